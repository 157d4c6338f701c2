"""remat.torch.partition: an AOTAutograd partition function that remat plans.

    from functorch.compile import aot_module, nop
    compiled = aot_module(model, fw_compiler=nop, bw_compiler=nop, partition_fn=rt.partition)
    partial(rt.partition, solver="fastsa", budget="60%")       # any graph solver, any budget
    torch.compile(model, backend=rt.compile_backend(budget="50%"))   # compile.py: Inductor

AOTAutograd traces the joint forward+backward graph and asks a partition function for a forward
graph (which also returns the values the backward reads) and a backward graph. `partition` turns
the joint graph into a remat graph (JointGraph: phase from the forward outputs, the nodes they
need from the primal inputs being the forward; the incoming gradients made by one node that runs
after the forward outputs and before every backward node, as in a real step), solves it with a
remat graph solver under a budget of activation memory (activation_budget_bytes), and lowers the
plan: the forward graph runs the plan's steps before the backward starts, in its order, the
backward graph the rest in its order, a node the plan runs again as one more call there; the
values crossing are the saved set. AOTAutograd's own extraction gives the two graphs'
inputs and outputs (so they are what AOTAutograd expects); their bodies follow the plan.

Sizes come from each node's tensor metadata (views and in-place results alias their input, size
0); costs from the FLOP model of cost.py on meta tensors of those shapes. `partition.last` holds
the last call's figures (PartitionStats). A random call the plan runs again draws what its first
run drew: the forward saves the generator state it drew from and the recomputation replays it
(PyTorch's run_and_save_rng_state and run_with_rng_state), leaving the generator where it was;
the plan counts the state's bytes (JointGraph). A graph remat does not model (symbolic shapes,
higher-order operators, torch.utils.checkpoint regions) raises Unplannable; the compile backend
(compile.py) then uses PyTorch's partitioner and warns.
"""

import dataclasses
import functools
import heapq
import math
import operator
import time
from collections import Counter

import torch
import torch.fx as fx

import remat
from remat.torch import _compat, inductor_buffers, kernel_workspace, op_kinds
from remat.torch import cost as cost_models
from remat.torch import effects

SAFETY_TIME_LIMIT_S = 600.0
BACKWARD_START = "remat_backward_start"
RNG_STATE = "remat_rng_state"  # the op of a JointGraph node saving a random call's generator
LAYOUT_COPIES = "remat_layout_copies"  # the op of a JointGraph node making channels-last copies
LAYOUT_GRADIENTS = "remat_layout_gradients"  # ... and of one storing their gradients' layouts


class Unplannable(ValueError):
    """The joint graph holds something remat does not model; the message says what."""


@dataclasses.dataclass
class PartitionStats:
    """Figures of one partition: what the forward saves, what the backward recomputes, and for a
    remat plan the activation memory it was asked for and plans (the simulator's peak of the two
    graphs as lowered, above the graph's inputs)."""

    saved: list  # names of the saved fx nodes
    saved_bytes: int  # sum of their tensor sizes (numel x element size, as functorch counts)
    recomputed: list  # names of forward ops the backward graph runs again (a name per run)
    seconds: float  # partition time
    solver: str = ""
    status: str = ""
    recomputed_flops: float = 0.0  # cost.py's FLOPs of the recomputed calls
    redrawn: int = 0  # recomputed random calls: each draws anew (remat's plans: none)
    replayed: int = 0  # recomputed random calls replaying their first draw (a saved state)
    graph: str = ""
    input_bytes: int = 0  # parameters, buffers and batch: resident throughout
    budget_bytes: int = None  # activation memory asked for (None: no budget)
    baseline_activation_bytes: int = 0  # the default schedule's: what a fraction is of
    planned_activation_bytes: int = 0
    lower_bound_activation_bytes: int = 0
    # The graphs compile with Inductor's layout optimization, whose copies the figures count.
    layout_copies: bool = False


def partition(joint_module, _joint_inputs=None, *, solver="mincut", budget=None,
              num_fwd_outputs=None, static_lifetime_input_indices=None, compiler=None,
              work_limit=None, time_limit=None, seed=1, fuse=None, memory_cap=None,
              layout_copies=False, **params):
    """AOTAutograd partition function: (forward module, backward module) of the joint graph as
    remat `solver` plans it under `budget` of activation memory (see activation_budget_bytes;
    None: no memory budget, the solver's least-cost plan, as AOTAutograd's partitioners do).
    Raises Unplannable for a graph remat does not model.

    `static_lifetime_input_indices` (inputs that live for the whole program, such as parameters)
    changes nothing: every primal input is live throughout in the remat graph, so saving one costs
    no memory there either; `compiler` (Inductor passes "inductor") neither. With `fuse` (None:
    for every solver but "mincut", which models fusion itself from the op kinds) each chain of
    calls a compiler fuses into one kernel is one remat node (JointGraph): its inner values are
    not stored, as in the compiled step; the values a chain makes from its statistics are chains
    of their own (split_statistic_tails), so a plan may keep a statistic and make them again;
    and the backward gets its own copies of the forward's pointwise chains it reads
    (fuse_pointwise_recomputation), as Inductor recomputes them in the backward's kernels (a
    fraction budget stays a share of the activation memory without them). `work_limit`: work
    units, None for remat's default, or a function of the remat graph giving them
    (scaled_work_limit). `memory_cap`: activation bytes a plan that recomputes more than the
    backward's copies of pointwise chains exist for anyway should not need more than (the compile
    backend passes PyTorch's default partition's; None: the default schedule's of the graph with
    copies). `layout_copies`: the graphs compile with Inductor's layout optimization, whose
    channels-last copies of the convolutions' inputs the plan counts (JointGraph). Other keywords
    are the solver's parameters."""
    start = time.perf_counter()
    joint_module.graph.eliminate_dead_code()
    merge_common_subexpressions(joint_module)
    if fuse is None:
        fuse = solver != "mincut"
    default = JointGraph(joint_module, num_fwd_outputs, backward_start=True, fuse=fuse,
                         layout_copies=layout_copies)
    base_peak, base_cost = remat.baseline(default.graph)
    # A fraction is of the default schedule's activation memory (nothing recomputed).
    asked = activation_budget_bytes(default.graph, budget, default.input_bytes)
    candidates = _rewritten(joint_module, default, num_fwd_outputs, layout_copies) if fuse \
        else [(joint_module, default)]
    if _is_min(budget):
        # The least memory: the graph whose lower bound is the least.
        candidates = [min(candidates, key=lambda c: remat.memory_lower_bound(c[1].graph))]
    limit = SAFETY_TIME_LIMIT_S if time_limit is None else float(time_limit)
    if solver == "auto":
        # The step's whole recomputation is a fraction of a point of CI (the forward and
        # backward's cost is the baseline), so auto's cold run always pays where it can gain.
        params = {"cold_run_gain_points": 0, **params}
    best = None
    # The graph whose copies are not shared (the last) first: it holds them the least, so where
    # its plan is over the budget the others' are too, and they are not planned (one of theirs
    # may still peak a little lower, over the budget: bench/partition_scale_bench.py's two
    # layers). Where another graph's plan is as good, that one is kept (shared copies recompute
    # less).
    for planned_module, joint in reversed(candidates):
        if best is not None and best.peak_bytes > best.solve_budget:
            break
        plan = _plan(planned_module, joint, budget, asked, solver, work_limit, limit, seed, params,
                     rival=best)
        if best is None or not _better_plan(best, plan, best.solve_budget):
            best = plan
    if _may_fit_cheaper_without_copies(best, default, candidates, budget, base_cost):
        # The plan fits, and runs more FLOPs than the default schedule: the backward's copies of
        # pointwise chains, all of them where it runs every node once, and what it recomputes.
        # The joint graph without copies, where a chain is made again only where the plan says,
        # may fit for fewer FLOPs (bench/compile_bench.py: ResNet-50 at the memory of PyTorch's
        # plans at 0.8, and at 0.8 itself). Within `memory_cap` too: PyTorch's default
        # partition, which recomputes such chains as well, needs no more (more memory than that
        # for fewer FLOPs is not what a budget asks for; the compile backend refuses it).
        if memory_cap is None:
            memory_cap = remat.baseline(best.joint.graph)[0] - best.joint.input_bytes
        plan = _plan(joint_module, default, budget, min(asked, memory_cap), solver, work_limit,
                     limit, seed, params, rival=best)
        if _better_plan(plan, best, plan.solve_budget):
            best = dataclasses.replace(plan, asked=asked)
    best = _statistics_saved(best)
    joint, graph, lower, asked = best.joint, best.joint.graph, best.lower, best.asked
    fw, bw, executed = best.plan.lowered()
    peak, planner = best.plan.peak_bytes, best.plan.planner
    if executed != best.plan.executed:  # see _ends_without_extraction
        peak = _simulated_peak(graph, executed)
    if peak >= base_peak and (joint is not default
                              or executed != remat.default_schedule(graph)):
        # Never worse than the default schedule, and no recomputation that lowers no peak.
        graph = default.graph
        fw, bw, executed = lower_plan(joint_module, default, remat.default_schedule(graph))
        peak = _simulated_peak(graph, executed)
    stats = partition_stats(fw, bw, len(joint.fwd_outputs), time.perf_counter() - start)
    stats.solver = planner
    stats.graph = graph.name
    stats.input_bytes = joint.input_bytes
    stats.budget_bytes = asked
    stats.baseline_activation_bytes = base_peak - joint.input_bytes
    stats.planned_activation_bytes = peak - joint.input_bytes
    stats.lower_bound_activation_bytes = lower - joint.input_bytes
    stats.layout_copies = layout_copies
    if asked is None:
        stats.status = "no budget"
    else:
        stats.status = "feasible" if peak <= asked + joint.input_bytes else "over-budget"
    partition.last = stats
    return fw, bw


partition.last = None


@dataclasses.dataclass
class _Lowered:
    """A plan as `partition` lowers it to compare it with others (without AOTAutograd's
    extraction: lower_plan's build_modules): the sequence its two graphs run, the simulator's
    peak of that sequence and the FLOPs of the calls the two graphs run (what plans are compared
    by: lowering drops the steps whose outputs nothing reads, and the calls of a fused step that
    no kept call reads, so a solver's own figures may be above them)."""

    sequence: list  # the plan as solved
    executed: list
    peak_bytes: int
    cost: float
    planner: str
    module: fx.GraphModule  # the joint module planned (its attributes go into the two modules)
    joint: object  # its JointGraph

    def lowered(self):
        """(forward module, backward module, the sequence they run) of the plan, lowered with
        AOTAutograd's extraction: only for the plan `partition` returns (the extraction and a
        GraphModule's code generation are most of a lowering's time). From the sequence the
        lowering without it ran, whose saved set is already the one the lowering settles on:
        one extraction, not one more for each pass that drops a step nothing reads."""
        return lower_plan(self.module, self.joint, self.executed)


@dataclasses.dataclass
class _Planned:
    """The best _Lowered plan of one graph, with the budget it was solved under."""

    joint: object  # the JointGraph planned
    plan: _Lowered
    solve_budget: int
    asked: int  # activation bytes asked for (None: no budget)
    lower: int  # the graph's memory lower bound

    @property
    def peak_bytes(self):
        return self.plan.peak_bytes

    @property
    def cost(self):
        return self.plan.cost


def _may_fit_cheaper_without_copies(best, default, candidates, budget, default_cost):
    """Whether `partition` plans `default` (the JointGraph without the backward's copies of
    pointwise chains) too: the graphs planned had copies, and `best`, their better plan, fits a
    budget (not "min") running more FLOPs than `default`'s schedule (`default_cost`)."""
    return (candidates[0][1] is not default and best.asked is not None and not _is_min(budget)
            and best.peak_bytes <= best.solve_budget and best.cost > default_cost)


def _plan(planned_module, joint, budget, asked, solver, work_limit, time_limit, seed, params,
          rival=None):
    """_Planned of `joint` (a JointGraph of `planned_module`) solved by `solver` under `asked`
    bytes of activation memory ("min": the graph's least). With auto, the greedy members
    (_greedy_members) compete too, unless auto's plan fits and recomputes nothing: then none can
    cost less (auto stops there too). They run on each graph, also where `rival` (the _Planned
    of another graph of the same joint graph: the graph whose copies are not shared) is better
    than auto's plan here: on the graph of shared copies, FastSA from the greedy plan found
    bench/cuda_joint_bench.py's best plan of HF GPT-2 at PyTorch's memory at 0.8, where auto's own
    plan there was worse than the rival's. Only the first graph planned (no rival) starts
    FastSA from knapsack_starts: they make every chain again just before its reader, and the
    graph whose copies are not shared holds them the least."""
    graph = joint.graph
    lower = remat.memory_lower_bound(graph)
    if _is_min(budget):
        asked = lower - joint.input_bytes
    solve_budget = max(1, sum(graph.value(v)["size"] for v in range(graph.num_values)))
    if asked is not None:
        solve_budget = max(asked + joint.input_bytes, lower)
    if callable(work_limit):
        work_limit = work_limit(graph)
    result = remat.solve(graph, solve_budget, solver, work_limit=work_limit,
                         time_limit=time_limit, seed=seed, **params)
    plan = _lower(planned_module, joint, result.sequence, result.solver)
    least_cost = plan.peak_bytes <= solve_budget and result.cost <= remat.baseline(graph)[1]
    if solver == "auto" and asked is not None and not least_cost:
        plan = _greedy_members(planned_module, joint, solve_budget, plan, work_limit, time_limit,
                               seed, knapsack=rival is None)
    return _Planned(joint, plan, solve_budget, asked, lower)


