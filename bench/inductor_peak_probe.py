"""Where a compiled training step's memory goes, line by line of Inductor's code, beside the
plan's timeline in remat's simulator: which buffers Inductor holds at its peak, and what the
plan holds at its own.

    ./scripts/python bench/inductor_peak_probe.py --model resnet50 --fraction 0.3
    ./scripts/python bench/inductor_peak_probe.py --model gpt --fraction 0.5 --solver auto
    ./scripts/python bench/inductor_peak_probe.py --model resnet50 --fraction 0.5 \
        --no-layout-optimization  # compile_backend(layout_optimization=False): no copies
    ./scripts/python bench/inductor_peak_probe.py --model gpt --fraction 0.8 \
        --torch-solver greedy  # PyTorch's activation_memory_budget plan, compiled as Inductor does

One step is compiled with remat's backend (bench/compile_bench.py's models and settings), then
one more runs with a line tracer on the `call` function of each graph Inductor wrote: after
every line it sums the storages the function's locals hold (buffers, the saved tensors and
inputs in its argument list; the parameters, buffers and batch of the model, resident before
the step, left out). Its peak and the live buffers there are printed with the kernel (its
source fx nodes) that made each; the same step's measured peak (measured_peak_bytes) and the
simulator's timeline of the partition (simulate_partition's model with Inductor's buffer
reuse, with the layout optimization's copies unless it is off) are printed beside them.
--torch-solver probes PyTorch's partition instead (its default, or its activation memory
budget plan of that solver), --budgets remat's plan to given activation bytes per graph.
Everything also goes to --out (JSON).
"""

import argparse
import copy
import importlib
import json
import os
import re
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compile_bench  # noqa: E402
import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
from remat.torch import _compat  # noqa: E402
from remat.torch.compile import CompileBackend  # noqa: E402

rp = importlib.import_module("remat.torch.partition")  # the module, not its function


class Recording(compile_bench.SimulatingPartition):
    """compile_bench's remat partition, keeping each graph's joint, forward and backward."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.partitions = []

    def __call__(self, joint, inputs=None, **kwargs):
        fw, bw = super().__call__(joint, inputs, **kwargs)
        self.partitions.append((copy.deepcopy(joint), copy.deepcopy(fw), copy.deepcopy(bw),
                                kwargs["num_fwd_outputs"]))
        return fw, bw


class TorchRecording(compile_bench.RecordingPartition):
    """compile_bench's PyTorch partition (its min-cut, under activation_memory_budget where one
    is set), keeping each graph's joint, forward and backward as Recording does."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.partitions = []

    def __call__(self, joint, inputs, **kwargs):
        fw, bw = super().__call__(joint, inputs, **kwargs)
        self.partitions.append((copy.deepcopy(joint), copy.deepcopy(fw), copy.deepcopy(bw),
                                kwargs["num_fwd_outputs"]))
        self.graphs[-1].layout_copies = self.layout_copies and _compat.optimizes_layout(fw)
        self.graphs[-1].solver = self.label
        return fw, bw


def record_output_code():
    """A list filled with the path of each module Inductor's wrapper code is loaded from."""
    from torch._inductor.graph import GraphLowering

    paths = []
    original = GraphLowering.compile_to_module

    def compile_to_module(self, *args, **kwargs):
        mod = original(self, *args, **kwargs)
        paths.append(mod.__file__)
        return mod

    GraphLowering.compile_to_module = compile_to_module
    return paths


def line_sources(path):
    """{line number: the source fx nodes of the kernel the line runs} of Inductor's `call`."""
    sources, current = {}, ""
    with open(path) as f:
        for k, line in enumerate(f, 1):
            m = re.search(r"Source Nodes: \[([^\]]*)\]", line)
            if m:
                current = m.group(1)
            sources[k] = current
    return sources


def storages(value, found):
    if isinstance(value, torch.Tensor):
        s = value.untyped_storage()
        if s.nbytes() and s.device.type == "cpu":
            found[s.data_ptr()] = int(s.nbytes())
    elif isinstance(value, (list, tuple)):
        for v in value:
            storages(v, found)


