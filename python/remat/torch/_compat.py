"""The only file that knows PyTorch 1.13 from 2.x.

Everything else in remat.torch calls these helpers: a functional call of a module with given
parameters, make_fx, and the identity and size of a tensor's storage.
"""

import torch

TORCH_MAJOR = int(torch.__version__.split(".")[0])

if TORCH_MAJOR >= 2:
    from torch.func import functional_call as _functional_call
else:  # 1.13
    from torch.nn.utils.stateless import functional_call as _functional_call

from torch.fx.experimental.proxy_tensor import make_fx  # same place in 1.13 and 2.x


def functional_call(module, tensors_by_name, args):
    """Calls `module(*args)` with its parameters and buffers replaced by `tensors_by_name`."""
    return _functional_call(module, tensors_by_name, tuple(args))


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
