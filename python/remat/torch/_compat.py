"""The only file that touches private PyTorch APIs (PyTorch 2; the tests run on the version
README.md names).

Everything else in remat.torch calls these helpers: a functional call of a module with given
parameters, make_fx, pytree flattening, operator schemas and overload names, the identity and size
of a tensor's storage, its version counter, AOTAutograd's joint-graph partitioning, the autocast
state, the saved-tensor hooks of torch.utils.checkpoint and FSDP's flat parameters.
"""

import contextlib
import contextvars
import copy
import functools
import warnings

import torch
import torch.utils._pytree as _pytree
from torch.func import functional_call as _functional_call
from torch.fx.experimental.proxy_tensor import make_fx

from remat.torch import op_kinds

tree_flatten = _pytree.tree_flatten
tree_unflatten = _pytree.tree_unflatten
tree_map_only = _pytree.tree_map_only


def functional_call(module, tensors_by_name, args, kwargs=None):
    """Calls `module(*args, **kwargs)` with its parameters and buffers replaced by
    `tensors_by_name` (recurrent modules' cached weight lists follow, through their
    __setattr__)."""
    return _functional_call(module, tensors_by_name, tuple(args), dict(kwargs or {}))


def trace_fake(fn, args):
    """make_fx over fake tensors: aten ops of one call of fn(*args), autograd included."""
    with _cpu_float32_grouped_mm():
        return make_fx(fn, tracing_mode="fake", _allow_non_fake_inputs=True)(*args)


def _is_grouped_mm(func):
    return func is torch.ops.aten._grouped_mm.default


def _grouped_mm_size(mat_a, mat_b, offs):
    """The size of aten._grouped_mm's result (the layouts its meta function names)."""
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        return [offs.size(0), mat_a.size(0), mat_b.size(1)]
    if mat_a.dim() == 2:
        return [mat_a.size(0), mat_b.size(-1)]
    if mat_b.dim() == 2:
        return [mat_a.size(1), mat_b.size(1)]
    return [mat_a.size(0), mat_a.size(1), mat_b.size(-1)]


def _fake_cpu_float32_grouped_mm(fake_mode, func, mat_a, mat_b, offs=None, bias=None,
                                 out_dtype=None):
    """aten._grouped_mm's result on fake tensors where the CPU kernel runs it in float32 and
    PyTorch's meta function refuses it (it checks CUDA's dtypes only): a contiguous tensor, as the
    CPU kernel returns; any other call goes to the meta function."""
    if not (mat_a.device.type == "cpu" and mat_a.dtype == mat_b.dtype == torch.float32
            and bias is None and out_dtype in (None, torch.float32)):
        return NotImplemented
    from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager
    with in_kernel_invocation_manager(fake_mode):
        out = torch.empty(_grouped_mm_size(mat_a, mat_b, offs), dtype=torch.float32,
                          device="meta")
    return FakeTensor(fake_mode, out, mat_a.device)


@contextlib.contextmanager
def _cpu_float32_grouped_mm():
    """Fake tensors run aten._grouped_mm in float32 on the CPU while it lasts, as eager does
    (Hugging Face's mixture-of-experts layers call it: Mixtral, Qwen2-MoE)."""
    from torch._subclasses import fake_impls
    entry = (_is_grouped_mm, _fake_cpu_float32_grouped_mm)
    fake_impls.op_implementations_checks.insert(0, entry)
    try:
        yield
    finally:
        fake_impls.op_implementations_checks.remove(entry)


def copy_graph_module(gm):
    """A deep copy of fx graph module `gm` whose tensor attributes are `gm`'s own, not copies: a
    joint graph keeps the tensors model code builds (torch.tensor(...)) as real constants, which
    cannot be copied while AOTAutograd's fake mode is active (their new storage would be fake),
    and which the graph only reads."""
    memo = {}
    for module in gm.modules():
        for value in vars(module).values():
            if isinstance(value, torch.Tensor):
                memo[id(value)] = value
        for value in module._buffers.values():
            if value is not None:
                memo[id(value)] = value
    return copy.deepcopy(gm, memo)


def unbacked_bindings(node):
    """The data-dependent sizes (unbacked symbols) an fx call of a make_fx graph introduces, as
    {symbol: path into its result}; empty for a call whose output sizes follow from its inputs'."""
    return node.meta.get("unbacked_bindings") or {}


