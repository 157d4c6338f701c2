"""Whether FastSA's single-node fallback pays after its memory pass.

    ./scripts/python bench/fastsa_fallback_bench.py [--cases KIND:NODES:SEED:PCT,...] \
        [--results bench/results/fastsa_fallback_bench.md]

When grouped stage 1 does not reach the budget, FastSA anneals the groups on for memory alone (the
memory pass) and then single nodes from the default schedule for the rest of stage 1 (the
fallback, src/solvers/fastsa/fastsa.cc run_first_stage). The fallback's plan is used only when it
fits the budget. This bench solves each case with `fastsa` at its defaults and prints, from the
solve's counters, the peaks the three parts reached (groups, memory pass, fallback; % of the
default schedule's peak), whether the memory pass and the fallback fitted, and the fallback's
share of the run's iterations and its length in convergence windows (work, not wall time). Each
case runs twice: at the defaults, where the fallback runs at most `stage1_fallback_windows` (2)
windows after a memory pass, and uncapped (`stage1_fallback_windows=0`), the plan before the
cap. Cases are generated graphs
(`remat gen KIND --nodes NODES --seed SEED`) or `resnet18` (tests/data) at PCT % of the default
schedule's peak.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import bench_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CASES = ",".join([
    "random-layered:60:1:55", "random-layered:60:1:65", "random-layered:60:2:55",
    "random-layered:60:3:45", "random-layered:100:1:45", "random-layered:100:2:55",
    "random-layered:100:4:55", "random-layered:100:4:70", "random-layered:100:6:55",
    "random-layered:150:1:45", "random-layered:150:5:45", "random-layered:300:1:50",
    "random-layered:300:2:50", "random-layered:600:1:50", "random-layered:600:2:50",
    "random-layered:1000:1:50", "random-layered:1000:2:50", "random-layered:1000:3:50",
    "random-layered:1000:4:50", "random-layered:1000:6:50", "resnet18:0:0:50", "resnet18:0:0:60",
])


def graph_path(binary, tmp, kind, nodes, seed):
    if kind == "resnet18":
        return os.path.join(ROOT, "tests", "data", "resnet18_b32_i128.json"), "resnet18"
    name = f"{kind}_{nodes}_s{seed}"
    path = os.path.join(tmp, name + ".json")
    subprocess.run([binary, "gen", kind, "--nodes", str(nodes), "--seed", str(seed), "-o", path],
                   check=True, capture_output=True)
    return path, name


def solve(binary, path, pct, params=()):
    command = [binary, "solve", path, "--solver", "fastsa", "--budget", f"{pct}%", "--json",
               "--work-limit", "60"]
    for p in params:
        command += ["--param", p]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def plan_cell(plan):
    """The plan as a cell: CI within budget, the peak when over it; then its work units."""
    if plan["status"] == "over-budget":
        return f"over ({plan['peak_percent_of_baseline']:.1f} %) | {plan['stats']['work']:.2f}"
    return f"{plan['cost_increase_percent']:+.2f} | {plan['stats']['work']:.2f}"


def percent(plan, counter):
    value = plan["stats"]["counters"].get(counter)
    return None if value is None else 100.0 * value / plan["baseline_peak_bytes"]


def cell(x):
    return "—" if x is None else f"{x:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remat", default=os.path.join(ROOT, "build", "src", "remat"))
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--results", default=bench_results.default_path("fastsa_fallback_bench"))
    args = parser.parse_args()
    fitted = {True: [0, 0], False: [0, 0]}  # memory pass fits -> [cases, fallback fits]
    most_paying = work_uncapped = work_default = 0.0
    changed = 0
    with tempfile.TemporaryDirectory() as tmp, \
            bench_results.recorded("fastsa_fallback_bench", args.results):
        print("`fastsa` (work limit 60), the fallback uncapped (`stage1_fallback_windows=0`). "
              "Peaks in % of the default schedule's peak: grouped stage 1's plan, the memory "
              "pass's, the fallback's best; whether the memory pass's plan and the fallback's "
              "fit (where the fallback's fits, stage 2 starts from it: the fallback paid); its "
              "share of "
              "the run's iterations and its length in convergence windows. Then the plan (CI, or "
              "the peak when over the budget) and work units uncapped and at the defaults "
              "(capped after a memory pass).\n")
        print("| graph | budget % | groups | memory pass | fallback | memory pass fits | "
              "fallback fits | "
              "fallback share of iterations | fallback windows | uncapped plan | work | "
              "default plan | work | capped |")
        print("| --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | "
              "---: | --- |")
        for case in filter(None, args.cases.split(",")):
            kind, nodes, seed, pct = case.split(":")
            path, name = graph_path(args.remat, tmp, kind, int(nodes), int(seed))
            plan = solve(args.remat, path, float(pct), ["stage1_fallback_windows=0"])
            default = solve(args.remat, path, float(pct))
            counters = plan["stats"]["counters"]
            windows = counters.get("stage1_fallback_iterations", 0) / counters["convergence_window"]
            capped = default["stats"]["counters"].get("stage1_fallback_capped") == 1
            budget = float(pct)
            groups = percent(plan, "stage1_groups_peak")
            memory = percent(plan, "stage1_memory_peak")
            fallback = percent(plan, "stage1_fallback_peak")
            memory_fits = fallback_fits = ""
            if memory is not None and fallback is not None:
                # Counters are bytes, so the comparison is exact where the percentages are not.
                pass_fits = counters["stage1_memory_peak"] <= plan["budget_bytes"]
                fits = counters["stage1_fallback_peak"] <= plan["budget_bytes"]
                fitted[pass_fits][0] += 1
                fitted[pass_fits][1] += fits
                memory_fits = "yes" if pass_fits else "no"
                fallback_fits = "**yes**" if fits else "no"
                if fits:
                    most_paying = max(most_paying, windows)
            share = counters.get("stage1_fallback_iterations", 0) / max(1, plan["stats"][
                "iterations"])
            print(f"| {name} | {pct} | {cell(groups)} | {cell(memory)} | {cell(fallback)} | "
                  f"{memory_fits} | {fallback_fits} | {100 * share:.0f} % | {windows:.2f} | "
                  f"{plan_cell(plan)} | {plan_cell(default)} | {'yes' if capped else ''} |")
            changed += ((plan["peak_bytes"], plan["cost"]) !=
                        (default["peak_bytes"], default["cost"]))
            if capped:
                work_uncapped += plan["stats"]["work"]
                work_default += default["stats"]["work"]
        print(f"\nThe memory pass ended over the budget in {fitted[False][0]} cases, the "
              f"fallback's plan fitted in {fitted[False][1]} of them; the pass fitted in "
              f"{fitted[True][0]} cases, the fallback's plan in {fitted[True][1]} of them. Where "
              f"the fallback fitted it did so within {most_paying:.2f} convergence windows. "
              f"Where the cap cut the fallback, the runs took {work_default:.2f} work units "
              f"against {work_uncapped:.2f} uncapped; {changed} plans differ.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
