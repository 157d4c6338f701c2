"""make_fx -> remat Graph: the joint graph of one training step, and nothing else (no solving).

    traced = remat.torch.trace(model, (x, y), F.cross_entropy)   # loss_fn(model(x), y)
    traced.graph           # remat.Graph: parameters and data in, loss and gradients out
    traced.module          # the fx.GraphModule the graph was made from

How the fx graph becomes a remat graph:
- Every call (not getitem) is one node; a call returning several tensors is one node with several
  outputs. Placeholders (parameters, buffers, data) and constants are graph inputs; the loss and
  the gradients are graph outputs.
- Sizes are the bytes of each tensor's storage, found by running the step once on copies of the
  example tensors. A tensor sharing a storage with an earlier one (a view, an in-place result) is
  an alias of it (size 0, alias_of).
- In-place operators whose mutation nobody else can observe (relu_ on a fresh activation, a
  residual add_) are rewritten to their out-of-place overload so they can be recomputed. The ones
  left (writes to parameters or buffers, random draws, writes seen through other aliases) are
  side effects: not recomputable, and chained by size-0 "effect" values so every plan keeps their
  traced order (and so the random generator is drawn in eager order). A node reading a storage
  that a side effect writes later (or wrote after the value it reads was made) joins the chain.
- ones_like/zeros_like/full_like of a contiguous tensor become ones/zeros/full (they read only
  metadata), so the gradient seed is a backward node without inputs.
- Training-mode batch norm writes its running statistics although its schema does not say so;
  it stays recomputable because a recomputation is run without the running statistics (the
  output depends only on the batch), see op_kinds.HIDDEN_WRITES.
- Cost: FLOPs (matmul and convolution from shapes, element count otherwise, views 0), or the
  measured time of each op in microseconds with cost="measure".
"""

import dataclasses
import math
import operator
import time

import torch
import torch.fx as fx
from torch.utils._pytree import tree_flatten

import remat
from remat.torch import _compat, op_kinds


class TraceError(RuntimeError):
    """The training step of a model could not be traced; the message names model and reason."""


@dataclasses.dataclass
class TracedStep:
    """A traced training step: the fx graph, its remat graph, and side tables between the two.

    Tables are indexed by remat node or value index, never stored as attributes on fx nodes.
    """

    model_name: str
    module: fx.GraphModule
    graph: "remat.Graph"
    param_names: list
    fixed_names: list  # frozen parameters and buffers, in placeholder order after the parameters
    num_data: int
    model_inputs: int
    placeholders: list  # fx placeholder nodes, in call order
    node_fx: list  # remat node -> fx call node
    node_getitems: list  # remat node -> its getitem users, in graph order
    value_fx: dict  # fx node (placeholder, constant, single-output call, getitem) -> value
    value_root: list  # value -> value owning its storage (itself for roots), -1 for effect values
    value_producer: list  # value -> remat node producing it, -1 for graph inputs
    node_pure_view: list  # remat node -> a recomputable view (re-derived from the latest root)
    recompute_args: dict  # remat node -> fn(args) giving the arguments of a recomputation
    output_fx: list  # fx nodes (or None) returned by the step: loss, then one gradient per param
    data_layouts: list = None  # (shape, strides, dtype, device) of each batch tensor traced

    @property
    def num_nodes(self):
        return self.graph.num_nodes


