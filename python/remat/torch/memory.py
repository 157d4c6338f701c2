"""Memory beyond activations: what the peak of a traced step is made of, and what training adds.

    split = memory_split(traced, optimizer="adamw")   # at the baseline (default schedule) peak
    split.parameters, split.gradients, split.activations, ...   # bytes; they add up to the peak
    split.optimizer_state, split.master_weights     # outside the graph, resident all the step
    print("\\n".join(split.lines()))

The graph's bytes at the peak step are split by what each live value is: a trainable parameter,
a frozen parameter, buffer or constant, the batch, a gradient (an output of the step), an
activation (made by the forward: up to the loss) or a temporary (made by the backward, and the
workspace of the call running at the peak). The split is replayed the way the simulator counts
(docs/design.md §1) and must add up to its peak, to the byte.

The optimizer's state is not in the graph: "adamw" and "adam" keep two fp32 moments per
trainable parameter, "sgd" none; a torch.optim optimizer is counted by its class (its moments
in the parameter's dtype, as torch keeps them); an int is bytes. Master weights (an fp32 copy of
each parameter that is not fp32, as mixed-precision training keeps for the optimizer) are
counted for the named optimizers when the parameters are not fp32, and never for a torch.optim
instance (it updates the parameters in their own dtype); `master_weights=` says otherwise.
"""

import dataclasses

import torch

import remat

# Named optimizers -> fp32 values kept per trainable parameter.
_NAMED_OPTIMIZERS = {"adamw": 2, "adam": 2, "sgd": 0, "sgd-momentum": 1}

_FP32_BYTES = 4


@dataclasses.dataclass
class MemorySplit:
    """Bytes at a peak of the step, by what they are; see the module docstring."""

    peak_bytes: int  # the simulator's peak of the sequence split
    peak_step: int
    parameters: int
    fixed: int  # frozen parameters, buffers and constants
    batch: int
    gradients: int
    activations: int
    temporaries: int
    lower_bound: int  # remat.memory_lower_bound: the smallest peak any plan can reach
    optimizer_state: int = 0
    master_weights: int = 0
    optimizer: str = "none"

    @property
    def graph_bytes(self):
        return (self.parameters + self.fixed + self.batch + self.gradients + self.activations
                + self.temporaries)

    @property
    def outside_graph(self):
        """Bytes resident through the step that the graph does not hold (optimizer)."""
        return self.optimizer_state + self.master_weights

    @property
    def total(self):
        return self.peak_bytes + self.outside_graph

    def lines(self, title="baseline peak"):
        fmt = remat.format_bytes

        def row(name, nbytes, note=""):
            share = 100.0 * nbytes / self.total if self.total else 0.0
            return f"  {name:<22} {fmt(nbytes):>12} {share:6.1f} %{note}"

        out = [f"memory at the {title} (step {self.peak_step}): {fmt(self.total)}"
               + (f" ({fmt(self.peak_bytes)} in the graph + {fmt(self.outside_graph)} optimizer)"
                  if self.outside_graph else ""),
               row("parameters", self.parameters)]
        if self.fixed:
            out.append(row("frozen and buffers", self.fixed))
        out += [row("batch", self.batch), row("gradients", self.gradients)]
        if self.outside_graph or self.optimizer != "none":
            out.append(row("optimizer state", self.optimizer_state, f"  ({self.optimizer})"))
        if self.master_weights:
            out.append(row("master weights", self.master_weights, "  (fp32 copies)"))
        out += [row("activations", self.activations, "  (made by the forward)"),
                row("temporaries", self.temporaries, "  (made by the backward, workspace)")]
        lower = self.lower_bound + self.outside_graph
        out.append(f"memory lower bound: {fmt(lower)} ({100.0 * lower / self.total:.1f} % of "
                   f"{fmt(self.total)}): the smallest peak any plan can reach")
        return out


def optimizer_bytes(params, optimizer, master_weights=None):
    """(optimizer state bytes, master weight bytes, description) for the trainable `params`
    (tensors, meta ones included) under `optimizer` (see the module docstring)."""
    params = list(params)
    numel = sum(p.numel() for p in params)
    low_precision = sum(p.numel() for p in params if p.dtype != torch.float32)
    if optimizer is None:
        state, name, named = 0, "none", False
    elif isinstance(optimizer, bool):
        raise TypeError("optimizer must be a name, a torch.optim.Optimizer or int bytes")
    elif isinstance(optimizer, int):
        if optimizer < 0:
            raise ValueError(f"optimizer state bytes must be >= 0 (got {optimizer})")
        state, name, named = optimizer, f"{remat.format_bytes(optimizer)} given", False
    elif isinstance(optimizer, str):
        key = optimizer.strip().lower()
        if key not in _NAMED_OPTIMIZERS:
            raise ValueError(f"optimizer {optimizer!r}: expected one of "
                             f"{', '.join(_NAMED_OPTIMIZERS)}, a torch.optim.Optimizer or int "
                             "bytes")
        per_param = _NAMED_OPTIMIZERS[key]
        state, named = per_param * _FP32_BYTES * numel, True
        name = f"{key}: {per_param} x fp32 per parameter"
    elif isinstance(optimizer, torch.optim.Optimizer):
        state, name = _torch_optimizer_bytes(optimizer), type(optimizer).__name__
        named = False
    else:
        raise TypeError(f"optimizer must be a name ({', '.join(_NAMED_OPTIMIZERS)}), a "
                        f"torch.optim.Optimizer or int bytes (got {type(optimizer).__name__})")
    if master_weights is None:
        master_weights = named
    master = _FP32_BYTES * low_precision if master_weights else 0
    return state, master, name