def traced_step(step, paths, resident):
    """Runs `step()` with a tracer on Inductor's `call` functions (of modules at `paths`):
    per graph, the live bytes after each line, and at each graph's peak the live locals."""
    files = set(paths)
    timelines = {}  # path -> [(line, bytes)]
    peaks = {}  # path -> (bytes, line, {name: (bytes, line made)})
    born = {}  # (path, name, ptr) -> line first seen

    def snapshot(frame, line):
        path = frame.f_code.co_filename
        names, total = {}, {}
        for name, value in frame.f_locals.items():
            found = {}
            storages(value, found)
            for ptr, nbytes in found.items():
                if ptr in resident:
                    continue
                total[ptr] = nbytes
                names.setdefault(ptr, name)
                born.setdefault((path, name, ptr), line)
        live = sum(total.values())
        timelines.setdefault(path, []).append((line, live))
        if live > peaks.get(path, (-1,))[0]:
            peaks[path] = (live, line, {names[p]: (b, born[(path, names[p], p)])
                                        for p, b in total.items()})

    def local(frame, event, arg):
        if event in ("line", "return"):
            snapshot(frame, frame.f_lineno)
        return local

    def tracer(frame, event, arg):
        if frame.f_code.co_filename in files and frame.f_code.co_name == "call":
            return local
        return None

    sys.settrace(tracer)
    try:
        step()
    finally:
        sys.settrace(None)
    return timelines, peaks