def is_symbolic_scalar(value):
    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


# Calls of a make_fx graph that only check or bound symbolic sizes (runtime asserts).
SIZE_ASSERTS = tuple(getattr(torch.ops.aten, name).default for name in (
    "_assert_scalar", "sym_constrain_range", "sym_constrain_range_for_size")
    if hasattr(torch.ops.aten, name))


def storage_key_and_bytes(tensor):
    """(key identifying the storage, its size in bytes); views of one storage share the key.

    An empty storage has no identity (its data pointer is null), so it gets None and size 0.
    """
    storage = tensor.untyped_storage()
    nbytes = int(storage.nbytes())
    if nbytes == 0:
        return None, 0
    if is_without_data(tensor):  # no data pointer: the storage object itself is the identity
        return ("storage", int(storage._cdata)), nbytes
    return (tensor.device.type, tensor.device.index, int(storage.data_ptr())), nbytes


# -- tensors without data (the meta device, fake tensors) -------------------------------------

def is_fake(tensor):
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(tensor, FakeTensor)


def is_without_data(tensor):
    """A tensor with shape, dtype and device but no memory: on the meta device, or a fake
    tensor (torch._subclasses.FakeTensorMode)."""
    return tensor.is_meta or is_fake(tensor)


def new_fake_mode():
    """A FakeTensorMode as make_fx(tracing_mode="fake") makes its own (static shapes, a shape
    environment for data-dependent sizes); make_fx traces in it when its inputs are its fakes."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv(), static_shapes=True)


@contextlib.contextmanager
def outside_dispatch_modes():
    """Runs the block with the caller's dispatch modes (an active FakeTensorMode) set aside, so
    that remat's own fake mode is the only one; they are restored after."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        yield


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


# -- autocast -----------------------------------------------------------------------------------

AUTOCAST_DEVICES = tuple(d for d in ("cpu", "cuda", "xpu", "mps", "hpu")
                         if torch.amp.is_autocast_available(d))