def trace(model, example_inputs, loss_fn, *, model_inputs=1, cost="flops", name=None):
    """Traces one training step of `model` and returns a TracedStep.

    The step is `loss = loss_fn(model(*batch[:model_inputs]), *batch[model_inputs:])` followed by
    the gradients of every parameter with requires_grad. `example_inputs` is the batch (a tensor
    or a tuple of tensors). The model's parameters, buffers and the random generator are left as
    they were. Raises TraceError naming the model and the reason when make_fx cannot trace it.
    """
    if cost not in ("flops", "measure"):
        raise ValueError(f"remat.torch.trace: cost must be 'flops' or 'measure' (got {cost!r})")
    model_name = name or type(model).__name__
    is_tuple = isinstance(example_inputs, (tuple, list))
    batch = tuple(example_inputs) if is_tuple else (example_inputs,)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not params:
        raise TraceError(f"cannot trace {model_name}: it has no parameter with requires_grad")
    fixed = [(n, p) for n, p in model.named_parameters() if not p.requires_grad]
    fixed += list(model.named_buffers())
    step_fn = _make_step_fn(model, [n for n, _ in params], [n for n, _ in fixed], model_inputs,
                            loss_fn)

    def fresh_args():
        return ([_strided_copy(p).requires_grad_(True) for _, p in params],
                [_strided_copy(t) for _, t in fixed], *[_strided_copy(x) for x in batch])

    devices = {t.device.type for _, t in params + fixed}
    saved_rng = _compat.rng_state(devices)
    try:
        try:
            gm = _compat.trace_real(step_fn, fresh_args())
        except Exception as error:  # make_fx raises plain RuntimeErrors; name the model
            raise TraceError(f"cannot trace {model_name}: {_reason(error)}") from error
        _compat.set_rng_state(saved_rng)
        first = _Recorder(gm).run_all(fresh_args())
        _rewrite_private_inplace(gm, first)
        _rewrite_like_factories(gm, first)
        _compat.set_rng_state(saved_rng)
        runs = [_Recorder(gm, timed=cost == "measure").run_all(fresh_args())]
        if cost == "measure":
            for _ in range(2):
                _compat.set_rng_state(saved_rng)
                runs.append(_Recorder(gm, timed=True).run_all(fresh_args()))
    finally:
        _compat.set_rng_state(saved_rng)
    traced = _Builder(gm, runs, cost).build(model_name, [n for n, _ in params],
                                             [n for n, _ in fixed], len(batch), model_inputs)
    traced.data_layouts = [_layout(x) for x in batch]
    return traced


def _strided_copy(tensor):
    """A detached copy with the same strides: make_fx records stride-specific calls
    (_reshape_alias), so the copies traced must be laid out as the tensors the step will get."""
    tensor = tensor.detach()
    copy = torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype,
                               device=tensor.device)
    return copy.copy_(tensor)


def _layout(tensor):
    return tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype, tensor.device


def _tied_names(model):
    """name -> every name of the same tensor (tied weights appear once in named_parameters)."""
    names_of = {}
    for prefix, module in model.named_modules(remove_duplicate=False):
        for table in (module._parameters, module._buffers):
            for name, tensor in table.items():
                if tensor is not None:
                    full = f"{prefix}.{name}" if prefix else name
                    names_of.setdefault(id(tensor), []).append(full)
    tied = {}
    for names in names_of.values():
        for name in names:
            tied[name] = names
    return tied


def _make_step_fn(model, param_names, fixed_names, model_inputs, loss_fn):
    tied = _tied_names(model)

    def step(param_list, fixed_list, *data):
        tensors = {}
        for name, tensor in zip(param_names + fixed_names, list(param_list) + list(fixed_list)):
            for alias in tied.get(name, [name]):
                tensors[alias] = tensor
        output = _compat.functional_call(model, tensors, data[:model_inputs])
        loss = loss_fn(output, *data[model_inputs:])
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError("loss_fn must return a tensor with one element")
        grads = torch.autograd.grad(loss, param_list, allow_unused=True)
        return [loss, *grads]

    return step


def _reason(error):
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if "data-dependent" in text or "get value out of a tracing tensor" in text:
        return ("data-dependent control flow: the step reads the value of a tensor (e.g. "
                "`if x.sum() > 0` or `.item()`), which make_fx cannot trace "
                f"(make_fx: {text})")
    return f"{type(error).__name__}: {text}"


