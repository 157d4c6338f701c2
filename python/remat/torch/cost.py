"""Cost models: what one call of the traced step costs, for the planner (injectable).

    trace(model, batch, loss_fn, cost="flops")      # FLOPs from shapes (default)
    trace(model, batch, loss_fn, cost="measure")    # fastest of three timed runs, microseconds
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
    """Matmul and convolution FLOPs from shapes; element count otherwise; views cost nothing."""
    return float(_flops(call.packet, call.kind, call.args, call.result))


def measured_cost(call):
    """The fastest measured run of the call, in microseconds."""
    return min(call.seconds) * 1e6


def resolve(cost):
    """(cost callable, whether it needs timed runs) for trace's `cost` argument."""
    if cost == "flops":
        return flop_cost, False
    if cost == "measure":
        return measured_cost, True
    if callable(cost):
        return cost, False
    raise ValueError(f"remat.torch.trace: cost must be 'flops', 'measure' or a callable "
                     f"(got {cost!r})")


def _numel(x):
    return x.numel() if isinstance(x, torch.Tensor) else 0


def _conv_macs_per_output(weight, transposed):
    """Multiply-adds per output element (per input element when transposed)."""
    channels = weight.shape[0] if transposed else weight.shape[1]
    return channels * math.prod(weight.shape[2:])


def _flops(packet, kind, args, result):
    """Matmul and convolution FLOPs from shapes; element count otherwise; views cost nothing."""
    if kind == "view":
        return 0
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
