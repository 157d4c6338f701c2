"""remat.torch.kernel_workspace: the bytes a convolution kernel allocates and frees within one
call (its workspace), measured once per shape on the CPU, for the compile path's node temps.

    workspace_bytes(fx_call)    # 0 but for a CPU convolution or its backward

A compiled step runs convolutions as library calls (oneDNN on the CPU), Inductor's or not. Such
a call reorders its weight into the layout its kernel wants and, in the backward, may reduce the
weight's gradient through buffers of its own: memory held only while it runs, at times several
times the weight (bench/inductor_peak_probe.py prints a step's allocations by the call making
them). The simulator charges a node's `temp` at its step, so a plan that ignored it would not be
the compiled step's peak. The bytes depend on the shapes, the strides, the machine's kernels and
the thread count, not on the values: each distinct call is run once on zeros of its arguments'
shapes and strides (as the compiled graph has them: where the compile backend has Inductor's
layout optimization on, as it is by default, its 4-d tensors are channels-last; off, the graph's
own strides), and its peak above what it returns is its workspace. A
call on another device, or of other operators, is charged nothing.
"""

import functools

import torch

from remat.torch import _compat

# Operators whose CPU kernels hold workspaces (bench/inductor_peak_probe.py): a convolution's
# reordered weight and gradient buffers, dropout's floating-point mask (the bool mask it returns
# is made from it), fused attention's per-thread accumulators; matrix products and Inductor's
# own kernels hold none worth counting there.
PROBED = frozenset({"convolution", "convolution_backward", "native_dropout",
                    "_scaled_dot_product_flash_attention_for_cpu",
                    "_scaled_dot_product_flash_attention_for_cpu_backward"})


def workspace_bytes(n, channels_last=False):
    """The bytes fx call `n` (of a joint or partitioned graph, with fake tensor metadata)
    allocates and frees while it runs: measured for a CPU call of PROBED; 0 otherwise. With
    `channels_last`, its 4-d tensors are in channels-last layout, as Inductor's layout
    optimization passes them to a convolution and its backward."""
    if n.op != "call_function" or _compat.packet_name(n.target) not in PROBED \
            or not _compat.is_operator(n.target):
        return 0
    key = _call_key(n, channels_last)
    return 0 if key is None else _measured(key)


def _call_key(n, channels_last=False):
    """A hashable description of the call: its target, its arguments with each tensor as
    (shape, stride, dtype) (a 4-d one's stride channels-last's where `channels_last`), and the
    thread count; None where an argument is not a CPU tensor of static shape or a plain
    value."""
    flat, spec = _compat.tree_flatten((n.args, n.kwargs))
    described = []
    for a in flat:
        if hasattr(a, "op"):  # an fx node: its fake tensor
            value = a.meta.get("val")
            if not isinstance(value, torch.Tensor) or value.device.type != "cpu" \
                    or not all(isinstance(d, int) for d in (*value.shape, *value.stride())):
                return None
            stride = tuple(value.stride())
            if channels_last and value.dim() == 4:
                stride = torch.empty(value.shape, device="meta",
                                     memory_format=torch.channels_last).stride()
            described.append(("tensor", tuple(value.shape), stride, value.dtype))
        elif isinstance(a, (int, float, bool, str, type(None), torch.dtype)):
            described.append(("value", a))
        else:
            return None
    return n.target, tuple(described), spec, torch.get_num_threads()


@functools.lru_cache(maxsize=None)
def _measured(key):
    target, described, spec, _ = key
    # Real tensors, not the fake ones of the compile that asks (its dispatch modes set aside).
    with _compat.outside_dispatch_modes(), torch.no_grad():
        flat = [_zeros(*d[1:]) if d[0] == "tensor" else d[1] for d in described]
        args, kwargs = _compat.tree_unflatten(flat, spec)
        target(*args, **kwargs)  # the kernel's one-time setup (its primitive cache) aside
        result, events = _compat.allocations_during(lambda: target(*args, **kwargs))
    live = peak = 0
    for nbytes, _ in events:
        live += nbytes
        peak = max(peak, live)
    del result
    return max(0, peak - live)


def _zeros(shape, stride, dtype):
    """Zeros of `shape` and `stride` (an expanded stride reads one storage element)."""
    size = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
    return torch.zeros(size, dtype=dtype).as_strided(shape, stride)


def measured_on():
    """What the measured workspaces depend on besides the calls: the thread count and the
    oneDNN build (a compile cache's key)."""
    return f"threads={torch.get_num_threads()},mkldnn={torch.backends.mkldnn.is_available()}," \
        f"torch={torch.__version__}"