def _statistics_saved(planned):
    """`planned` (a _Planned) with its statistic steps (statistic_steps) placed alike: each runs
    once, in the forward, just after what it reads, where the plan still fits its solve budget
    and the lowered graphs run no more FLOPs. Where a statistic is made (in the forward and
    saved, or made again in the backward from what it is made of, or first made in the
    backward, as a running mean's update and its write to the buffer may be) changes the peak by
    a few bytes, so a solver's choice among them is close to arbitrary and differs from one
    repeated block to the next; each choice gives the compiled graphs kernels of their own
    (Inductor reuses a kernel only where its code is the same, and fuses a buffer's write into
    the kernel it runs beside). Placed alike, repeated blocks share their kernels
    (bench/kernel_count.py counts them)."""
    plan, joint = planned.plan, planned.joint
    sequence = plan.executed
    start = sequence.index(joint.backward_start)
    statistics = statistic_steps(joint) & set(sequence)
    forward = [s for s in sequence[:start] if s not in statistics]
    in_forward = set(forward)
    for step in sorted(statistics):
        after = [joint.producer_step[v] for v in joint.nodes[step]["inputs"]
                 if v in joint.producer_step]
        if not in_forward.issuperset(after):
            return planned  # it reads what the plan first makes in the backward
        forward.insert(max(map(forward.index, after), default=-1) + 1, step)
        in_forward.add(step)
    placed = forward + [joint.backward_start] + [s for s in sequence[start + 1:]
                                                 if s not in statistics]
    if placed == sequence or not _writes_after_reads(joint, placed, statistics):
        return planned
    try:
        lowered = _lower(plan.module, joint, placed, plan.planner)
    except Unplannable:
        return planned
    if lowered.peak_bytes > max(planned.solve_budget, plan.peak_bytes) or lowered.cost > plan.cost:
        return planned
    return dataclasses.replace(planned, plan=lowered)


def _writes_after_reads(joint, sequence, steps):
    """Whether moving `steps` of `joint` as `sequence` has them read and write storages written
    in place (a running mean's buffer) in order: each of them that writes one runs after every
    other run of a step reading that storage, and each that reads one reads a storage only they
    write."""
    last_read, writer = {}, {}
    for position, step in enumerate(sequence):
        node = joint.nodes[step]
        for v in node["inputs"]:
            last_read.setdefault(joint.value_root[v], {})[step] = position
        if node["kind"] != "view":
            for v in node["outputs"]:
                if joint.value_root[v] in joint.written_roots:
                    writer.setdefault(joint.value_root[v], set()).add(step)
    for position, step in enumerate(sequence):
        if step not in steps:
            continue
        node = joint.nodes[step]
        if any(not writer.get(joint.value_root[v], set()) <= steps for v in node["inputs"]):
            return False
        for v in node["outputs"] if not node["recomputable"] else []:
            readers = last_read.get(joint.value_root[v], {})
            if any(at > position for reader, at in readers.items() if reader != step):
                return False
    return True


def statistic_steps(joint):
    """The forward steps of `joint` (a JointGraph) that make statistics only. A statistic is an
    output of a reduction step that is a statistic of what it reads (_statistics), or an output
    of a step reading statistics and graph inputs only that is no larger than the largest of
    them nor than the largest reduction's statistic: a normalization's variance plus epsilon,
    its reciprocal square root, the update of its running mean and of its count of batches, and
    the in-place write of such an update to its buffer."""
    forward = [joint.nodes[step] for step in range(joint.backward_start)]
    reduced = {v for node in forward if node["kind"] == "reduction"
               for v in _statistics(joint, node)}
    cap = max((joint.values[v]["size"] for v in reduced), default=0)
    statistics, steps = set(reduced), set()
    for step, node in enumerate(forward):
        if node["kind"] != "reduction":
            read = [v for v in node["inputs"] if v in joint.producer_step]
            if statistics.issuperset(read) and (read or node["kind"] != "view"):
                # A view's size is 0 (it aliases its root): its root's is what it reads. A
                # constant (a call reading nothing, such as a zero a ReLU's backward selects) is
                # bounded by the statistics' size alone.
                largest = max((joint.values[joint.value_root[v]]["size"]
                               for v in node["inputs"]), default=cap if not node["inputs"] else 0)
                statistics.update(v for v in node["outputs"]
                                  if joint.values[v]["size"] <= min(largest, cap))
        # Not recomputable: one that writes a buffer in place (_statistics_saved moves it only
        # after every read of the buffer).
        if node["outputs"] and statistics.issuperset(node["outputs"]) \
                and (node["recomputable"] or joint.value_root[node["outputs"][0]] in
                     joint.written_roots):
            steps.add(step)
    return steps


def _is_min(budget):
    """Whether `budget` asks for the least memory ("min")."""
    return isinstance(budget, str) and budget.strip().lower() == "min"


def _lower(planned_module, joint, sequence, planner):
    """_Lowered of `sequence`, a plan of `joint` (a JointGraph of `planned_module`)."""
    fw, bw, executed = lower_plan(planned_module, joint, list(sequence), build_modules=False)
    flops = sum(joint.call_flops(n) for graph in (fw, bw) for n in graph.nodes
                if n.op == "call_function" and n.target is not operator.getitem)
    return _Lowered(list(sequence), executed, _simulated_peak(joint.graph, executed), flops,
                    planner, planned_module, joint)


def _rewritten(joint_module, default, num_fwd_outputs, layout_copies=False):
    """The (module, JointGraph) pairs `partition` plans with `fuse` (it keeps the better plan):
    copies of `joint_module` after split_statistic_tails, fuse_pointwise_recomputation and
    sink_backward_views (only `joint_module` and `default`, its JointGraph, where they change
    nothing). In the first, the copies of a chain that calls no compiler fuses (matmuls) read are
    shared among those a few calls apart, which recomputes less but holds each copy longer; in
    the second each such call has a copy of its own. Neither graph's plans are always the better
    (bench/compile_bench.py: remat at the memory of PyTorch's plans)."""
    groups = [([n.name for n in members], node["phase"])
              for members, node in zip(default.node_fx, default.nodes) if len(members) > 1]
    group_of = {name: g for g, (names, _) in enumerate(groups) for name in names}
    forward_groups = [names for names, phase in groups if phase == "forward"]
    found = []
    # The rewrites both graphs share are made once, on a copy the second graph then takes.
    # Views first, so that the copies a view reads are made where it is read.
    # The forward's calls (_compat.forward_node_names, an extraction of the forward graph) are
    # found once before the rewrites and once after split_statistic_tails: its copies of forward
    # values are forward calls, and a call it no longer reads from may leave the forward; the
    # other rewrites give only backward calls copies and move only backward views, which takes
    # no call into or out of the forward.
    split = _compat.copy_graph_module(joint_module)
    changes = split_statistic_tails(split, forward_groups, num_fwd_outputs,
                                    forward_names=default.forward_names)
    forward = (_compat.forward_node_names(split, num_fwd_outputs) if changes
               else default.forward_names)
    changes += sink_backward_views(split, num_fwd_outputs, forward_names=forward)
    for share_nearby in (True, False):
        rewritten = _compat.copy_graph_module(split) if share_nearby else split
        if not (changes
                + fuse_pointwise_recomputation(rewritten, num_fwd_outputs, group_of,
                                               share_nearby, forward_names=forward)
                + sink_backward_views(rewritten, num_fwd_outputs, forward_names=forward)):
            return [(joint_module, default)]
        found.append((rewritten, JointGraph(rewritten, num_fwd_outputs, backward_start=True,
                                            fuse=True, forward_names=forward,
                                            layout_copies=layout_copies)))
    return found


def _greedy_members(planned_module, joint, budget, plan, work_limit, time_limit, seed,
                    knapsack=True):
    """The best _Lowered plan by _better_plan of auto's `plan`, the greedy plan (the `greedy`
    solver, docs/solvers/greedy.md), when the greedy plan fits the budget as lowered, FastSA
    started from it (its annealing goes on from there where single recomputations stop lowering
    the peak), and with `knapsack` FastSA started from each of knapsack_starts. From a greedy
    plan over the budget FastSA is not started, as in auto: its own grouped stage 1 reaches
    lower peaks, and the run costs a good part of the planning time
    (bench/partition_scale_bench.py). The knapsack-shaped starts are over the budget as a rule,
    and are annealed from all the same: they lead to plans neither stage 1 nor the greedy plan
    does. Each is judged as lowered: a greedy plan over the budget before lowering may fit
    after it."""
    work_limit, time_limit, seed, threads = remat._solve_settings(work_limit, time_limit, seed)
    graph = joint.graph
    greedy = _lower(planned_module, joint,
                    _greedy_plan(graph, budget, work_limit, time_limit).sequence, "greedy")
    members = [greedy]
    if greedy.peak_bytes <= budget:
        annealed = remat._remat.solve(graph, budget, "fastsa", time_limit, seed, threads, {},
                                      start=greedy.executed, work_limit=work_limit)
        members.append(_lower(planned_module, joint, annealed.sequence, "fastsa from greedy"))
    for start in knapsack_starts(joint) if knapsack else []:
        annealed = remat._remat.solve(graph, budget, "fastsa", time_limit, seed, threads, {},
                                      start=start, work_limit=work_limit)
        members.append(_lower(planned_module, joint, annealed.sequence, "fastsa from knapsack"))
    best = plan
    for member in members:
        if _better_plan(member, best, budget):
            best = member
    return best


def knapsack_starts(joint):
    """Plans of `joint` (a JointGraph with a backward start) shaped as PyTorch's activation-memory
    knapsack shapes its plans, as starts for FastSA: the forward keeps what its matmuls and the
    calls that may not run again make, and the statistics of its reductions; the backward makes
    everything else again just before it is first read (just_in_time), and so the matmuls whose
    outputs hold the most bytes per FLOP: the first KNAPSACK_MATMULS[0] of them in one start,
    the first KNAPSACK_MATMULS[1] in the next, ... FastSA from such a start can reach plans that
    recompute a whole attention (scores, softmax, replayed dropout) in several layers, which no
    single recomputation from auto's other starts leads to (bench/compile_bench.py: remat at the
    memory of PyTorch's plans)."""
    kept, matmuls = set(), []
    for step in range(joint.backward_start):
        node = joint.nodes[step]
        if node["recomputable"] and node["kind"] != "compute":
            if node["kind"] == "reduction":
                kept.update(joint.value_root[v] for v in _statistics(joint, node))
            continue
        kept.update(joint.value_root[v] for v in node["outputs"])
        if node["recomputable"] and node["cost"] > 0:
            matmuls.append(step)
    made = {step: {joint.value_root[v] for v in joint.nodes[step]["outputs"]} for step in matmuls}
    matmuls.sort(key=lambda step: -sum(joint.values[v]["size"] for v in made[step])
                 / joint.nodes[step]["cost"])
    starts = []
    for count in KNAPSACK_MATMULS:
        if count <= len(matmuls):
            dropped = set().union(*(made[step] for step in matmuls[:count]))
            starts.append(just_in_time(joint, kept - dropped))
    return starts


KNAPSACK_MATMULS = (4,)


def _statistics(joint, node):
    """The outputs of reduction node `node` of `joint` that are statistics: at most
    1/STATISTIC_RATIO of the bytes of the largest value it reads."""
    read = max((joint.values[v]["size"] for v in node["inputs"]), default=0)
    return [v for v in node["outputs"]
            if joint.values[v]["size"] * STATISTIC_RATIO <= read]


def just_in_time(joint, kept_roots):
    """The sequence of `joint` (a JointGraph with a backward start) that runs the forward, then
    the backward in its order, making each forward value a backward step reads again just before
    (with the forward values it is made of, recursively) unless its storage is in `kept_roots`
    or its producer may not run again; a value made again is read by the later steps too."""
    start = joint.backward_start
    sequence = list(range(start + 1))
    made_before = {v for step in range(start) for v in joint.nodes[step]["outputs"]}
    remade = set()

    def remake(value):
        stack = [(value, False)]
        while stack:
            v, inputs_ready = stack.pop()
            if v not in made_before or v in remade or joint.value_root[v] in kept_roots:
                continue
            step = joint.producer_step[v]
            node = joint.nodes[step]
            if not node["recomputable"]:
                continue
            if inputs_ready:
                sequence.append(step)
                remade.update(node["outputs"])
                continue
            stack.append((v, True))
            stack.extend((u, False) for u in reversed(node["inputs"]))

    for step in range(start + 1, len(joint.nodes)):
        for v in joint.nodes[step]["inputs"]:
            remake(v)
        sequence.append(step)
    return sequence


def _greedy_plan(graph, budget, work_limit, time_limit):
    """The `greedy` solver's plan of `graph` under `budget` bytes (a SolveResult)."""
    return remat._remat.solve(graph, budget, "greedy", time_limit, 1, 1, {},
                              work_limit=work_limit)


def _better_plan(a, b, budget):
    """Whether plan a (peak_bytes, cost) is better than plan b under `budget`, by the rule every
    solver's plans are compared with (remat/toolkit.h's better_plan)."""
    return remat._remat.better_plan(a.peak_bytes, a.cost, b.peak_bytes, b.cost, budget)


def _simulated_peak(graph, sequence):
    """The simulator's peak of the sequence the lowered graphs run; Unplannable if it is not a
    valid schedule (a lowering the simulator cannot follow is not run)."""
    return _evaluate(graph, sequence).peak_bytes


def scaled_work_limit(graph):
    """The compile path's work limit: a unit per NODES_PER_WORK_UNIT nodes of the graph as
    planned, between 1 and remat's default, so planning a small graph does not take longer than
    compiling it (bench/compile_bench.py prints partition and compile seconds)."""
    return min(float(remat._remat.DEFAULT_WORK_LIMIT),
               max(1.0, graph.num_nodes / NODES_PER_WORK_UNIT))


NODES_PER_WORK_UNIT = 50


