"""`auto`'s CPU seconds and plan quality against its work limit, on graphs of about 250 to 10,000
nodes: the default work limit beside larger ones, side by side in one run.

    ./scripts/python bench/auto_speed_bench.py [--results] [--remat build/src/remat] \
        [--budget 50] [--work-limits 60,240] [--graphs NAME,...] [--repeat] [--progress]

Graphs: tests/data/resnet18_b32_i128.json, tests/data/blocks/{hf_gpt2,hf_llama,hf_t5}.json, and
`remat gen joint` / `remat gen random-layered` graphs of 1,000, 2,500 and 10,000 nodes (written to
a temporary folder; `--graphs` picks by name). Per graph and work limit: the CPU seconds of the
`remat solve --solver auto` process (reading the graph included), the work units it spent, why it
stopped, status, peak and CI (% of the default schedule, from the simulator as `remat solve
--json` prints them) and the member whose plan won. The time limit is the CLI's backstop for the
largest work limit, so every run stops on work or convergence, never on the clock.

Bars (issue: planning speed, time given is time used): CPU ≤ 3 s up to 1,000 nodes and ≤ 20 s at
10,000 nodes with the default limit; with a larger limit a CI no worse (`ci ≤ default` column).
`--repeat` runs each larger limit twice and checks the plan is the same (determinism: the same
graph, options, seed and work limit give the same plan). `--progress` prints `auto`'s best plan
over the work spent (the plan's `auto_best_*` series) for the largest limit.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

import bench_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")

FILES = {
    "resnet18": os.path.join(DATA, "resnet18_b32_i128.json"),
    "hf_gpt2": os.path.join(DATA, "blocks", "hf_gpt2.json"),
    "hf_llama": os.path.join(DATA, "blocks", "hf_llama.json"),
    "hf_t5": os.path.join(DATA, "blocks", "hf_t5.json"),
}
GENERATED = [("joint", 1000), ("joint", 2500), ("joint", 10000), ("random-layered", 1000),
             ("random-layered", 2500), ("random-layered", 10000)]


def child_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def graph_paths(binary, directory, wanted):
    paths = dict(FILES)
    for kind, nodes in GENERATED:
        name = f"{kind}_{nodes}"
        if wanted and name not in wanted:
            continue
        path = os.path.join(directory, f"{name}.json")
        subprocess.run([binary, "gen", kind, "--nodes", str(nodes), "--seed", "1", "-o", path],
                       check=True, capture_output=True)
        paths[name] = path
    return {k: v for k, v in paths.items() if not wanted or k in wanted}


def solve(binary, path, budget, work_limit, time_limit):
    before = child_cpu()
    done = subprocess.run([binary, "solve", path, "--solver", "auto", "--budget", f"{budget}%",
                           "--json", "--work-limit", str(work_limit), "--time-limit",
                           str(time_limit)], capture_output=True, text=True)
    cpu = child_cpu() - before
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {done.returncode}", "cpu": cpu}
    plan = json.loads(done.stdout)
    stats = plan["stats"]
    return {"status": plan["status"], "peak": plan["peak_percent_of_baseline"],
            "ci": plan["cost_increase_percent"], "cpu": cpu, "work": stats.get("work", 0),
            "stop": stats.get("stop_reason", "?"), "sequence": plan.get("sequence"),
            "winner": stats.get("lists", {}).get("auto_winner", ["?"])[0],
            "series": stats.get("series", {}), "nodes": plan.get("nodes")}


def node_count(path):
    with open(path, encoding="utf-8") as f:
        return len(json.load(f)["nodes"])


def row(name, nodes, limit, r, default):
    if "error" in r:
        return f"| {name} | {nodes} | {limit:g} | error: {r['error']} | | | | | | | |"
    no_worse = ""
    if default is not None and "error" not in default and limit != default["limit"]:
        same_status = (r["status"] == "over-budget") == (default["status"] == "over-budget")
        if r["status"] != "over-budget" and default["status"] == "over-budget":
            no_worse = "yes (fits)"
        elif same_status:
            better = (r["ci"] <= default["ci"] + 1e-9 if r["status"] != "over-budget" else
                      r["peak"] <= default["peak"] + 1e-9)
            no_worse = "yes" if better else "**no**"
        else:
            no_worse = "**no**"
    return (f"| {name} | {nodes} | {limit:g} | {r['cpu']:.2f} | {r['work']:.2f} | {r['stop']} | "
            f"{r['status']} | {r['peak']:.1f} | {r['ci']:+.2f} | {r['winner']} | {no_worse} |")


def print_progress(name, r):
    series = r["series"]
    work = series.get("auto_best_work", [])
    cost = series.get("auto_best_ci_percent", [])
    peak = series.get("auto_best_peak_percent", [])
    if not work:
        print(f"- {name}: no auto_best_* series in the plan")
        return
    # A new best plan often gains a millionth of a point: keep the points that change the CI by
    # at least 0.01 point or the peak by 0.1 point, and the last.
    kept = []
    for i, point in enumerate(zip(work, peak, cost)):
        if not kept or i == len(work) - 1 or abs(point[2] - kept[-1][2]) >= 0.01 or \
                abs(point[1] - kept[-1][1]) >= 0.1:
            kept.append(point)
    points = ", ".join(f"{w:.2f}u: {p:.1f}% {c:+.2f}%" for w, p, c in kept)
    print(f"- {name}: {points}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remat", default=os.path.join(ROOT, "build", "src", "remat"))
    parser.add_argument("--budget", type=float, default=50)
    parser.add_argument("--work-limits", default="60,240",
                        help="comma-separated; the first is the one the others are compared to")
    parser.add_argument("--graphs", default="",
                        help="comma-separated names (default: all): " +
                        ", ".join(list(FILES) + [f"{k}_{n}" for k, n in GENERATED]))
    parser.add_argument("--repeat", action="store_true",
                        help="run each larger limit twice and compare the plans")
    parser.add_argument("--progress", action="store_true",
                        help="print the best plan over the work spent, largest limit")
    parser.add_argument("--results", nargs="?", const=bench_results.default_path(
        "auto_speed_bench"), default=None, help="write the figures to bench/results/")
    args = parser.parse_args()
    limits = [float(x) for x in args.work_limits.split(",")]
    wanted = [g for g in args.graphs.split(",") if g]
    time_limit = 10 * max(limits) + 10

    with tempfile.TemporaryDirectory() as tmp, \
            bench_results.recorded("auto_speed_bench", args.results):
        paths = graph_paths(args.remat, tmp, wanted)
        print(f"`auto` at {args.budget:g} % of the default schedule's peak; CPU seconds of the "
              f"`remat solve` process; work limits {', '.join(f'{x:g}' for x in limits)} "
              f"(time limit {time_limit:g} s, never reached).\n")
        print("| graph | nodes | work limit | CPU s | work | stopped | status | peak % | CI % | "
              "winner | ≤ default |")
        print("| --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- | --- |")
        progress = []
        mismatches = []
        for name, path in paths.items():
            nodes = node_count(path)
            default = None
            for limit in limits:
                r = solve(args.remat, path, args.budget, limit, time_limit)
                r["limit"] = limit
                if default is None:
                    default = r
                print(row(name, nodes, limit, r, default), flush=True)
                if args.repeat and limit != limits[0] and "error" not in r:
                    again = solve(args.remat, path, args.budget, limit, time_limit)
                    if again.get("sequence") != r["sequence"]:
                        mismatches.append(f"{name} at {limit:g}")
                if limit == max(limits) and "error" not in r:
                    progress.append((name, r))
        if args.repeat:
            print("\nDeterminism (each larger limit run twice): " +
                  ("the same plan every time" if not mismatches else
                   "**different plans**: " + ", ".join(mismatches)))
        if args.progress:
            print(f"\nBest plan over the work spent (work limit {max(limits):g}; units: peak %, "
                  "CI %):\n")
            for name, r in progress:
                print_progress(name, r)


if __name__ == "__main__":
    sys.exit(main())
