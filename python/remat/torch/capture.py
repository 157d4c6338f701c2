"""Capture: one training step of a model as an fx graph of aten calls (make_fx), nothing more.

    spec = BatchSpec.of(args, kwargs)          # tensors, constants and the structure of a batch
    captured = capture(model, spec, loss_fn, model_inputs=1)
    captured.module                            # fx.GraphModule: (params, fixed, *tensors) ->
                                               #   [loss, grad of each param]

The batch is any pytree (nested tuples, lists and dicts) of positional arguments plus keyword
arguments for the model. Its tensors become graph inputs; its other leaves (ints, floats, bools,
None, strings) are baked into the trace, so a step checks them on every call (BatchSpec.check).
The model gets `args[:model_inputs]` and the keyword arguments; the loss gets the model's output
and `args[model_inputs:]`.
"""

import dataclasses
import re

import torch
from torch.overrides import TorchFunctionMode

from remat.torch import _compat, host_random


class TraceError(RuntimeError, ValueError):
    """The training step of a model could not be traced; the message names model and reason. A
    ValueError, as every refusal of a model or batch remat cannot run is (and a RuntimeError, as
    it was first)."""


_CONSTANT_TYPES = (int, float, bool, str, type(None), complex, torch.dtype, torch.device)


@dataclasses.dataclass
class BatchSpec:
    """How a call's (args, kwargs) flatten: the tree, the constants and each tensor's layout."""

    treedef: object
    constants: list  # per leaf: the constant, or _TENSOR for a tensor leaf
    layouts: list  # (shape, strides, dtype, device) of each tensor leaf, in leaf order

    @classmethod
    def of(cls, args, kwargs, where="batch"):
        leaves, treedef = _compat.tree_flatten((tuple(args), dict(kwargs)))
        constants, layouts = [], []
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor):
                constants.append(_TENSOR)
                layouts.append(_layout(leaf))
            elif isinstance(leaf, _CONSTANT_TYPES):
                constants.append(leaf)
            else:
                raise TypeError(f"{where}: leaf {i} is a {type(leaf).__name__}; batches may hold "
                                "tensors, numbers, bools, None and strings in tuples, lists and "
                                "dicts")
        return cls(treedef, constants, layouts)

    @property
    def num_tensors(self):
        return len(self.layouts)

    def tensors(self, args, kwargs):
        """The tensor leaves of (args, kwargs), in the traced layout; ValueError saying what
        differs from the traced batch (structure, a constant, a shape, dtype or device)."""
        leaves, treedef = _compat.tree_flatten((tuple(args), dict(kwargs)))
        if treedef != self.treedef:
            raise ValueError(f"the batch structure changed: traced {self.treedef}, got {treedef}")
        tensors = []
        for i, (leaf, constant) in enumerate(zip(leaves, self.constants)):
            if constant is _TENSOR:
                if not isinstance(leaf, torch.Tensor):
                    raise ValueError(f"batch leaf {i} is a {type(leaf).__name__}; the step was "
                                     "traced with a tensor there")
                tensors.append(_in_layout(leaf, self.layouts[len(tensors)], i))
            elif isinstance(leaf, torch.Tensor) or type(leaf) is not type(constant) or \
                    leaf != constant:
                raise ValueError(f"batch leaf {i} is {leaf!r}; the step was traced with the "
                                 f"constant {constant!r} there (constants are baked into the "
                                 "trace: trace again for another value)")
            # else: the same constant
        return tensors

    def rebuild(self, tensors):
        """(args, kwargs) with the tensor leaves taken from `tensors`, constants as traced."""
        it = iter(tensors)
        leaves = [next(it) if c is _TENSOR else c for c in self.constants]
        args, kwargs = _compat.tree_unflatten(leaves, self.treedef)
        return args, kwargs


_TENSOR = object()


def _layout(tensor):
    return tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype, tensor.device


def _in_layout(x, layout, leaf):
    """The traced graph is specialized to the example batch: same shape, dtype and device; a
    tensor laid out differently is copied into the traced strides (make_fx records
    stride-specific calls such as _reshape_alias)."""
    shape, stride, dtype, device = layout
    if tuple(x.shape) != shape or x.dtype != dtype or x.device != device:
        raise ValueError(f"batch tensor {leaf} is {tuple(x.shape)} {x.dtype} on {x.device}; the "
                         f"step was traced for {shape} {dtype} on {device}")
    if tuple(x.stride()) == stride:
        return x
    return torch.empty_strided(shape, stride, dtype=dtype, device=device).copy_(x)


