"""Plan -> fx.GraphModule, and live-bytes accounting while it runs.

    module = plan_module(traced, sequence)       # node list = the plan's sequence
    outputs = module(*params, *fixed, *batch)    # [loss, grad_0, grad_1, ...]
    outputs, peak = run_measured(module, flat_inputs)   # CPU: bytes of live storages

Each step of the sequence becomes a fresh call reading the latest earlier copy of each of its
inputs; fx's generated code drops every value after its last use, so a value recomputed later is
released in between. Two things are not literal copies of the plan:
- A view whose root storage has been recomputed since the view was made is re-derived from the
  latest copy of the root just before it is read (views have size 0 and cost 0 in the graph, and
  the simulator assumes readers see the latest root copy; reading the old view would keep the old
  storage alive).
- A recomputation of a node with hidden writes (training-mode batch norm) runs without them.
- A random node the plan runs more than once (TracedStep.replayed) saves the generator states
  it draws from right before its first computation (the CPU generator's, 5,056 bytes, and that
  of each CUDA device its tensors are on, 16 bytes each, as torch.utils.checkpoint does); each
  recomputation sets them, runs the call, and puts back the states the generators had before it,
  so it gives the first computation's tensor and moves no generator. The saved states are values
  of the plan module, freed after the last recomputation and counted by run_measured; the graph
  does not count them (at most 5 KB per recomputed random node: see docs/python.md). The CUDA
  path is untested here (no GPU).
"""

import collections
import operator

import torch
import torch.fx as fx
from torch.fx.node import map_arg

from remat.torch import _compat, op_kinds
from remat.torch._compat import tree_flatten


def plan_module(traced, sequence):
    """An fx.GraphModule running `sequence` (remat node indices) of a TracedStep."""
    return _PlanBuilder(traced).build(sequence)


class _PlanBuilder:
    def __init__(self, traced):
        self.traced = traced
        self.graph = fx.Graph()
        self.env = {}  # fx node of the traced graph -> latest copy in the new graph
        self.serial = {}  # value -> production count of its root when this copy was made
        self.runs = [0] * traced.graph.num_nodes
        self.planned_runs = collections.Counter()
        self.generator_states = {}  # replayed node -> the plan module's value of saved states

    def build(self, sequence):
        t = self.traced
        self.planned_runs = collections.Counter(int(i) for i in sequence)
        for p in t.placeholders:
            self.env[p] = self.graph.placeholder(p.name)
        for n in t.module.graph.nodes:
            if n.op == "get_attr":
                self.env[n] = self.graph.get_attr(n.target)
        for index in sequence:
            self.emit(int(index))
        outputs = [self.resolve(o) if isinstance(o, fx.Node) else o for o in t.output_fx]
        self.graph.output(outputs)
        self.release_unused()
        self.graph.lint()
        return fx.GraphModule(t.module, self.graph)

    def release_unused(self):
        """fx frees a value after its last use but keeps a value nobody uses until the end; the
        simulator frees it at once, so each unused value is handed to a no-op right away."""
        for n in list(self.graph.nodes):
            if n.op == "call_function" and not n.users and n.target is not _release:
                with self.graph.inserting_after(n):
                    self.graph.call_function(_release, (n,))

    def emit(self, index):
        t = self.traced
        n = t.node_fx[index]
        args = map_arg(n.args, self.resolve)
        kwargs = map_arg(n.kwargs, self.resolve)
        if self.runs[index] > 0 and index in t.recompute_args:
            args = t.recompute_args[index](args)
        target = traced_call(n.target)
        if index in t.replayed and self.planned_runs[index] > 1:
            if self.runs[index] == 0:
                self.generator_states[index] = self.graph.call_function(
                    _save_generators, args, kwargs)
            else:
                target = _replaying(target)
                args = (self.generator_states[index],) + tuple(args)
        if index in t.data_dependent_sizes:
            target = _checking_sizes(target, t.data_dependent_sizes[index], n.name)
        self.runs[index] += 1
        copy = self.graph.call_function(target, args, kwargs)
        self.env[n] = copy
        for g in t.node_getitems[index]:
            self.env[g] = self.graph.call_function(operator.getitem, (copy, g.args[1]))
        for v in self.values_of(index, n):
            root = t.value_root[v]
            if root == v:
                self.serial[v] = self.serial.get(v, 0) + 1
            elif root >= 0:
                self.serial[v] = self.serial.get(root, 0)

    def values_of(self, index, n):
        t = self.traced
        nodes = [n] + t.node_getitems[index]
        return [t.value_fx[x] for x in nodes if x in t.value_fx]

    def resolve(self, n):
        """The latest copy of traced fx node `n`, re-deriving a stale view first."""
        t = self.traced
        v = t.value_fx.get(n)
        if v is not None and self.is_stale_view(v):
            self.emit(t.value_producer[v])
        if n not in self.env:
            raise RuntimeError(f"plan reads {n.name} before any step produced it")
        return self.env[n]

    def is_stale_view(self, v):
        t = self.traced
        root, producer = t.value_root[v], t.value_producer[v]
        if root < 0 or root == v or producer < 0 or not t.node_pure_view[producer]:
            return False
        if t.node_fx[producer] not in self.env:
            return False
        return self.serial.get(v) != self.serial.get(root, 0)


