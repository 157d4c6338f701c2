"""make_fx -> remat Graph: the joint graph of one training step, and nothing else (no solving).

    traced = remat.torch.trace(model, (x, y), F.cross_entropy)   # loss_fn(model(x), y)
    traced.graph           # remat.Graph: parameters and data in, loss and gradients out
    traced.module          # the fx.GraphModule the graph was made from
    traced.fingerprint     # remat.graph_fingerprint: plans name the graph they were made for

The work is split by concern: `capture.py` (make_fx of the step, batch structure), `rewrites.py`
(in-place and *_like rewrites), `effects.py` (which inputs each call writes, side effects),
`cost.py` (the injectable cost model); this file turns the result into remat values and nodes:
- Every call (not getitem) is one node; a call returning several tensors is one node with several
  outputs. Placeholders (parameters, buffers, data) and constants are graph inputs; the loss and
  the gradients are graph outputs.
- Sizes are the bytes of each tensor's storage, found by running the step once on copies of the
  example tensors. A tensor sharing a storage with an earlier one (a view, an in-place result) is
  an alias of it (size 0, alias_of).
- `phase` is forward for calls up to the loss, backward after.
"""

import contextlib
import dataclasses
import operator

import torch
import torch.fx as fx

import remat
from remat.torch import _compat, distributed, op_kinds
from remat.torch import capture as capture_module
from remat.torch import cost as cost_models
from remat.torch import effects as side_effects
from remat.torch import rewrites
from remat.torch._compat import tree_flatten
from remat.torch.capture import BatchSpec, TraceError, capture, trainable

__all__ = ["TraceError", "TracedStep", "trace"]


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
    spec: BatchSpec  # structure, constants and tensor layouts of the traced batch
    model_inputs: int
    placeholders: list  # fx placeholder nodes, in call order
    node_fx: list  # remat node -> fx call node
    node_getitems: list  # remat node -> its getitem users, in graph order
    value_fx: dict  # fx node (placeholder, constant, single-output call, getitem) -> value
    value_root: list  # value -> value owning its storage (itself for roots), -1 for effect values
    value_producer: list  # value -> remat node producing it, -1 for graph inputs
    node_pure_view: list  # remat node -> a recomputable view (re-derived from the latest root)
    recompute_args: dict  # remat node -> fn(args) giving the arguments of a recomputation
    replayed: frozenset  # remat nodes (random) whose recomputation replays the generator
    output_fx: list  # fx nodes (or None) returned by the step: loss, then one gradient per param
    training_modes: tuple = ()  # (module name, training flag) of every submodule when traced
    autocast: tuple = ()  # _compat.autocast_state() when traced: the graph holds its casts
    # remat node -> shapes of its tensor outputs, for the calls whose output sizes depend on the
    # data (nonzero, boolean-mask indexing, ...): the graph holds these sizes, every run checks them
    data_dependent_sizes: dict = dataclasses.field(default_factory=dict)
    fingerprint: str = ""
    loss_fn: object = None
    # The device the graph was traced for when traced without memory (on fake tensors), else None
    device: object = None

    @property
    def num_nodes(self):
        return self.graph.num_nodes

    @property
    def num_data(self):
        return self.spec.num_tensors

    @property
    def data_layouts(self):
        return self.spec.layouts


# The recorded run is patched for the rewrites (rewrites._move_storages); True runs the step again
# instead (the equality of both is checked by the tests).
_RERUN_AFTER_REWRITES = False


def graph_fingerprint(graph):
    """The graph's fingerprint (remat.graph_fingerprint: names, sizes, costs, edges), the same
    one `remat solve -o` writes: a plan records the graph it was made for, and a plan for another
    graph is refused, by Python and by the CLI alike."""
    return remat.graph_fingerprint(graph)


def training_modes(model):
    return tuple((name, m.training) for name, m in model.named_modules())