def check_budget(budget):
    """Raises TypeError or ValueError for a budget activation_budget_bytes cannot read, before
    any graph exists (the compile backend checks it when made, not in the training loop)."""
    if budget is None:
        return
    if isinstance(budget, bool) or not isinstance(budget, (int, float, str)):
        raise TypeError(f"budget must be None, int bytes, a float fraction, text such as \"50%\" "
                        f"or \"90MB\", or \"min\" (got {type(budget).__name__})")
    if isinstance(budget, float) and not 0.0 < budget <= 1.0:
        raise ValueError(f"a float budget is a fraction of the activation memory in (0, 1] "
                         f"(got {budget!r})")
    if isinstance(budget, int) and budget <= 0:
        raise ValueError(f"a byte budget must be positive (got {budget})")
    if isinstance(budget, str):
        text = budget.strip().lower()
        if text.endswith("%"):
            try:
                percent = float(text[:-1])
            except ValueError:
                raise ValueError(f"budget {budget!r}: not a percentage") from None
            if not 0.0 < percent <= 100.0:
                raise ValueError(f"budget {budget!r}: a percentage of the activation memory "
                                 f"must be in (0, 100]")
        elif text != "min":
            remat._remat.parse_budget(_budget_check_graph(), budget)  # ValueError if bad


def _budget_check_graph():
    return remat.Graph.build("budget check", [{"name": "x", "size": 1},
                                              {"name": "y", "size": 1, "output": True}],
                             [{"name": "f", "cost": 1, "inputs": [0], "outputs": [1]}])


def activation_budget_bytes(graph, budget, input_bytes):
    """The activation memory `budget` allows on `graph` (bytes above its inputs), or None.

    The activation memory of a joint graph is the simulator's peak of its default schedule (the
    forward, then the backward, in the graph's order, each value freed after its last use) less
    the bytes of its inputs (parameters, buffers, batch), which are resident before the step and
    after it. A float in (0, 1] or "P%" is that fraction of it; int bytes or byte text ("90MB")
    are bytes of activation memory; "min" is the least any plan needs (the memory lower bound
    less the inputs)."""
    check_budget(budget)
    if budget is None:
        return None
    activation = remat.baseline(graph)[0] - input_bytes
    if isinstance(budget, float):
        return int(budget * activation)
    if isinstance(budget, int):
        return budget
    text = budget.strip().lower()
    if text == "min":
        return remat.memory_lower_bound(graph) - input_bytes
    if text.endswith("%"):
        return int(float(text[:-1]) / 100.0 * activation)
    return remat._remat.parse_budget(graph, budget)


def lower_plan(joint_module, joint, sequence, build_modules=True):
    """(forward module, backward module, the sequence they run) of a plan of `joint`'s graph:
    AOTAutograd's extraction with the plan's saved set gives each graph's inputs and outputs,
    and each body is the plan's steps on its side of the backward start, in order (the returned
    sequence says what runs: steps whose outputs nothing reads are dropped). Without
    `build_modules`, the two fx graphs instead of modules, their inputs and outputs made as the
    extraction makes them but without it (_ends_without_extraction)."""
    saved = joint.saved_nodes(sequence)
    while True:
        if build_modules:
            fw, bw, kept = _compat.extract_fwd_bwd_modules(
                joint_module, saved, len(joint.fwd_outputs), keep_saved=True)
            fw, bw = _ends(fw), _ends(bw)
        else:
            fw, bw, kept = _ends_without_extraction(joint_module, joint, saved)
        boundary = sequence.index(joint.backward_start)
        replays = _Replays(joint, sequence, boundary)
        fw, fw_ran = _follow_plan(joint_module, joint, fw, sequence[:boundary], replays=replays)
        bw, bw_ran = _follow_plan(joint_module, joint, bw, sequence[boundary + 1:],
                                  drop_outputs=kept, replays=replays, side="backward")
        # No calls: Inductor makes the copies first, autograd lays out the gradients last.
        if joint.layout_copies in sequence:
            fw_ran.insert(0, joint.layout_copies)
        if joint.layout_gradients in sequence:
            bw_ran.append(joint.layout_gradients)
        sequence = fw_ran + [joint.backward_start] + bw_ran
        # A step whose copy nothing reads is dropped (a view read only after its root was made
        # again is made again): the values it read from the forward need no saving.
        fewer = joint.saved_nodes(sequence)
        if len(fewer) == len(saved):
            if build_modules:
                fw, bw = (fx.GraphModule(joint_module, g) for g in (fw, bw))
            return fw, bw, sequence
        saved = fewer


def _follow_plan(joint_module, joint, ends, steps, drop_outputs=0, replays=None,
                 side="forward"):
    """The `side` graph with the inputs and outputs of `ends` (_GraphEnds) and the calls of
    `steps` (remat node ids), in order, between them, less its last `drop_outputs` outputs; the
    random calls `replays` says run again replay their first draw. Returns the graph and the
    steps it runs."""
    lowering = _Lowering(joint_module, joint, ends.inputs, replays, side)
    for step in steps:
        lowering.emit(step)
    return lowering.finish(ends, drop_outputs)


@dataclasses.dataclass
class _GraphEnds:
    """What the lowering takes of one side's graph as AOTAutograd's extraction makes it: its
    inputs (placeholders and get_attr nodes, copied in order), its outputs (fx nodes named as
    the joint graph's, or constants) and the meta of its output node."""

    inputs: list
    outputs: list
    output_meta: dict


def _ends(module):
    """_GraphEnds of an extracted module."""
    output = next(n for n in module.graph.nodes if n.op == "output")
    return _GraphEnds([n for n in module.graph.nodes if n.op in ("placeholder", "get_attr")],
                      _compat.tree_flatten(output.args[0])[0], output.meta)


def _ends_without_extraction(joint_module, joint, saved):
    """(forward _GraphEnds, backward _GraphEnds, saved tensors kept) as
    _compat.extract_fwd_bwd_modules(..., keep_saved=True) makes the two graphs with `saved`, made
    without it: the extraction copies the joint graph three times and generates two modules'
    code, most of a lowering's time, while a plan lowered only to be compared with others needs
    the graphs' ends alone (their get_attr nodes are copied where read). partition lowers the plan
    it returns with the extraction and takes that lowering's figures
    (test_lowering_without_extraction_runs_what_the_extracted_graphs_run)."""
    forward_inputs, backward_inputs = _compat.extraction_inputs(joint_module)
    tensors = [n for n in saved if not _compat._is_sym(n)]
    symbols = [n for n in saved if _compat._is_sym(n)]
    fwd_outputs, bwd_outputs = _compat.joint_outputs(joint_module, len(joint.fwd_outputs))
    forward = _GraphEnds(_placeholders_like(forward_inputs), fwd_outputs + tensors + symbols, {})
    backward = _GraphEnds(_placeholders_like(symbols + tensors + backward_inputs),
                          bwd_outputs + tensors, {})
    return forward, backward, len(tensors)


def _placeholders_like(nodes):
    """Placeholders named as fx `nodes` and sharing their meta, as the extraction makes a graph's
    inputs, in a graph of their own."""
    graph = fx.Graph()
    made = []
    for n in nodes:
        placeholder = graph.placeholder(n.name)
        placeholder.meta = n.meta
        made.append(placeholder)
    return made


class _Lowering:
    """Copies joint-graph calls into a new fx graph in plan order. A call run again is a copy
    named after the first (meta["remat_copy_of"]); each read takes the latest copy, and a view
    whose root was computed again since the view was made is made again from the new root first
    (in the simulator a view is free and reads whichever copy of its root is live)."""

    def __init__(self, joint_module, joint, inputs, replays=None, side="forward"):
        self.joint_module, self.joint = joint_module, joint
        self.replays, self.side = replays, side
        self.states = {}  # replayed random call (remat node id) -> its generator state here
        self.first_runs = {}  # replayed random call first run in this graph -> that run's call
        self.graph = fx.Graph()
        self.by_name = {n.name: n for n in joint_module.graph.nodes}
        self.env = {}
        self.serial = {}  # value -> how many times its root was computed when it was made
        self.step_of = {}  # copy -> (remat node id, which emission of a step made it)
        self.emitted = 0
        self.given = set()  # values the graph takes as inputs
        for n in inputs:
            joint_node = self.by_name[n.name]
            self.env[joint_node] = self.graph.node_copy(n)
            if joint_node in joint.value_of:
                self.serial[joint.value_of[joint_node]] = 0
                self.given.add(joint.value_of[joint_node])
        if replays is not None and side == "backward":
            self.states = replays.state_inputs(self.graph)

    def emit(self, step):
        joint = self.joint
        replayed = self.replays is not None and step in self.replays.steps
        # One emission for all the step's calls: a view one of them makes again (or a step it
        # runs first) takes the next, so the step's calls stay one step of the sequence run.
        emission = self.emitted
        self.emitted += 1
        for call in joint.node_fx[step]:
            made = self._copy_replayed(call, step) if replayed else self._copy_call(call)
            self.step_of[made] = (step, emission)
            # Per call, not per step: a later call of a fused step may read a view made here.
            for v in joint.call_outputs(call):
                root = joint.value_root[v]
                self.serial[v] = (self.serial.get(v, 0) + 1 if root == v
                                  else self.serial.get(root, 0))

    def read(self, n):
        """The latest copy of joint fx node `n`, making a view again first when it is stale or
        absent (the backward gets a view's storage, not the view)."""
        joint = self.joint
        if n not in self.env and n.op == "get_attr":
            self.env[n] = self.graph.node_copy(n)
        v = joint.value_of.get(n)
        if v is not None and joint.value_root[v] != v and v in joint.producer_step and (
                n not in self.env or self.serial.get(v) != self.serial.get(joint.value_root[v], 0)):
            call = n.args[0] if n.target is operator.getitem else n
            if effects.is_view(call):
                self._remake_view(call)
            else:
                self.emit(joint.producer_step[v])
        if n not in self.env:
            raise Unplannable(f"the plan reads {n.name} where it does not exist (a forward "
                              f"value the backward reads must be saved)")
        return self.env[n]

    def _remake_view(self, call):
        """Runs view `call` again on the latest copy of what it views (a view costs nothing, so
        a plan never runs one as a step of its own)."""
        copy = self._copy_call(call)
        made = self.joint.call_outputs(call)
        step = self.joint.producer_step[made[0]]
        if len(self.joint.node_fx[step]) == 1 and self.joint.nodes[step]["recomputable"]:
            # The sequence run says so: the forward may have dropped its copy of the view. (A
            # fused step's view is made by its step in the forward, which other calls keep; one
            # that must run once is a forward output, kept too.)
            self.step_of[copy] = (step, self.emitted)
            self.emitted += 1
        for v in made:
            self.serial[v] = self.serial.get(self.joint.value_root[v], 0)

    def _copy_call(self, call):
        """Copies joint fx call `call` and its getitems into the lowered graph, reading the latest
        copies of its arguments; returns the call's copy."""
        copy = self.graph.node_copy(call, self.read)
        if copy.name != call.name:
            copy.meta["remat_copy_of"] = call.name
        self._bind(call, copy)
        return copy

    def _bind(self, call, result):
        """Makes `result` the latest copy of joint fx call `call`, and copies its getitems."""
        self.env[call] = result
        for item in self.joint.getitems.get(call, ()):
            self.env[item] = self.graph.node_copy(item, self.read)

    def _copy_replayed(self, call, step):
        """Copies random fx call `call` (remat node `step`, which the plan runs again) into the
        lowered graph: its first run saves the generator state it draws from
        (run_and_save_rng_state), a later one draws from that state (run_with_rng_state), which
        gives the first draw again and leaves the generator as it was. A run again in the graph
        that made the state reads the first run's output instead (the value lives on until then:
        the sequence run has the step once, and the simulator's peak is that sequence's): under
        Inductor with fallback_random, PyTorch's fake-tensor run of run_and_save_rng_state gives
        a real state, which run_with_rng_state in the same graph cannot take. Returns the call
        made (or the first run's)."""
        if step in self.first_runs:
            return self.first_runs[step]
        run_and_save, run_with = _compat.rng_replay_operators()
        args = fx.node.map_arg(call.args, self.read)
        kwargs = fx.node.map_arg(call.kwargs, self.read)
        state = self.states.get(step)
        if state is None:
            made = self.graph.call_function(run_and_save, (call.target,) + tuple(args), kwargs)
            state = self.graph.create_node("call_function", operator.getitem, (made, 0),
                                           name=f"rng_state_{call.name}")
            state.meta["val"] = self.joint.rng_state_value(call)
            result = self.graph.call_function(operator.getitem, (made, 1))
            made.meta["val"] = (state.meta["val"], call.meta.get("val"))
            self.states[step] = state
            self.replays.names[step] = state.name
            self.first_runs[step] = made
        else:
            made = result = self.graph.call_function(run_with, (state, call.target) + tuple(args),
                                                     kwargs)
        result.meta.update(call.meta)
        made.meta["remat_copy_of"] = call.name
        self._bind(call, result)
        return made

    def finish(self, ends, drop_outputs):
        results = ends.outputs[:len(ends.outputs) - drop_outputs]
        returned = [self.read(self.by_name[n.name]) if isinstance(n, fx.Node) else n
                    for n in results]
        if self.replays is not None and self.side == "forward":
            returned = self.replays.with_state_outputs(returned, self.states)
        new_output = self.graph.output(returned)
        new_output.meta.update(ends.output_meta)
        if "desc" in ends.output_meta and (drop_outputs or len(returned) > len(results)):
            descs = list(ends.output_meta["desc"])[:len(results)]
            new_output.meta["desc"] = descs + descs[-1:] * (len(returned) - len(results))
        # A fused step's calls may enclose a view made again for one of them: each emission of a
        # step ran where its last call is (after what it encloses), as emitted: the call reading
        # the view may be dead (an emission of a step run twice whose last call only the second
        # run's readers need) while the view lives on for a later emission.
        last = {}
        for i, n in enumerate(self.graph.nodes):
            if n in self.step_of:
                last[self.step_of[n]] = i
        self.graph.eliminate_dead_code()
        self.graph.lint()
        for n in self.graph.nodes:
            n.meta[_compat.PLANNED_CALL] = True  # the compiler keeps the order of such calls
        surviving = {self.step_of[n] for n in self.graph.nodes if n in self.step_of}
        ran = [step for step, _ in sorted(self._with_producers(surviving, last), key=last.get)]
        if self.replays is not None:
            ran = self.replays.with_state_steps(ran, self.side)
        return self.graph, ran

    def _with_producers(self, surviving, last):
        """The `surviving` emissions (step, emission) and the dropped ones that made what a
        kept one reads in the remat graph, where no kept emission before it made it and the graph
        does not take it as an input. An emission of a fused step survives where any of its calls
        is read, while a call dropped from it may have been the only reader of a value another
        emission made: that emission is dropped too, yet the simulator reads every input of a
        step, so the sequence run, and the plan lowered again from it, would read the value
        before it is made. `last`: each emission's position in the graph before dead code was
        eliminated."""
        order = sorted(last, key=last.get)
        kept = set(surviving)
        while True:
            latest_kept, latest, needed = {}, {}, set()
            for emission in order:
                node = self.joint.nodes[emission[0]]
                if emission in kept:
                    needed.update(latest[v] for v in node["inputs"] if v in latest
                                  and v not in latest_kept and v not in self.given)
                for v in node["outputs"]:
                    latest[v] = emission
                    if emission in kept:
                        latest_kept[v] = emission
            if needed <= kept:
                return kept
            kept |= needed