_IN_GRAD_MODE = {}


def traced_call(target):
    """`target` as the traced graph ran it: as it is, or, for an operator whose kernel reads
    grad mode (op_kinds.READS_GRAD_MODE), a call that turns grad mode on (make_fx traced with it
    on; remat runs graphs under no_grad) on detached tensors (so no autograd graph is built)."""
    if not op_kinds.reads_grad_mode(_compat.packet_name(target)):
        return target
    call = _IN_GRAD_MODE.get(target)
    if call is None:
        def call(*args, **kwargs):
            args, kwargs = _compat.tree_map_only(
                torch.Tensor, torch.Tensor.detach, (args, kwargs))
            with torch.enable_grad():
                return target(*args, **kwargs)

        call.__name__ = f"grad_mode_{_compat.packet_name(target)}"
        _IN_GRAD_MODE[target] = call
    return call


def _cuda_devices(args, kwargs):
    """Indices of the CUDA devices a call's tensors (or `device` arguments) are on."""
    devices = set()
    for x in tree_flatten((args, kwargs))[0]:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            devices.add(x.device.index)
        elif isinstance(x, torch.device) and x.type == "cuda":
            devices.add(x.index if x.index is not None else torch.cuda.current_device())
    return tuple(sorted(devices))


def _save_generators(*args, **kwargs):
    """The states of the generators a random call with these arguments draws from: the CPU
    generator's, and each CUDA device's its tensors are on (torch.utils.checkpoint saves the
    same). Called right before the call's first computation."""
    devices = _cuda_devices(args, kwargs)
    return torch.get_rng_state(), tuple(torch.cuda.get_rng_state(d) for d in devices), devices


_REPLAYING = {}


def _replaying(target):
    """`target` run as a recomputation: replay(states, *args, **kwargs) sets the generators to
    `states` (from _save_generators), calls target, and gives the generators back the states
    they had before, so the call draws what its first computation drew and nothing moves."""
    replay = _REPLAYING.get(target)
    if replay is None:
        def replay(states, *args, **kwargs):
            cpu, cuda, devices = states
            with torch.random.fork_rng(devices=list(devices)):
                torch.set_rng_state(cpu)
                for device, state in zip(devices, cuda):
                    torch.cuda.set_rng_state(state, device)
                return target(*args, **kwargs)

        replay.__name__ = f"replay_{_compat.packet_name(target)}"
        _REPLAYING[target] = replay
    return replay


class DataDependentSizeError(ValueError):
    """A call whose output size depends on the data gave another size than when traced;
    `what` says which (fx adds the graph's context to the message)."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what


def _checking_sizes(target, shapes, name):
    """`target` followed by a check that its tensor outputs have the traced `shapes`: the plan
    holds the sizes the traced batch gave (trace.py), which another batch's data may change."""
    def check(*args, **kwargs):
        result = target(*args, **kwargs)
        got = tuple(tuple(x.shape) for x in tree_flatten(result)[0]
                    if isinstance(x, torch.Tensor))
        if got != shapes:
            raise DataDependentSizeError(
                f"{_compat.packet_name(target)} ({name}) gave shape {_shapes_text(got)} where "
                f"the traced batch gave {_shapes_text(shapes)}: its output size depends on the "
                "data (the elements a boolean mask selects, nonzero, unique, ...), and a traced "
                "step holds the sizes of the batch it was traced with")
        return result

    check.__name__ = f"sized_{_compat.packet_name(target)}"
    return check


def _shapes_text(shapes):
    return ", ".join(str(s) for s in shapes)


def _release(value):
    """Reads a value so that fx's generated code drops it right after (see release_unused)."""
    del value


def run_measured(module, inputs):
    """Runs `module` on `inputs`, accounting the bytes of live tensor storages after each call.

    Each storage counts once, however many views of it are alive; the inputs count throughout
    (the caller holds them). Returns (outputs, peak_bytes).
    """
    interpreter = _LiveBytes(module, inputs)
    with torch.no_grad(), _compat.autocast(()):
        outputs = interpreter.run(*inputs)
    return outputs, interpreter.peak_bytes


class _LiveBytes(fx.Interpreter):
    """Runs a plan module keeping `live_bytes`, the bytes of live storages after the last call
    (the inputs, every value still held, its result), and their peak."""

    def __init__(self, module, inputs):
        super().__init__(module, garbage_collect_values=True)
        self.pinned = _storages(inputs, {})
        self.live_bytes = self.peak_bytes = sum(self.pinned.values())

    def run_node(self, n):
        result = super().run_node(n)
        live = dict(self.pinned)
        _storages(list(self.env.values()), live)
        _storages([result], live)
        self.live_bytes = sum(live.values())
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return result


def storage_bytes(values):
    """The bytes of the tensor storages in `values` (nested lists, tuples and dicts), each storage
    once however many views of it there are."""
    return sum(_storages(values, {}).values())


def _storages(values, into):
    stack = list(values)
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            key, nbytes = _compat.storage_key_and_bytes(x)
            if key is not None:
                into[key] = nbytes
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    return into
