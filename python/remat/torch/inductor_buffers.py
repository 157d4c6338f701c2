"""Inductor's buffer reuse, as the simulator of a partition's graphs counts it
(partition.simulate_partition): which values share a storage in the compiled graphs.

Inductor's wrapper code reuses storages in two ways (torch._inductor.config's inplace_buffers
and allow_buffer_reuse, both on by default):

- In place: a pointwise kernel writes its output into a buffer it reads at the same index, of
  the same dtype and storage size, when no kernel after it reads that buffer (one made in the
  graph, or a saved tensor the backward was handed as a donated buffer). The output then takes
  no memory of its own.
- A pool of freed buffers: a buffer of the graph freed after its last kernel is kept, and a
  later allocation of the same dtype and storage size takes the latest one kept (not an
  allocation a fallback kernel such as a random call makes itself). Kept where the two kernels
  are adjacent, or where holding the buffer until then does not raise Inductor's estimate of
  the graph's peak, the estimate of buffers each made by its kernel and freed after its last
  reader, as the simulator counts them without reuse. A buffer taken from the pool lives from
  its first maker to its last reader under its new name: the simulator's peak can be above that
  of the same graphs without reuse (the peak of the estimate bounds it).

Both are modelled as aliases (a value of size 0 whose storage is its root's: docs/design.md),
found in the order the graph lists its steps, the order its kernels run them.
bench/inductor_peak_probe.py prints a compiled step's buffers beside the simulator's values.
"""

import dataclasses


@dataclasses.dataclass
class Layout:
    """What decides whether Inductor may share a storage: the value's dtype, and whether a
    kernel reads it at its storage's own index (contiguous from the storage's start)."""

    dtype: object
    flat: bool


def shared_storages(values, steps, nodes, group_of, layouts, estimate):
    """Makes the values of a partition's run graph that Inductor stores in another value's
    storage aliases of it (size 0, `alias_of` the storage's root), in place: `values` the run
    graph's value dicts, `steps` its node dicts as the graphs call them, in the order the
    kernels run them, `nodes` the same with the inputs inner values are made from (what each
    step reads while it runs), `group_of` each step's fusion group (one kernel), `layouts` a
    Layout per value (None where not known: never shared), `estimate` the simulator's live
    bytes after each step before any sharing. Returns the (output, storage) names shared, in
    place first, then from the pool."""
    reuse = _Reuse(values, steps, nodes, group_of, layouts)
    shared = [reuse.in_place(i) for i in range(len(nodes))]
    shared = [s for found in shared for s in found]
    return shared + reuse.pooled(estimate)


