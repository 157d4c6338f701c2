"""remat.torch.partition: an AOTAutograd partition function whose saved set remat plans.

    from functorch.compile import aot_module, nop
    compiled = aot_module(model, fw_compiler=nop, bw_compiler=nop, partition_fn=rt.partition)
    partial(rt.partition, solver="fastsa", budget="60%")       # any graph solver, any budget
    torch.compile(model, backend=rt.aot_backend(solver="mincut"))   # no compiler: fx modules

AOTAutograd traces the joint forward+backward graph and asks a partition function which forward
values the forward graph saves for the backward; everything else the backward needs it
recomputes from the saved values. `partition` turns the joint graph into a remat graph (phase
from the forward outputs: the nodes they need from the primal inputs are the forward), solves it
with a remat graph solver (default `mincut`, the min-cut paper's algorithm, with no memory budget
unless one is given), and reads the saved set off the plan: the forward values and primal inputs whose
forward copy a backward step or a recomputation reads. The forward and backward
graphs are then cut by AOTAutograd's own extraction (so they are what AOTAutograd expects).

Sizes come from each node's tensor metadata (views and in-place results alias their input, size
0); costs from the FLOP model of cost.py on meta tensors of those shapes. `partition.last` holds
the last call's figures (see PartitionStats).
"""

import dataclasses
import math
import operator
import time

import torch
import torch.fx as fx

import remat
from remat.torch import _compat, op_kinds
from remat.torch import cost as cost_models
from remat.torch import effects


@dataclasses.dataclass
class PartitionStats:
    """Figures of one partition: what the forward saves, what the backward recomputes."""

    saved: list  # names of the saved fx nodes
    saved_bytes: int  # sum of their tensor sizes (numel x element size, as functorch counts)
    recomputed: list  # names of forward ops the backward graph runs again
    seconds: float  # partition time
    solver: str = ""
    status: str = ""


def partition(joint_module, _joint_inputs=None, *, solver="mincut", budget=None,
              num_fwd_outputs=None, static_lifetime_input_indices=None, time_limit=None, seed=1,
              **params):
    """AOTAutograd partition function: (forward module, backward module) of the joint graph,
    with the saved set planned by remat `solver` under `budget` (see remat.parse_budget; None:
    no memory budget, the solver's least-cost plan, as AOTAutograd's partitioners do).

    `static_lifetime_input_indices` (AOTAutograd's inputs that live for the whole program, such
    as parameters) changes nothing: every primal input is live throughout in the remat graph, so
    saving one costs no memory there either. Other keywords are the solver's parameters."""
    start = time.perf_counter()
    merge_common_subexpressions(joint_module)
    joint = JointGraph(joint_module, num_fwd_outputs)
    limit = 600.0 if time_limit is None else float(time_limit)
    if budget is None:
        budget = max(1, sum(joint.graph.value(v)["size"] for v in range(joint.graph.num_values)))
    result = remat.solve(joint.graph, budget, solver, time_limit=limit, seed=seed, **params)
    saved = joint.saved_nodes(result.sequence)
    fw, bw = _compat.extract_fwd_bwd_modules(joint_module, saved, len(joint.fwd_outputs))
    drop_forward_random_calls(bw, joint.forward_names)
    stats = partition_stats(fw, bw, len(joint.fwd_outputs), time.perf_counter() - start)
    stats.solver, stats.status = result.solver, result.status
    partition.last = stats
    return fw, bw


partition.last = None


def aot_backend(**partition_options):
    """A torch.compile backend running AOTAutograd with remat's partition and no compiler (the
    graphs run as fx modules)."""
    import functools

    from torch._dynamo.backends.common import aot_autograd

    compiler = _compat.nop_compiler()
    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler,
                        partition_fn=functools.partial(partition, **partition_options))


