"""FastSA's spread over seeds: how far one walk's plan lands from another's on the same graph.

    ./scripts/python bench/fastsa_spread_bench.py [--results] [--remat build/src/remat] \
        [--budget 50] [--seeds 6] [--graphs NAME,...]

Per graph (bench/auto_speed_bench.py's names: `random-layered_1000_s2` is `remat gen
random-layered --nodes 1000 --seed 2`), FastSA alone at the budget with seeds 1 to --seeds, twice:
with the convergence window `auto`'s quick cold run has (docs/solvers/auto.md, "Quick first runs")
and with FastSA's own. Each seed's plan (CI %, or the peak when over the budget), the best and the
worst, their spread in points and the mean CPU seconds of a run; beside them `auto`'s default plan.
The planning-speed bar (`bench/auto_speed_bench.py --search`) holds `auto`'s plan, one quick walk
where FastSA is the only member that applies, to within 1 point of a 20-unit search, which keeps
the best of many walks: where one walk's plans spread over more than that point from seed to seed,
the gap to the search is the walk's luck as much as its length.
"""

import argparse
import os
import statistics
import tempfile

import auto_speed_bench as speed
import bench_results

DEFAULT_GRAPHS = ("resnet18,joint_1000,random-layered_1000,random-layered_1000_s2,"
                  "random-layered_1000_s3,random-layered_1200_s1,random-layered_1200_s2")
WORK_LIMIT = 60  # the default work limit: runs stop on convergence well inside it


def quick_window(nodes):
    """The convergence window of `auto`'s quick FastSA runs, as quick_fastsa_window in
    src/solvers/auto/auto.cc computes it (FastSA alone has no such setting to ask for): 2,000
    iterations per node within [25,000, 250,000], or 50 per node when that is more."""
    return max(min(max(2000 * nodes, 25000), 250000), 50 * nodes)


def spread(runs):
    """(best, worst, spread in points, unit) of one setting's runs: their CI where every run fits
    the budget, else the peak (% of the default schedule's)."""
    if any(r["status"] == "over-budget" for r in runs):
        peaks = [r["peak"] for r in runs]
        return min(peaks), max(peaks), max(peaks) - min(peaks), "peak"
    costs = [r["ci"] for r in runs]
    return min(costs), max(costs), max(costs) - min(costs), "CI"


def setting_row(name, nodes, label, runs):
    failed = [r for r in runs if "error" in r]
    if failed:
        return f"| {name} | {nodes} | {label} | error: {failed[0]['error']} | | | | |"
    best, worst, points, unit = spread(runs)
    plans = " / ".join(speed.cell(r) for r in runs)
    mark = " %" if unit == "peak" else ""
    return (f"| {name} | {nodes} | {label} | {plans} | {best:.2f}{mark} | {worst:.2f}{mark} | "
            f"{points:.2f} {unit} | {statistics.mean(r['cpu'] for r in runs):.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remat", default=os.path.join(speed.ROOT, "build", "src", "remat"))
    parser.add_argument("--budget", type=float, default=50, help="%% of the default schedule's "
                        "peak")
    parser.add_argument("--seeds", type=int, default=6, help="FastSA runs per graph and setting")
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS, help="comma-separated names (as "
                        "bench/auto_speed_bench.py's --graphs)")
    parser.add_argument("--results", nargs="?", const=bench_results.default_path(
        "fastsa_spread_bench"), default=None, help="write the figures to bench/results/")
    args = parser.parse_args()
    if args.seeds < 2:
        parser.error("--seeds: at least 2 (a spread needs two walks)")
    wanted = [g for g in args.graphs.split(",") if g]
    time_limit = 10 * WORK_LIMIT + 10
    with tempfile.TemporaryDirectory() as tmp, \
            bench_results.recorded("fastsa_spread_bench", args.results):
        paths = speed.graph_paths(args.remat, tmp, wanted)
        unknown = [g for g in wanted if g not in paths]
        if unknown:
            parser.error(f"--graphs: unknown graph {unknown[0]} (names as "
                         "bench/auto_speed_bench.py's --graphs takes them)")
        print(f"FastSA alone at {args.budget:g} % of the default schedule's peak, seeds 1 to "
              f"{args.seeds}, with `auto`'s quick convergence window and with FastSA's own; "
              "`auto`'s default plan beside them. Plans: CI %, or the peak when over the budget; "
              "CPU s: the mean of a run's.\n")
        print("| graph | nodes | run | plans, seed by seed | best | worst | spread | CPU s |")
        print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |")
        for name in wanted:
            path = paths[name]
            nodes = speed.node_count(path)
            window = quick_window(nodes)
            for label, params in ((f"FastSA, window {window:,}",
                                   [f"convergence_window={window}"]), ("FastSA, own", [])):
                runs = [speed.solve(args.remat, path, args.budget, WORK_LIMIT, time_limit,
                                    solver="fastsa", params=params, seed=seed)
                        for seed in range(1, args.seeds + 1)]
                print(setting_row(name, nodes, label, runs), flush=True)
            auto = speed.solve(args.remat, path, args.budget, WORK_LIMIT, time_limit)
            print(f"| {name} | {nodes} | auto (default) | {speed.cell(auto)} | | | | "
                  f"{auto.get('cpu', 0):.2f} |", flush=True)


if __name__ == "__main__":
    main()
