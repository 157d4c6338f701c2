"""Cost models: what one call of the traced step costs, for the planner (injectable).

    trace(model, batch, loss_fn)                    # cost="auto": "roofline" for a CUDA call,
                                                    # "flops" for the others
    trace(model, batch, loss_fn, cost="flops")      # FLOPs from shapes
    trace(model, batch, loss_fn, cost="measure")    # fastest of three timed runs, microseconds
    trace(model, batch, loss_fn, cost="roofline")   # FLOPs or bytes moved, whichever takes
                                                    # longer on the device: microseconds
    trace(model, batch, loss_fn, cost=my_model)     # any callable(OpCall) -> float >= 0

An OpCall describes one aten call of the traced step: `op` (e.g. "aten.mm.default"), `packet`
("mm"), `kind` (the remat node kind), `args` (the argument values of the traced run: tensors,
numbers, lists), `result` (its output), `seconds` (the measured times, only with cost="measure").
"""

import dataclasses
import math

import torch

from remat.torch import op_kinds
from remat.torch._compat import tree_flatten


@dataclasses.dataclass
class OpCall:
    op: str
    packet: str
    kind: str
    args: tuple
    result: object
    seconds: tuple = ()


def flop_cost(call):
    """Matmul, convolution and attention FLOPs from shapes; element count otherwise; views cost
    nothing."""
    return float(_flops(call.packet, call.kind, call.args, call.result))


# Throughputs a step reaches, per device type: matrix products per element size (16-bit ones run
# on the tensor cores of a GPU), everything else, and memory traffic. The defaults are those of an
# H100-class GPU and of a few cores of a server CPU; Roofline(...) takes the machine's own.
_RATES = {
    "cuda": {"matmul": {2: 4e14, 4: 5e13, 8: 2.5e13}, "vector": 2.5e13, "bytes": 2.5e12},
    "cpu": {"matmul": {2: 5e10, 4: 1e11, 8: 5e10}, "vector": 2e10, "bytes": 1e10},
}


@dataclasses.dataclass(frozen=True)
class Roofline:
    """A cost callable: the microseconds a call takes when it is bound by its arithmetic or by
    the bytes it reads and writes, whichever is slower (the roofline model). Matrix products,
    convolutions and attention run at `matmul_flops` (by element size in bytes), other calls'
    arithmetic at `vector_flops`, memory at `bytes_per_second`; None takes the default of the
    call's device (cost._RATES). Unlike FLOPs, it prices the memory-bound calls (norms,
    activations, casts) a plan recomputes at what they cost on the device."""
    matmul_flops: dict = None
    vector_flops: float = None
    bytes_per_second: float = None

    def __post_init__(self):
        rates = list((self.matmul_flops or {}).values()) + [self.vector_flops,
                                                              self.bytes_per_second]
        if self.matmul_flops is not None and not self.matmul_flops:
            raise ValueError("Roofline: matmul_flops needs at least one element size")
        for rate in rates:
            if rate is not None and not (isinstance(rate, (int, float)) and rate > 0):
                raise ValueError(f"Roofline: rates are positive numbers per second, got {rate!r}")

    def __call__(self, call):
        if call.kind == "view":
            return 0.0
        tensors = _tensors(call)
        rates = _RATES["cuda" if _on_cuda(tensors) else "cpu"]
        flops = _flops(call.packet, call.kind, call.args, call.result)
        if call.kind == "compute":
            size = max((t.element_size() for t in tensors if t.is_floating_point()), default=4)
            table = self.matmul_flops or rates["matmul"]
            rate = table.get(size) or min(table.values())  # an unlisted size: the slowest
        else:
            rate = self.vector_flops or rates["vector"]
        moved = sum(t.numel() * t.element_size() for t in tensors)
        seconds = max(flops / rate, moved / (self.bytes_per_second or rates["bytes"]))
        return seconds * 1e6


_DEVICE_ROOFLINE = Roofline()


def device_cost(call):
    """cost="auto": the roofline's microseconds for a call on a CUDA device, where a recomputed
    memory-bound call (a norm, an activation, a cast) costs a pass over memory that FLOPs price
    at almost nothing (bench/gpu_plan_for_check.py compares plans of the two on a GPU); FLOPs
    on the CPU."""
    return _DEVICE_ROOFLINE(call) if _on_cuda(_tensors(call)) else flop_cost(call)


def _tensors(call):
    return [t for t in tree_flatten((call.args, call.result))[0] if isinstance(t, torch.Tensor)]


def _on_cuda(tensors):
    return any(t.device.type == "cuda" for t in tensors)


def measured_cost(call):
    """The fastest measured run of the call, in microseconds."""
    return min(call.seconds) * 1e6


def resolve(cost):
    """(cost callable, whether it needs timed runs) for trace's `cost` argument."""
    if cost == "auto":
        return device_cost, False
    if cost == "flops":
        return flop_cost, False
    if cost == "measure":
        return measured_cost, True
    if cost == "roofline":
        return Roofline(), False
    if callable(cost):
        return cost, False
    raise ValueError("remat.torch.trace: cost must be 'auto', 'flops', 'measure', 'roofline' "
                     f"or a callable (got {cost!r})")


def _numel(x):
    return x.numel() if isinstance(x, torch.Tensor) else 0


def _conv_macs_per_output(weight, transposed):
    """Multiply-adds per output element (per input element when transposed)."""
    channels = weight.shape[0] if transposed else weight.shape[1]
    return channels * math.prod(weight.shape[2:])


def _attention_flops(packet, args):
    """The matrix products of a fused attention call (scaled_dot_product_attention's kernels),
    forward or backward, from the shapes of its query, key and value ([batch, heads, sequence,
    head size]; grouped-query key and value broadcast over the query's heads); None for a call
    of another layout."""
    backward = packet.endswith("_backward")
    q, k, v = args[1:4] if backward else args[:3]
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (q, k, v)):
        return None
    scores = q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]  # one per query-key pair
    # Forward: q @ k^T and scores @ v. Backward: q @ k^T again (the kernels keep no scores),
    # then the gradients of scores, v, q and k.
    per_score = 3 * q.shape[3] + 2 * v.shape[3] if backward else q.shape[3] + v.shape[3]
    return 2 * scores * per_score


def _flops(packet, kind, args, result):
    """Matmul, convolution and attention FLOPs from shapes; element count otherwise; views cost
    nothing."""
    if kind == "view":
        return 0
    if packet in op_kinds.FUSED_ATTENTION:
        flops = _attention_flops(packet, args)
        if flops is not None:
            return flops
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
    if kind == "reduction" or packet in op_kinds.NORMALIZATION:
        inputs = [t for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor)]
        return max([_numel(t) for t in inputs + outputs] + [1])
    return max(sum(_numel(t) for t in outputs), 1)