def _torch_optimizer_bytes(optimizer):
    """Moments a torch.optim optimizer keeps for its parameters, in each parameter's dtype."""
    return sum(_torch_moments(optimizer, group) * p.numel() * p.element_size()
               for group in optimizer.param_groups for p in group["params"] if p.requires_grad)


def _torch_moments(optimizer, group):
    kind = type(optimizer).__name__
    if kind in ("Adam", "AdamW", "NAdam", "RAdam", "Adamax"):
        return 2 + int(bool(group.get("amsgrad", False)))
    if kind == "SGD":
        return int(group.get("momentum", 0) != 0)
    if kind == "Adagrad":
        return 1
    if kind == "RMSprop":
        return 1 + int(group.get("momentum", 0) != 0) + int(bool(group.get("centered", False)))
    raise ValueError(f"optimizer {kind}: its state size is not known to remat; pass its bytes "
                     "as optimizer=int")


def memory_split(traced, sequence=None, *, optimizer=None, master_weights=None):
    """The MemorySplit of `traced` at the peak of `sequence` (default: the default schedule,
    i.e. the baseline), with the state of `optimizer` (see the module docstring)."""
    g = traced.graph
    if sequence is None:
        sequence = remat.default_schedule(g)
    evaluation = remat.simulate(g, list(sequence))
    if not evaluation.valid:
        raise ValueError(f"{traced.model_name}: invalid sequence: {evaluation.error}")
    category = _categories(traced)
    by_category = dict.fromkeys(("parameters", "fixed", "batch", "gradients", "activations",
                                 "temporaries"), 0)
    for v, nbytes in _live_at(g, list(sequence), evaluation.peak_step):
        by_category[category(v)] += nbytes
    temp = g.node(sequence[evaluation.peak_step]).get("temp", 0)
    by_category["temporaries"] += temp
    split = MemorySplit(peak_bytes=evaluation.peak_bytes, peak_step=evaluation.peak_step,
                        lower_bound=remat.memory_lower_bound(g), **by_category)
    if split.graph_bytes != evaluation.peak_bytes:
        raise RuntimeError(f"{traced.model_name}: the memory split adds up to "
                           f"{split.graph_bytes} bytes, the simulator's peak is "
                           f"{evaluation.peak_bytes}")
    split.optimizer_state, split.master_weights, split.optimizer = outside_graph_bytes(
        traced, optimizer, master_weights)
    return split


def outside_graph_bytes(traced, optimizer, master_weights=None):
    """(optimizer state bytes, master weight bytes, description) for the trainable parameters
    of `traced`."""
    return optimizer_bytes(_param_tensors(traced), optimizer, master_weights)


def _param_tensors(traced):
    # Shapes and dtypes from the trace (make_fx records each placeholder's fake value), on meta.
    out = []
    for node in traced.placeholders[:len(traced.param_names)]:
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{traced.model_name}: parameter {node.name} has no recorded shape; "
                             "pass model= to count the optimizer's state")
        out.append(torch.empty(value.shape, dtype=value.dtype, device="meta"))
    return out


def _categories(traced):
    """value index -> category name."""
    g = traced.graph
    inputs = {}
    params = len(traced.param_names)
    fixed = params + len(traced.fixed_names)
    for i, node in enumerate(traced.placeholders):
        if node in traced.value_fx:
            inputs[traced.value_fx[node]] = ("parameters" if i < params else
                                             "fixed" if i < fixed else "batch")
    gradients = set()
    for o in traced.output_fx[1:]:
        v = traced.value_fx.get(o)
        if v is not None:
            gradients.add(traced.value_root[v])
    node_phase = {}

    def category(v):
        if v in inputs:
            return inputs[v]
        producer = traced.value_producer[v] if v < len(traced.value_producer) else -1
        if producer < 0:
            producer = g.producer(v)
            if producer is None:
                return "fixed"  # constants read by the graph
        if v in gradients:
            return "gradients"
        if producer not in node_phase:
            node_phase[producer] = g.node(producer)["phase"]
        return "activations" if node_phase[producer] == "forward" else "temporaries"

    return category


def _live_at(g, sequence, step):
    """(value, bytes) of every value live at `step` of `sequence`, as the simulator counts them:
    graph inputs throughout; a value from its production to its last read before the next
    production (outputs to the end)."""
    produced_at, last_use = {}, {}
    live = []
    for t, n in enumerate(sequence):
        node = g.node(n)
        for v in node["inputs"]:
            if v in produced_at:
                last_use[v] = t
        for v in node["outputs"]:
            if v in produced_at and produced_at[v] <= step <= max(last_use[v], produced_at[v]):
                live.append(v)
            produced_at[v] = t
            last_use[v] = t
    for v, made in produced_at.items():
        end = len(sequence) - 1 if g.value(v).get("output") else last_use[v]
        if made <= step <= end:
            live.append(v)
    live += [v for v in g.graph_inputs]
    sizes = ((v, g.value(v)["size"]) for v in live)
    return [(v, s) for v, s in sizes if s]