def strided_copy(tensor):
    """A detached copy with the same strides (see _in_layout)."""
    tensor = tensor.detach()
    copy = torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype,
                               device=tensor.device)
    return copy.copy_(tensor)


@dataclasses.dataclass
class Captured:
    module: object  # fx.GraphModule
    param_names: list
    fixed_names: list
    fresh_args: object  # () -> a fresh copy of the traced arguments
    rng_state: dict


def trainable(model):
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def model_tensors(model):
    """(trainable parameters, frozen parameters and buffers) as (name, tensor) lists, in the
    order the traced graph takes them."""
    params = trainable(model)
    fixed = [(n, p) for n, p in model.named_parameters() if not p.requires_grad]
    fixed += list(model.named_buffers())
    return params, fixed


def fake_like(tensor, fake_mode, device):
    """A fake tensor of `fake_mode` with `tensor`'s shape, strides and dtype on `device`: no
    memory is taken, whatever its size."""
    with fake_mode:
        return torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype,
                                   device=device)


def capture(model, spec, example_tensors, loss_fn, model_inputs, model_name, fake=None):
    """make_fx of one training step on copies of the parameters, buffers and batch tensors.
    With `fake` = (FakeTensorMode, device), the copies are fake tensors of that mode on that
    device (tracing without memory): make_fx traces in that mode."""
    params, fixed = model_tensors(model)
    if not params:
        raise TraceError(f"cannot trace {model_name}: it has no parameter with requires_grad")
    param_names, fixed_names = [n for n, _ in params], [n for n, _ in fixed]
    step_fn = _make_step_fn(model, param_names, fixed_names, spec, model_inputs, loss_fn)
    copy = strided_copy if fake is None else (lambda t: fake_like(t, *fake))

    def fresh_args():
        return ([copy(p).requires_grad_(True) for _, p in params],
                [copy(t) for _, t in fixed], *[copy(x) for x in example_tensors])

    devices = {t.device.type for _, t in params + fixed}
    saved_rng = _compat.rng_state(devices)
    host_before = host_random.state()
    try:
        gm = _compat.trace_fake(step_fn, fresh_args())
    except _LossError as error:
        raise ValueError(f"{model_name}: {error}") from None
    except _CheckpointInModel:
        raise TraceError(
            f"cannot trace {model_name}: it calls torch.utils.checkpoint (non-reentrant) in its "
            "forward; remat plans what to keep and what to recompute for the whole step and "
            "replaces it: call the model without it (Hugging Face: "
            "model.gradient_checkpointing_disable())") from None
    except Exception as error:  # make_fx raises plain RuntimeErrors; name the model
        raise TraceError(f"cannot trace {model_name}: {_reason(error)}") from error
    finally:
        _compat.set_rng_state(saved_rng)
    _check_no_host_draws(host_before, model_name)
    _check_no_hidden_parameters(gm, model, params, model_name)
    return Captured(gm, param_names, fixed_names, fresh_args, saved_rng)


class _LossError(TypeError):
    pass


def _check_no_host_draws(before, model_name):
    """Refuses a trace that drew from Python's or numpy's global generator since `before`
    (host_random.state()), with both put back: the numbers of the tracing run would be kept in
    the graph as constants or as the branches they chose, the same at every step. (Tracing again
    from other states could not tell a draw that decides nothing from one whose branch happened
    to come out the same: refused either way.)"""
    moved = host_random.moved(before)
    if not moved:
        return
    host_random.set_state(before)
    raise TraceError(
        f"cannot trace {model_name}: the step draws random numbers from {' and '.join(moved)}; "
        "a trace would keep the numbers of the tracing run as constants (or the branches they "
        "chose) and every step would reuse them. Draw them with torch (torch.rand, "
        "torch.bernoulli, torch.randint), whose draws remat replays; a draw that decides "
        "nothing (a layerdrop draw at a rate of 0) is refused too, as remat cannot tell")


# make_fx's GuardOnDataDependentSymNode: "Could not guard on data-dependent expression u0 > 4 ..."
_DATA_DEPENDENT_SIZE = re.compile(r"data-dependent expression (.+?) \(unhinted")


