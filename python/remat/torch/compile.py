"""remat.torch.compile: a torch.compile backend whose AOTAutograd partition remat plans.

    backend = rt.compile_backend(budget="50%", solver="auto")
    step = torch.compile(lambda x, y: F.cross_entropy(model(x), y), backend=backend)
    step(x, y).backward()                       # Inductor runs the planned forward and backward
    backend.graphs                              # PartitionStats of every graph it partitioned
    rt.compile_backend(budget=0.3, compiler="eager")   # no Inductor: the graphs run as fx modules
    aot_function(fn, nop, nop, partition_fn=backend.partition_fn)   # AOTAutograd alone
    loss, peak = rt.measured_peak_bytes(lambda: step(x, y).backward())

Dynamo captures each graph, AOTAutograd traces its joint forward+backward graph, and
`backend.partition_fn` (a RematPartitioner) plans it with remat.torch.partition under the budget
(activation memory, see partition.activation_budget_bytes). Inductor then compiles the two graphs
(with `compiler="eager"` they run as they are, after Inductor's decompositions, as
"aot_eager_decomp_partition" does). A graph remat cannot plan, or whose plan needs more activation
memory than PyTorch's default partition of it (simulate_partition, one model for both), goes to
PyTorch's min-cut partitioner with one warning (RematFallbackWarning) naming why; a plan over the
budget warns with its figures. Under Inductor the planned graphs' kernels run in the plan's order
where Inductor estimates that order no worse, and its memory pass does not reorder them then
(_compat.keep_planned_order), no kernel fuses with another only for reading the same buffer
(_compat._planned_graph_choices), and Inductor's layout optimization (convolutions in channels-last
layout, faster on CPU) is on or off as Inductor's own config has it for the default partition's
graphs, unless `layout_optimization` says otherwise; where it is on, the plans count the
channels-last copies it holds across the step (partition.JointGraph's layout_copies). The CPU
convolutions' workspaces are in the plan (kernel_workspace).
"""

import os
import warnings

import remat
from remat.torch import _compat, kernel_workspace
from remat.torch.partition import (Unplannable, activation_budget_bytes, check_budget, partition,
                                   partition_stats, scaled_work_limit, simulate_partition)

# Planning of each graph stops at the first of the solver's own end and this limit
# (bench/compile_bench.py prints the compile times it gives).
COMPILERS = ("inductor", "eager")


class RematFallbackWarning(UserWarning):
    """A graph the backend could not plan was partitioned by PyTorch's min-cut partitioner."""


class RematBudgetWarning(UserWarning):
    """A graph's plan is over its budget (the least-memory plan found)."""


def compile_backend(budget, solver="auto", *, compiler="inductor", work_limit=None,
                    time_limit=None, seed=1, fuse=None, layout_optimization=None, **params):
    """A torch.compile backend planning each graph's saved set and recomputation with remat
    `solver` under `budget` of activation memory: a float fraction in (0, 1] or "P%" of each
    graph's activation memory, int bytes or byte text ("90MB") for the whole step (shared out
    across graph breaks), "min" (the least-memory plan), or None (the least-cost plan, no memory
    budget). `compiler`: "inductor" or "eager". `work_limit` (work units per graph; default a
    unit per 50 nodes of the graph as planned, 1 to 60: partition.scaled_work_limit) stops each
    solve, so the plan does not depend on machine load; `time_limit` (seconds) is a
    wall-clock backstop. `fuse`: plan each chain of calls Inductor fuses into one kernel as one
    step whose inner values are never stored (None: for every solver but "mincut", which models
    fusion itself; partition.partition). `layout_optimization`: Inductor's layout optimization
    (convolutions in channels-last layout) for the planned graphs; their CPU convolutions run
    faster, but each convolution input's channels-last copy is held from the forward's start to
    its last backward read, and the plans count the copies (so a fraction is of the activation
    memory with them) and the convolutions' channels-last workspaces. None (the default): as
    Inductor compiles the default partition's graphs (its config's layout_optimization, on unless
    turned off) under compiler="inductor", off under "eager"; True needs "inductor"
    (docs/python.md, "Step time").
    Other keywords are the solver's parameters.
    Raises ValueError (TypeError for a wrong type) for a budget, solver, compiler or parameter it
    cannot use, here rather than in the training loop."""
    return CompileBackend(RematPartitioner(budget, solver, work_limit=work_limit,
                                           time_limit=time_limit, seed=seed, fuse=fuse, **params),
                          compiler, layout_optimization=layout_optimization)