class _Replays:
    """The random calls a plan runs more than once (JointGraph.replay_state), for the lowering:
    each first run saves its generator state, each later run replays it. The states of those
    first run in the forward and run again in the backward cross as saved tensors: forward
    outputs after the saved values (names: the forward's state nodes), backward inputs before the
    incoming gradients, in the same order."""

    def __init__(self, joint, sequence, boundary):
        self.joint = joint
        runs = Counter(sequence)
        first = {}
        for i, step in enumerate(sequence):
            first.setdefault(step, i)
        self.steps = {r for r in joint.replay_state if runs[r] > 1}
        self.first_side = {r: "forward" if first[r] < boundary else "backward"
                           for r in joint.replay_state if r in first}
        in_backward = set(sequence[boundary + 1:])
        self.crossing = sorted(r for r in self.steps if first[r] < boundary and r in in_backward)
        self.names = {}  # replayed random call -> its forward state node's name

    def with_state_outputs(self, returned, states):
        """The forward's outputs `returned` with the states the backward reads added after the
        saved tensors (before any saved symbolic sizes, which AOTAutograd expects last)."""
        missing = [r for r in self.crossing if r not in states]
        if missing:
            raise Unplannable(f"the plan runs {self.joint.nodes[missing[0]]['name']} again in "
                              f"the backward but its first run in the forward was not lowered")
        end = len(returned)
        while end > 0 and isinstance(returned[end - 1], fx.Node) and _compat._is_sym(
                returned[end - 1]):
            end -= 1
        return returned[:end] + [states[r] for r in self.crossing] + returned[end:]

    def state_inputs(self, graph):
        """{random call: backward graph input} of the states crossing into the backward graph
        `graph` (its inputs copied so far): inputs placed before the incoming gradients."""
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        tangents = [n for n in placeholders if _compat.is_tangent(n)]
        where = graph.inserting_before(tangents[0]) if tangents else (
            graph.inserting_after(placeholders[-1]) if placeholders
            else graph.inserting_before(None))
        states = {}
        with where:
            for r in self.crossing:
                name = self.names[r]
                placeholder = states[r] = graph.placeholder(name)
                if placeholder.name != name:
                    raise Unplannable(f"the backward's input {name} is named {placeholder.name}")
                placeholder.meta["val"] = self.joint.rng_state_value(self.joint.node_fx[r][0])
        return states

    def with_state_steps(self, ran, side):
        """`ran` (the steps one lowered graph runs) with each random call's state node (which
        has no call) just before the call's first run, in the graph running it first."""
        for r, s in self.joint.replay_state.items():
            if self.first_side.get(r) == side and r in ran:
                ran.insert(ran.index(r), s)
        return ran


def replay_device(n):
    """The device type ("cpu" or "cuda") of the generator random fx call `n` draws from, where a
    recomputation can replay its draw (run_with_rng_state, which finds the device as here: the
    `device` keyword, else the first tensor argument); None where it cannot: it writes a
    tensor, or runs on another device or none found."""
    if n.op != "call_function" or not _compat.is_operator(n.target) \
            or not op_kinds.is_random(_compat.packet_name(n.target)) or effects.declared_writes(n):
        return None
    device = n.kwargs.get("device")
    if device is None:
        for a in n.args:
            value = a.meta.get("val") if isinstance(a, fx.Node) else a
            if isinstance(value, (torch.Tensor, torch.device)):
                device = value.device if isinstance(value, torch.Tensor) else value
                break
    if isinstance(device, str):
        device = torch.device(device)
    if not isinstance(device, torch.device) or device.type not in ("cpu", "cuda"):
        return None
    if not _compat.is_fake(_first_tensor(n.meta.get("val"))):
        return None  # no fake tensor to make its state's from (AOTAutograd's graphs have them)
    return device.type


def _first_tensor(value):
    """The first tensor of an fx node's meta["val"] (a tensor or a tuple of them), or None."""
    for v in _compat.tree_flatten(value)[0]:
        if isinstance(v, torch.Tensor):
            return v
    return None


def merge_common_subexpressions(joint_module):
    """Merges, in place, each pure call that repeats an earlier one (same op, same arguments)
    into the earlier one, as functorch's partitioners do before cutting: the two layers of a
    model building the same causal mask then save one mask, not two. Pure: not random, writes
    nothing (schema or op_kinds.HIDDEN_WRITES), and neither reads nor makes a storage that some
    call writes in place (its value would depend on when it runs). Returns the merged count."""
    graph = joint_module.graph
    root = {}  # fx node -> the node whose storage it shares (views, in-place results)
    written = set()
    for n in graph.nodes:
        root[n] = n
        if n.op != "call_function":
            continue
        writes = effects.declared_writes(n)
        if n.target is operator.getitem:
            parent = n.args[0]
            if isinstance(parent, fx.Node) and root[parent] is not parent:
                root[n] = root[parent]  # an element of a view's tuple (split)
        elif writes:
            root[n] = root[next(iter(writes))]
        elif effects.is_view(n) and n.all_input_nodes:
            root[n] = root[n.all_input_nodes[0]]
        written.update(root[w] for w in writes)
    first = {}
    merged = 0
    for n in list(graph.nodes):
        if n.op != "call_function" or root[n] in written or effects.declared_writes(n):
            continue
        if op_kinds.is_random(_compat.packet_name(n.target)):
            continue
        if any(root[i] in written for i in n.all_input_nodes):
            continue
        key = _call_key(n)
        if key is None:
            continue
        kept = first.setdefault(key, n)
        if kept is not n:
            n.replace_all_uses_with(kept)
            graph.erase_node(n)
            merged += 1
    if merged:
        joint_module.recompile()
    return merged


def split_statistic_tails(joint_module, groups, num_fwd_outputs=None, forward_names=None):
    """Gives each value that a forward fusion group makes from its own statistics and that is
    read outside the group its own copy of the calls making it, in place: the group keeps the
    statistics (the small results of its reductions: a softmax's max and sum, a normalization's
    mean and variance), and each copy, a fusion group of its own (meta STATISTIC_TAIL), makes one
    value from the statistics and what the group read. A plan can then keep a statistic and make
    the value again from it, or keep one of the values the group made and not the others.

    `groups`: the forward fusion groups (fx call names) as JointGraph fuses the graph. A value's
    copy runs the group's pointwise calls and views it needs, back to the statistics, the
    group's inputs, the values of the group read outside it that no statistic went into and the
    copies of earlier values; it is placed after what it reads, and the readers outside the
    group read it instead. A value only the backward reads (and no copied value is made from)
    is copied only where its copy reads statistics, graph inputs, the graph's outputs (a forward
    output such as a model's logits lives to the end) and values the backward reads anyway: the
    copy is a backward call, and would otherwise hold what it reads into the backward where a
    plan might not. Returns the number of values copied. `forward_names`: the names of the
    forward's calls (_compat.forward_node_names; None: found here)."""
    graph = joint_module.graph
    by_name = {n.name: n for n in graph.nodes}
    outputs = {o for o in _compat.tree_flatten(
        next(n for n in graph.nodes if n.op == "output").args)[0] if isinstance(o, fx.Node)}
    forward = _forward_names(joint_module, num_fwd_outputs, forward_names)
    copied = 0
    for names in groups:
        members = [by_name[name] for name in names if name in by_name]
        statistics = {v for m in members for i in m.all_input_nodes + [m]
                      if _is_statistic(_call_of(i)) for v in _made(_call_of(i))}
        if not statistics:
            continue
        copied += _split_group(graph, set(members), statistics, outputs, forward)
    if copied:
        graph.eliminate_dead_code()
        graph.lint()
        joint_module.recompile()
    return copied


STATISTIC_TAIL = "remat_statistic_tail"


def _split_group(graph, members, statistics, outputs, forward):
    """Copies, for split_statistic_tails, the values of one group (`members`) made from its
    `statistics` and read outside it; returns how many."""
    made_in = {v: m for m in members for v in _made(m)}
    output_storages = {_storage_of(o) for o in outputs}  # live to the end in any plan
    from_statistics = set()  # values of the group a statistic went into
    for n in sorted(made_in):  # in graph order (fx nodes compare by their place)
        if n not in statistics and any(i in statistics or i in from_statistics
                                       for i in _call_of(n).all_input_nodes):
            from_statistics.add(n)
    # The values a forward call outside the group reads, and what they are made of: their
    # copies are forward values (a plan may keep them or make them again).
    feeds_forward, stack = set(), [v for v in from_statistics
                                   if any(_call_of(u) not in members and u.name in forward
                                          for u in v.users)]
    while stack:
        n = stack.pop()
        if n in made_in and n not in feeds_forward:
            feeds_forward.add(n)
            stack.extend(_call_of(n).all_input_nodes)
    copies = {}  # a value of the group -> its copy
    for v in sorted(from_statistics):
        readers = [u for u in v.users if _call_of(u) not in members]
        if not readers or v in outputs:
            continue
        chain = _statistic_chain(v, members, made_in, statistics, from_statistics, copies)
        if chain is None:
            continue
        read = {copies.get(i, i) for n in chain for i in n.all_input_nodes if i not in chain}
        if v not in feeds_forward and not all(
                i in statistics or _storage_of(i).op in ("placeholder", "get_attr")
                or _storage_of(i) in output_storages
                or any(u.name not in forward for u in i.users) for i in read):
            continue  # a backward copy would hold a value into the backward: a plan might not
        made = {}
        # After what the copies read (all before v, so before its readers).
        last = max(read) if read else chain[0].prev
        for n in chain:
            with graph.inserting_after(last):
                made[n] = last = graph.node_copy(n, lambda a: made.get(a, copies.get(a, a)))
            last.meta[STATISTIC_TAIL] = v.name  # the copies of one value: one fusion group
            last.meta["remat_recomputes"] = n.meta.get("remat_recomputes", n.name)
        for u in readers:
            u.replace_input_with(v, made[v])
        copies[v] = made[v]
    return len(copies)


def _statistic_chain(v, members, made_in, statistics, from_statistics, copies):
    """The calls of the group (in graph order) making `v` from its statistics, its inputs, the
    values of it read outside it that no statistic went into and the values copied before
    (`copies`); None where one of them is not a pointwise call or a view (_copyable) or the
    chain is too long."""
    chain, stack = {v}, [v]
    while stack:
        n = stack.pop()
        if not _copyable(n) or _dropout_parts(n) is not None:
            return None
        for i in n.all_input_nodes:
            if i in chain or i not in made_in or i in statistics or i in copies:
                continue
            if i not in from_statistics and any(_call_of(u) not in members for u in i.users):
                continue  # stored anyway: the group's output
            chain.add(i)
            stack.append(i)
            if len(chain) > MAX_COPIED_CHAIN:
                return None
    return sorted(chain)


def _is_statistic(n):
    """Whether fx call `n` is a fusible reduction whose results are small beside what it reads
    (at most 1/STATISTIC_RATIO of its largest input's elements): a statistic of it."""
    if not _fusible_reduction(n):
        return False
    read = max((_elements(i) for i in n.all_input_nodes), default=0)
    return read > 0 and all(_elements(v) * STATISTIC_RATIO <= read for v in _made(n))


STATISTIC_RATIO = 4


def _fusible_reduction(n):
    if n.op != "call_function" or n.target is operator.getitem \
            or not _compat.is_operator(n.target):
        return False
    packet = _compat.packet_name(n.target)
    kind = op_kinds.kind_of(packet, effects.is_view(n))
    return kind == "reduction" and op_kinds.is_fusible(packet, kind) \
        and not effects.declared_writes(n)


def _elements(n):
    meta = _compat.node_tensor_meta(n)
    return math.prod(meta[0]) if meta is not None else 0


def _made(n):
    """The values fx call `n` makes: its getitems, or itself."""
    return [u for u in n.users if u.target is operator.getitem] or [n]


def _call_of(n):
    return n.args[0] if n.op == "call_function" and n.target is operator.getitem else n