def trace(model, example_inputs, loss_fn, *, model_inputs=1, model_kwargs=None, cost="auto",
          name=None, fake=None, device=None):
    """Traces one training step of `model` and returns a TracedStep.

    The step is `loss = loss_fn(model(*batch[:model_inputs], **model_kwargs),
    *batch[model_inputs:])` followed by the gradients of every parameter with requires_grad.
    `example_inputs` is the batch: a tuple (or one object) whose elements are tensors or nested
    tuples, lists and dicts of tensors and constants; `model_kwargs` go to the model as keyword
    arguments. `cost` is "auto" (the roofline's µs on CUDA, FLOPs elsewhere), "flops",
    "measure", "roofline" or a callable (see cost.py). The model's
    parameters, buffers and the random generator are left as they were. DDP(m) is traced as m
    (a Step of it synchronises the gradients). Sizes that depend on the data are the example
    batch's (TracedStep.data_dependent_sizes). Raises TraceError naming the model and the reason
    when the step cannot be traced (FSDP-sharded models included), ValueError for a loss that is
    not one number.

    Tracing without memory: a model built on the meta device (`with torch.device("meta"):`), a
    batch of meta tensors, or fake tensors (torch._subclasses.FakeTensorMode) are traced on fake
    tensors, so no tensor of the model's or the batch's size is ever made; `fake=True` does so
    for a real model too. `device` names the device the graph is for ("cuda", "cpu"; required
    when every tensor is on the meta device, since aten calls differ by device): the graph, and
    its fingerprint, are those a real trace on that device gives. cost="measure" is refused (a
    fake call cannot be timed), and so is a step whose output sizes depend on the data.
    """
    cost_fn, timed = cost_models.resolve(cost)
    model_name = name or type(model).__name__
    model, _ = distributed.unwrap(model, model_name)  # DDP(m) traces m; FSDP is refused
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    kwargs = dict(sorted((model_kwargs or {}).items()))
    if not isinstance(model_inputs, int) or not 0 <= model_inputs <= len(args):
        raise ValueError(f"{model_name}: model_inputs must be an int in 0..{len(args)} (the "
                         f"batch has {len(args)} elements), got {model_inputs!r}")
    try:
        spec = BatchSpec.of(args, kwargs, where=f"{model_name} batch")
    except TypeError as error:
        raise ValueError(str(error)) from None
    example_tensors = spec.tensors(args, kwargs)
    fake_mode, target = without_memory(model, example_tensors, fake, device, model_name)
    if fake_mode is None:
        return _trace(model, spec, example_tensors, loss_fn, model_inputs, cost_fn, timed,
                      model_name, None)
    if timed:
        raise ValueError(f"{model_name}: cost=\"measure\" times real calls; a step traced "
                         "without memory (meta or fake tensors) has none: use cost=\"flops\" or "
                         "a cost callable")
    with _compat.outside_dispatch_modes():  # remat's fake mode, not an active one, traces
        fake_batch = [capture_module.fake_like(x, fake_mode, target) for x in example_tensors]
        spec = BatchSpec.of(*spec.rebuild(fake_batch), where=f"{model_name} batch")
        traced = _trace(model, spec, fake_batch, loss_fn, model_inputs, cost_fn, timed,
                        model_name, (fake_mode, target))
    traced.device = torch.device(fake_batch[0].device if fake_batch else target)
    return traced