def drop_forward_random_calls(bw, forward_names):
    """Removes from the backward module the forward's random calls whose result it does not
    use. AOTAutograd's extraction copies every call whose inputs the backward has, then drops
    the unused ones, but keeps random calls (impure outside torch.compile): a dropout whose
    input is saved for another reason would draw again in the backward, unused, and move the
    generator away from eager's. A forward random call the backward does use would be a new
    draw, not the forward's: the plan never recomputes one, so that is an error here."""
    graph = bw.graph

    def forward_random(n):
        return (n.op == "call_function" and n.name in forward_names
                and op_kinds.is_random(_compat.packet_name(n.target))
                and not effects.declared_writes(n))

    for n in reversed(list(graph.nodes)):
        if n.users:
            continue
        if forward_random(n) or (n.target is operator.getitem and forward_random(n.args[0])):
            graph.erase_node(n)
    used = [n.name for n in graph.nodes if forward_random(n)]
    if used:
        raise RuntimeError(f"remat partition: the backward graph would draw the forward's random "
                           f"call(s) {', '.join(used)} again instead of reading the saved draw")
    bw.recompile()


def merge_common_subexpressions(joint_module):
    """Merges, in place, each pure call that repeats an earlier one (same op, same arguments)
    into the earlier one, as functorch's partitioners do before cutting: the two layers of a
    model building the same causal mask then save one mask, not two. Pure: not random, writes
    nothing (schema or op_kinds.HIDDEN_WRITES), and neither reads nor makes a storage that some
    call writes in place (its value would depend on when it runs). Returns the merged count."""
    graph = joint_module.graph
    root = {}  # fx node -> the node whose storage it shares (views, in-place results)
    written = set()
    for n in graph.nodes:
        root[n] = n
        if n.op != "call_function":
            continue
        writes = effects.declared_writes(n)
        if n.target is operator.getitem:
            parent = n.args[0]
            if isinstance(parent, fx.Node) and root[parent] is not parent:
                root[n] = root[parent]  # an element of a view's tuple (split)
        elif writes:
            root[n] = root[next(iter(writes))]
        elif effects.is_view(n) and n.all_input_nodes:
            root[n] = root[n.all_input_nodes[0]]
        written.update(root[w] for w in writes)
    first = {}
    merged = 0
    for n in list(graph.nodes):
        if n.op != "call_function" or root[n] in written or effects.declared_writes(n):
            continue
        if op_kinds.is_random(_compat.packet_name(n.target)):
            continue
        if any(root[i] in written for i in n.all_input_nodes):
            continue
        key = _call_key(n)
        if key is None:
            continue
        kept = first.setdefault(key, n)
        if kept is not n:
            n.replace_all_uses_with(kept)
            graph.erase_node(n)
            merged += 1
    if merged:
        joint_module.recompile()
    return merged


def _call_key(n):
    """A hashable key of an fx call (its target and arguments), or None when an argument is
    not hashable."""
    flat, spec = _compat.tree_flatten((n.args, n.kwargs))
    # A tensor constant is keyed by identity (comparing tensors with == gives a tensor).
    key = (n.target, tuple((type(a), id(a) if isinstance(a, torch.Tensor) else a) for a in flat),
           str(spec))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def partition_stats(fw, bw, num_fwd_outputs, seconds=0.0):
    """Saved values (forward outputs beyond the model's) and recomputed ops of a partition."""
    fw_output = next(n for n in fw.graph.nodes if n.op == "output")
    outputs = _compat.tree_flatten(fw_output.args)[0]
    saved = [n for n in outputs[num_fwd_outputs:] if isinstance(n, fx.Node)]
    saved_bytes = 0
    for n in saved:
        meta = _compat.node_tensor_meta(n)
        if meta is not None:
            saved_bytes += _bytes(*meta)
    forward_calls = {n.name for n in fw.graph.nodes if n.op == "call_function"}
    recomputed = [n.name for n in bw.graph.nodes
                  if n.op == "call_function" and n.name in forward_calls
                  and n.target is not operator.getitem]
    return PartitionStats([n.name for n in saved], saved_bytes, recomputed, seconds)


def _bytes(shape, dtype):
    return math.prod(shape) * _element_size(dtype)


def _element_size(dtype):
    return torch.empty((), dtype=dtype).element_size()


