"""Side-effect analysis: which calls write which inputs, which are views, which must run once.

    run = Recorder(gm).run_all(args)        # one run keeping every value: storages, writes
    effects = Effects(builder, calls)       # side effects (kept in order), what is recomputable

A call is a side effect when it writes an input other than through a hidden write
(op_kinds.HIDDEN_WRITES), draws random numbers, or reads a storage a side effect writes later
(or wrote after the value read was made). Side effects are chained by size-0 effect values so
every plan keeps the traced order of their first computations. Side effects are not
recomputable, but for two kinds of call:
- A call whose only writes are hidden (training-mode batch norm's running statistics): its
  recomputation runs without them.
- A random call that writes nothing, reads no storage a side effect writes, and draws from the
  default generators (no generator argument): its first computation stays on the chain, so the
  draws happen in eager order; a recomputation replays the generator state saved before the first
  one and restores the generator after (execute.py), so it gives the same tensor and draws nothing.
  A recomputation reads the previous effect value too (size 0: it costs no memory).
"""

import operator
import time

import torch
import torch.fx as fx

from remat.torch import _compat, op_kinds
from remat.torch._compat import tree_flatten
from remat.torch.execute import traced_call


class Recorder(fx.Interpreter):
    """Runs the traced step once, keeping every value alive (so storages are never reused) and
    recording which inputs each call writes (version counter, schema, hidden writes), the
    workspace each call on a GPU takes (see workspace_probe) and, when timed, how long each call
    takes."""

    def __init__(self, gm, timed=False):
        super().__init__(gm, garbage_collect_values=False)
        self.timed = timed
        self.writes = {}  # fx node -> list of written input fx nodes
        self.seconds = {}
        self.workspace = {}  # fx node -> bytes the call held only while it ran
        # (fx node, element or None) -> (storage key, bytes), for values whose storage a rewrite
        # changed after this run (see rewrites.rewrite_private_inplace).
        self.storage_override = {}

    def storage(self, node, element=None):
        """(storage key, bytes) of fx node's value (or of element `element` of its tuple)."""
        override = self.storage_override.get((node, element))
        if override is not None:
            return override
        value = self.env.get(node)
        if element is not None:
            value = value[element]
        return storage_of(value)

    def run_all(self, args):
        # Autocast off: the traced graph holds the casts autocast made while it was traced.
        with torch.no_grad(), _compat.autocast(()):
            self.run(*args)
        return self

    def run_node(self, n):
        if n.op != "call_function" or n.target is operator.getitem:
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        inputs = [(i, self.env[i]) for i in n.all_input_nodes]
        before = [_compat.version_of(v) if isinstance(v, torch.Tensor) else None for _, v in inputs]
        probe = workspace_probe(n, args, kwargs)
        if probe is not None:
            probe.start()
        start = time.perf_counter()
        result = traced_call(n.target)(*args, **kwargs)
        if self.timed and result is not None:
            _synchronize(result)
        self.seconds[n] = time.perf_counter() - start
        if probe is not None:
            self.workspace[n] = probe.stop()
        written = {i for (i, v), b in zip(inputs, before)
                   if b is not None and _compat.version_of(v) != b}
        written.update(declared_writes(n))
        self.writes[n] = sorted(written, key=position_in(n.graph))
        return result


class CudaWorkspace:
    """The bytes a call on a CUDA device allocates and frees before it returns (the workspaces
    of cuDNN's convolutions, cuBLAS's and reductions' scratch): torch.cuda's peak during the call
    above what is allocated after it. The recorded run frees nothing between calls, so all that
    the call left allocated is its outputs."""

    def __init__(self, device):
        self.device = device

    def start(self):
        torch.cuda.reset_peak_memory_stats(self.device)

    def stop(self):
        return max(0, torch.cuda.max_memory_allocated(self.device)
                   - torch.cuda.memory_allocated(self.device))


def workspace_probe(n, args, kwargs):
    """A CudaWorkspace for call `n` (fx node) of `args` and `kwargs` when it reads a CUDA tensor
    with data, else None (the CPU's
    allocations are not counted: there a plan's measured peak is its live tensors, as the
    simulator's)."""
    for x in tree_flatten((args, kwargs))[0]:
        if isinstance(x, torch.Tensor) and x.is_cuda and not _compat.is_without_data(x):
            return CudaWorkspace(x.device)
    return None


def _synchronize(result):
    tensors = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
    if any(t.is_cuda for t in tensors):
        torch.cuda.synchronize()


def position_in(graph):
    order = {node: i for i, node in enumerate(graph.nodes)}
    return order.__getitem__


def declared_writes(n):
    """Input fx nodes the schema (or op_kinds.HIDDEN_WRITES) says the call writes."""
    written = set(hidden_write_nodes(n))
    schema = _compat.schema_of(n.target)
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


def hidden_write_nodes(n):
    positions = op_kinds.hidden_writes(_compat.packet_name(n.target), n.args)
    return [n.args[p] for p in positions if isinstance(n.args[p], fx.Node)]


def is_view(n):
    schema = _compat.schema_of(n.target)
    if schema is None:
        return False
    returns_alias = any(r.alias_info is not None and not r.alias_info.is_write
                        for r in schema.returns)
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    return returns_alias and not writes


def storage_of(value):
    if isinstance(value, torch.Tensor):
        return _compat.storage_key_and_bytes(value)
    return None, 0


class Effects:
    """Which calls are side effects (first computations in traced order), which are recomputable
    and which of those replay the generator (`replayed`)."""

    def __init__(self, builder, calls):
        self.builder = builder
        self.calls = calls
        self.recompute_args = {}
        run = builder.run
        position = builder.position
        storage = {n: run.storage(n)[0] for n in builder.nodes}
        hidden = {n: set(hidden_write_nodes(n)) for n in calls}
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
        self.replayed = set()
        for index, n in enumerate(calls):
            packet = _compat.packet_name(n.target)
            writes = [w for w in run.writes.get(n, []) if w not in hidden[n]]
            random = op_kinds.is_random(packet)
            reads_mutated = self.reads_mutated(n, storage)
            if writes or random or reads_mutated:
                self.effect.add(index)
                if random and not (writes or reads_mutated or hidden[n]) and \
                        replayable(n, run.env.get(n)):
                    self.replayed.add(index)
            elif hidden[n]:
                shared = any(len(hidden_storages.get(storage[w], ())) > 1 or storage[w] in
                             self.mutations for w in hidden[n])
                if shared or not accepts_none(n.target, op_kinds.hidden_writes(packet, n.args)):
                    self.effect.add(index)
                else:
                    self.recompute_args[index] = without_hidden_writes(packet, n)
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

    def recomputable(self, index):
        return (index not in self.effect or index in self.replayed) and index not in self.fixed

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


def replayable(n, result):
    """A random call a recomputation can replay: it draws from the default generator of its
    device (no generator argument, which the replay would not restore) and returns tensors."""
    if any(isinstance(a, torch.Generator) for a in tree_flatten((n.args, n.kwargs))[0]):
        return False
    tensors = tree_flatten(result)[0]
    return bool(tensors) and all(isinstance(t, torch.Tensor) for t in tensors)


def accepts_none(target, positions):
    schema = _compat.schema_of(target)
    if schema is None:
        return False
    arguments = schema.arguments
    return all(p < len(arguments) and _compat.is_optional_type(arguments[p].type)
               for p in positions)


def without_hidden_writes(packet, n):
    positions = op_kinds.hidden_writes(packet, n.args)

    def rewrite(args):
        args = list(args)
        for p in positions:
            args[p] = None
        return tuple(args)

    return rewrite