def autocast_state():
    """The autocast state of this thread: ((device type, dtype) of each device type autocast is
    on for, in AUTOCAST_DEVICES order), and whether its weight cache is on. () when it is off."""
    enabled = tuple((d, torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES
                    if torch.is_autocast_enabled(d))
    return (enabled, torch.is_autocast_cache_enabled()) if enabled else ()


def describe_autocast(state):
    if not state:
        return "without autocast"
    devices, _ = state
    return "under autocast " + ", ".join(f"{d} {str(dtype).replace('torch.', '')}"
                                         for d, dtype in devices)


@contextlib.contextmanager
def autocast(state, cache_enabled=None):
    """Runs the block in the autocast `state` (from autocast_state(); () turns autocast off on
    every device type), as torch.utils.checkpoint replays a forward's state in a recomputation.
    `cache_enabled` overrides the state's weight-cache flag (False: the block neither reads nor
    fills the cast-weight cache of an enclosing autocast region)."""
    devices, cache = state if state else ((), torch.is_autocast_cache_enabled())
    if cache_enabled is not None:
        cache = cache_enabled
    dtypes = dict(devices)
    with contextlib.ExitStack() as stack:
        for d in AUTOCAST_DEVICES:
            if d in dtypes:
                stack.enter_context(torch.autocast(d, dtype=dtypes[d], cache_enabled=cache))
            elif torch.is_autocast_enabled(d):
                stack.enter_context(torch.autocast(d, enabled=False))
        yield


# -- torch.utils.checkpoint and FSDP -------------------------------------------------------------

def in_non_reentrant_checkpoint():
    """Whether a non-reentrant torch.utils.checkpoint region is running: its saved-tensor hooks
    are on top of the stack (their pack hook carries `_checkpoint_internal`)."""
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(True)
    return hooks is not None and getattr(hooks[0], "_checkpoint_internal", False)


def is_fsdp1_flat_parameter(tensor):
    """A FlatParameter of FullyShardedDataParallel (FSDP1): many parameters flattened, sharded
    and gathered by FSDP's hooks."""
    try:
        from torch.distributed.fsdp._flat_param import FlatParameter
    except ImportError:
        return False
    return isinstance(tensor, FlatParameter)


def ddp_features_remat_cannot_follow(ddp):
    """What a DistributedDataParallel is set up to do beyond averaging gradients (names), which a
    planned step, synchronising .grad after it, does not reproduce."""
    features = []
    if getattr(ddp, "_comm_hooks", None):
        features.append("a communication hook")
    if getattr(ddp, "mixed_precision", None) is not None:
        features.append("mixed_precision")
    if getattr(ddp, "_delay_all_reduce_all_params", False):
        features.append("a delayed all-reduce (delay_all_reduce_named_params, or an optimizer "
                        "in the backward)")
    if getattr(ddp, "_use_python_reducer", False):
        features.append("the Python reducer (compiled autograd)")
    return features


# -- AOTAutograd (torch._functorch) ------------------------------------------------------------

def aot_module(module, fw_compiler, bw_compiler, partition_fn):
    """AOTAutograd of a module with the given compilers and partition function."""
    from torch._functorch.aot_autograd import aot_module as _aot_module

    return _aot_module(module, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                       partition_fn=partition_fn)


def nop_compiler():
    """A compiler that runs the graph as it is (boxed, as AOTAutograd calls it)."""
    from torch._functorch.aot_autograd import make_boxed_compiler

    return make_boxed_compiler(lambda gm, _inputs: gm)


def freeing_nop_compiler():
    """A compiler that runs the graph as it is, taking its inputs as a list it empties (the
    boxed convention, as Inductor's code does), so each input is freed after its last use."""
    from torch.fx.graph import _BoxedCodeGen

    def compile_graph(gm, _inputs):
        gm.graph.set_codegen(_BoxedCodeGen())
        gm.recompile()
        return gm

    return compile_graph


def functorch_min_cut_partition():
    """AOTAutograd's min_cut_rematerialization_partition (the min-cut paper's partitioner)."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return min_cut_rematerialization_partition


def _partitioners():
    from torch._functorch import partitioners

    return partitioners


def _num_fwd_outputs(joint_module, num_fwd_outputs):
    if num_fwd_outputs is not None:
        return num_fwd_outputs
    return joint_module._out_spec.child(0).num_leaves


def joint_outputs(joint_module, num_fwd_outputs=None):
    """(forward outputs, backward outputs) of an AOTAutograd joint graph: fx nodes or None.
    AOTAutograd passes `num_fwd_outputs` to a partition function; without it, the joint
    graph's output structure (forward outputs, backward outputs) tells."""
    fwd, bwd, _, _ = _partitioners()._extract_fwd_bwd_outputs(
        joint_module, num_fwd_outputs=_num_fwd_outputs(joint_module, num_fwd_outputs))
    return fwd, bwd


def is_tangent(node):
    from torch._functorch._aot_autograd.utils import _is_tangent

    return _is_tangent(node)


def extraction_inputs(joint_module):
    """(forward inputs, backward inputs after the saved values) of an AOTAutograd joint graph,
    in the order extract_fwd_bwd_modules makes them the two graphs' inputs: the primals and the
    forward's random seeds; the incoming gradients, the backward's random seeds and the
    backward state."""
    from torch._functorch._aot_autograd import utils

    partitioners = _partitioners()
    placeholders = list(joint_module.graph.find_nodes(op="placeholder"))

    def kind(test):
        return [n for n in placeholders if test(n)]

    forward = kind(utils._is_primal) + kind(utils._is_fwd_seed_offset)
    backward = (kind(utils._is_tangent) + kind(utils._is_bwd_seed_offset)
                + kind(partitioners._is_backward_state))
    return forward, backward


def forward_node_names(joint_module, num_fwd_outputs=None):
    """Names of the joint graph's nodes the forward outputs need from the primal inputs (and
    the forward's random seeds), as AOTAutograd's min-cut partitioner finds them."""
    partitioners = _partitioners()
    fwd_outputs, _, fwd_descs, _ = partitioners._extract_fwd_bwd_outputs(
        joint_module, num_fwd_outputs=_num_fwd_outputs(joint_module, num_fwd_outputs))
    inputs, _ = extraction_inputs(joint_module)
    forward = partitioners._extract_graph_with_inputs_outputs(
        joint_module.graph, inputs, fwd_outputs, fwd_descs, "forward")
    return {n.name for n in forward.nodes if n.op != "output"}


def extract_fwd_bwd_modules(joint_module, saved_values, num_fwd_outputs, keep_saved=False):
    """The forward and backward modules of a joint graph given the values to save.

    The extraction drops a saved value its backward does not read (it computes the backward
    from the saved values, so one read only to recompute another saved value goes unread). With
    `keep_saved`, each saved tensor is also a backward output while extracting, so all are kept:
    the backward module's outputs then end with them (returns the count as a third element; the
    caller removes them)."""
    tensors = [n for n in saved_values if not _is_sym(n)]
    symbols = [n for n in saved_values if _is_sym(n)]
    partitioners = _partitioners()
    if not keep_saved:
        return partitioners._extract_fwd_bwd_modules(joint_module, tensors, symbols,
                                                     num_fwd_outputs=num_fwd_outputs)
    output = next(iter(joint_module.graph.find_nodes(op="output")))
    args, meta = output.args, dict(output.meta)
    if "desc" in meta:
        descs = _pytree.arg_tree_leaves(meta["desc"])
        output.meta["desc"] = descs + [descs[-1]] * len(tensors)
    output.args = ((args[0], tuple(tensors)),)
    try:
        fw, bw = partitioners._extract_fwd_bwd_modules(joint_module, tensors, symbols,
                                                       num_fwd_outputs=num_fwd_outputs)
    finally:
        output.args = args
        output.meta.clear()
        output.meta.update(meta)
    return fw, bw, len(tensors)


def is_operator(target):
    """Whether an fx call target is an operator overload (aten, prims or a library's), not a
    higher-order operator or a Python function."""
    return isinstance(target, torch._ops.OpOverload)


def min_cut_partition(joint_module, joint_inputs, save_random=False, **kwargs):
    """PyTorch's partition for Inductor: min-cut, under torch._functorch.config's
    activation_memory_budget. The budget's knapsack may run a random call again in the backward,
    which draws anew where no generator state is replayed (CPU, or Inductor's fallback_random);
    with `save_random` every random call is marked as one PyTorch must save (its tag for calls it
    may not run again, as it marks collectives), as remat's plans never run one again."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch.utils.checkpoint import CheckpointPolicy

    kwargs.setdefault("compiler", "inductor")
    if not save_random:
        return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)
    marked = set()
    for n in joint_module.graph.nodes:
        if n.op == "call_function" and is_operator(n.target) and "recompute" not in n.meta \
                and op_kinds.is_random(packet_name(n.target)):
            n.meta["recompute"] = CheckpointPolicy.MUST_SAVE
            marked.add(n.name)
    modules = [joint_module]
    try:
        modules += min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)
        return tuple(modules[1:])
    finally:  # off the joint graph and the two graphs (whose calls copied the meta)
        for module in modules:
            _unmark(module, marked)


def _unmark(module, names):
    for n in module.graph.nodes:
        if n.name in names:
            n.meta.pop("recompute", None)


# -- torch.compile (remat.torch.compile) -------------------------------------------------------

def default_partition_config():
    """torch._functorch.config as PyTorch's default partition runs: no activation memory
    budget."""
    import torch._functorch.config as functorch_config

    return functorch_config.patch(activation_memory_budget=1.0)


def hash_of_files(paths):
    from torch._inductor.custom_graph_pass import get_hash_for_files

    return get_hash_for_files(tuple(paths))


def inductor_compile(gm, example_inputs, partitioner, layout_optimization=False):
    """Inductor's torch.compile backend with `partitioner` (a partition function with a
    `uuid()`, Inductor's cache key) in place of its min-cut partition, after its joint-graph
    passes; the graphs it planned run their kernels in the plan's order (keep_planned_order), with
    Inductor's layout optimization only where `layout_optimization` (PLANNED_GRAPH_CONFIG)."""
    from torch._inductor.compile_fx import compile_fx

    inner = functools.partial(_compile_graph, layout_optimization=layout_optimization)
    return compile_fx(gm, example_inputs, inner_compile=inner, config_patches={
        "custom_partitioner_fn": _inductor_partitioner(partitioner),
        "_post_fusion_custom_pass": keep_planned_order})


# fx meta key of the calls of a graph whose order is a plan's (remat.torch.partition's lowering).
PLANNED_CALL = "remat_planned"
# fx meta key: whether the plan of the graph counts the layout optimization's copies.
PLANNED_LAYOUT = "remat_layout_optimization"


def mark_layout_optimization(fw, bw, counted):
    """Marks planned graphs `fw` and `bw` as compiled with Inductor's layout optimization where
    their plan counts its copies (`counted`), without it where it does not."""
    for module in (fw, bw):
        for n in module.graph.nodes:
            n.meta[PLANNED_LAYOUT] = counted


def compiles_with_layout_optimization(compiler):
    """Whether graphs compiled by `compiler` ("inductor" or "eager", as compile_backend names
    them) get Inductor's layout optimization, as Inductor's config has it (on by default): its
    heuristics then decide per graph (optimizes_layout)."""
    if compiler != "inductor":
        return False
    from torch._inductor import config

    return bool(config.layout_optimization)


def reuses_buffers(compiler):
    """Whether graphs compiled by `compiler` ("inductor" or "eager", as compile_backend names
    them) share storages as simulate_partition's buffer_reuse models: Inductor's, where its config
    has both its buffer reuses on (inplace_buffers, allow_buffer_reuse; its default). With either
    off, the model of neither, whose peak is not below the compiled graphs' (the pool of freed
    buffers holds no more than Inductor's estimate of the peak without reuse allows)."""
    if compiler != "inductor":
        return False
    from torch._inductor import config

    return bool(config.inplace_buffers and config.allow_buffer_reuse)


def optimizes_layout(fw):
    """Whether Inductor, with its layout optimization on, optimizes the layout of forward graph
    `fw` if it has convolutions (its heuristics, GraphLowering.decide_layout_opt: on CPU wherever
    the convolutions run on oneDNN; on CUDA not where they are few among the calls, or have
    dynamic shapes). True without convolutions (there is nothing to copy, and the option stays
    as asked), and where this PyTorch has no such function (the plan then counts copies that may
    not be made: its peak errs high, not low)."""
    convolution = torch.ops.aten.convolution.default
    if not any(n.op == "call_function" and n.target is convolution for n in fw.graph.nodes):
        return True
    try:
        from torch._inductor import config
        from torch._inductor.graph import GraphLowering

        with config.patch(layout_optimization=True, force_layout_optimization=False):
            return bool(GraphLowering.decide_layout_opt(fw, is_inference=False))
    except (ImportError, AttributeError, TypeError, KeyError):
        return True

# Inductor's options for the graphs remat planned. Inductor inlines a pointwise value into each
# kernel that reads it unless it reads more than realize_reads_threshold buffers, and gives each
# library kernel (a matmul, attention) that reads an inlined value a stored copy of its own; the
# plan stores a value several kernels read once (a fused chain's value read outside the chain).
# With 1, a pointwise value of two or more reads that several kernels read is stored once, as the
# plan counts it (bench/compile_bench.py measures the peaks with and without remat's plans).
# Inductor's layout optimization (convolutions in channels-last layout) copies each convolution
# weight that is not channels-last already at the start of the forward and returns the copy as
# the weight the backward reads: memory held from the forward's start to the weight's backward
# (channels_last_copied_inputs; bench/inductor_peak_probe.py shows where a step's memory goes).
# The backend turns it on or off per compile (compile_backend's layout_optimization: by default
# as Inductor's config has it for the default partition), and where it is on the plans count the
# copies (partition.JointGraph's layout_copies); off, the convolutions run on the graphs' own
# layouts, slower on CPU (bench/compile_bench.py --without-layout-optimization).
# Inductor's memory pass (reorder_for_peak_memory) does not run after keep_planned_order: see there.
PLANNED_GRAPH_CONFIG = {"realize_reads_threshold": 1, "layout_optimization": False,
                        "reorder_for_peak_memory": False}


def channels_last_copied_inputs(graph):
    """{graph input: the convolutions reading it} of the inputs of fx `graph` (a joint graph's
    primals: weights, batch) that Inductor's layout optimization copies into channels-last
    layout: those a 2-d convolution reads as its input or weight that are not channels-last
    already (a 1x1 kernel's weight is). Inductor makes the copies in the forward graph before
    its first kernel, each convolution reads the copy, and the forward returns the copy where it
    saves the input, so the backward reads it too (bench/inductor_peak_probe.py shows the
    buffers)."""
    convolution = torch.ops.aten.convolution.default
    copied = {}
    for n in graph.nodes:
        if n.op != "call_function" or n.target is not convolution:
            continue
        for arg in n.args[:2]:
            val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
            if isinstance(val, torch.Tensor) and arg.op == "placeholder" \
                    and not is_tangent(arg) and val.dim() == 4 \
                    and not val.is_contiguous(memory_format=torch.channels_last):
                readers = copied.setdefault(arg, [])
                if n not in readers:
                    readers.append(n)
    return copied


def _compile_graph(gm, example_inputs, *, layout_optimization=False, **kwargs):
    """Inductor's compile of one graph (compile_fx_inner), under PLANNED_GRAPH_CONFIG where remat
    planned the graph (with layout optimization as asked, and as its plan counts it where the
    partitioner marked it: mark_layout_optimization)."""
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.virtualized import V

    if not any(n.meta.get(PLANNED_CALL) for n in gm.graph.nodes):
        return compile_fx_inner(gm, example_inputs, **kwargs)
    choices = _planned_graph_choices()
    handler = contextlib.nullcontext() if choices is None else V.set_choices_handler(choices)
    marked = [n.meta[PLANNED_LAYOUT] for n in gm.graph.nodes if PLANNED_LAYOUT in n.meta]
    if marked:
        layout_optimization = layout_optimization and marked[0]
    patch = dict(PLANNED_GRAPH_CONFIG, layout_optimization=layout_optimization)
    memory_pass = _INDUCTOR_MEMORY_PASS.set(bool(config.reorder_for_peak_memory))
    try:
        with config.patch(patch), handler:
            return compile_fx_inner(gm, example_inputs, **kwargs)
    finally:
        _INDUCTOR_MEMORY_PASS.reset(memory_pass)


# Whether Inductor's config, as the user has it, runs its memory pass (reorder_for_peak_memory) on
# the graph being compiled: PLANNED_GRAPH_CONFIG turns it off for a planned graph, and
# keep_planned_order runs it where it keeps Inductor's order.
_INDUCTOR_MEMORY_PASS = contextvars.ContextVar("remat_inductor_memory_pass", default=True)


def _planned_graph_choices():
    """Inductor's heuristics (InductorChoices) for a graph remat planned: no horizontal fusion
    (two kernels that read a common buffer and do not read each other run as one) but of
    reductions of one tensor along different dimensions (a normalization's backward). Inductor
    fuses such kernels up to 64 of its nodes apart; the fused kernel makes all its outputs where
    it runs, so a recomputation the plan places just before a late reader (a matmul's weight
    gradient reading a copy of a layer norm's output) runs with an early one that reads the same
    saved values, and its result lives from there: the plan's peak would not be the compiled
    step's (bench/compile_bench.py prints both)."""
    global _PlannedGraphChoices
    if _PlannedGraphChoices is None:
        from torch._inductor import scheduler as inductor_scheduler
        from torch._inductor import virtualized
        from torch._inductor.choices import InductorChoices

        if not (hasattr(virtualized.V, "set_choices_handler")
                and hasattr(InductorChoices, "can_fuse_horizontal")):
            warnings.warn("remat: this PyTorch's Inductor has no choices handler for horizontal "
                          "fusion; the planned graphs compile with Inductor's own, whose "
                          "fused kernels can run a recomputation early and hold its result: the "
                          "compiled step's peak can be above the plan's", stacklevel=2)
            return None

        # Older PyTorch has no fusion of reductions along different dimensions.
        mix_order = getattr(inductor_scheduler, "MixOrderReduction", None)

        class PlannedGraphChoices(InductorChoices):
            @staticmethod
            def can_fuse_horizontal(scheduler, node1, node2, shared_data_score):
                return mix_order is not None and mix_order.can_fuse(node1, node2) \
                    and InductorChoices.can_fuse_horizontal(scheduler, node1, node2,
                                                            shared_data_score)

        _PlannedGraphChoices = PlannedGraphChoices
    return _PlannedGraphChoices()


_PlannedGraphChoices = None  # made on first use: Inductor's import is slow


def keep_planned_order(nodes):
    """Inductor's post-fusion scheduler pass: the kernels of a graph remat planned, in the plan's
    order. Inductor places each fused kernel at its earliest call and runs what it reads before
    it, depth first (Scheduler.topological_sort_schedule): a kernel fusing a call near the end of
    the backward with one near its start (two reads of one saved value) drags every call the late
    one needs to the start, and the values those calls make live from there: the plan's peak is
    not the compiled graph's. Here each kernel is placed at its latest call instead (with what it
    reads before it, depth first): no call runs before its place in the plan but to feed a kernel
    that must. Inductor's kernels are not the plan's steps (a kernel may join calls of several
    steps, and its buffers are not the plan's values), so this order is kept only where Inductor's
    own estimate of its peak is not above that of Inductor's order. Inductor's memory pass
    (reorder_for_peak_memory) does not move the kernels of the plan's order: its estimate does
    not count what the plan's simulator does (the workspace a CPU convolution's backward
    allocates), and an order it estimates a little lower can peak higher (bench/compile_bench.py:
    ViT-B/16, whose weight gradients it ran before the patch embedding's backward). Where
    Inductor's order is kept, its memory pass runs on it, as Inductor's config has it. The
    kernels of graphs remat did not plan keep Inductor's order."""
    from torch._inductor.virtualized import V

    module = getattr(V.graph, "module", None)
    if not nodes or module is None \
            or not any(n.meta.get(PLANNED_CALL) for n in module.graph.nodes):
        return nodes
    planned = in_plan_order(nodes)
    ours, theirs = inductor_peak_estimates([planned, nodes])
    if ours <= theirs:
        return planned
    return inductor_memory_pass(nodes) if _INDUCTOR_MEMORY_PASS.get() else nodes


def inductor_memory_pass(nodes):
    """Inductor's memory pass (reorder_for_peak_memory) on `nodes`, its scheduler nodes in an
    order, as its scheduler runs it after the post-fusion pass."""
    from torch._inductor import memory
    from torch._inductor.virtualized import V
    from torch.utils._ordered_set import OrderedSet

    scheduler = nodes[0].scheduler
    return memory.reorder_for_peak_memory(
        nodes, scheduler.name_to_buf, scheduler.name_to_fused_node,
        OrderedSet(V.graph.graph_inputs.keys()), OrderedSet(V.graph.get_output_names()))


def inductor_peak_estimates(orders):
    """Inductor's estimate of the peak memory of each order (a list of its scheduler nodes) of
    the graph it is scheduling (torch._inductor.memory: buffer sizes and lifetimes, kernel by
    kernel)."""
    from torch._inductor import memory
    from torch._inductor.virtualized import V
    from torch.utils._ordered_set import OrderedSet

    scheduler = orders[0][0].scheduler
    outputs = OrderedSet(V.graph.get_output_names())
    _, freeable = memory.prepare_planning_info(
        orders[0], scheduler.name_to_buf, scheduler.name_to_fused_node,
        OrderedSet(V.graph.graph_inputs.keys()), outputs)
    return [memory.estimate_peak_memory(order, freeable, outputs)[0] for order in orders]


def in_plan_order(nodes):
    """Inductor's scheduler nodes (fused or not) ordered by their latest call in the graph
    (`max_order`), each after the nodes making what it reads (`unmet_dependencies`, buffers
    named as `get_buffer_names` gives them), placed depth first, earliest latest call first."""
    producer = {name: node for node in nodes for name in node.get_buffer_names()}
    placed, order = set(), []

    def place(node):
        stack = [(node, False)]
        while stack:
            n, inputs_placed = stack.pop()
            if inputs_placed:
                order.append(n)
                continue
            if n in placed:
                continue
            placed.add(n)
            stack.append((n, True))
            reads = dict.fromkeys(producer.get(name) for name in
                                  sorted(d.name for d in n.unmet_dependencies))
            reads.pop(None, None)
            reads.pop(n, None)
            for p in sorted(reads, key=_plan_position, reverse=True):
                stack.append((p, False))

    for node in sorted(nodes, key=_plan_position):
        place(node)
    return order


def _plan_position(node):
    return node.max_order, node.min_order


def _inductor_partitioner(partitioner):
    from torch._inductor.custom_graph_pass import CustomPartitionerFn

    global _InductorPartitioner
    if _InductorPartitioner is None:
        class InductorPartitioner(CustomPartitionerFn):
            """`partitioner` as Inductor's config takes it; its cache key pickles the config,
            so it pickles as its uuid (the partitioner's code and options)."""

            def __init__(self, partitioner):
                self.partitioner = partitioner

            def __call__(self, joint_module, joint_inputs, **kwargs):
                return self.partitioner(joint_module, joint_inputs, **kwargs)

            def uuid(self):
                return self.partitioner.uuid()

            def __reduce__(self):
                return (str, (self.uuid(),))

        _InductorPartitioner = InductorPartitioner
    return _InductorPartitioner(partitioner)


_InductorPartitioner = None  # made on first use: Inductor's import is slow


def aot_eager_compile(gm, example_inputs, partition_fn):
    """AOTAutograd with Inductor's decompositions and `partition_fn`, no compiler (the graphs run
    as fx modules), as torch.compile's "aot_eager_decomp_partition" backend."""
    import torch._inductor.lowering  # noqa: F401 - the max-pool decomposition reads it
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    compiler = freeing_nop_compiler()
    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler, partition_fn=partition_fn,
                        decompositions=select_decomp_table())(gm, example_inputs)