def fuse_pointwise_recomputation(joint_module, num_fwd_outputs=None, group_of=None,
                                 share_nearby=True, forward_names=None):
    """Gives the backward its own copy of each forward pointwise chain whose result it reads,
    in place, as Inductor recomputes such a chain in the backward kernel that reads it (or, for
    a matmul reading it, in the kernel just before): the result need not be saved, and the copy
    is part of the backward's chains (fusion_groups), whose inner values take no memory.

    A chain is the forward's pointwise calls and views (no random, in-place or multi-output
    call, at most MAX_COPIED_CHAIN calls) the result is made of, back to its leaves (what those
    calls read that is not in the chain; a value the backward reads anyway is a leaf). A
    training dropout's output is in a chain too, copied as x * mask * (1 / (1 - p)) from its
    input and mask, as the CPU kernel computes it (the same bits): the draw is never made
    again. A chain is copied only where every leaf is a graph input or lives into the backward
    anyway (the backward reads it or a view of it): the copy then lives within the time the
    saved result would, so no plan needs more memory. A copy carries the name of the call it
    copies (meta["remat_recomputes"]): partition_stats counts it as a recomputation when the
    forward runs that call. The readers of one backward fusion group (`group_of`: fx call name ->
    its group, as JointGraph fuses the graph) share their copies, as its kernel computes each
    value once; with `share_nearby`, calls no compiler fuses share them too (_copies_for).
    Returns the number of reads rewired. `forward_names`: as for split_statistic_tails (the
    copies are backward calls: the forward's calls are the same after)."""
    graph = joint_module.graph
    forward = _forward_names(joint_module, num_fwd_outputs, forward_names)
    fwd_outputs = set(_compat.joint_outputs(joint_module, num_fwd_outputs)[0])
    backward = [n for n in graph.nodes if n.op == "call_function" and n.name not in forward]
    chains = _backward_chains(backward, forward, fwd_outputs)
    rewired = 0
    shared = {}  # fusion group -> its copies
    position = {n: k for k, n in enumerate(backward)}
    recent = []  # (position of a reader, its copies)
    for reader in backward:
        copies = _copies_for(reader, group_of, shared, recent if share_nearby else None,
                             chains, position)
        for v in reader.all_input_nodes:
            chain = chains.get(v)
            if chain is None:
                continue
            with graph.inserting_before(reader):
                for n in chain:
                    if n not in copies:
                        copies[n] = _copy_into(graph, n, copies)
            reader.replace_input_with(v, copies[v])
            rewired += 1
    if rewired:
        graph.lint()
        joint_module.recompile()
    return rewired


MAX_COPIED_CHAIN = 32
NEARBY_CALLS = 16


def _copies_for(reader, group_of, shared, recent, chains, position):
    """The copies (forward node -> its copy) backward call `reader` reads, for
    fuse_pointwise_recomputation: each kernel its own, as Inductor inlines a pointwise chain into
    each kernel reading it (without `group_of`, each reader its own). The readers of one fusion
    group share theirs. With `recent` (None: not), a call no compiler fuses with them (a matmul,
    or a view for one) shares those of a reader of the same chain at most NEARBY_CALLS calls
    before it (the matmul's is stored anyway), as does a group whose first reader it is."""
    if group_of is None:
        return {}
    group = _kernel_of(reader, group_of)
    if group in shared:
        return shared[group]
    needed = {n for v in reader.all_input_nodes if v in chains for n in chains[v]}
    if not needed:
        return {}  # it reads no copy
    if recent is None or (group is None and _fusible_call(reader)
                          and not effects.is_view(reader)):
        return {} if group is None else shared.setdefault(group, {})
    here = position[reader]
    copies = next((c for at, c in reversed(recent) if here - at <= NEARBY_CALLS
                   and needed.intersection(c)), {})
    recent.append((here, copies))
    if group is not None:
        shared[group] = copies
    return copies


def _kernel_of(reader, group_of):
    """The fusion group (group_of) whose kernel computes fx call `reader`: its own, or for a view
    in none, that of its earliest reader in one, through views (a view is made where it is
    read); None where there is none."""
    while reader.name not in group_of:
        if not effects.is_view(reader):
            return None
        grouped = [u for u in reader.users if u.name in group_of] or [
            u for u in reader.users if u.op == "call_function" and effects.is_view(u)]
        if not grouped:
            return None
        reader = min(grouped)
    return group_of[reader.name]


def sink_backward_views(joint_module, num_fwd_outputs=None, forward_names=None):
    """Moves, in place, each backward view of a forward value to just before its first reader
    (AOTAutograd puts the aliases of saved values at the start of the backward): a view costs
    nothing, so where it is made changes no peak, but one made at the start pins the forward's
    copy of what it views, where a plan that makes that value again later could read the view
    of the new copy. Returns the number of views moved. `forward_names`: as for
    split_statistic_tails (only backward calls move: the forward's calls are the same after)."""
    graph = joint_module.graph
    forward = _forward_names(joint_module, num_fwd_outputs, forward_names)
    moved = 0
    for n in reversed(list(graph.nodes)):  # a view of a view moves after its readers did
        if n.op != "call_function" or n.name in forward or not effects.is_view(n) \
                or not n.users or not any(i.name in forward for i in n.all_input_nodes):
            continue
        first = n.next
        while first not in n.users:
            first = first.next
        if first is not n.next:
            first.prepend(n)
            moved += 1
    if moved:
        graph.lint()
        joint_module.recompile()
    return moved


def _forward_names(joint_module, num_fwd_outputs, forward_names):
    if forward_names is not None:
        return forward_names
    return _compat.forward_node_names(joint_module, num_fwd_outputs)


def _backward_chains(backward, forward, fwd_outputs):
    """{forward fx node the `backward` calls read: its pointwise chain (_pointwise_chain)} of
    those fuse_pointwise_recomputation copies. A chain stops at the values the backward still
    reads once the copies are made (a value read both directly and inside another's chain is
    copied for both, so neither reads the forward's). In graph order, a value whose chain cannot
    be copied stays read: its leaves then live into the backward, and the later values made from
    it may stop there (an earlier value's chain never holds a later one)."""
    read = {i for n in backward for i in n.all_input_nodes}
    candidates = sorted(i for i in read if i.name in forward and i not in fwd_outputs
                        and _copyable(i))
    still_read = read - set(candidates)
    kept = _with_storages(still_read)  # they live into the backward
    chains = {}
    for v in candidates:
        chain = _pointwise_chain(v, forward, still_read, kept)
        if chain is None:
            still_read.add(v)
            kept |= _with_storages([v])
        else:
            chains[v] = chain
    return chains


def _storage_of(n):
    """The fx node whose storage fx node `n` views (itself where it is no view)."""
    while n.op == "call_function" and effects.is_view(n) and n.all_input_nodes:
        n = n.all_input_nodes[0]
    return n


def _with_storages(nodes):
    """`nodes` and, for each view among them, the storage it views (transitively)."""
    found = set()
    for i in nodes:
        while i not in found:
            found.add(i)
            if i.op == "call_function" and effects.is_view(i) and i.all_input_nodes:
                i = i.all_input_nodes[0]
    return found


def _fusible_call(n):
    """Whether fx call `n` is one a compiler fuses with its pointwise neighbours and that may run
    again (not random, writes nothing; one output)."""
    if n.op != "call_function" or n.target is operator.getitem or not _compat.is_operator(n.target):
        return False
    packet = _compat.packet_name(n.target)
    return (op_kinds.is_fusible(packet, op_kinds.kind_of(packet, effects.is_view(n)))
            and not op_kinds.is_random(packet) and not effects.declared_writes(n)
            and not any(u.target is operator.getitem for u in n.users))


def _copyable(n):
    """Whether forward fx node `n` may be copied into the backward: a pointwise call or a view
    (_fusible_call, no reduction), or a training dropout's output."""
    if _dropout_parts(n) is not None:
        return True
    return _fusible_call(n) and op_kinds.kind_of(
        _compat.packet_name(n.target), effects.is_view(n)) in ("pointwise", "view")


def _dropout_parts(n):
    """(input, mask, scale) of fx node `n` when it is the output of native_dropout in training
    with a float p, else None."""
    if n.op != "call_function" or n.target is not operator.getitem or n.args[1] != 0:
        return None
    dropout = n.args[0]
    if dropout.target is not torch.ops.aten.native_dropout.default or len(dropout.args) < 3 \
            or dropout.args[2] is not True or not isinstance(dropout.args[1], float):
        return None
    masks = [u for u in dropout.users if u.target is operator.getitem and u.args[1] == 1]
    if not masks:
        return None
    kept = 1.0 - dropout.args[1]
    return dropout.args[0], masks[0], 0.0 if kept == 0.0 else 1.0 / kept


def _chain_inputs(n):
    parts = _dropout_parts(n)
    return n.all_input_nodes if parts is None else parts[:2]


def _copy_into(graph, n, copies):
    """A copy of forward node `n` in `graph` (at its insertion point) reading the copies of what
    it reads; a dropout's output is made from its input and mask."""
    parts = _dropout_parts(n)
    if parts is None:
        made = graph.node_copy(n, lambda a: copies.get(a, a))
    else:
        x, mask, scale = parts
        masked = graph.call_function(torch.ops.aten.mul.Tensor,
                                     (copies.get(x, x), copies.get(mask, mask)))
        made = graph.call_function(torch.ops.aten.mul.Tensor, (masked, scale))
        for node in (masked, made):
            node.meta.update({k: v for k, v in n.meta.items() if k in ("val", "tensor_meta")})
        masked.meta["remat_part_of_copy"] = True  # simulate_partition: `made` is the dropout
        n = n.args[0]
    made.meta["remat_recomputes"] = n.meta.get("remat_recomputes", n.name)
    made.meta.pop(STATISTIC_TAIL, None)  # in the backward it fuses with its readers' chains
    return made


def _pointwise_chain(v, forward, read, kept):
    """The forward nodes (in graph order) of the pointwise chain making `v`, back to the values
    the backward reads anyway (`read`), or None when one of its leaves is a forward call's value
    that does not live into the backward (`kept`) or the chain is too long."""
    chain, stack = {v}, [v]
    while stack:
        for i in _chain_inputs(stack.pop()):
            if i in chain or i in read or i.op in ("placeholder", "get_attr"):
                continue
            if i.name in forward and _copyable(i):
                chain.add(i)
                stack.append(i)
                if len(chain) > MAX_COPIED_CHAIN:
                    return None
            elif i not in kept:
                return None
    return sorted(chain)


def _call_key(n):
    """A hashable key of an fx call (its target and arguments), or None when an argument is
    not hashable."""
    flat, spec = _compat.tree_flatten((n.args, n.kwargs))
    # A tensor constant is keyed by identity (comparing tensors with == gives a tensor).
    key = (n.target, tuple((type(a), id(a) if isinstance(a, torch.Tensor) else a) for a in flat),
           str(spec))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def partition_stats(fw, bw, num_fwd_outputs, seconds=0.0):
    """Saved values (forward outputs beyond the model's) and recomputed calls of any partition
    (remat's or PyTorch's): a backward call but a view is a recomputation when the forward graph
    has a call of its name (or, for remat's copies, of the name it is a copy of)."""
    saved = _saved_outputs(fw, num_fwd_outputs)
    saved_bytes = 0
    for n in saved:
        meta = _compat.node_tensor_meta(n)
        if meta is not None:
            saved_bytes += _bytes(*meta)
    forward_calls = {name for n in fw.graph.nodes if n.op == "call_function"
                     for name in (n.name, _original_call(n))}
    recomputed = [n for n in bw.graph.nodes
                  if n.op == "call_function" and n.target is not operator.getitem
                  and not effects.is_view(n) and _original_call(n) in forward_calls]
    stats = PartitionStats([n.name for n in saved], saved_bytes,
                           [_original_call(n) for n in recomputed], seconds)
    stats.recomputed_flops = sum(node_flops(n) for n in recomputed)
    stats.redrawn = sum(op_kinds.is_random(_compat.packet_name(n.target)) for n in recomputed)
    replaying = _compat.rng_replay_operators()[1]
    stats.replayed = sum(n.target is replaying for n in recomputed)
    return stats


@dataclasses.dataclass
class SimulatedPartition:
    """The simulator's figures of a partition (remat's or another partitioner's) run on the joint
    graph it partitioned: the activation memory its two graphs need in remat's memory model,
    beside the default schedule's activation memory (what a fraction budget is of)."""

    activation_bytes: int
    baseline_activation_bytes: int  # None when not asked for


def simulate_partition(joint_module, fw, bw, num_fwd_outputs, baseline=True,
                       layout_copies=False, buffer_reuse=False):
    """SimulatedPartition of the forward and backward modules `fw`, `bw` that a partition
    function made of `joint_module` (the joint graph it partitioned, after its own rewrites: a
    partitioner that merges common subexpressions in place leaves the merged graph there).

    One model for any partitioner's graphs, as a compiler runs them: each call of fw, then each
    of bw, is one step (of the joint call _original_call names), making values of its own; each
    graph's fusible chains are fused as the compile path fuses (fusion_groups, within each
    graph: a forward call recomputed in the backward fuses with the backward calls there), and a
    value passed only inside a chain takes no memory. Random calls may run again: one saving its
    generator state (run_and_save_rng_state, as remat's plans lower a random call they run
    again) holds the state, one replaying it (run_with_rng_state) reads the state, and one
    running plainly again (PyTorch's knapsack may; a new draw) reads none. The simulator gives
    the peak. Raises Unplannable for a graph remat does not model or a call of fw or bw that is
    not a joint call. Without `baseline`, the default schedule's figure is None (not computed:
    its fused graph is most of the time a simulation takes). With `layout_copies`, the graphs
    compile with Inductor's layout optimization: its channels-last copies of the convolutions'
    inputs are made before the forward's first call (JointGraph). With `buffer_reuse`, the graphs
    compile with Inductor, whose kernels write outputs in place of buffers they read last and
    whose wrapper keeps freed buffers for later allocations of their size (inductor_buffers):
    such values share a storage (without, a compiled step can peak far from the figure, above or
    below it: bench/inductor_peak_probe.py --torch-solver)."""
    calls, run = partition_run(joint_module, fw, bw, num_fwd_outputs, layout_copies,
                               buffer_reuse)
    graph = run.build(calls.graph.name)
    evaluation = _evaluate(graph, remat.default_schedule(graph))
    # The graph inputs are the same values with or without fusion (calls' input_bytes).
    base = None
    if baseline:
        fused = JointGraph(joint_module, num_fwd_outputs, backward_start=True, fuse=True,
                           layout_copies=layout_copies)
        base = remat.baseline(fused.graph)[0] - calls.input_bytes
    return SimulatedPartition(evaluation.peak_bytes - calls.input_bytes, base)