def without_memory(model, batch_tensors, fake, device, model_name):
    """(FakeTensorMode, target device) when the step is to be traced on fake tensors, else
    (None, None); ValueError for a combination that cannot be traced (see trace)."""
    params, fixed = capture_module.model_tensors(model)
    tensors = [t for _, t in params + fixed] + list(batch_tensors)
    dataless = [t for t in tensors if _compat.is_without_data(t)]
    if fake is None:
        fake = bool(dataless) or device is not None
    if not fake:
        if dataless:
            raise ValueError(f"{model_name}: fake=False, but the model or the batch holds meta or "
                             "fake tensors (no data to run on)")
        return None, None
    if device is None:
        real = [t.device for t in tensors if not t.is_meta]
        if not real:
            raise ValueError(f"{model_name}: every tensor of the model and the batch is on the "
                             "meta device; pass device=\"cuda\" (or \"cpu\"): the device the "
                             "plan is for (the traced aten calls differ by device)")
        device = real[0]
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{model_name}: tracing for device=\"cuda\" needs a CUDA device here "
                         "(of any memory size): aten picks some kernels, attention's among them, "
                         "by the GPU, so the graph cannot be known without one; plan on a "
                         "machine with a GPU of the training machine's kind, or for \"cpu\"")
    if device.type == "meta":
        raise ValueError(f"{model_name}: device=\"meta\" is not a device a plan runs on; pass "
                         "the device the plan is for (\"cuda\", \"cpu\")")
    return _compat.new_fake_mode(), device


def _trace(model, spec, example_tensors, loss_fn, model_inputs, cost_fn, timed, model_name, fake):
    fake_mode = fake[0] if fake else contextlib.nullcontext()
    captured = capture(model, spec, example_tensors, loss_fn, model_inputs, model_name, fake)
    gm, saved_rng = captured.module, captured.rng_state
    if fake:
        _refuse_data_dependent_sizes(gm, model_name)
    # Before the first run: it adds calls, which the run then records like any other.
    rewrites.split_convolution_backward(gm)
    rewrites.causal_masks_to_is_causal(gm)
    rewrites.native_grouped_query_attention(gm)
    try:
        with fake_mode:  # factories (ones, empty) make fake tensors too
            first = side_effects.Recorder(gm).run_all(captured.fresh_args())
            data_dependent = rewrites.specialize_data_dependent_sizes(gm, first)
            changed = rewrites.rewrite_private_inplace(gm, first)
            # ones_like(x) -> ones(shape) changes no storage or write: the run stays valid for it.
            rewrites.rewrite_like_factories(gm, first)
            runs = [first]
            if (changed and _RERUN_AFTER_REWRITES) or timed:
                _compat.set_rng_state(saved_rng)
                runs = [side_effects.Recorder(gm, timed=timed).run_all(captured.fresh_args())]
            if timed:
                for _ in range(2):
                    _compat.set_rng_state(saved_rng)
                    runs.append(side_effects.Recorder(gm, timed=True).run_all(
                        captured.fresh_args()))
    finally:
        _compat.set_rng_state(saved_rng)
    # A call making a data-dependent size runs exactly once: every plan then runs its check.
    traced = _Builder(gm, runs, cost_fn, run_once=data_dependent).build(
        model_name, captured, spec, model_inputs)
    traced.training_modes = training_modes(model)
    traced.autocast = _compat.autocast_state()
    index = {n: i for i, n in enumerate(traced.node_fx)}
    traced.data_dependent_sizes = {index[n]: shapes for n, shapes in data_dependent.items()}
    traced.fingerprint = graph_fingerprint(traced.graph)
    traced.loss_fn = loss_fn
    return traced


class DataDependentWithoutMemory(ValueError):
    """A step traced without memory makes outputs whose size depends on the data."""


def _refuse_data_dependent_sizes(gm, model_name):
    made = [n.name for n in gm.graph.nodes
            if n.op == "call_function" and _compat.unbacked_bindings(n)]
    if made:
        raise DataDependentWithoutMemory(
            f"{model_name}: the step has calls whose output size depends on the "
                         f"data ({', '.join(made[:3])}); traced without memory there is no data "
                         "to size them: trace it on a real batch")