class _Recorder(fx.Interpreter):
    """Runs the traced step once, keeping every value alive (so storages are never reused) and
    recording which inputs each call writes (version counter, schema, hidden writes) and, when
    timed, how long each call takes."""

    def __init__(self, gm, timed=False):
        super().__init__(gm, garbage_collect_values=False)
        self.timed = timed
        self.writes = {}  # fx node -> list of written input fx nodes
        self.seconds = {}

    def run_all(self, args):
        with torch.no_grad():
            self.run(*args)
        return self

    def run_node(self, n):
        if n.op != "call_function" or n.target is operator.getitem:
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        inputs = [(i, self.env[i]) for i in n.all_input_nodes]
        before = [_compat.version_of(v) if isinstance(v, torch.Tensor) else None for _, v in inputs]
        start = time.perf_counter()
        result = n.target(*args, **kwargs)
        if self.timed and result is not None:
            _synchronize(result)
        self.seconds[n] = time.perf_counter() - start
        written = {i for (i, v), b in zip(inputs, before)
                   if b is not None and _compat.version_of(v) != b}
        written.update(_declared_writes(n))
        self.writes[n] = sorted(written, key=_position(n.graph))
        return result


def _synchronize(result):
    tensors = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
    if any(t.is_cuda for t in tensors):
        torch.cuda.synchronize()


def _position(graph):
    order = {node: i for i, node in enumerate(graph.nodes)}
    return order.__getitem__


def _schema(target):
    return getattr(target, "_schema", None)


def _packet_name(target):
    packet = getattr(target, "overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(target, "__name__", str(target))


def _declared_writes(n):
    """Input fx nodes the schema (or op_kinds.HIDDEN_WRITES) says the call writes."""
    written = set(_hidden_write_nodes(n))
    schema = _schema(n.target)
    if schema is None:
        return written
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = n.args[position] if position < len(n.args) else n.kwargs.get(argument.name)
        for node in tree_flatten(value)[0]:
            if isinstance(node, fx.Node):
                written.add(node)
    return written


def _hidden_write_nodes(n):
    positions = op_kinds.hidden_writes(_packet_name(n.target), n.args)
    return [n.args[p] for p in positions if isinstance(n.args[p], fx.Node)]


def _is_view(n):
    schema = _schema(n.target)
    if schema is None:
        return False
    returns_alias = any(r.alias_info is not None and not r.alias_info.is_write
                        for r in schema.returns)
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    return returns_alias and not writes


def _out_of_place(target):
    """The out-of-place overload of an in-place aten overload (relu_ -> relu), or None."""
    name = _packet_name(target)
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    overload = getattr(packet, target._overloadname, None) if packet is not None else None
    if overload is None or _schema(overload) is None:
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in overload._schema.arguments):
        return None
    return overload


def _storage_of(value):
    if isinstance(value, torch.Tensor):
        return _compat.storage_key_and_bytes(value)
    return None, 0