class JointGraph:
    """An AOTAutograd joint graph as a remat graph, with the tables back to fx nodes."""

    def __init__(self, joint_module, num_fwd_outputs=None):
        self.module = joint_module
        self.fwd_outputs, self.bwd_outputs = _compat.joint_outputs(joint_module, num_fwd_outputs)
        self.forward_names = _compat.forward_node_names(joint_module, len(self.fwd_outputs))
        self.values, self.value_node, self.value_of, self.value_root = [], [], {}, []
        self.tangent_values = set()
        self.written_roots = set()  # storages in-place calls write: their producers run once
        self.producer_dict = {}  # value -> node dict producing it
        nodes = []
        for n in joint_module.graph.nodes:
            if n.op == "placeholder":
                v = self._add_value(n, n, None)
                if _compat.is_tangent(n):
                    self.tangent_values.add(v)
            elif n.op == "call_function" and n.target is not operator.getitem:
                nodes.append(self._node_dict(n))
        for root in self.written_roots:
            if root in self.producer_dict:
                self.producer_dict[root]["recomputable"] = False
        for o in self.fwd_outputs + self.bwd_outputs:
            if isinstance(o, fx.Node) and o in self.value_of:
                self.values[self.value_of[o]]["output"] = True
        self.graph = remat.Graph.build(f"{type(joint_module).__name__} joint graph",
                                       self.values, nodes)

    def _add_value(self, node, fx_node, alias_root):
        meta = _compat.node_tensor_meta(node)
        index = len(self.values)
        if alias_root is not None:
            entry = {"name": node.name, "size": 0, "alias_of": alias_root}
            root = alias_root
        else:
            entry = {"name": node.name, "size": _bytes(*meta) if meta else 0}
            root = index
        self.values.append(entry)
        self.value_node.append(fx_node)
        self.value_root.append(root)
        if fx_node is not None:
            self.value_of[fx_node] = index
        return index

    def _node_dict(self, n):
        packet = _compat.packet_name(n.target)
        inputs = []
        for i in n.all_input_nodes:
            if i in self.value_of and self.value_of[i] not in inputs:
                inputs.append(self.value_of[i])
        written = [self.value_of[w] for w in effects.declared_writes(n) if w in self.value_of]
        is_view = effects.is_view(n)
        alias = None
        if written:
            alias = self.value_root[written[0]]
            self.written_roots.update(self.value_root[w] for w in written)
        elif is_view and inputs:
            alias = self.value_root[inputs[0]]
        getitems = sorted((u for u in n.users if u.target is operator.getitem),
                          key=lambda u: u.args[1])
        if getitems:
            outputs = [self._add_value(g, g, None) for g in getitems]
        elif _compat.node_tensor_meta(n) is not None:
            outputs = [self._add_value(n, n, alias)]
        else:
            outputs = []
        kind = op_kinds.kind_of(packet, is_view)
        node = {
            "name": n.name, "op": str(n.target), "kind": kind,
            "phase": "forward" if n.name in self.forward_names else "backward",
            "cost": self._cost(n, packet, kind, getitems),
            "inputs": inputs, "outputs": outputs,
            "recomputable": not written and not op_kinds.is_random(packet),
        }
        for v in outputs:
            self.producer_dict[v] = node
        return node

    def _cost(self, n, packet, kind, getitems):
        def meta_tensor(node):
            meta = _compat.node_tensor_meta(node)
            if meta is None:
                return None
            return torch.empty(meta[0], dtype=meta[1], device="meta")

        args = tuple(meta_tensor(a) if isinstance(a, fx.Node) else a for a in n.args)
        result = (tuple(meta_tensor(g) for g in getitems) if getitems else meta_tensor(n))
        try:
            return cost_models.flop_cost(cost_models.OpCall(str(n.target), packet, kind, args,
                                                            result))
        except (TypeError, IndexError, AttributeError):
            return 1.0  # an op whose arguments the FLOP model does not know

    def saved_nodes(self, sequence):
        """fx nodes to save: the values whose forward copy (made by the first run of a forward
        node, or a primal input) is read by the backward graph's steps (backward-phase nodes and
        recomputations)."""
        g = self.graph
        runs = {}
        forward_copy = {}  # value -> whether its latest copy is a forward copy
        saved = []
        for n in sequence:
            node = g.node(n)
            runs[n] = runs.get(n, 0) + 1
            in_forward = node["phase"] == "forward" and runs[n] == 1
            if not in_forward:
                for v in node["inputs"]:
                    if v in self.tangent_values or not forward_copy.get(v, True):
                        continue
                    fx_node = self.value_node[v] if v < len(self.value_node) else None
                    if fx_node is not None and fx_node not in saved:
                        saved.append(fx_node)
            for v in node["outputs"]:
                forward_copy[v] = in_forward
        return saved
