"""When `auto` skips FastSA's cold run, and what that costs: per graph and budget where another
member's plan fits, `auto`'s plan beside FastSA's cold run alone (the run `auto` makes cold: its
quick convergence window, the same seed), side by side in one run.

    ./scripts/python bench/auto_cold_run_bench.py [--results] [--remat build/src/remat] \
        [--budgets 50,60,70,80,90] [--graphs NAME,...] [--models gpt4,...] [--graph-cache DIR]

Graphs: the traced ResNet-18 and Hugging Face block graphs of tests/data, the MOCCASIN training
graphs (REMAT_BENCH_DATA or ../shared/benchmarks/moccasin beside the repository, when there), and
generated ones: `remat gen joint` of 150, 300 and 1,000 nodes and `remat gen random-layered` of
100, 200 and 500 nodes, a few seeds each. `--models` adds bench/models_bench.py's traced models
(as bench/auto_speed_bench.py does). Budgets below a graph's memory lower bound are left out.

Where the cheapest other member's plan that fits costs at most twice the default schedule's cost,
`auto` runs FastSA's warm runs from it first and its cold run after them only where they end more
than 1 point of CI above the least possible cost (docs/solvers/auto.md). A row per graph and
budget with a fitting start: that start, how the cold run went (first, after the warm runs, or
skipped), `auto`'s CI and work units, the cold run alone's CI, and the loss from skipping it:
`auto`'s CI minus the better of the two (0 where the cold run ran inside `auto`). Bar: the loss
stays within 1 point (the planning-speed bar's tolerance) wherever the cold run was skipped.
"""

import argparse
import glob
import json
import os
import re
import tempfile

import auto_speed_bench
import bench_results

ROOT = auto_speed_bench.ROOT
DATA = auto_speed_bench.DATA
FILES = {name: path for name, path in auto_speed_bench.FILES.items() if name != "hf_t5"}
GENERATED = [("joint", 150, (4, 5, 6)), ("joint", 300, (1, 2, 3)), ("joint", 1000, (1, 2)),
             ("random-layered", 100, (4, 5, 6)), ("random-layered", 200, (1, 2, 3)),
             ("random-layered", 500, (1, 2))]
LOSS_BAR = 1.0  # points of CI, where the cold run was skipped
WORK_LIMIT = 60  # remat's default
TIME_LIMIT = 10 * WORK_LIMIT + 10  # the CLI's backstop


def moccasin_graphs():
    folder = os.environ.get("REMAT_BENCH_DATA",
                            os.path.join(ROOT, "..", "shared", "benchmarks", "moccasin"))
    return {"moccasin_" + os.path.basename(p).split("_")[0]: p
            for p in sorted(glob.glob(os.path.join(folder, "*_train.nx.json")))}


def generated_graphs(binary, directory):
    paths = {}
    for kind, nodes, seeds in GENERATED:
        for seed in seeds:
            name = f"{kind}_{nodes}_s{seed}"
            path = os.path.join(directory, name + ".json")
            auto_speed_bench.run_child([binary, "gen", kind, "--nodes", str(nodes), "--seed",
                                        str(seed), "-o", path])
            paths[name] = path
    return paths


def quick_window(nodes):
    """FastSA's convergence window in `auto`'s quick settings (auto.cc: quick_fastsa_window)."""
    return max(min(250_000, 2_000 * nodes), 25_000, 50 * nodes)


MEMBER_LINE = re.compile(r"^(\w+): (feasible|over-budget), peak [0-9.]+%, CI ([+-][0-9.]+)%")


def solve(binary, path, budget, solver, params=()):
    """The plan's figures (from the simulator, as `remat solve --json` prints them), its member
    lines, and the CPU seconds of the process; None where the budget is below every plan."""
    command = [binary, "solve", path, "--solver", solver, "--budget", f"{budget}%", "--json",
               "--work-limit", str(WORK_LIMIT), "--time-limit", str(TIME_LIMIT)]
    for p in params:
        command += ["--param", p]
    code, stdout, stderr, cpu, _ = auto_speed_bench.run_child(command)
    if code == 2 and "below the memory lower bound" in stderr:
        return None
    if code != 0:
        raise SystemExit(f"{' '.join(command)}: {stderr.strip()}")
    plan = json.loads(stdout)
    return {"fits": plan["status"] == "feasible", "ci": plan["cost_increase_percent"],
            "work": plan["stats"].get("work", 0), "cpu": cpu,
            "members": plan["stats"].get("lists", {}).get("auto_members", [])}


def cold_run_outcome(members):
    """(the warm runs' start, its CI, the best warm run's CI, how the cold run went: "first",
    "after warm", "skipped" or None where no other member's plan fits) from `auto`'s lines."""
    fitting = {}
    for line in members:
        m = MEMBER_LINE.match(line)
        if m and m.group(2) == "feasible":
            fitting[m.group(1)] = float(m.group(3))
    warm = next((line for line in members if line.startswith("fastsa_warm: ")), None)
    if warm is None:
        return None, None, None, None
    start = re.search(r"started from (\w+)", warm).group(1)
    warm_ci = min(ci for label, ci in fitting.items() if label.startswith("fastsa_warm"))
    labels = [line.split(":")[0] for line in members]
    if "fastsa" not in labels or "skipped" in members[labels.index("fastsa")]:
        how = "skipped"
    elif labels.index("fastsa") < labels.index("fastsa_warm"):
        how = "first"
    else:
        how = "after warm"
    return start, fitting.get(start), warm_ci, how