def partition_run(joint_module, fw, bw, num_fwd_outputs, layout_copies=False,
                  buffer_reuse=False):
    """(JointGraph of `joint_module`'s calls, unfused, the _RunGraph of the steps `fw` then `bw`
    run, not yet built): simulate_partition's model of a partition (see there). Raises
    Unplannable for a call of fw or bw that is not a joint call."""
    calls = JointGraph(joint_module, num_fwd_outputs, backward_start=False, fuse=False,
                       layout_copies=layout_copies)
    step_of = {members[0].name: step for step, members in enumerate(calls.node_fx) if members}
    run = _RunGraph(calls, buffer_reuse)
    saved = {n.name: n for n in _saved_outputs(fw, num_fwd_outputs)}
    for side, module in (("forward", fw), ("backward", bw)):
        if side == "forward" and calls.layout_copies is not None:
            run.add_uncalled(calls.layout_copies, side)
        if side == "backward":
            run.add_tangents()
        for n in module.graph.nodes:
            if n.op == "placeholder":
                run.name_input(n, saved.get(n.name))
            if n.op == "output":  # the forward's outputs after the model's are saved values
                returned = _compat.tree_flatten(n.args[0])[0]
                run.name_returned(returned[:num_fwd_outputs] if side == "forward" else returned)
            if n.op != "call_function" or n.target is operator.getitem \
                    or n.meta.get("remat_part_of_copy"):
                continue
            # A copy is known by its meta, never by its name: fx names a graph's new nodes
            # from what that graph holds, and its name may be another joint call's.
            name = _original_call(n)
            if name not in step_of:
                raise Unplannable(f"{name} of the partitioned graphs is not a call of the joint "
                                  f"graph")
            run.add(step_of[name], side, n)
    if calls.layout_gradients is not None:
        run.add_uncalled(calls.layout_gradients, "backward")
    return calls, run


class _RunGraph:
    """The steps a partition's two graphs run, as a remat graph whose nodes are the calls run,
    listed in the order their kernels run them, with values of its own (a value made again is a
    new value). A call reads the copy its graph's argument is (a saved value, though the backward
    made it again for other calls), or for an argument the run does not know, the latest copy."""

    def __init__(self, calls, buffer_reuse=False):
        self.calls = calls
        self.buffer_reuse = buffer_reuse
        self.shared = []
        self.values = []
        self.latest = {}  # joint value -> its latest copy here
        self.steps = []  # (fx call, node dict) per call run
        self.runs = {}
        self.copies = {}  # joint value -> how many copies of it were made
        self.joint_value = []  # run value -> the joint value it is a copy of
        self.run_value = {}  # fx node of the partitioned graphs -> the run value it is
        self.returned = set()  # run values the graphs return as the joint graph's outputs
        self.by_name = {n.name: n for n in calls.module.graph.nodes}
        produced = {v for node in calls.nodes for v in node["outputs"]}
        for v, value in enumerate(calls.values):
            if v not in produced and v not in calls.tangent_values:
                self.latest[v] = self._new_value(value, v)

    def _new_value(self, value, v):
        entry = dict(value)
        copies = self.copies[v] = self.copies.get(v, 0) + 1
        if copies > 1:
            entry["name"] = f"{value['name']}#{copies}"
        if "alias_of" in entry:
            entry["alias_of"] = self.latest[self.calls.value_root[v]]
        self.values.append(entry)
        self.joint_value.append(v)
        return len(self.values) - 1

    def name_input(self, placeholder, saved):
        """Records the run value a graph input is: the forward's copy of a saved value
        (`saved`: the forward's node returning it), or a graph input of the joint graph."""
        if saved is not None and saved in self.run_value:
            self.run_value[placeholder] = self.run_value[saved]
            return
        joint = self.by_name.get(placeholder.name)
        v = self.calls.value_of.get(joint)
        if v is not None and v in self.latest:
            self.run_value[placeholder] = self.latest[v]

    def name_returned(self, nodes):
        """Records the run values that fx nodes `nodes`, returned as outputs of the joint graph
        (the model's outputs, the gradients), are."""
        self.returned.update(self.run_value[n] for n in nodes if n in self.run_value)

    def add(self, step, side, call):
        """Runs joint step `step` as fx call `call` of a partitioned graph (reading the copies
        its arguments are) on `side` ("forward" or "backward"). A random call saving its
        generator state (_Lowering._copy_replayed) runs the state's node first; one that does
        not draw from a saved state reads none."""
        node = self.calls.nodes[step]
        run_and_save, run_with = _compat.rng_replay_operators()
        state_step = self.calls.replay_state.get(step)
        node_inputs = node["inputs"]
        if state_step is not None:
            state = self.calls.nodes[state_step]["outputs"][0]
            if call.target is run_and_save:
                self._run_state(state_step, side, call)
            elif call.target is not run_with:
                node_inputs = [v for v in node_inputs if v != state]
            made = _replayed_parts(call)[2] if call.target is run_and_save else call
        else:
            made = call
        read = {}
        for arg in call.all_input_nodes:
            if arg in self.run_value:
                copy = self.run_value[arg]
                read[self.joint_value[copy]] = copy
        missing = [self.calls.values[v]["name"] for v in node_inputs
                   if v not in read and v not in self.latest]
        if missing:
            raise Unplannable(f"{node['name']} reads {missing[0]} before it is made")
        self.runs[step] = self.runs.get(step, 0) + 1
        inputs = [read.get(v, self.latest.get(v)) for v in node_inputs]
        outputs = []
        for v in node["outputs"]:
            self.latest[v] = self._new_value(self.calls.values[v], v)
            outputs.append(self.latest[v])
        if made is not None:
            self._name_outputs(made, step, outputs)
        name = node["name"] if self.runs[step] == 1 else f"{node['name']}#{self.runs[step]}"
        self.steps.append((self.calls.node_fx[step][0], dict(
            node, name=name, phase=side, inputs=inputs, outputs=outputs, recomputable=True)))

    def add_uncalled(self, step, side):
        """Runs JointGraph node `step` that has no fx call (LAYOUT_COPIES before the forward's
        first call, LAYOUT_GRADIENTS after the backward's last) on `side`."""
        node = self.calls.nodes[step]
        outputs = []
        for v in node["outputs"]:
            self.latest[v] = self._new_value(self.calls.values[v], v)
            outputs.append(self.latest[v])
        self.steps.append((None, dict(node, phase=side,
                                      inputs=[self.latest[v] for v in node["inputs"]],
                                      outputs=outputs, recomputable=True)))

    def add_tangents(self):
        """Makes the incoming gradients (the joint graph's tangents) at the backward's start:
        they exist from the call of the backward graph, which frees each after its last read,
        not through the forward as the graph inputs do."""
        outputs = []
        for v in sorted(self.calls.tangent_values):
            self.latest[v] = self._new_value(self.calls.values[v], v)
            outputs.append(self.latest[v])
        if outputs:
            self.steps.append((None, {"name": TANGENTS, "op": TANGENTS, "kind": "other",
                                      "phase": "backward", "cost": 0.0, "temp": 0, "inputs": [],
                                      "outputs": outputs, "recomputable": False}))

    def _run_state(self, step, side, call):
        """Runs generator-state node `step` (JointGraph.replay_state) for call `call`, which saves
        the state its random call draws from as its item 0."""
        node = self.calls.nodes[step]
        inputs = [self.latest[v] for v in node["inputs"] if v in self.latest]
        (v,) = node["outputs"]
        state = self.latest[v] = self._new_value(self.calls.values[v], v)
        for user in call.users:
            if user.target is operator.getitem and user.args[1] == 0:
                self.run_value[user] = state
        self.steps.append((None, dict(node, phase=side, inputs=inputs, outputs=[state],
                                      recomputable=True)))

    def _name_outputs(self, call, step, outputs):
        """Records the run values partitioned call `call` (and its getitems) made as `outputs`,
        the copies of joint step `step`'s outputs."""
        items = self.calls.getitems.get(self.calls.node_fx[step][0]) or []
        if not items:
            if outputs:
                self.run_value[call] = outputs[0]
            return
        by_index = {item.args[1]: self.calls.value_of.get(item) for item in items}
        copies = dict(zip(self.calls.nodes[step]["outputs"], outputs))
        for user in call.users:
            if user.target is operator.getitem and by_index.get(user.args[1]) in copies:
                self.run_value[user] = copies[by_index[user.args[1]]]

    def build(self, name):
        """The remat graph, each graph's fused chains' inner values taking no memory. Of the
        copies of a joint output, only the one returned is an output (held to the end; the
        latest copy where none is known to be returned): a copy the plan made again is freed
        after its last read, as the graph running it frees it."""
        returned = {self.joint_value[r] for r in self.returned}
        for r, v in enumerate(self.joint_value):
            if self.values[r].get("output") and (
                    r not in self.returned if v in returned else r != self.latest.get(v)):
                del self.values[r]["output"]
        groups = fusion_groups(self.steps, self.calls._is_fusible)
        group_of = {i: g for g, members in enumerate(groups) for i in members}
        outside = _read_outside_their_group(self.steps, group_of)
        producer = {v: i for i, (_, node) in enumerate(self.steps) for v in node["outputs"]}
        # A view read outside its group, or returned (a gradient the backward returns as a view
        # of its chain's result), keeps its root stored.
        for v, value in enumerate(self.values):
            if "alias_of" in value and (v in outside or value.get("output")):
                outside.add(value["alias_of"])
        inner = set()
        sizes = [value["size"] for value in self.values]
        for v, i in producer.items():
            if v not in outside and not self.values[v].get("output") \
                    and len(groups[group_of[i]]) > 1:
                self.values[v]["size"] = 0
                inner.add(v)
        # A view of a stored value is no computation a kernel could not read across a gap.
        order = _kernel_order(self.steps, groups, {
            v for v in inner if self.values[v].get("alias_of") is None
            or self.values[v]["alias_of"] in inner}, sizes)
        group_of = self._list_in_order(order, group_of)
        producer = {v: i for i, (_, node) in enumerate(self.steps) for v in node["outputs"]}
        nodes = self._inlined(producer, inner)
        if self.buffer_reuse:
            self._share_storages(name, nodes, group_of)
        return remat.Graph.build(f"{name} as partitioned", self.values, nodes)

    def _list_in_order(self, order, group_of):
        """Lists the steps in `order`, the order the kernels run them in (_kernel_order), so that
        the graph's default schedule is that order and a value may share the storage of any value
        made before it there (inductor_buffers). Returns the fusion group of each step as listed
        now."""
        self.steps = [self.steps[i] for i in order]
        return {j: group_of[i] for j, i in enumerate(order)}

    def _share_storages(self, name, nodes, group_of):
        """Makes the values Inductor stores in another's storage aliases of it
        (inductor_buffers.shared_storages), from the simulator's timeline of the graph without
        any such sharing (Inductor's own estimate of the graph's memory); `self.shared` lists
        them."""
        graph = remat.Graph.build(f"{name} as partitioned", self.values, nodes)
        estimate = remat.simulate(graph, remat.default_schedule(graph), timeline=True)
        layouts = [self._layout(r) for r in range(len(self.values))]
        self.shared = inductor_buffers.shared_storages(
            self.values, [node for _, node in self.steps], nodes, group_of, layouts,
            list(estimate.timeline))

    def _layout(self, r):
        """inductor_buffers.Layout of run value r (None where its tensor is not known)."""
        v = self.joint_value[r]
        n = self.calls.value_node[v]
        value = n.meta.get("val") if n is not None else None
        if not isinstance(value, torch.Tensor):
            return None
        alias = self.values[r].get("alias_of")
        root = self.joint_value[r if alias is None else alias]
        try:
            flat = value.is_contiguous() and value.storage_offset() == 0 \
                and value.numel() * value.element_size() == self.calls.values[root]["size"]
        except (RuntimeError, TypeError):  # a symbolic shape
            return None
        return inductor_buffers.Layout(value.dtype, bool(flat))

    def _inlined(self, producer, inner):
        """The steps, each reading also what the inner values it reads are made from (those of
        its fusion group, transitively): an inner value is computed in the kernel that reads it,
        so what it is made from lives until that kernel runs, however far from its maker."""
        nodes = []
        for _, node in self.steps:
            inputs, stack = list(node["inputs"]), [v for v in node["inputs"] if v in inner]
            seen = set(inputs)
            while stack:
                for u in self.steps[producer[stack.pop()]][1]["inputs"]:
                    if u not in seen:
                        seen.add(u)
                        inputs.append(u)
                        if u in inner:
                            stack.append(u)
            nodes.append(dict(node, inputs=inputs))
        return nodes


def _kernel_order(steps, groups, inner, sizes):
    """The order the kernels run `steps` in (_RunGraph.build lists them so), `groups` their
    fusion groups, `inner` the values that take no memory (read in their group only). Where the
    graph puts a call of another group between a call of a group making an inner value and one
    reading it (a matmul reading a recomputed GELU's output before the GELU's backward reads the
    chain's tanh), the group is one kernel, its calls run together: the value is then made once
    and stored nowhere, as in the kernel Inductor makes of the two (it fuses them; its outputs
    are live at once), where run in place the later call would read a value no kernel keeps, or
    make it again for FLOPs no figure counts. Not for calls more than FUSED_SPAN steps apart,
    which Inductor does not fuse (its scheduler's are_long_distant_nodes), nor for a value
    smaller than the largest the group makes (`sizes`: of each value, as made): a statistic,
    made again in each kernel reading it for few FLOPs; other calls keep their places."""
    producer = {v: i for i, (_, node) in enumerate(steps) for v in node["outputs"]}
    members = {i: [i] for i in range(len(steps))}
    for calls in groups:
        if calls[-1] - calls[0] > FUSED_SPAN or calls[-1] - calls[0] + 1 == len(calls):
            continue
        rank = {i: r for r, i in enumerate(calls)}  # a gap between k and j: j - k > rank gap
        largest = max(sizes[u] for i in calls for u in steps[i][1]["outputs"])
        if any(v in inner and j - producer[v] > rank[j] - rank[producer[v]]
               and sizes[v] >= largest
               for j in calls for v in steps[j][1]["inputs"] if v in producer
               and producer[v] in rank):
            for i in calls:
                del members[i]
            members[calls[0]] = list(calls)
    group = {i: g for g, calls in members.items() for i in calls}
    return [i for calls in _groups_in_order(steps, producer, group, members) for i in calls]


FUSED_SPAN = 64
# The op of simulate_partition's step making the incoming gradients at the backward's start.
TANGENTS = "remat_tangents"