def _rewrite_private_inplace(gm, run):
    """Rewrites in-place calls whose write no other reader can see to their out-of-place form.

    A write to storage S at position m is private when S is not a graph input's storage, the call
    is not random, and no value on S made before m is read after m (the readers after m all read
    the in-place result, which the out-of-place result replaces).
    """
    nodes = list(gm.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    storage = {n: _storage_of(run.env.get(n))[0] for n in nodes}
    input_storages = {storage[n] for n in nodes if n.op in ("placeholder", "get_attr")}
    on_storage = {}
    for n in nodes:
        if storage[n] is not None:
            on_storage.setdefault(storage[n], []).append(n)
    changed = False
    for n in nodes:
        if n.op != "call_function" or not run.writes.get(n):
            continue
        replacement = _out_of_place(n.target)
        if replacement is None or op_kinds.is_random(_packet_name(n.target)):
            continue
        if _hidden_write_nodes(n):
            continue
        written = {storage[w] for w in run.writes[n]}
        if None in written or written & input_storages:
            continue
        m = position[n]
        seen_later = any(position[u] > m
                         for s in written for v in on_storage.get(s, []) if position[v] < m
                         for u in v.users)
        if not seen_later:
            n.target = replacement
            changed = True
    if changed:
        gm.recompile()


# `ones_like(x)` and friends read only x's metadata. Written as plain factories they have no
# inputs, so the gradient seed `ones_like(loss)` becomes a node without inputs, as a tangent input
# is in AOTAutograd's joint graphs (the min-cut solver looks for such seeds), and no value is kept
# alive only to be the template of a factory.
_LIKE_FACTORIES = {"ones_like": ("ones", None), "zeros_like": ("zeros", None),
                   "full_like": ("full", 1)}


def _rewrite_like_factories(gm, run):
    """Rewrites ones_like/zeros_like/full_like of a contiguous tensor as ones/zeros/full."""
    changed = False
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.args[0] if n.args else None, fx.Node):
            continue
        entry = _LIKE_FACTORIES.get(_packet_name(n.target))
        template = run.env.get(n.args[0])
        if entry is None or n.target._overloadname != "default":
            continue
        if not isinstance(template, torch.Tensor):
            continue
        memory_format = n.kwargs.get("memory_format")
        if not template.is_contiguous() or memory_format not in (
                None, torch.preserve_format, torch.contiguous_format):
            continue
        factory, fill_position = entry
        kwargs = {
            "dtype": n.kwargs.get("dtype") or template.dtype,
            "layout": n.kwargs.get("layout") or template.layout,
            "device": n.kwargs.get("device") or template.device,
            "pin_memory": bool(n.kwargs.get("pin_memory") or False),
        }
        args = (list(template.shape),)
        if fill_position is not None:
            args += (n.args[fill_position],)
        n.target = getattr(torch.ops.aten, factory).default
        n.args, n.kwargs = args, kwargs
        changed = True
    if changed:
        gm.recompile()