def measure(binary, name, path, budget):
    """The row of `name` at `budget` (None where no other member's plan fits or the budget is
    below every plan)."""
    auto = solve(binary, path, budget, "auto")
    if auto is None or not auto["fits"]:
        return None
    start, start_ci, warm_ci, how = cold_run_outcome(auto["members"])
    if start is None:
        return None
    nodes = auto_speed_bench.node_count(path)
    cold = solve(binary, path, budget, "fastsa", (f"convergence_window={quick_window(nodes)}",))
    best = min(auto["ci"], cold["ci"]) if cold["fits"] else auto["ci"]
    loss = 0.0 if how != "skipped" else auto["ci"] - best
    return {"name": name, "nodes": nodes, "budget": budget, "start": start, "start_ci": start_ci,
            "warm_ci": warm_ci, "how": how, "auto": auto, "cold": cold, "loss": loss}


def table_line(r):
    cold = r["cold"]
    cold_cell = f"{cold['ci']:+.2f}" if cold["fits"] else "over budget"
    return (f"| {r['name']} | {r['nodes']} | {r['budget']} % | {r['start']} {r['start_ci']:+.2f} "
            f"| {r['warm_ci']:+.2f} | {r['how']} | {r['auto']['ci']:+.2f} | "
            f"{r['auto']['work']:.2f} | {r['auto']['cpu']:.2f} | {cold_cell} | "
            f"{cold['work']:.2f} | {r['loss']:+.2f} |")


def summary(rows):
    skipped = [r for r in rows if r["how"] == "skipped"]
    after = [r for r in rows if r["how"] == "after warm"]
    worst = max(skipped, key=lambda r: r["loss"], default=None)
    lines = [f"{len(rows)} graph-budget pairs with a fitting start: cold run first in "
             f"{sum(r['how'] == 'first' for r in rows)}, after the warm runs in {len(after)}, "
             f"skipped in {len(skipped)}."]
    if worst is not None:
        met = "met" if worst["loss"] <= LOSS_BAR else "**not met**"
        lines.append(f"Largest loss where skipped: {worst['loss']:+.2f} points ({worst['name']} at "
                     f"{worst['budget']} %); bar ≤ {LOSS_BAR} point: {met}.")
    if after:
        gain = max(after, key=lambda r: r["warm_ci"] - r["auto"]["ci"])
        lines.append(f"Largest gain of a cold run after the warm runs: "
                     f"{gain['warm_ci'] - gain['auto']['ci']:+.2f} points ({gain['name']} at "
                     f"{gain['budget']} %), for {sum(r['cold']['work'] for r in after):.2f} units "
                     f"over those {len(after)} pairs.")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--remat", default=os.path.join(ROOT, "build", "src", "remat"))
    parser.add_argument("--budgets", default="50,60,70,80,90")
    parser.add_argument("--graphs", help="comma-separated graph names (default: all)")
    parser.add_argument("--models", default="", help="traced models to add (models_bench.py)")
    parser.add_argument("--graph-cache", help="folder keeping the traced models")
    parser.add_argument("--results", nargs="?", const=bench_results.default_path(
        "auto_cold_run_bench"), help="also write the table here")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    with tempfile.TemporaryDirectory() as tmp, \
            bench_results.recorded("auto_cold_run_bench", args.results):
        paths = dict(FILES)
        paths.update(moccasin_graphs())
        paths.update(generated_graphs(args.remat, tmp))
        models = [m for m in args.models.split(",") if m]
        paths.update(auto_speed_bench.traced_models(models, tmp, args.graph_cache))
        if args.graphs:
            wanted = args.graphs.split(",")
            unknown = [g for g in wanted if g not in paths]
            if unknown:
                raise SystemExit(f"--graphs: unknown {', '.join(unknown)}; "
                                 f"known: {', '.join(paths)}")
            paths = {g: paths[g] for g in wanted}
        print(f"`auto` at the default work limit ({WORK_LIMIT}) against FastSA's cold run alone "
              "(its quick convergence window, seed 1); CI in % of the default schedule's cost, "
              "from the simulator; work in units, CPU in seconds of the `remat solve` process.\n")
        print("| graph | nodes | budget | start (CI %) | warm runs' best CI % | cold run | "
              "auto CI % | auto units | auto CPU s | cold run alone CI % | its units | "
              "loss from skipping (points) |")
        print("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        rows = []
        for name, path in paths.items():
            for budget in budgets:
                r = measure(args.remat, name, path, budget)
                if r is not None:
                    rows.append(r)
                    print(table_line(r), flush=True)
        print()
        for line in summary(rows):
            print(line)


if __name__ == "__main__":
    main()