def _evaluate(graph, sequence):
    evaluation = remat.simulate(graph, sequence)
    if not evaluation.valid:
        raise Unplannable(f"the partitioned graphs do not follow a valid schedule "
                          f"({evaluation.error})")
    return evaluation


def _saved_outputs(fw, num_fwd_outputs):
    """The fx nodes forward module `fw` returns beyond the model's `num_fwd_outputs`."""
    fw_output = next(n for n in fw.graph.nodes if n.op == "output")
    outputs = _compat.tree_flatten(fw_output.args)[0]
    return [n for n in outputs[num_fwd_outputs:] if isinstance(n, fx.Node)]


def _original_call(n):
    """The name of the joint call a partitioned graph's call `n` runs (again)."""
    return n.meta.get("remat_recomputes") or n.meta.get("remat_copy_of", n.name)


def node_flops(n):
    """cost.py's FLOPs of an fx call from its nodes' tensor metadata (1 for a call whose
    arguments the FLOP model does not know)."""
    target, call_args, made = _replayed_parts(n) or (n.target, n.args, n)
    packet = _compat.packet_name(target)
    kind = op_kinds.kind_of(packet, effects.is_view(n))
    getitems = [] if made is None else sorted(
        (u for u in made.users if u.target is operator.getitem), key=lambda u: u.args[1])

    def meta_tensor(node):
        meta = None if node is None else _compat.node_tensor_meta(node)
        return None if meta is None else _meta_tensor(*meta)

    args = tuple(meta_tensor(a) if isinstance(a, fx.Node) else a for a in call_args)
    result = (tuple(meta_tensor(g) for g in getitems) if getitems else meta_tensor(made))
    try:
        return cost_models.flop_cost(cost_models.OpCall(str(target), packet, kind, args,
                                                        result))
    except (TypeError, IndexError, AttributeError):
        return 1.0


def _replayed_parts(n):
    """(random operator, its arguments, the fx node of its result or None) of fx call `n` when it
    runs the operator saving or replaying a generator state (_Lowering._copy_replayed); else
    None."""
    run_and_save, run_with = _compat.rng_replay_operators()
    if n.target is run_and_save:
        results = [u for u in n.users if u.target is operator.getitem and u.args[1] == 1]
        return n.args[0], n.args[1:], results[0] if results else None
    if n.target is run_with:
        return n.args[1], n.args[2:], n
    return None


@functools.lru_cache(maxsize=4096)
def _meta_tensor(shape, dtype):
    """A meta tensor of `shape` and `dtype`, shared by every call asking for it (the FLOP model
    reads shapes only; making one per argument was most of a joint graph's build time)."""
    return torch.empty(shape, dtype=dtype, device="meta")


def _bytes(shape, dtype):
    return math.prod(shape) * _element_size(dtype)


@functools.lru_cache(maxsize=None)
def _element_size(dtype):
    return torch.empty((), dtype=dtype).element_size()


class JointGraph:
    """An AOTAutograd joint graph as a remat graph, with the tables back to fx nodes.

    With `backward_start`, one more node, `remat_backward_start`, reads the forward outputs and
    makes a size-0 value every backward node reads: a plan then runs the whole forward before any
    backward node, as a compiled step does. The incoming gradients (tangents) stay graph inputs,
    as the `mincut` solver expects of a joint graph. Random calls read each other in the graph's
    order (size-0 values), so every plan draws in that order; one that writes nothing draws from
    a generator state a node of its own makes just before (RNG_STATE, no fx call; its bytes:
    _compat.rng_state_bytes), and may run again from it (replay_state): the lowering saves the
    state at the first run and replays it (the same draw), so a plan recomputes a random call
    only where keeping the state costs less than keeping its output. `input_bytes`: the bytes of
    the graph inputs but the tangents (parameters, buffers, batch).

    With `fuse`, each chain of calls a compiler fuses into one kernel (pointwise ops, views and
    simple reductions of one phase, op_kinds.is_fusible; fusion_groups) is one remat node: the
    values passed only inside it are never stored (size 0 in the graph), its cost is the sum of
    its calls', and a plan runs or recomputes the chain as a whole. `forward_names`: the names of
    the forward's calls (_compat.forward_node_names; None: found here).

    With `layout_copies` (the compile backend's layout_optimization), the channels-last copies
    Inductor's layout optimization makes of the graph inputs its convolutions read
    (_compat.channels_last_copied_inputs) are the outputs of one node (LAYOUT_COPIES, no fx call,
    run once) that the forward runs first, as Inductor does: the convolutions read the copies,
    and so does every backward node reading such an input (the forward saves the copy in its
    place), so a copy lives from the forward's start to its last read. A copied weight's gradient
    comes out of the backward channels-last too, and autograd stores it in the parameter's
    layout, one gradient at a time after the backward (the gradient and its copy both live): one
    more node (LAYOUT_GRADIENTS) reads every gradient, so it runs last, with the largest such
    gradient as its temp. `layout_copies` and `layout_gradients`: those nodes' ids (None:
    none)."""

    def __init__(self, joint_module, num_fwd_outputs=None, backward_start=False, fuse=False,
                 forward_names=None, layout_copies=False):
        self.module = joint_module
        self.fwd_outputs, self.bwd_outputs = _compat.joint_outputs(joint_module, num_fwd_outputs)
        self.forward_names = _forward_names(joint_module, len(self.fwd_outputs), forward_names)
        self.values, self.value_node, self.value_of, self.value_root = [], [], {}, []
        self.tangent_values = set()
        self.written_roots = set()  # storages in-place calls write: their producers run once
        self.producer_dict = {}  # value -> node dict producing it
        self.node_fx = []  # remat node id -> its fx calls, in order (none: the backward start)
        self.getitems = {}  # fx call -> its getitem nodes
        self._rng_states = {}  # random fx call -> rng_state_value's
        self._flops = {}  # fx call name -> node_flops
        self.backward_start = None
        self.layout_copies = self.layout_gradients = None
        self.channels_last = layout_copies  # the convolutions' workspaces are channels-last's
        self._backward_token = None
        forward, backward = [], []
        for n in joint_module.graph.nodes:
            _check_plannable(n)
            if n.op == "placeholder":
                v = self._add_value(n, n, None)
                if _compat.is_tangent(n):
                    self.tangent_values.add(v)
            elif n.op == "call_function" and n.target is not operator.getitem:
                node = self._node_dict(n)
                (forward if node["phase"] == "forward" else backward).append((n, node))
        for root in self.written_roots:
            if root in self.producer_dict:
                self.producer_dict[root]["recomputable"] = False
        copied = _compat.channels_last_copied_inputs(joint_module.graph) if layout_copies else {}
        if copied:
            forward.insert(0, (None, self._layout_copies(copied, forward + backward)))
            gradients = self._layout_gradients(copied)
            if gradients is not None:
                backward.append((None, gradients))
        for o in self.fwd_outputs + self.bwd_outputs:
            if isinstance(o, fx.Node) and o in self.value_of:
                self.values[self.value_of[o]]["output"] = True
        if backward_start:
            self._pin_forward_outputs()
        calls = forward + ([(None, self._backward_start(backward))] if backward_start else [])
        calls += backward
        calls = self._chain_random_calls(calls)
        steps = (self._fuse(calls) if fuse
                 else [((n,) if n is not None else (), node) for n, node in calls])
        self.nodes = nodes = []  # the node dicts, by remat node id
        self.producer_step = {}  # value -> remat node id making it (inside a fused one too)
        step_of_node = {id(node): i for i, (_, node) in enumerate(steps)}
        # Random call (remat node id) -> the node making the generator state it draws from.
        self.replay_state = {step_of_node[id(r)]: step_of_node[id(s)] for s, r in self._drawn_from}
        for members, node in steps:
            if node["op"] == BACKWARD_START:
                self.backward_start = len(nodes)
            if node["op"] == LAYOUT_COPIES:
                self.layout_copies = len(nodes)
            if node["op"] == LAYOUT_GRADIENTS:
                self.layout_gradients = len(nodes)
            for v in node["outputs"] + [v for n in members for v in self.call_outputs(n)]:
                self.producer_step[v] = len(nodes)
            self.node_fx.append(members)
            nodes.append(node)
        produced = {v for node in nodes for v in node["outputs"]}
        self.input_bytes = sum(self.values[v]["size"] for v in range(len(self.values))
                               if v not in produced and v not in self.tangent_values
                               and "alias_of" not in self.values[v])
        self.graph = remat.Graph.build(f"{type(joint_module).__name__} joint graph",
                                       self.values, nodes)

    def rng_state_value(self, call):
        """A fake tensor like the generator state random fx call `call` saves for its replays:
        one per call, kept for every plan lowered (making one is a fake tensor conversion)."""
        if call not in self._rng_states:
            self._rng_states[call] = _compat.rng_state_value(
                _first_tensor(call.meta.get("val")), replay_device(call))
        return self._rng_states[call]

    def call_flops(self, n):
        """node_flops of fx call `n` of a graph lowered from this one (_Lowering): a copy of a
        joint call (its name, or meta["remat_copy_of"]) with the same target reads and makes
        tensors of the joint call's shapes, so it has the FLOPs found when this graph was built,
        and a lowering costs no FLOP model calls; any other call (a random call replaying its
        draw) is costed anew."""
        target, flops = self._flops.get(n.meta.get("remat_copy_of", n.name), (None, None))
        return flops if target is n.target else node_flops(n)

    def _call_cost(self, n):
        flops = node_flops(n)
        self._flops[n.name] = (n.target, flops)
        return flops

    def _is_view(self, v):
        """Whether value v is made by a view call (not an in-place write, whose result must be
        saved as it is: the backward cannot write again)."""
        n = self.value_node[v]
        if n is None or n.op != "call_function":
            return False
        if n.target is operator.getitem:
            n = n.args[0]
        return effects.is_view(n)

    def call_outputs(self, n):
        """The values fx call `n` makes (its getitems' or its own)."""
        made = self.getitems.get(n) or [n]
        return [self.value_of[m] for m in made if m in self.value_of]

    def _fuse(self, calls):
        """[(fx calls, node dict)] of `calls` [(fx call or None, node dict)] with each fusion group
        (fusion_groups) one node: it reads what its calls read from outside it and makes what is
        read outside it (or is a graph output, or the storage of such a view); the values only
        its calls read become size-0 values that no node makes."""
        # A call reading a random draw is a step of its own (its result, a dropout's mask, is
        # what the backward reads): fused with the calls around it, the draw itself would have
        # to be kept to run them again.
        drawn = {v for _, node in calls if node["kind"] == "random" for v in node["outputs"]}
        groups = fusion_groups(calls, lambda n, node: self._is_fusible(n, node)
                               and not drawn.intersection(node["inputs"]), _may_join)
        outside = _read_outside_their_group(
            calls, {i: g for g, members in enumerate(groups) for i in members})
        steps = []
        for members in groups:
            if len(members) == 1:
                n, node = calls[members[0]]
                steps.append(((n,) if n is not None else (), node))
                continue
            made = [v for i in members for v in calls[i][1]["outputs"]]
            inputs = list(dict.fromkeys(v for i in members for v in calls[i][1]["inputs"]
                                        if v not in made))
            outputs = [v for v in made if self.values[v].get("output") or v in outside]
            outputs += [r for r in dict.fromkeys(self.value_root[v] for v in outputs)
                        if r in made and r not in outputs]
            for v in made:
                if v not in outputs:
                    self.values[v]["size"] = 0
                    self.values[v].pop("alias_of", None)
            first = calls[members[0]][1]
            kinds = {calls[i][1]["kind"] for i in members}
            steps.append((tuple(calls[i][0] for i in members), {
                "name": f"{first['name']}+{len(members) - 1}", "op": "fused",
                "kind": "reduction" if "reduction" in kinds else "pointwise",
                "phase": first["phase"], "cost": sum(calls[i][1]["cost"] for i in members),
                "inputs": inputs, "outputs": outputs, "recomputable": True}))
        return steps

    def _is_fusible(self, n, node):
        return n is not None and node["recomputable"] and op_kinds.is_fusible(
            _compat.packet_name(n.target), node["kind"])

    def _backward_start(self, backward):
        """The node making the incoming gradients after the forward outputs; every backward node
        reads its size-0 token."""
        token = self._backward_token = self._new_value(BACKWARD_START, 0)
        for _, node in backward:
            node["inputs"].append(token)
        forward_outputs = []
        for o in self.fwd_outputs:
            if isinstance(o, fx.Node) and o in self.value_of:
                v = self.value_of[o]
                if v not in forward_outputs:
                    forward_outputs.append(v)
        return {"name": BACKWARD_START, "op": BACKWARD_START, "kind": "other",
                "phase": "backward", "cost": 0.0, "inputs": forward_outputs,
                "outputs": [token], "recomputable": False}

    def _layout_copies(self, copied, calls):
        """The LAYOUT_COPIES node dict of the graph whose [(fx call, node dict)] are `calls`
        (`copied`: _compat.channels_last_copied_inputs), with the readers of each copied input
        reading its copy too."""
        node = {"name": LAYOUT_COPIES, "op": LAYOUT_COPIES, "kind": "other", "phase": "forward",
                "cost": 0.0, "inputs": [], "outputs": [], "recomputable": False}
        copy_of = {}
        for placeholder in copied:
            v = self.value_of[placeholder]
            copy_of[v] = self._new_value(f"channels_last.{placeholder.name}",
                                         self.values[v]["size"])
            node["inputs"].append(v)
            node["outputs"].append(copy_of[v])
            self.producer_dict[copy_of[v]] = node
        convolutions = {c for readers in copied.values() for c in readers}
        for n, reader in calls:
            if reader["phase"] == "backward" or n in convolutions:
                reader["inputs"] += [copy_of[v] for v in reader["inputs"] if v in copy_of]
        return node

    def _layout_gradients(self, copied):
        """The LAYOUT_GRADIENTS node dict (a size-0 output of its own, so every plan runs it), or
        None where no input in `copied` has a gradient (the batch has none)."""
        primals = [n for n in self.module.graph.nodes
                   if n.op == "placeholder" and not _compat.is_tangent(n)]
        gradient_of = dict(zip(primals, self.bwd_outputs))
        sizes = [_bytes(*_compat.node_tensor_meta(gradient_of[p])) for p in copied
                 if isinstance(gradient_of.get(p), fx.Node)
                 and _compat.node_tensor_meta(gradient_of[p]) is not None]
        if not sizes:
            return None
        done = self._new_value(LAYOUT_GRADIENTS, 0)
        self.values[done]["output"] = True
        gradients = [self.value_of[g] for g in self.bwd_outputs
                     if isinstance(g, fx.Node) and g in self.value_of]
        return {"name": LAYOUT_GRADIENTS, "op": LAYOUT_GRADIENTS, "kind": "other",
                "phase": "backward", "cost": 0.0, "temp": max(sizes),
                "inputs": list(dict.fromkeys(gradients)), "outputs": [done],
                "recomputable": False}

    def _pin_forward_outputs(self):
        """The forward returns its outputs, and the caller holds them to the end of the step: their
        producers (and their storages' producers) run once, so no plan frees one to make it again
        (the simulator only asks that an output exist at the end)."""
        for o in self.fwd_outputs:
            if isinstance(o, fx.Node) and o in self.value_of:
                v = self.value_of[o]
                for x in (v, self.value_root[v]):
                    if x in self.producer_dict:
                        self.producer_dict[x]["recomputable"] = False

    def _chain_random_calls(self, calls):
        """`calls` with a generator-state node before each random call that may run again.

        Every random call makes an effect value, read by the next one, the last one's included
        (read by nothing): the layers of a repeated block then have the same structure, so
        block detection sees the last layer as one of them. A random call that may run again
        (recomputable: replay_device) reads instead the generator state its own node
        (RNG_STATE: no fx call, run once) makes after the previous effect value: the first
        computation draws from that state, in order, and a recomputation replays it, so the
        state is kept until then (its bytes are what recomputing a random call costs)."""
        link = None
        chained = []
        self._drawn_from = []  # (state node, random node) dicts
        for n, node in calls:
            if node["kind"] != "random":
                chained.append((n, node))
                continue
            if node["recomputable"]:
                state = self._new_value(f"rng_state.{node['name']}",
                                        _compat.rng_state_bytes(replay_device(n)))
                made = {"name": f"rng_state.{node['name']}", "op": RNG_STATE, "kind": "other",
                        "phase": node["phase"], "cost": 0.0,
                        "inputs": [link] if link is not None else [], "outputs": [state],
                        "recomputable": False}
                if self._backward_token in node["inputs"]:
                    made["inputs"].append(self._backward_token)
                chained.append((None, made))
                self._drawn_from.append((made, node))
                node["inputs"].append(state)
            elif link is not None:
                node["inputs"].append(link)
            link = self._new_value(f"effect.{node['name']}", 0)
            node["outputs"].append(link)
            chained.append((n, node))
        return chained

    def _new_value(self, name, size):
        """A value of no fx node (its own root)."""
        v = len(self.values)
        self.values.append({"name": name, "size": size})
        self.value_node.append(None)
        self.value_root.append(v)
        return v

    def _add_value(self, node, fx_node, alias_root):
        meta = _compat.node_tensor_meta(node)
        index = len(self.values)
        if alias_root is not None:
            entry = {"name": node.name, "size": 0, "alias_of": alias_root}
            root = alias_root
        else:
            entry = {"name": node.name, "size": _bytes(*meta) if meta else 0}
            root = index
        self.values.append(entry)
        self.value_node.append(fx_node)
        self.value_root.append(root)
        if fx_node is not None:
            self.value_of[fx_node] = index
        return index

    def _node_dict(self, n):
        packet = _compat.packet_name(n.target)
        inputs = []
        for i in n.all_input_nodes:
            if i in self.value_of and self.value_of[i] not in inputs:
                inputs.append(self.value_of[i])
        written = [self.value_of[w] for w in effects.declared_writes(n) if w in self.value_of]
        is_view = effects.is_view(n)
        alias = None
        if written:
            alias = self.value_root[written[0]]
            self.written_roots.update(self.value_root[w] for w in written)
        elif is_view and inputs:
            alias = self.value_root[inputs[0]]
        getitems = sorted((u for u in n.users if u.target is operator.getitem),
                          key=lambda u: u.args[1])
        self.getitems[n] = getitems
        if getitems:
            outputs = [self._add_value(g, g, alias) for g in getitems]
        elif _compat.node_tensor_meta(n) is not None:
            outputs = [self._add_value(n, n, alias)]
        else:
            outputs = []
        kind = op_kinds.kind_of(packet, is_view)
        node = {
            "name": n.name, "op": str(n.target), "kind": kind,
            "phase": "forward" if n.name in self.forward_names else "backward",
            "cost": self._call_cost(n),
            "temp": kernel_workspace.workspace_bytes(n, self.channels_last),
            "inputs": inputs, "outputs": outputs,
            "recomputable": not written and (not op_kinds.is_random(packet)
                                             or replay_device(n) is not None),
        }
        for v in outputs:
            self.producer_dict[v] = node
        return node

    def saved_nodes(self, sequence):
        """fx nodes to save: the values whose forward copy (made before the backward start, or
        without it by the first run of a forward node; or a primal input) is read by a backward
        step (after the backward start; without it, a backward-phase node or a recomputation).
        A view whose root was made again since is not saved: lowering makes it again from the
        new root (in the simulator a view reads whichever copy of its root is live)."""
        runs = {}
        forward_copy = {}  # value -> whether its latest copy is a forward copy
        saved = []
        after_start = False
        for n in sequence:
            node = self.nodes[n]
            runs[n] = runs.get(n, 0) + 1
            if n == self.backward_start:
                after_start = True
            elif self.backward_start is not None:
                in_forward = not after_start
            else:
                in_forward = node["phase"] == "forward" and runs[n] == 1
            if n != self.backward_start and not in_forward:
                for v in node["inputs"]:
                    if v in self.tangent_values or not forward_copy.get(v, True):
                        continue
                    if not forward_copy.get(self.value_root[v], True):
                        continue  # a view of a root made again: the view is made again too
                    # The storage, not the view: the backward makes the view again (free). Two
                    # saved tensors sharing a storage would break Inductor's donated buffers
                    # (the backward may reuse a saved tensor's storage as its own once read).
                    fx_node = self.value_node[self.value_root[v] if self._is_view(v) else v]
                    if fx_node is not None and fx_node not in saved:
                        saved.append(fx_node)
            for v in node["outputs"]:
                forward_copy[v] = n != self.backward_start and in_forward
        return saved