def profiled_peak(fn):
    """(peak bytes, the op running at the peak, {op: bytes} of the live allocations at the peak
    by the op that made them) from the profiler's allocation events while fn runs, counted as
    measured_peak_bytes counts them."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    allocations = []
    stack = [(e, ()) for e in prof.profiler.kineto_results.experimental_event_tree()]
    while stack:
        event, ops = stack.pop()
        if event.tag == _EventType.Allocation:
            if event.extra_fields.device.type == "cpu":
                allocations.append((event.start_time_ns, event.extra_fields.ptr,
                                    event.extra_fields.alloc_size, ops))
            continue
        here = ops + (event.name,)
        stack.extend((c, here) for c in event.children)
    allocations.sort(key=lambda a: a[0])
    live, total, peak, at = {}, 0, 0, None
    for t, ptr, nbytes, ops in allocations:
        if nbytes > 0:
            live[ptr] = (nbytes, ops)
            total += nbytes
            if total > peak:
                peak, at = total, (ops, dict(live))
        elif nbytes < 0 and ptr in live:
            total -= live.pop(ptr)[0]
    by_op = {}
    for nbytes, ops in at[1].values():
        key = " > ".join(o for o in ops if not o.startswith("## ")) or "?"
        by_op[key] = by_op.get(key, 0) + nbytes
    return peak, " > ".join(at[0]), by_op


def simulated_timeline(joint, fw, bw, num_fwd_outputs, layout_copies=False):
    """(step names, live bytes after each step, graph, input bytes) of simulate_partition's
    model of the partition as Inductor compiles it (its buffer reuse; the layout optimization's
    copies where `layout_copies`); the graph lists its steps in the order they run."""
    calls, run = rp.partition_run(joint, fw, bw, num_fwd_outputs, layout_copies,
                                  buffer_reuse=True)
    graph = run.build("probe")
    evaluation = remat.simulate(graph, remat.default_schedule(graph), timeline=True)
    names = [(graph.node(i)["name"], graph.node(i)["phase"]) for i in range(graph.num_nodes)]
    return names, list(evaluation.timeline), graph, calls.input_bytes


def live_values_at(graph, step):
    """{value name: bytes} of the values live after `step` (made at or before it, read after it
    or a graph output), inputs left out."""
    last_read, made = {}, {}
    for i in range(graph.num_nodes):
        node = graph.node(i)
        for v in node["inputs"]:
            last_read[v] = i
        for v in node["outputs"]:
            made[v] = i
    live = {}
    for v, at in made.items():
        value = graph.value(v)
        if at <= step and (last_read.get(v, -1) > step or value["output"]) and value["size"]:
            live[value["name"]] = value["size"]
    return live


def main():
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--model", default="resnet50", choices=sorted(compile_bench.MODELS))
    p.add_argument("--fraction", type=float, default=0.3)
    p.add_argument("--solver", default="auto")
    p.add_argument("--top", type=int, default=40, help="live buffers printed at each peak")
    p.add_argument("--no-layout-optimization", action="store_true",
                   help="compile with compile_backend(layout_optimization=False) (default: as "
                        "Inductor's config has it, on)")
    p.add_argument("--torch-solver", choices=("default",) + compile_bench.TORCH_SOLVERS,
                   help="probe PyTorch's partition instead of remat's: its default, or its "
                        "activation_memory_budget plan of this solver at --fraction (compiled "
                        "as Inductor compiles it, as compile_bench's pytorch rows)")
    p.add_argument("--save-random", action="store_true",
                   help="with --torch-solver: random calls are ones PyTorch's partition must save "
                        "(compile_bench's 'random saved' rows)")
    p.add_argument("--budgets", help="comma-separated activation bytes, one per graph: remat "
                                      "plans graph i to the i-th (compile_bench's 'remat SOLVER "
                                      "at ...'s sim' rows; --fraction then unused)")
    p.add_argument("--out", default="/tmp/inductor_peak_probe.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    model, batch, loss_fn = compile_bench.MODELS[args.model]()
    model = copy.deepcopy(model).train()
    functorch_patches = {"enable_autograd_cache": False}
    if args.torch_solver is None:
        budgets = args.budgets and [int(b) for b in args.budgets.split(",")]
        partitioner = Recording(1.0 if budgets else args.fraction, args.solver, budgets)
        backend = CompileBackend(partitioner, "inductor", layout_optimization=False
                                 if args.no_layout_optimization else None)
    else:
        layout = not args.no_layout_optimization \
            and _compat.compiles_with_layout_optimization("inductor")
        partitioner = TorchRecording(args.torch_solver, args.save_random, layout_copies=layout,
                                     buffer_reuse=True)

        def backend(gm, inputs):
            return _compat.inductor_compile(gm, inputs, partitioner)
        if args.torch_solver != "default":
            functorch_patches.update(activation_memory_budget=args.fraction,
                                     activation_memory_budget_solver=args.torch_solver)
    train_step = compile_bench.train_step_fn(
        model, batch, compile_bench.step_fn(model, batch, loss_fn, backend))

    paths = record_output_code()
    patches = {"fx_graph_cache": False, "fallback_random": True}
    with torch._inductor.config.patch(patches), \
            torch._functorch.config.patch(functorch_patches):
        start = time.perf_counter()
        train_step()
        compile_s = time.perf_counter() - start
        train_step()
        _, measured = rt.measured_peak_bytes(train_step)
        profiled, running, by_op = profiled_peak(train_step)
        resident = {}
        storages([*model.parameters(), *model.buffers(), *batch], resident)
        timelines, peaks = traced_step(train_step, paths, resident)
    print(f"compile {compile_s:.1f} s; measured peak {measured / 1e6:.2f} MB; Inductor code: "
          f"{paths}")
    print(f"profiled peak {profiled / 1e6:.2f} MB while running {running}; live then, by the "
          f"op that allocated it:")
    for op, nbytes in sorted(by_op.items(), key=lambda x: -x[1])[:args.top]:
        print(f"    {nbytes / 1e6:8.2f} MB  {op}")
    report = {"measured_peak_bytes": measured, "compile_s": compile_s, "graphs": [],
              "profiled": [profiled, running, by_op]}
    for g, (joint, fw, bw, nfo) in enumerate(partitioner.partitions):
        stats = partitioner.graphs[g]
        names, timeline, graph, input_bytes = simulated_timeline(joint, fw, bw, nfo,
                                                                 stats.layout_copies)
        at = max(range(len(timeline)), key=timeline.__getitem__)
        print(f"graph {g}: plan {stats.solver}, simulated activation "
              f"{stats.simulated_activation_bytes / 1e6:.2f} MB; simulator's peak "
              f"{(timeline[at] - input_bytes) / 1e6:.2f} MB above the inputs at step {at} "
              f"{names[at]}")
        plan_live = live_values_at(graph, at)
        for name, size in sorted(plan_live.items(), key=lambda x: -x[1])[:args.top]:
            print(f"    plan {name}: {size / 1e6:.2f} MB")
        report["graphs"].append({"simulated_activation_bytes": stats.simulated_activation_bytes,
                                 "sim_peak_step": names[at], "sim_live": plan_live,
                                 "sim_timeline": [(n, ph, b - input_bytes) for (n, ph), b in
                                                  zip(names, timeline)]})
    for path in paths:
        if path not in peaks:
            continue
        live, line, buffers = peaks[path]
        sources = line_sources(path)
        print(f"{path}: locals' peak {live / 1e6:.2f} MB at line {line} ({sources[line]})")
        for name, (size, made) in sorted(buffers.items(), key=lambda x: -x[1][0])[:args.top]:
            print(f"    {name}: {size / 1e6:.2f} MB, made at line {made} ({sources[made]})")
        report.setdefault("inductor", []).append({
            "path": path, "peak_bytes": live, "peak_line": line,
            "live": {n: [s, m, sources[m]] for n, (s, m) in buffers.items()},
            "timeline": timelines[path]})
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