# ... and the line of the same message saying its symbols are no sizes: they are tensor values.
_VALUE_SYMBOLS = "(Size-like symbols: none)"


def _symbols(expression):
    return sorted(set(re.findall(r"\bu\d+\b", expression))) or ["a symbol"]


def _make_step_fn(model, param_names, fixed_names, spec, model_inputs, loss_fn):
    tied = {}
    for name, tensor in _compat.named_tensor_tables(model):
        tied.setdefault(id(tensor), []).append(name)
    aliases = {name: names for names in tied.values() for name in names}

    def step(param_list, fixed_list, *data):
        tensors = {}
        for name, tensor in zip(param_names + fixed_names, list(param_list) + list(fixed_list)):
            for alias in aliases.get(name, [name]):
                tensors[alias] = tensor
        args, kwargs = spec.rebuild(data)
        with _CheckpointDetector():
            output = _compat.functional_call(model, tensors, args[:model_inputs], kwargs)
        loss = loss_fn(output, *args[model_inputs:])
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise _LossError(f"loss_fn must return a tensor with one element (got {shape}; "
                             "use reduction='mean' or 'sum')")
        grads = torch.autograd.grad(loss, param_list, allow_unused=True)
        return [loss, *grads]

    return step


class _CheckpointInModel(Exception):
    pass


class _CheckpointDetector(TorchFunctionMode):
    """Stops the trace at the first torch call inside a non-reentrant torch.utils.checkpoint
    region. Traced, such a region's recomputation reads the parameters as constants of the graph
    (no gradient); refused by name instead."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if _compat.in_non_reentrant_checkpoint():
            raise _CheckpointInModel()
        return func(*args, **(kwargs or {}))


def _reason(error):
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    size = _DATA_DEPENDENT_SIZE.search(text)
    if "data-dependent expression" in text and size and _VALUE_SYMBOLS in str(error):
        return ("data-dependent control flow on a tensor's value: the step's Python code "
                f"branches on `{size.group(1)}`, where {', '.join(_symbols(size.group(1)))} is "
                "read from a tensor (`if torch.rand([]) < p`, as Hugging Face's layerdrop does, "
                "`if x.sum() > 0`, `.item()`); one trace holds one outcome for every step, so it "
                "is refused (make the branch a tensor operation, e.g. torch.where; Hugging Face: "
                "BART-like models draw for layerdrop only where the config's encoder_layerdrop "
                "or decoder_layerdrop is above 0, Wav2Vec2-like ones at every rate)")
    if "data-dependent expression" in text and size:
        return ("data-dependent control flow on a size: the step's Python code branches on "
                f"or computes with `{size.group(1)}`, where {', '.join(_symbols(size.group(1)))} "
                "is the size of the output of a call whose size depends on tensor values "
                "(nonzero, boolean-mask indexing, masked_select, unique, ...); one trace holds "
                "one outcome for every batch, so it is refused (make the branch independent of "
                "the count, e.g. with torch.where, or run that part outside the step)")
    if "data-dependent" in text or "get value out of a tracing tensor" in text:
        return ("data-dependent control flow: the step reads the value of a tensor (e.g. "
                "`if x.sum() > 0` or `.item()`), which make_fx cannot trace "
                f"(make_fx: {text})")
    return f"{type(error).__name__}: {text}"


def _check_no_hidden_parameters(gm, model, params, model_name):
    """A trainable parameter read as a constant (a module caching its weights outside its
    parameters) gets no gradient from the trace: an error naming the parameter and the op."""
    by_storage = {}
    for name, p in params:
        key, _ = _compat.storage_key_and_bytes(p)
        if key is not None:
            by_storage.setdefault(key, name)
    if not by_storage:
        return
    for n in gm.graph.nodes:
        if n.op != "get_attr":
            continue
        value = getattr(gm, n.target, None)
        if not isinstance(value, torch.Tensor):
            continue
        key, _ = _compat.storage_key_and_bytes(value)
        if key in by_storage:
            users = sorted({str(u.target) for u in n.users})
            raise TraceError(
                f"cannot trace {model_name}: trainable parameter '{by_storage[key]}' is read as "
                f"a constant by {', '.join(users) or 'no op'}, so the traced step would not "
                "compute its gradient (a module that caches its weights outside its parameters, "
                "such as flattened RNN weights)")
