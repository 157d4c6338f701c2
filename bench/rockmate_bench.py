"""Rockmate's bars, printed.

    ./scripts/python bench/rockmate_bench.py [--time-limit 60]
        [--budgets 70%,50%,40%,30%] [--solvers rockmate,rotor,fastsa,checkmate] [--skip-table]
        [--only-table] [--graphs gpt6,resnet18,resnet18-32]

1. Solve time of rockmate on the traced GPT of examples/train_gpt.py (batch 8 x 128) at 6 and 12
   layers and 50 %: cold (a fresh process, options computed by the MILPs) and warm (a fresh
   process reading the options from --param cache=DIR), with the MILP runs of each.
2. The 2-layer GPT (batch 4 x 64) at 70 % and 50 %: rockmate against the Checkmate MILP.
3. One table for the 6-layer GPT and ResNet-18 (batch 16 x 3 x 96 x 96, the test suite's; and
   32 x 3 x 128 x 128, where activations weigh more): status, peak % of the baseline, CI % and
   seconds per solver and budget (checkmate under --time-limit), with each graph's memory lower
   bound (no plan of any solver fits below it). --graphs picks some of gpt6,resnet18,resnet18-32.
4. Activation memory (peak minus graph inputs and gradients, which every plan holds) against CI
   for the GPT, beside the baseline's.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
import train_gpt  # noqa: E402
from models import resnet18  # noqa: E402

BINARY = os.path.join(ROOT, "build", "src", "remat")


def solve(path, budget, solver, time_limit, params=()):
    args = [BINARY, "solve", path, "--budget", budget, "--solver", solver, "--json",
            "--time-limit", str(time_limit)]
    for p in params:
        args += ["--param", p]
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1], "seconds": seconds,
                "cpu_seconds": cpu}
    doc = json.loads(out.stdout)
    doc["seconds"] = seconds
    doc["cpu_seconds"] = cpu  # the process's user + system time (one thread: one core)
    c = doc["stats"].get("counters", {})
    doc["counters"] = dict(c) if isinstance(c, list) else c
    return doc


def trace_to(tmp, label, make):
    model, batch, loss_fn = make()
    graph = rt.trace(model, batch, loss_fn).graph
    path = os.path.join(tmp, label.replace(" ", "_") + ".json")
    remat.save(graph, path)
    return path, graph


def resident_bytes(graph):
    """Graph inputs and graph outputs (parameters, data, gradients, loss): held by every plan."""
    ids = set(graph.graph_inputs) | set(graph.graph_outputs)
    return sum(graph.value(v)["size"] for v in ids)


def resnet18_large():
    import torch
    import torch.nn.functional as F
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    batch = (torch.randn(32, 3, 128, 128), torch.randint(0, 10, (32,)))
    return model, batch, F.cross_entropy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--budgets", default="70%,50%,40%,30%")
    parser.add_argument("--solvers", default="rockmate,rotor,fastsa,checkmate")
    parser.add_argument("--skip-table", action="store_true")
    parser.add_argument("--only-table", action="store_true")
    parser.add_argument("--graphs", default="gpt6,resnet18,resnet18-32")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.only_table:
            times_and_checkmate(args, tmp)
        if not args.skip_table:
            table(args, tmp)


def times_and_checkmate(args, tmp):
    print("1. rockmate solve time on the traced GPT (batch 8 x 128), budget 50 %")
    print(f"{'layers':>6} {'nodes':>6} {'cold s':>7} {'cpu s':>6} {'MILPs':>6} {'warm s':>7} "
          f"{'cpu s':>6} {'MILPs':>6} {'CI %':>7}")
    cold_times = {}
    for layers in (6, 12):
        path, graph = trace_to(tmp, f"gpt{layers}", lambda: train_gpt.make(8, layers=layers))
        cache = os.path.join(tmp, f"cache{layers}")
        cold = solve(path, "50%", "rockmate", args.time_limit, [f"cache={cache}"])
        warm = solve(path, "50%", "rockmate", args.time_limit, [f"cache={cache}"])
        cold_times[layers] = cold["seconds"]
        print(f"{layers:>6} {graph.num_nodes:>6} {cold['seconds']:>7.2f} "
              f"{cold['cpu_seconds']:>6.2f} {cold['counters'].get('milp_runs', 0):>6.0f} "
              f"{warm['seconds']:>7.2f} {warm['cpu_seconds']:>6.2f} "
              f"{warm['counters'].get('milp_runs', 0):>6.0f} "
              f"{cold.get('cost_increase_percent', float('nan')):>7.2f}")
    print(f"12 layers / 6 layers (cold, wall): {cold_times[12] / cold_times[6]:.2f}x")
    print()
    print("2. the 2-layer GPT (batch 4 x 64) against the Checkmate MILP (--time-limit)")
    path, graph = trace_to(tmp, "gpt2", lambda: train_gpt.make(4, context=64, layers=2))
    print(f"{'budget':>6} {'solver':<10} {'status':<12} {'peak %':>7} {'CI %':>8} "
          f"{'time s':>7}  {'MILP bound CI %':>15}")
    for budget in ("70%", "50%"):
        for solver in ("rockmate", "checkmate"):
            r = solve(path, budget, solver, args.time_limit)
            if "error" in r:
                print(f"{budget:>6} {solver:<10} error: {r['error'][:70]}")
                continue
            bound = r["stats"].get("cost_lower_bound")
            bound_ci = ("" if bound is None else
                        f"{100 * (bound - r['baseline_cost']) / r['baseline_cost']:.2f}")
            print(f"{budget:>6} {solver:<10} {r['status']:<12} "
                  f"{r['peak_percent_of_baseline']:>7.1f} {r['cost_increase_percent']:>8.2f} "
                  f"{r['seconds']:>7.2f}  {bound_ci:>15}")


def table(args, tmp):
    print()
    print("3. peak % of the baseline, CI % and seconds; act. MB: activation memory")
    makers = {"gpt6": ("GPT 6 layers", lambda: train_gpt.make(8, layers=6)),
              "resnet18": ("ResNet-18", resnet18),
              "resnet18-32": ("ResNet-18 32", resnet18_large)}
    graphs = {}
    for key in args.graphs.split(","):
        label, make = makers[key]
        graphs[label] = trace_to(tmp, key, make)
    print(f"{'graph':<13} {'budget':>6} {'solver':<10} {'status':<12} {'peak %':>7} "
          f"{'CI %':>8} {'time s':>7}  {'act. MB':>8}")
    for label, (path, graph) in graphs.items():
        resident = resident_bytes(graph)
        base_peak, _ = remat.baseline(graph)
        print(f"{label:<13} {'-':>6} {'baseline':<10} {'':<12} {100.0:>7.1f} {0.0:>8.2f} "
              f"{'':>7}  {(base_peak - resident) / 1e6:>8.2f}")
        lower = remat.memory_lower_bound(graph)
        print(f"{label:<13} {'-':>6} {'lower bd':<10} {'':<12} {100.0 * lower / base_peak:>7.1f}")
        for budget in args.budgets.split(","):
            for solver in args.solvers.split(","):
                r = solve(path, budget, solver, args.time_limit)
                if "error" in r:
                    print(f"{label:<13} {budget:>6} {solver:<10} error: {r['error'][:70]}")
                    continue
                act = (r["peak_bytes"] - resident) / 1e6
                print(f"{label:<13} {budget:>6} {solver:<10} {r['status']:<12} "
                      f"{r['peak_percent_of_baseline']:>7.1f} "
                      f"{r['cost_increase_percent']:>8.2f} {r['seconds']:>7.2f}  "
                      f"{act:>8.2f}")
    print("act. MB: activation memory, the peak minus graph inputs and graph outputs "
          "(weights, data, gradients, loss)")


if __name__ == "__main__":
    main()