class CompileBackend:
    """torch.compile(model, backend=CompileBackend(...)): see compile_backend."""

    def __init__(self, partition_fn, compiler="inductor", *, layout_optimization=None):
        if compiler not in COMPILERS:
            raise ValueError(f"compiler must be one of {', '.join(COMPILERS)} (got {compiler!r})")
        if layout_optimization is not None and not isinstance(layout_optimization, bool):
            raise TypeError(f"layout_optimization must be True, False or None (got "
                            f"{layout_optimization!r})")
        if layout_optimization and compiler != "inductor":
            raise ValueError("layout_optimization is Inductor's: it needs compiler='inductor' "
                             f"(got {compiler!r})")
        self.partition_fn = partition_fn
        self.compiler = compiler
        self.layout_optimization = layout_optimization  # as asked; None: layout_optimized()

    def layout_optimized(self):
        """Whether the graphs compiled now get Inductor's layout optimization: as asked, else as
        Inductor's config has it for the default partition's graphs (never under "eager")."""
        if self.layout_optimization is not None:
            return self.layout_optimization
        return _compat.compiles_with_layout_optimization(self.compiler)

    @property
    def graphs(self):
        """PartitionStats of every graph partitioned, in order (fallbacks included)."""
        return self.partition_fn.graphs

    def __call__(self, gm, example_inputs):
        layout_optimized = self.layout_optimized()
        if isinstance(self.partition_fn, RematPartitioner):
            # Its plans count the copies the layout optimization makes (and its cache key says so).
            self.partition_fn.layout_optimization = layout_optimized
            # Its plan and PyTorch's default partition are compared as the compiler runs them.
            self.partition_fn.buffer_reuse = _compat.reuses_buffers(self.compiler)
        if self.compiler == "inductor":
            return _compat.inductor_compile(gm, example_inputs, self.partition_fn,
                                            layout_optimization=layout_optimized)
        return _compat.aot_eager_compile(gm, example_inputs, self.partition_fn)

    def __repr__(self):
        return (f"CompileBackend({self.partition_fn!r}, compiler={self.compiler!r}, "
                f"layout_optimization={self.layout_optimization!r})")