def compile_frame_id():
    """Dynamo's id of the frame being compiled (code after a graph break is another frame; a
    recompile keeps the id), or None outside torch.compile."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    return None if compile_id is None else compile_id.frame_id


def allocations_during(fn):
    """(fn(), [(bytes, time_ns)]): the CPU allocator's allocations (+) made while fn runs and
    the frees (-) of those among them freed before it ends, in time order, from the profiler's
    allocation events (every tensor storage, Inductor's buffers included).

    A free of a block allocated before fn started is left out: the profiler knows the size of
    a block only if some profiling session saw it allocated, and keeps the sizes of blocks freed
    while no session ran, so such a free is either missing or reported with the size of another
    block once at that address (a storage freed at the start of fn, such as the gradients a
    training step sets to None, would lower the count by a size that depends on the process's
    history). The frees counted take the size allocated at their address during fn."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    allocations = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        if event.tag == _EventType.Allocation and event.extra_fields.device.type == "cpu":
            fields = event.extra_fields
            allocations.append((event.start_time_ns, fields.id, fields.ptr, fields.alloc_size))
    allocations.sort()
    live, events = {}, []  # live: address -> bytes allocated there during fn, not yet freed
    for t, _, ptr, nbytes in allocations:
        if nbytes > 0:
            live[ptr] = nbytes
            events.append((nbytes, t))
        elif nbytes < 0 and ptr in live:
            events.append((-live.pop(ptr), t))
    return result, events


@functools.lru_cache(maxsize=None)
def rng_replay_operators():
    """(run_and_save_rng_state, run_with_rng_state): PyTorch's higher-order operators that run a
    random operator returning (the generator state it drew from, its result), and run it again
    drawing from a saved state, putting the generator back where it was after (its partitioner
    wraps the random calls of a checkpointed region so). Inductor runs both as fallback kernels."""
    from torch._prims import rng_prims

    return rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state


# Bytes of the generator state run_and_save_rng_state saves, by device type: the CPU generator's
# whole Mersenne Twister state (torch.get_rng_state()); CUDA's is its Philox seed and offset.
CUDA_RNG_STATE_BYTES = 16


def rng_state_bytes(device_type):
    """Bytes of the generator state of `device_type` ("cpu" or "cuda"), a uint8 CPU tensor."""
    if device_type == "cuda":
        return CUDA_RNG_STATE_BYTES
    return torch.get_rng_state().numel()


def rng_state_value(like, device_type):
    """A fake tensor like a saved generator state of `device_type`, in the fake mode of fake
    tensor `like` (an fx node's meta["val"]), or None when `like` is not a fake tensor."""
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(like, FakeTensor):
        return None
    with outside_dispatch_modes():
        state = torch.empty(rng_state_bytes(device_type), dtype=torch.uint8)
    # Static: a fake mode with a shape environment (Dynamo's) would give a new tensor a symbolic
    # size, and the saved bytes counted from it would be a symbolic expression, not bytes.
    return like.fake_mode.from_tensor(state, static_shapes=True)


def _is_sym(node):
    value = node.meta.get("val")
    return value is not None and not isinstance(value, torch.Tensor)


def node_tensor_meta(node):
    """(shape, dtype) of an fx node's tensor value from its metadata, or None. A symbolic size
    (a graph compiled with dynamic shapes, which remat does not plan but whose default partition
    it still reports on) is its hint, the size of the example the graph was compiled for; None
    when a size has no hint."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        value = node.meta.get("tensor_meta")
        if value is None or not hasattr(value, "shape"):
            return None
    shape = tuple(d if isinstance(d, int) else d.node.hint for d in value.shape)
    return None if None in shape else (shape, value.dtype)


# -- live-storage accounting (remat.torch.checkpointable) ------------------------------------
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


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
