"""Where remat's executor spends the time eager PyTorch does not: one step of each, profiled.

    python3 bench/gpu_executor_profile.py [--layers 8] [--batch 8] [--budget 100%] [--top 12]
                                          [--results [FILE]]

The Llama of bench/gpu_plan_for_check.py (fewer layers by default), planned with load_plan's
fake trace at `--budget` (100 %: the default schedule, so the difference is the executor's alone).
Per step: the wall time, the GPU kernels' summed time and count, and the kernels whose summed time
differs most between remat and eager (by name), so a slower step shows whether the GPU does more
work or waits for the CPU. `--device cpu` with small sizes runs it here (CPU operators instead of
kernels). --results writes the figures to bench/results/gpu_executor_profile.md (or FILE) too.
"""

import argparse
import collections
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_results  # noqa: E402 (bench/, beside this file)
import gpu_plan_for_check as llama  # noqa: E402


def profiled(run, device):
    """(wall seconds of one run, {kernel or operator name: (summed µs, count)})."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    run()
    llama.synchronize(device)
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        run()
        llama.synchronize(device)
        wall = time.perf_counter() - start
    kernels = collections.defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        on_device = event.device_type == torch.autograd.DeviceType.CUDA
        if (device == "cuda") == on_device and (on_device or event.name.startswith("aten::")):
            kernels[event.name][0] += event.device_time if on_device else event.self_cpu_time_total
            kernels[event.name][1] += 1
    return wall, {name: tuple(v) for name, v in kernels.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    llama.add_model_arguments(parser, layers=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--budget", default="100%")
    parser.add_argument("--cost", default="auto")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--results", nargs="?",
                        const=bench_results.default_path("gpu_executor_profile"))
    args = parser.parse_args()
    import torch
    import remat.torch as rt

    config = llama.make_config(args)
    model = llama.new_model(config, args.device)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=args.device)
    with torch.device("meta"):
        meta_model = llama.new_model(config, "meta")
    shapes = torch.empty(args.batch, args.seq, dtype=torch.long, device="meta")
    planned = rt.plan_for(meta_model, (shapes, shapes), llama.loss_fn, budget=args.budget,
                          device=args.device, cost=args.cost, progress=False)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "plan.json")
        planned.save_plan(path)
        step = rt.load_plan(model, (ids, ids), llama.loss_fn, path, cost=args.cost)

    def eager():
        model.zero_grad(set_to_none=True)
        llama.loss_fn(model(ids), ids).backward()

    def remat_step():
        model.zero_grad(set_to_none=True)
        step(ids, ids, measure=False)

    with bench_results.recorded("gpu_executor_profile", args.results):
        report(args, planned, profiled_runs(args, eager, remat_step))


def profiled_runs(args, eager, remat_step):
    return {name: profiled(run, args.device) for name, run in
            (("eager", eager), ("remat", remat_step))}


def report(args, planned, results):
    print(f"Llama {args.layers} layers, batch {args.batch}, budget {args.budget} "
          f"({planned.traced.num_nodes} nodes, planned {planned.planned_peak_bytes / 1e9:.2f} GB, "
          f"extra {planned.extra_cost_percent:+.2f} %), device {args.device}")
    unit = "kernel" if args.device == "cuda" else "operator"
    for name, (wall, kernels) in results.items():
        busy = sum(t for t, _ in kernels.values())
        count = sum(c for _, c in kernels.values())
        print(f"{name}: wall {wall * 1e3:.1f} ms, {unit}s {busy / 1e3:.1f} ms in {count} calls")
    eager_k, remat_k = results["eager"][1], results["remat"][1]
    names = set(eager_k) | set(remat_k)
    delta = sorted(names, key=lambda n: -abs(remat_k.get(n, (0, 0))[0] - eager_k.get(n, (0, 0))[0]))
    print(f"\n| {unit} | eager ms (calls) | remat ms (calls) |\n| --- | ---: | ---: |")
    for n in delta[:args.top]:
        e, r = eager_k.get(n, (0, 0)), remat_k.get(n, (0, 0))
        print(f"| {n[:90]} | {e[0] / 1e3:.2f} ({e[1]}) | {r[0] / 1e3:.2f} ({r[1]}) |")


if __name__ == "__main__":
    main()