class RematPartitioner:
    """An AOTAutograd partition function (and Inductor custom partitioner) planning with remat,
    falling back to PyTorch's min-cut partitioner with one warning on a graph it cannot plan."""

    def __init__(self, budget, solver="auto", *, work_limit=None, time_limit=None, seed=1,
                 fuse=None, **params):
        check_budget(budget)
        _check_solver(solver, params)
        # The core's checks of both limits (remat.solve's), here rather than in the training loop.
        remat._solve_settings(work_limit, time_limit, seed)
        self.budget, self.solver, self.seed = budget, solver, seed
        self.work_limit, self.time_limit = work_limit, time_limit
        self._solve_work_limit = scaled_work_limit if work_limit is None else work_limit
        self.fuse = fuse
        self.params = params
        self.layout_optimization = False  # CompileBackend sets it: see compile_backend
        self.buffer_reuse = False  # CompileBackend sets it: simulate_partition's
        self.step_bytes = _step_bytes(budget)
        self.graphs = []
        self._saved_by_frame = {}

    def __call__(self, joint_module, joint_inputs=None, **kwargs):
        frame = _compat.compile_frame_id()
        budget = self._share(frame)
        num_fwd_outputs = kwargs.get("num_fwd_outputs")
        if num_fwd_outputs is None:
            num_fwd_outputs = len(_compat.joint_outputs(joint_module)[0])
        # PyTorch's default partition of the graph (before remat's rewrites), which remat's plan
        # must not need more memory than, and the fallback where it does or cannot plan.
        default, theirs, copies = _default_partition(joint_module, joint_inputs, kwargs,
                                                     num_fwd_outputs, self.layout_optimization,
                                                     self.buffer_reuse)
        planned = None
        try:
            fw, bw = partition(joint_module, joint_inputs, solver=self.solver, budget=budget,
                               work_limit=self._solve_work_limit, time_limit=self.time_limit,
                               seed=self.seed, fuse=self.fuse, memory_cap=theirs,
                               layout_copies=copies, **self.params, **kwargs)
            stats = planned = partition.last
            reason = _worse_than_default(joint_module, fw, bw, theirs, num_fwd_outputs, copies,
                                         self.buffer_reuse)
            _compat.mark_layout_optimization(fw, bw, copies)
        except Exception as e:  # noqa: BLE001 - any failure to plan falls back, with its reason
            detail = str(e) if isinstance(e, Unplannable) else f"{type(e).__name__}: {e}"
            reason = f"cannot plan it ({detail})"
        if reason is not None:
            warnings.warn(f"remat: graph {len(self.graphs)}: {reason}; it is partitioned by "
                          f"PyTorch's min-cut partitioner", RematFallbackWarning, stacklevel=2)
            fw, bw = default
            stats = partition_stats(fw, bw, num_fwd_outputs)
            stats.solver, stats.status = "pytorch-min-cut", f"fallback: {reason}"
            stats.layout_copies = copies
            if planned is not None:  # what the graph was asked for (a byte budget's share)
                for figure in ("input_bytes", "budget_bytes", "baseline_activation_bytes"):
                    setattr(stats, figure, getattr(planned, figure))
        if stats.status == "over-budget":
            warnings.warn(_over_budget_message(len(self.graphs), stats), RematBudgetWarning,
                          stacklevel=2)
        self.graphs.append(stats)
        self._saved_by_frame[frame] = stats.saved_bytes
        return fw, bw

    def _share(self, frame):
        """This graph's budget: a fraction or "min" applies to each graph; bytes for the step are
        what the graphs of other frames (compiled before it) do not save."""
        if self.step_bytes is None:
            return self.budget
        others = sum(b for f, b in self._saved_by_frame.items() if f != frame)
        return max(1, self.step_bytes - others)

    def uuid(self):
        """Inductor's cache key of this partitioner: its code, its options and what the
        convolutions' workspaces it plans with depend on (kernel_workspace.measured_on)."""
        here = os.path.dirname(os.path.abspath(__file__))
        files = [os.path.join(here, f) for f in ("compile.py", "partition.py", "op_kinds.py",
                                                  "cost.py", "effects.py", "_compat.py",
                                                  "kernel_workspace.py")]
        return (f"{_compat.hash_of_files(files + [remat._remat.__file__])}:{self!r}:"
                f"{kernel_workspace.measured_on()}")

    def __repr__(self):
        options = "".join(f", {k}={v!r}" for k, v in sorted(self.params.items()))
        return (f"RematPartitioner({self.budget!r}, {self.solver!r}, work_limit="
                f"{self.work_limit!r}, time_limit={self.time_limit!r}, seed={self.seed!r}, "
                f"fuse={self.fuse!r}{options}"
                + (", layout_optimization=True" if self.layout_optimization else "")
                + (", buffer_reuse=True" if self.buffer_reuse else "") + ")")