class _Builder:
    """Turns the recorded runs of the (rewritten) fx graph into remat values and nodes."""

    def __init__(self, gm, runs, cost):
        self.gm = gm
        self.run = runs[0]
        self.runs = runs
        self.cost_mode = cost
        self.nodes = list(gm.graph.nodes)
        self.position = {n: i for i, n in enumerate(self.nodes)}
        self.values = []  # dicts for remat.Graph.build
        self.value_fx = {}
        self.value_root = []
        self.value_producer = []
        self.root_by_storage = {}

    # -- values ------------------------------------------------------------------------------
    def add_value(self, name, tensor, producer, fx_node):
        key, nbytes = _storage_of(tensor)
        index = len(self.values)
        entry = {"name": name, "size": nbytes}
        root = index
        if key is not None and key in self.root_by_storage:
            root = self.root_by_storage[key]
            entry = {"name": name, "size": 0, "alias_of": root}
        elif key is not None:
            self.root_by_storage[key] = index
        self.values.append(entry)
        self.value_root.append(root)
        self.value_producer.append(producer)
        if fx_node is not None:
            self.value_fx[fx_node] = index
        return index

    def build(self, model_name, param_names, fixed_names, num_data, model_inputs):
        env = self.run.env
        placeholders = [n for n in self.nodes if n.op == "placeholder"]
        calls = [n for n in self.nodes
                 if n.op == "call_function" and n.target is not operator.getitem]
        for n in self.nodes:
            if n.op in ("placeholder", "get_attr") and isinstance(env.get(n), torch.Tensor):
                self.add_value(n.name, env[n], -1, n)
        node_getitems, node_outputs = [], []
        for index, n in enumerate(calls):
            getitems = [u for u in n.users
                        if u.op == "call_function" and u.target is operator.getitem]
            getitems.sort(key=self.position.__getitem__)
            node_getitems.append(getitems)
            node_outputs.append(self.add_outputs(index, n, env[n], getitems))
        output_node = next(n for n in self.nodes if n.op == "output")
        output_fx = tree_flatten(output_node.args[0])[0]
        for o in output_fx:
            if isinstance(o, fx.Node) and o in self.value_fx:
                self.values[self.value_fx[o]]["output"] = True
        effects = _Effects(self, calls)
        loss_position = self.position[output_fx[0]]
        node_dicts = []
        for index, n in enumerate(calls):
            is_forward = self.position[n] <= loss_position
            node_dicts.append(self.node_dict(index, n, node_outputs[index], effects, is_forward))
        effects.chain(node_dicts, self.values)
        graph = remat.Graph.build(f"{model_name} training step", self.values, node_dicts)
        pure_view = [d["kind"] == "view" and d["recomputable"] for d in node_dicts]
        value_root = self.value_root + [-1] * (graph.num_values - len(self.value_root))
        value_producer = self.value_producer + [-1] * (graph.num_values - len(self.value_producer))
        return TracedStep(
            model_name=model_name, module=self.gm, graph=graph, param_names=param_names,
            fixed_names=fixed_names, num_data=num_data, model_inputs=model_inputs,
            placeholders=placeholders, node_fx=calls, node_getitems=node_getitems,
            value_fx=self.value_fx, value_root=value_root, value_producer=value_producer,
            node_pure_view=pure_view, recompute_args=effects.recompute_args, output_fx=output_fx)

    def add_outputs(self, index, n, result, getitems):
        if isinstance(result, torch.Tensor):
            return [self.add_value(n.name, result, index, n)]
        if not isinstance(result, (tuple, list)):
            return []
        by_index = {g.args[1]: g for g in getitems}
        outputs = []
        for i, element in enumerate(result):
            if isinstance(element, torch.Tensor):
                name = by_index[i].name if i in by_index else f"{n.name}.{i}"
                # An unused output has no getitem, hence no fx node of its own.
                outputs.append(self.add_value(name, element, index, by_index.get(i)))
        return outputs

    # -- nodes -------------------------------------------------------------------------------
    def node_dict(self, index, n, outputs, effects, is_forward):
        inputs = []
        for i in n.all_input_nodes:
            if i in self.value_fx and self.value_fx[i] not in inputs:
                inputs.append(self.value_fx[i])
        packet = _packet_name(n.target)
        # A view is a call whose every output shares an input's storage and that writes nothing
        # (the schema misses some, e.g. _unsafe_view).
        aliases_only = bool(outputs) and all("alias_of" in self.values[v] for v in outputs)
        is_view = (_is_view(n) or aliases_only) and not self.run.writes.get(n)
        kind = op_kinds.kind_of(packet, is_view)
        return {
            "name": n.name,
            "op": str(n.target),
            "kind": kind,
            "phase": "forward" if is_forward else "backward",
            "cost": self.cost(n, packet, kind),
            "inputs": inputs,
            "outputs": outputs,
            "recomputable": effects.recomputable(index, kind),
        }

    def cost(self, n, packet, kind):
        if self.cost_mode == "measure":
            return min(r.seconds[n] for r in self.runs) * 1e6  # microseconds
        return float(_flops(packet, kind, n, self.run.env))


def _numel(x):
    return x.numel() if isinstance(x, torch.Tensor) else 0


def _conv_macs_per_output(weight, transposed):
    """Multiply-adds per output element (per input element when transposed)."""
    channels = weight.shape[0] if transposed else weight.shape[1]
    return channels * math.prod(weight.shape[2:])


