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


# -- AOTAutograd (functorch.compile on 1.13, torch._functorch on 2.x) ----------------------------

def aot_module(module, fw_compiler, bw_compiler, partition_fn):
    """AOTAutograd of a module with the given compilers and partition function."""
    if TORCH_MAJOR >= 2:
        from torch._functorch.aot_autograd import aot_module as _aot_module
    else:
        from functorch.compile import aot_module as _aot_module
    return _aot_module(module, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                       partition_fn=partition_fn)


def nop_compiler():
    if TORCH_MAJOR >= 2:
        from torch._functorch.aot_autograd import make_boxed_compiler

        return make_boxed_compiler(lambda gm, _inputs: gm)
    from functorch.compile import nop

    return nop


def functorch_min_cut_partition():
    """functorch's min_cut_rematerialization_partition (the min-cut paper's partitioner)."""
    if TORCH_MAJOR >= 2:
        from torch._functorch.partitioners import min_cut_rematerialization_partition
    else:
        from functorch.compile import min_cut_rematerialization_partition
    return min_cut_rematerialization_partition


def _partitioners():
    if TORCH_MAJOR >= 2:
        from torch._functorch import partitioners
    else:
        from functorch._src import partitioners
    return partitioners


def joint_outputs(joint_module, num_fwd_outputs=None):
    """(forward outputs, backward outputs) of an AOTAutograd joint graph: fx nodes or None."""
    outputs = tree_flatten([n.args for n in joint_module.graph.nodes if n.op == "output"])[0]
    if num_fwd_outputs is None:
        num_fwd_outputs = joint_module._out_spec.children_specs[0].num_leaves
    return outputs[:num_fwd_outputs], outputs[num_fwd_outputs:]


def is_tangent(node):
    return node.op == "placeholder" and "tangents" in str(node.target)


def forward_node_names(joint_module, fwd_outputs):
    """Names of the joint graph's nodes the forward outputs need from the primal inputs."""
    partitioners = _partitioners()
    primals = [n for n in joint_module.graph.nodes if n.op == "placeholder" and not is_tangent(n)]
    forward = partitioners._extract_graph_with_inputs_outputs(joint_module.graph, primals,
                                                              list(fwd_outputs))
    return {n.name for n in forward.nodes if n.op != "output"}


def extract_fwd_bwd_modules(joint_module, saved_values, num_fwd_outputs):
    """The forward and backward modules of a joint graph given the values to save."""
    partitioners = _partitioners()
    if TORCH_MAJOR >= 2:
        tensors = [n for n in saved_values if not _is_sym(n)]
        symbols = [n for n in saved_values if _is_sym(n)]
        return partitioners._extract_fwd_bwd_modules(joint_module, tensors, symbols,
                                                     num_fwd_outputs=num_fwd_outputs)
    return partitioners._extract_fwd_bwd_modules(joint_module, list(saved_values))


def _is_sym(node):
    value = node.meta.get("val")
    return value is not None and not isinstance(value, torch.Tensor)


def node_tensor_meta(node):
    """(shape, dtype) of an fx node's tensor value from its metadata, or None."""
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor):
        return tuple(value.shape), value.dtype
    meta = node.meta.get("tensor_meta")
    if meta is not None and hasattr(meta, "shape"):
        return tuple(meta.shape), meta.dtype
    return None


# -- live-storage accounting (remat.torch.checkpointable) ------------------------------------
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402  (1.13 and 2.x)


def storage_of_weak(ref):
    """(storage key, bytes) of the tensor behind a weakref.ref, or None when it is dead. The
    tensor is not held: its Python object may be owned by C++ (a tensor autograd saved), and a
    reference kept past C++ releasing it would dangle (_fix_weakref would leak it instead)."""
    t = ref()
    if t is None:
        return None
    key = storage_key_and_bytes(t)
    del t
    return key