def _default_partition(joint_module, joint_inputs, kwargs, num_fwd_outputs,
                       layout_optimization=False, buffer_reuse=False):
    """(PyTorch's default partition (fw, bw) of `joint_module`, its activation memory in remat's
    simulator (simulate_partition, None where that cannot be simulated), and whether the layout
    optimization's copies are counted), from a copy. The copies are counted where
    `layout_optimization` is on and Inductor's heuristics would optimize the layout of the
    default partition's forward graph (_compat.optimizes_layout: on CUDA, not for a model with
    a convolution or two among hundreds of calls, as a ViT's patch embedding); the planned graphs
    then compile with it as well, and without it where the copies are not counted.
    `buffer_reuse`: simulate_partition's, the graphs compiled by Inductor."""
    theirs_joint = _compat.copy_graph_module(joint_module)
    with _compat.default_partition_config():
        their_fw, their_bw = _compat.min_cut_partition(theirs_joint, joint_inputs, **kwargs)
    copies = layout_optimization and _compat.optimizes_layout(their_fw)
    try:
        theirs = simulate_partition(theirs_joint, their_fw, their_bw, num_fwd_outputs,
                                    baseline=False, layout_copies=copies,
                                    buffer_reuse=buffer_reuse).activation_bytes
    except Unplannable:
        theirs = None
    return (their_fw, their_bw), theirs, copies


def _worse_than_default(joint_module, fw, bw, theirs, num_fwd_outputs, layout_copies=False,
                        buffer_reuse=False):
    """Why remat's partition `fw`, `bw` of `joint_module` is worse than PyTorch's default
    partition, whose activation memory is `theirs` (None: not known): its activation memory in
    one model for both (simulate_partition) is above it; None when it is not."""
    if theirs is None:
        return None
    ours = simulate_partition(joint_module, fw, bw, num_fwd_outputs, baseline=False,
                              layout_copies=layout_copies,
                              buffer_reuse=buffer_reuse).activation_bytes
    if ours <= theirs:
        return None
    return (f"its plan needs {remat.format_bytes(ours)} of activation memory, more than "
            f"PyTorch's default partition's {remat.format_bytes(theirs)} in remat's simulator")


def measured_peak_bytes(fn):
    """(fn(), peak bytes): the peak of the CPU tensor storage bytes allocated while fn runs and
    not yet freed (the profiler's allocator events: every storage, Inductor's buffers included).
    Storages that exist when fn starts are not counted, nor are their frees: a training step
    that sets the gradients to None first counts the new gradients in full."""
    result, events = _compat.allocations_during(fn)
    live = peak = 0
    for nbytes, _ in events:
        live += nbytes
        peak = max(peak, live)
    return result, peak


def _step_bytes(budget):
    """A byte budget for the whole step, or None for a fraction, "min" or None."""
    if isinstance(budget, int) and not isinstance(budget, bool):
        return budget
    if isinstance(budget, str) and budget.strip().lower() != "min" \
            and not budget.strip().endswith("%"):
        graph = remat.Graph.build("budget", [{"name": "x", "size": 1},
                                             {"name": "y", "size": 1, "output": True}],
                                  [{"name": "f", "cost": 1, "inputs": [0], "outputs": [1]}])
        return activation_budget_bytes(graph, budget, 0)
    return None


def _check_solver(solver, params):
    rows = {row["name"]: row for row in remat._remat.solver_rows() if row["graph"]}
    if solver not in rows:
        raise ValueError(f"unknown graph solver {solver!r} (graph solvers: "
                         f"{', '.join(rows)})")
    known = {p[0] for p in rows[solver]["params"]}
    for key in params:
        member = key.split(".", 1)[0] if solver == "auto" and "." in key else None
        if key not in known and member not in rows:
            raise ValueError(f"solver {solver!r} has no parameter {key!r} (it has: "
                             f"{', '.join(sorted(known)) or 'none'})")


def _over_budget_message(index, stats):
    def percent(x):
        return 100.0 * x / stats.baseline_activation_bytes if stats.baseline_activation_bytes \
            else 0.0

    return (f"remat: graph {index} ({stats.graph}): the plan ({stats.solver}) needs "
            f"{remat.format_bytes(stats.planned_activation_bytes)} of activation memory "
            f"({percent(stats.planned_activation_bytes):.1f} % of its "
            f"{remat.format_bytes(stats.baseline_activation_bytes)}), over the budget "
            f"{remat.format_bytes(stats.budget_bytes)} ({percent(stats.budget_bytes):.1f} %); "
            f"the least any plan needs is "
            f"{remat.format_bytes(stats.lower_bound_activation_bytes)}")