def _flops(packet, kind, n, env):
    """Matmul and convolution FLOPs from shapes; element count otherwise; views cost nothing."""
    if kind == "view":
        return 0
    args = [env[a] if isinstance(a, fx.Node) else a for a in n.args]
    result = env[n]
    if packet == "mm":
        return 2 * args[0].shape[0] * args[0].shape[1] * args[1].shape[1]
    if packet == "addmm":
        return 2 * args[1].shape[0] * args[1].shape[1] * args[2].shape[1] + _numel(result)
    if packet in ("bmm", "baddbmm"):
        a, b = (args[0], args[1]) if packet == "bmm" else (args[1], args[2])
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if packet == "convolution":
        weight, transposed = args[1], bool(args[6])
        per_output = _conv_macs_per_output(weight, transposed)
        elements = _numel(args[0]) if transposed else _numel(result)
        return 2 * elements * per_output + (_numel(result) if args[2] is not None else 0)
    if packet == "convolution_backward":
        grad_out, weight, transposed, mask = args[0], args[2], bool(args[7]), args[10]
        per_output = _conv_macs_per_output(weight, transposed)
        forward = 2 * (_numel(args[1]) if transposed else _numel(grad_out)) * per_output
        return forward * (int(mask[0]) + int(mask[1])) + _numel(grad_out) * int(mask[2])
    outputs = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
    if kind == "reduction":
        inputs = [t for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor)]
        return max([_numel(t) for t in inputs + outputs] + [1])
    return max(sum(_numel(t) for t in outputs), 1)


class _Effects:
    """Which calls are side effects (kept once, in traced order) and which are recomputable."""

    def __init__(self, builder, calls):
        self.builder = builder
        self.calls = calls
        self.recompute_args = {}
        run = builder.run
        position = builder.position
        storage = {n: _storage_of(run.env.get(n))[0] for n in builder.nodes}
        hidden = {n: set(_hidden_write_nodes(n)) for n in calls}
        # Storages written by side effects, with the positions of the writes.
        self.mutations = {}
        hidden_storages = {}
        for n in calls:
            for w in run.writes.get(n, []):
                if w in hidden[n]:
                    hidden_storages.setdefault(storage[w], set()).add(n)
                    continue
                self.mutations.setdefault(storage[w], []).append(position[n])
        self.effect = set()
        self.fixed = set()
        for index, n in enumerate(calls):
            packet = _packet_name(n.target)
            writes = [w for w in run.writes.get(n, []) if w not in hidden[n]]
            if writes or op_kinds.is_random(packet) or self.reads_mutated(n, storage):
                self.effect.add(index)
            elif hidden[n]:
                shared = any(len(hidden_storages.get(storage[w], ())) > 1 or storage[w] in
                             self.mutations for w in hidden[n])
                if shared or not _accepts_none(n.target, op_kinds.hidden_writes(packet, n.args)):
                    self.effect.add(index)
                else:
                    self.recompute_args[index] = _without_hidden_writes(packet, n)
        # The producer of a storage that side effects write must not make a second copy of it.
        for s in self.mutations:
            if s in builder.root_by_storage:
                producer = builder.value_producer[builder.root_by_storage[s]]
                if producer >= 0:
                    self.fixed.add(producer)

    def reads_mutated(self, n, storage):
        p = self.builder.position[n]
        for i in n.all_input_nodes:
            writes = self.mutations.get(storage.get(i))
            if not writes:
                continue
            made = self.builder.position[i]
            if any(m > p or made < m < p for m in writes):
                return True
        return False

    def recomputable(self, index, kind):
        return index not in self.effect and index not in self.fixed and kind != "random"

    def chain(self, node_dicts, values):
        """Orders the side effects: each reads the previous one's size-0 effect value."""
        previous = None
        for index in sorted(self.effect):
            token = len(values)
            values.append({"name": f"effect.{node_dicts[index]['name']}", "size": 0})
            if previous is not None:
                node_dicts[index]["inputs"].append(previous)
            node_dicts[index]["outputs"].append(token)
            previous = token


def _accepts_none(target, positions):
    schema = _schema(target)
    if schema is None:
        return False
    arguments = schema.arguments
    return all(p < len(arguments) and isinstance(arguments[p].type, torch._C.OptionalType)
               for p in positions)


def _without_hidden_writes(packet, n):
    positions = op_kinds.hidden_writes(packet, n.args)

    def rewrite(args):
        args = list(args)
        for p in positions:
            args[p] = None
        return tuple(args)

    return rewrite