def _read_outside_their_group(calls, group_of):
    """The values of `calls` [(fx call or None, node dict)] that a call of another fusion group
    (group_of: call index -> group) than the one making them reads: those a fused step makes."""
    producer = {v: i for i, (_, node) in enumerate(calls) for v in node["outputs"]}
    return {v for i, (_, node) in enumerate(calls) for v in node["inputs"]
            if v in producer and group_of[producer[v]] != group_of[i]}


def _may_join(reader, producer):
    """Whether fx call `reader` may join the fusion group of fx call `producer`: a copy of
    split_statistic_tails stays out of the group it was split from."""
    return producer is None or reader.meta.get(STATISTIC_TAIL) is None \
        or reader.meta.get(STATISTIC_TAIL) == producer.meta.get(STATISTIC_TAIL)


def fusion_groups(calls, is_fusible, may_join=None):
    """Groups of `calls` [(fx call or None, node dict)] a compiler can run as one kernel each, as
    lists of indices, in an order in which every group runs after the groups it reads from.

    A fusible call (is_fusible(fx call, node dict)) joins the group of each fusible call of its
    phase whose result it reads, as Inductor fuses a consumer with its producers, unless that
    would make a group that reads (through other groups) what it makes itself: then the two
    could not run as one step. A view of a value made outside any group starts none (a backward
    that reads the view gets its storage saved and makes the view again, as a step of its own).
    With `may_join(fx call, producer fx call)`, a call joins only the groups it may."""
    producer = {v: i for i, (_, node) in enumerate(calls) for v in node["outputs"]}
    group = list(range(len(calls)))  # call -> its group's id (the id of one of its calls)
    members = {i: [i] for i in range(len(calls))}
    sources = {i: {producer[v] for v in node["inputs"] if v in producer} - {i}
               for i, (_, node) in enumerate(calls)}  # group -> the groups it reads from
    readers = {i: set() for i in range(len(calls))}
    for i, read in sources.items():
        for h in read:
            readers[h].add(i)

    # A topological order of the groups (each after those it reads from), kept as groups merge:
    # a group reads from another only at a lower position, so the search of what a group reads
    # stops below the position of the group it looks for, and a merge reorders only the groups
    # between the two merged (Pearce and Kelly's dynamic topological order).
    position = _topological_positions(sources, readers)

    def reaches(starts, target):
        """Whether group `target` is among `starts` or what they read from, transitively."""
        if target in starts:
            return True
        floor = position[target]
        stack = [s for s in starts if position[s] > floor]
        seen = set(stack)
        while stack:
            for h in sources[stack.pop()]:
                if h == target:
                    return True
                if h not in seen and position[h] > floor:
                    seen.add(h)
                    stack.append(h)
        return False

    def between(start, edges, low, high):
        """The groups strictly between positions `low` and `high` that `start` reaches through
        `edges` (sources or readers), in order of position."""
        found, stack = set(), [start]
        while stack:
            for h in edges[stack.pop()]:
                if h not in found and low < position[h] < high:
                    found.add(h)
                    stack.append(h)
        return sorted(found, key=position.get)

    def reorder(mine, theirs):
        """Positions for `mine` merged into `theirs` (which it reads from, and through no other
        group): the groups between them that `mine` reads from, then the merged group, then
        those reading from `theirs` keep the relative order they had, in the positions the
        groups involved held."""
        low, high = position[theirs], position[mine]
        before = between(mine, sources, low, high)
        after = between(theirs, readers, low, high)
        slots = sorted([low, high] + [position[h] for h in before + after])
        for h, slot in zip(before + [theirs], slots):
            position[h] = slot
        for h, slot in zip(after, slots[len(slots) - len(after):]):
            position[h] = slot
        del position[mine]

    def merge(mine, theirs):
        for j in members.pop(mine):
            group[j] = theirs
            members[theirs].append(j)
        for table, other in ((sources, readers), (readers, sources)):
            for h in table[mine]:
                other[h].discard(mine)
                if h != theirs:
                    other[h].add(theirs)
            table[theirs] = (table[theirs] | table.pop(mine)) - {theirs, mine}

    for i, (n, node) in enumerate(calls):
        if not is_fusible(n, node):
            continue
        for g in list(dict.fromkeys(group[producer[v]] for v in node["inputs"] if v in producer
                                    and (may_join is None or may_join(n, calls[producer[v]][0])))):
            p = members[g][0] if g in members else None
            if p is None or group[i] == g or not is_fusible(*calls[p]) \
                    or calls[p][1]["phase"] != node["phase"]:
                continue
            if len(members[g]) == 1 and calls[p][1]["kind"] == "view":
                continue  # a group's views view its own values: the backward remakes them alone
            # Merged, the groups would read each other if `mine` read `g` through a third group
            # too. (`g` cannot read `mine`: `mine` reads `g`, and the groups never read in a
            # cycle.)
            mine = group[i]
            if reaches(sources[mine] - {g}, g):
                continue
            reorder(mine, g)
            merge(mine, g)
    return _groups_in_order(calls, producer, group, members)


def _topological_positions(sources, readers, key=None):
    """{node: its position} in a topological order of the graph `sources` (node -> the nodes it
    reads from; `readers` the reverse), each node after those it reads; a node of lower `key`
    (None: the node itself) first where free."""
    key = key or (lambda i: i)
    needs = {i: len(read) for i, read in sources.items()}
    ready = [(key(i), i) for i, count in needs.items() if count == 0]
    heapq.heapify(ready)
    position = {}
    while ready:
        _, i = heapq.heappop(ready)
        position[i] = len(position)
        for r in readers[i]:
            needs[r] -= 1
            if needs[r] == 0:
                heapq.heappush(ready, (key(r), r))
    if len(position) != len(sources):
        raise ValueError("fusion_groups: the calls read each other in a cycle")
    return position


def _groups_in_order(calls, producer, group, members):
    """The groups (sorted lists of call indices) in an order that runs each after the groups it
    reads from, earliest first call first."""
    needs = {g: set() for g in members}
    readers = {g: set() for g in members}
    for g, calls_of in members.items():
        for i in calls_of:
            for v in calls[i][1]["inputs"]:
                h = group[producer[v]] if v in producer else g
                if h != g:
                    needs[g].add(h)
                    readers[h].add(g)
    position = _topological_positions(needs, readers, key=lambda g: min(members[g]))
    return [sorted(members[g]) for g in sorted(position, key=position.get)]


def _check_plannable(n):
    """Raises Unplannable for an fx node remat does not model."""
    if n.op in ("call_module", "call_method"):
        raise Unplannable(f"{n.name} is a {n.op} node; joint graphs call operators only")
    if n.meta.get("recompute") is not None:
        raise Unplannable(f"{n.name} is in a torch.utils.checkpoint region (its recompute "
                          f"policy is PyTorch's to honour)")
    if n.op == "call_function" and n.target is not operator.getitem:
        if not _compat.is_operator(n.target):
            raise Unplannable(f"{n.name} calls {getattr(n.target, '__name__', n.target)}, "
                              f"not an aten or prims operator (a higher-order operator or a "
                              f"Python function)")
    value = n.meta.get("val")
    for v in _compat.tree_flatten(value)[0]:
        if isinstance(v, torch.Tensor):
            if any(not isinstance(d, int) for d in v.shape):
                raise Unplannable(f"{n.name} has a symbolic shape {tuple(v.shape)} (dynamic "
                                  f"shapes); remat plans static shapes")
        elif isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise Unplannable(f"{n.name} is a symbolic value {v} (dynamic shapes); remat "
                              f"plans static shapes")
