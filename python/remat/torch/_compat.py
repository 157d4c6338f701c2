"""The only file that knows PyTorch 1.13 from 2.x, and the only one touching private torch APIs.

Everything else in remat.torch calls these helpers: a functional call of a module with given
parameters, make_fx, pytree flattening, operator schemas and overload names, the identity and size
of a tensor's storage, its version counter, and the cached weight list of recurrent modules.
"""

import contextlib

import torch
import torch.utils._pytree as _pytree

TORCH_MAJOR = int(torch.__version__.split(".")[0])

if TORCH_MAJOR >= 2:
    from torch.func import functional_call as _functional_call
else:  # 1.13
    from torch.nn.utils.stateless import functional_call as _functional_call

from torch.fx.experimental.proxy_tensor import make_fx  # same place in 1.13 and 2.x

tree_flatten = _pytree.tree_flatten
tree_unflatten = _pytree.tree_unflatten


def functional_call(module, tensors_by_name, args, kwargs=None):
    """Calls `module(*args, **kwargs)` with its parameters and buffers replaced by
    `tensors_by_name`. Recurrent modules (nn.LSTM, nn.GRU, nn.RNN) read their weights from a cached
    list (`_flat_weights`) that functional_call does not replace on 1.13; it is swapped too."""
    with _flat_weights_replaced(module, tensors_by_name):
        return _functional_call(module, tensors_by_name, tuple(args), dict(kwargs or {}))


@contextlib.contextmanager
def _flat_weights_replaced(module, tensors_by_name):
    saved = []
    for prefix, sub in module.named_modules():
        names = getattr(sub, "_flat_weights_names", None)
        flat = sub.__dict__.get("_flat_weights")
        if names is None or flat is None:
            continue
        full = [f"{prefix}.{n}" if prefix else n for n in names]
        if not any(f in tensors_by_name for f in full):
            continue
        saved.append((sub, flat))
        sub.__dict__["_flat_weights"] = [tensors_by_name.get(f, w) for f, w in zip(full, flat)]
    try:
        yield
    finally:
        for sub, flat in saved:
            sub.__dict__["_flat_weights"] = flat


def trace_real(fn, args):
    """make_fx over real tensors: aten ops of one call of fn(*args), autograd included."""
    return make_fx(fn, tracing_mode="real")(*args)


def storage_key_and_bytes(tensor):
    """(key identifying the storage, its size in bytes); views of one storage share the key.

    An empty storage has no identity (its data pointer is null), so it gets None and size 0.
    """
    if TORCH_MAJOR >= 2:
        storage = tensor.untyped_storage()
    else:
        storage = tensor.storage()
    nbytes = int(storage.nbytes())
    if nbytes == 0:
        return None, 0
    return (tensor.device.type, tensor.device.index, int(storage.data_ptr())), nbytes


def version_of(tensor):
    """The in-place version counter (bumped by every declared in-place write)."""
    return int(tensor._version)


def schema_of(target):
    """The aten schema of an fx call target (an OpOverload), or None."""
    return getattr(target, "_schema", None)


def overload_name(target):
    """"default" for aten.relu.default, "Tensor" for aten.add.Tensor; None for a non-aten call."""
    return getattr(target, "_overloadname", None)


def packet_name(target):
    """The overload packet's name: "mm" for aten.mm.default."""
    packet = getattr(target, "overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(target, "__name__", str(target))


def is_optional_type(argument_type):
    return isinstance(argument_type, torch._C.OptionalType)


def rng_state(device_types):
    """Snapshot of the CPU generator (and CUDA's when used), to restore after a trace."""
    state = {"cpu": torch.random.get_rng_state()}
    if "cuda" in device_types and torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    torch.random.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def named_tensor_tables(module):
    """(name, tensor) of every parameter and buffer slot of `module` and its submodules, tied
    tensors under each of their names (named_parameters lists a tied tensor once)."""
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for table in (sub._parameters, sub._buffers):
            for name, tensor in table.items():
                if tensor is not None:
                    yield (f"{prefix}.{name}" if prefix else name), tensor