class _Reuse:
    """The storages of a run graph as Inductor shares them (shared_storages)."""

    def __init__(self, values, steps, nodes, group_of, layouts):
        self.values, self.steps, self.nodes = values, steps, nodes
        self.group_of, self.layouts = group_of, layouts
        self.producer = {v: i for i, node in enumerate(nodes) for v in node["outputs"]}
        self.root = list(range(len(values)))
        for v, value in enumerate(values):
            self.root[v] = self._root_of(v)
        # storage -> the steps reading it (any value sharing it), views aside
        self.users = {}
        for i, node in enumerate(nodes):
            if node["kind"] != "view":
                for v in node["inputs"]:
                    self.users.setdefault(self.root[v], set()).add(i)
        self.returned = {self.root[v] for v, value in enumerate(values) if value.get("output")}

    def _root_of(self, v):
        while self.values[v].get("alias_of") is not None:
            v = self.values[v]["alias_of"]
        return v

    def _share(self, v, storage):
        """Value v (stored) is stored in `storage` from now on."""
        self.values[v]["alias_of"] = storage
        self.values[v]["size"] = 0
        self.root[v] = storage
        self.users.setdefault(storage, set()).update(self.users.pop(v, set()))
        if v in self.returned:
            self.returned.add(storage)

    def _stored(self, v):
        value = self.values[v]
        return value["size"] > 0 and value.get("alias_of") is None

    def in_place(self, i):
        """[(output, storage)] of step i writing an output in place: a pointwise step whose
        output is flat and has the dtype and size of a storage it reads flat that nothing after
        its kernel reads."""
        node = self.nodes[i]
        if node["kind"] != "pointwise":
            return []
        found, taken = [], set()
        for v in node["outputs"]:
            if not self._stored(v) or not self._flat(v):
                continue
            for u in node["inputs"]:
                storage = self.root[u]
                if storage not in taken and self._may_take(storage, u, v, i):
                    taken.add(storage)
                    self._share(v, storage)
                    found.append((self.values[v]["name"], self.values[storage]["name"]))
                    break
        return found

    def _flat(self, v):
        layout = self.layouts[v]
        return layout is not None and layout.flat

    def _may_take(self, storage, read, v, i):
        """Whether output v of step i may be written into `storage`, which step i reads as
        value `read`."""
        if storage in self.returned or not self._flat(read) \
                or not self._flat(storage) or self.values[storage]["size"] != \
                self.values[v]["size"] or self.layouts[storage].dtype != self.layouts[v].dtype:
            return False
        maker = self.producer.get(storage)
        if maker is None or self.nodes[maker]["kind"] == "view":
            return False  # a graph input of the joint graph (a parameter, the batch)
        if self.nodes[maker]["phase"] != self.nodes[i]["phase"] and not self._donated(storage):
            return False
        kernel = self.group_of[i]
        for r in self.users.get(storage, ()):
            if self.group_of[r] != kernel:
                if r > i:
                    return False
            elif r != i and not self._inlined_into(r, i, storage):
                return False
        return True

    def _inlined_into(self, r, i, storage):
        """Whether step r, of step i's kernel, is code Inductor inlines into the buffer step i
        makes (it stores nothing) and reads `storage` at its own index: a pointwise step reading
        it flat. A step storing a value of its own is a buffer of its own in the kernel, a second
        reader of the storage."""
        node = self.nodes[r]
        return node["kind"] == "pointwise" and not any(self._stored(v) for v in node["outputs"]) \
            and all(self._flat(v) for v in self.steps[r]["inputs"] if self.root[v] == storage)

    def _donated(self, storage):
        """A forward value the backward reads: AOTAutograd hands it to the backward as a buffer
        the backward may write over (torch._functorch.config.donated_buffer)."""
        maker = self.producer[storage]
        return self.nodes[maker]["phase"] == "forward"

    def pooled(self, estimate):
        """[(output, storage)] of the allocations taking a storage from the pool of freed ones
        (see the module docstring), per graph (phase)."""
        kernels, kernel_at = self._kernels()
        peak = [0] * len(kernels)
        for i, k in enumerate(kernel_at):
            if k is not None:
                peak[k] = max(peak[k], estimate[i])
        overall = {}
        for k, (phase, _) in enumerate(kernels):
            overall[phase] = max(overall.get(phase, 0), peak[k])
        frees = self._frees(kernel_at, kernels)
        pool, found = {}, []
        for k, (phase, steps) in enumerate(kernels):
            for i in steps:
                node = self.nodes[i]
                if node["kind"] == "random":
                    continue  # a fallback kernel allocates its outputs itself
                for v in node["outputs"]:
                    if not self._stored(v) or self.layouts[v] is None:
                        continue
                    key = (phase, self.values[v]["size"], self.layouts[v].dtype)
                    if not pool.get(key):
                        continue
                    storage, freed = pool[key][-1]
                    size = self.values[v]["size"]
                    between = range(freed + 1, k)
                    if freed + 1 == k or size + max((peak[j] for j in between), default=0) \
                            <= overall[phase]:
                        pool[key].pop()
                        for j in between:
                            peak[j] += size
                        found.append((self.values[v]["name"], self.values[storage]["name"]))
                        self._share(v, storage)
            for freed in frees.get(k, ()):
                # a value that took a storage frees that storage
                storage = self.root[freed]
                key = (phase, self.values[storage]["size"], self.layouts[storage].dtype)
                pool.setdefault(key, []).append((storage, k))
        return found

    def _kernels(self):
        """([(phase, steps)] of the kernels in order: runs of steps of one fusion group, views
        aside), and the kernel of each step (None for a view)."""
        kernels, kernel_at, last = [], [], None
        for i, node in enumerate(self.nodes):
            if node["kind"] == "view":
                kernel_at.append(None)
                continue
            key = (self.group_of[i], node["phase"])
            if key != last:
                kernels.append((node["phase"], []))
                last = key
            kernels[-1][1].append(i)
            kernel_at.append(len(kernels) - 1)
        return kernels, kernel_at

    def _frees(self, kernel_at, kernels):
        """{kernel: the storages freed after it into the pool}: made by a step of its graph,
        not returned, last read there."""
        last = {}
        for i, node in enumerate(self.nodes):
            if kernel_at[i] is None:
                continue
            for v in node["inputs"]:
                s = self.root[v]
                last[s] = max(last.get(s, -1), kernel_at[i])
        frees = {}
        for storage, k in last.items():
            maker = self.producer.get(storage)
            if maker is None or storage in self.returned or not self._stored(storage) \
                    or self.layouts[storage] is None \
                    or self.nodes[maker]["phase"] != kernels[k][0]:
                continue
            frees.setdefault(k, []).append(storage)
        return frees