class _Builder:
    """Turns the recorded runs of the (rewritten) fx graph into remat values and nodes."""

    def __init__(self, gm, runs, cost_fn, run_once=()):
        self.gm = gm
        self.run_once = set(run_once)  # fx calls made not recomputable
        self.run = runs[0]
        self.runs = runs
        self.cost_fn = cost_fn
        self.nodes = list(gm.graph.nodes)
        self.position = {n: i for i, n in enumerate(self.nodes)}
        self.values = []  # dicts for remat.Graph.build
        self.value_fx = {}
        self.value_root = []
        self.value_producer = []
        self.root_by_storage = {}

    # -- values ------------------------------------------------------------------------------
    def add_value(self, name, storage, producer, fx_node):
        key, nbytes = storage
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

    def build(self, model_name, captured, spec, model_inputs):
        param_names, fixed_names = captured.param_names, captured.fixed_names
        env = self.run.env
        placeholders = [n for n in self.nodes if n.op == "placeholder"]
        calls = [n for n in self.nodes
                 if n.op == "call_function" and n.target is not operator.getitem]
        for n in self.nodes:
            if n.op in ("placeholder", "get_attr") and isinstance(env.get(n), torch.Tensor):
                self.add_value(n.name, self.run.storage(n), -1, n)
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
        effects = side_effects.Effects(self, calls)
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
            fixed_names=fixed_names, spec=spec, model_inputs=model_inputs,
            placeholders=placeholders, node_fx=calls, node_getitems=node_getitems,
            value_fx=self.value_fx, value_root=value_root, value_producer=value_producer,
            node_pure_view=pure_view, recompute_args=effects.recompute_args,
            replayed=frozenset(effects.replayed - effects.fixed), output_fx=output_fx)

    def add_outputs(self, index, n, result, getitems):
        if isinstance(result, torch.Tensor):
            return [self.add_value(n.name, self.run.storage(n), index, n)]
        if not isinstance(result, (tuple, list)):
            return []
        by_index = {g.args[1]: g for g in getitems}
        outputs = []
        for i, element in enumerate(result):
            if isinstance(element, torch.Tensor):
                name = by_index[i].name if i in by_index else f"{n.name}.{i}"
                # An unused output has no getitem, hence no fx node of its own.
                storage = (self.run.storage(by_index[i]) if i in by_index
                           else self.run.storage(n, i))
                outputs.append(self.add_value(name, storage, index, by_index.get(i)))
        return outputs

    # -- nodes -------------------------------------------------------------------------------
    def node_dict(self, index, n, outputs, effects, is_forward):
        inputs = []
        for i in n.all_input_nodes:
            if i in self.value_fx and self.value_fx[i] not in inputs:
                inputs.append(self.value_fx[i])
        packet = _compat.packet_name(n.target)
        # A view is a call whose every output shares an input's storage and that writes nothing
        # (the schema misses some, e.g. _unsafe_view).
        aliases_only = bool(outputs) and all("alias_of" in self.values[v] for v in outputs)
        is_view = (side_effects.is_view(n) or aliases_only) and not self.run.writes.get(n)
        kind = op_kinds.kind_of(packet, is_view)
        return {
            "name": n.name,
            "op": str(n.target),
            "kind": kind,
            "phase": "forward" if is_forward else "backward",
            "cost": self.cost(n, packet, kind),
            "inputs": inputs,
            "outputs": outputs,
            "recomputable": effects.recomputable(index) and n not in self.run_once,
            "temp": max(r.workspace.get(n, 0) for r in self.runs),
        }

    def cost(self, n, packet, kind):
        env = self.run.env
        call = cost_models.OpCall(
            op=str(n.target), packet=packet, kind=kind,
            args=tuple(env[a] if isinstance(a, fx.Node) else a for a in n.args), result=env[n],
            seconds=tuple(r.seconds[n] for r in self.runs if n in r.seconds))
        value = float(self.cost_fn(call))
        if not value >= 0:
            raise ValueError(f"cost model gave {value} for {n.name} ({call.op}); costs must be "
                             ">= 0")
        return value
