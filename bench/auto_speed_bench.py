"""`auto`'s CPU seconds and plan quality against its work limit, on graphs of about 250 to 100,000
nodes: the default work limit beside larger ones, side by side in one run.

    ./scripts/python bench/auto_speed_bench.py [--results] [--remat build/src/remat] \
        [--budget 50] [--work-limits 60,240] [--graphs NAME,...] [--repeat] [--progress] \
        [--search 20 [--fastsa-alone]] [--models mobilenet_v2,gpt4,...] [--graph-cache DIR]

Graphs: tests/data/resnet18_b32_i128.json, tests/data/blocks/{hf_gpt2,hf_llama,hf_t5}.json, and
`remat gen joint` / `remat gen random-layered` graphs of 1,000, 2,500 and 10,000 nodes (written to
a temporary folder; `--graphs` picks by name); the 100,000-node ones (joint_100000,
random-layered_100000: minutes each) only when `--graphs` names them. `--graphs` also takes
another seed of a generated graph (`random-layered_1000_s2`: `remat gen random-layered --nodes
1000 --seed 2`; the others have seed 1). `--models` traces
bench/models_bench.py's models (torchvision's and the GPT example, batch 32, images 128 x 128,
with remat.torch on this machine; `--graph-cache` keeps the traces as models_bench's does) and adds
them under their names. Per graph and work limit: the CPU seconds of the `remat solve --solver
auto` process (reading the graph included), its peak resident memory (ru_maxrss), the work units
it spent, why it stopped, status, peak and CI (% of the default schedule, from the simulator as
`remat solve --json` prints them) and the member whose plan won. The time limit is the CLI's
backstop for the largest work limit, so every run stops on work or convergence, never on the
clock. `--budget-for NAME=PCT,...` solves those graphs at another budget (a graph where the
default budget is below every plan any member finds).

Bars (issue: planning speed, time given is time used): CPU ≤ 3 s up to 1,000 nodes, ≤ 20 s at
10,000 nodes and ≤ 300 s (and 2 GB of memory) at 100,000 with the default limit; with a larger
limit a CI no worse (`ci ≤ default` column).
`--fastsa-alone` (with `--search`) runs FastSA alone at its own defaults beside the default `auto`
and says whether `auto`'s plan is no worse (its cold run has quick settings, so this is measured,
not guaranteed). `--repeat` runs each larger limit twice and checks the plan is the same
(determinism: the same graph, options, seed and work limit give the same plan). `--progress`
prints `auto`'s best plan over the work spent (the plan's `auto_best_*` series) for the largest
limit.
"""

import argparse
import json
import math
import os
import re
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
# Minutes each: run only when --graphs names them.
LARGE = [("joint", 100000), ("random-layered", 100000)]
RSS_BAR_MB = 2048  # the planner's memory on a 100,000-node graph


# A generated graph with another seed than 1, by name (KIND_NODES_sSEED).
SEEDED = re.compile(r"(joint|random-layered)_(\d+)_s(\d+)")


def graph_paths(binary, directory, wanted):
    paths = dict(FILES)
    for kind, nodes in GENERATED + LARGE:
        name = f"{kind}_{nodes}"
        if (wanted and name not in wanted) or (not wanted and (kind, nodes) in LARGE):
            continue
        paths[name] = generated(binary, directory, name, kind, nodes, 1)
    for name in wanted or ():
        seeded = SEEDED.fullmatch(name)
        if seeded:
            kind, nodes, seed = seeded.groups()
            paths[name] = generated(binary, directory, name, kind, int(nodes), int(seed))
    return {k: v for k, v in paths.items() if not wanted or k in wanted}


def generated(binary, directory, name, kind, nodes, seed):
    """The path of `remat gen KIND --nodes NODES --seed SEED`'s graph, written to `directory`."""
    path = os.path.join(directory, f"{name}.json")
    subprocess.run([binary, "gen", kind, "--nodes", str(nodes), "--seed", str(seed), "-o", path],
                   check=True, capture_output=True)
    return path


# Runs argv[2:] and writes its CPU seconds and peak resident memory (KB) to the file argv[1]. A
# child forked from this bench starts with the bench's resident memory as its peak (torch makes it
# a gigabyte); a grandchild forked from this small interpreter does not.
RUSAGE_WRAPPER = """import os, sys
pid = os.spawnv(os.P_NOWAIT, sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_child(command):
    """Runs `command`; returns its exit code, stdout, stderr, CPU seconds and peak resident memory
    in MB, its own (RUSAGE_WRAPPER)."""
    with tempfile.NamedTemporaryFile("r") as usage:
        done = subprocess.run([sys.executable, "-c", RUSAGE_WRAPPER, usage.name, *command],
                              capture_output=True, text=True)
        figures = usage.read().split()  # none when the command could not start
        cpu, rss_kb = (float(x) for x in figures) if figures else (0.0, 0.0)
    return done.returncode, done.stdout, done.stderr, cpu, rss_kb / 1024


def solve(binary, path, budget, work_limit, time_limit, solver="auto", params=(), seed=None):
    command = [binary, "solve", path, "--solver", solver, "--budget", f"{budget}%", "--json",
               "--work-limit", str(work_limit), "--time-limit", str(time_limit)]
    if seed is not None:
        command += ["--seed", str(seed)]
    for p in params:
        command += ["--param", p]
    code, stdout, stderr, cpu, rss = run_child(command)
    if code != 0:
        lines = stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {code}", "cpu": cpu, "rss": rss}
    plan = json.loads(stdout)
    stats = plan["stats"]
    return {"status": plan["status"], "peak": plan["peak_percent_of_baseline"],
            "ci": plan["cost_increase_percent"], "cpu": cpu, "rss": rss,
            "work": stats.get("work", 0),
            "stop": stats.get("stop_reason", "?"), "sequence": plan.get("sequence"),
            "winner": stats.get("lists", {}).get("auto_winner", [solver])[0],
            "series": stats.get("series", {}), "nodes": plan.get("nodes")}


def traced_models(names, directory, cache):
    """bench/models_bench.py's models `names`, traced here (batch 32, images 128 x 128; reloaded
    from `cache` when given and traced by the same tracer) and written to `directory`."""
    if not names:
        return {}
    import remat
    import models_bench
    settings = argparse.Namespace(batch=32, image=128, vit_image=128, graph_cache=cache)
    table = models_bench.model_table(settings.image, settings.batch, settings.vit_image)
    paths = {}
    for name in names:
        if name not in table:
            raise SystemExit(f"--models: '{name}' is not one of {', '.join(table)}")
        path = os.path.join(directory, f"{name}.json")
        remat.save(models_bench.load_or_trace(name, table[name], settings), path)
        paths[name] = path
    return paths


def node_count(path):
    with open(path, encoding="utf-8") as f:
        return len(json.load(f)["nodes"])


def row(name, nodes, limit, r, default):
    if "error" in r:
        return f"| {name} | {nodes} | {limit:g} | error: {r['error']} | | | | | | | | |"
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
    return (f"| {name} | {nodes} | {limit:g} | {r['cpu']:.2f} | {r['rss']:.0f} | {r['work']:.2f} | "
            f"{r['stop']} | {r['status']} | {r['peak']:.1f} | {r['ci']:+.2f} | {r['winner']} | "
            f"{no_worse} |")


def cell(r):
    """A plan as one table cell: CI within budget, the peak when over it."""
    if "error" in r:
        return "n/a"
    if r["status"] == "over-budget":
        return f"over ({r['peak']:.1f} %)"
    return f"{r['ci']:+.2f}"


def score(r):
    """Orders plans by the better-plan rule (smaller is better): within budget and cheaper, else
    the lower peak; a member that did not apply is last."""
    if "error" in r:
        return (2, 0.0)
    return (0, r["ci"]) if r["status"] != "over-budget" else (1, r["peak"])


def gap_to_search(default, searched):
    """The default's gap to the search, as (points, unit mark): CI points, or, where both plans
    are over the budget at different peaks, points of the default schedule's peak."""
    over = default["status"] == "over-budget"
    if over and round(default["peak"], 1) != round(searched["peak"], 1):
        return default["peak"] - searched["peak"], " peak"
    return default["ci"] - searched["ci"], ""


def speed_bar(nodes):
    """The issue's CPU bar for the default `auto` at this size (seconds)."""
    return 3.0 if nodes <= 1000 else 20.0 if nodes <= 10000 else 300.0


def memory_bar(nodes):
    """The issue's bar on the planner's memory (MB): 2 GB on graphs above 10,000 nodes."""
    return RSS_BAR_MB if nodes > 10000 else None


def search_limit(search, default):
    """The search's work limit: `search`, or twice the work the default spent where that is more
    (a search with less work than the default is no search)."""
    spent = default.get("work", 0) if default else 0
    return max(search, float(math.ceil(2 * spent)))


def search_summary(rows, search):
    alone = any(a is not None for *_, a in rows)
    print(f"\nThe default against a {search:g}-unit search (`anytime=true` at {search:g} units, "
          "or twice the default's work where that is more), "
          "per graph: the default's CPU seconds against the bar (3 s up to 1,000 nodes, 20 s up "
          f"to 10,000, 300 s above, where its resident memory must also stay within "
          f"{RSS_BAR_MB} MB) and its CI gap to the search (bar: 1 point; where both plans are "
          "over the budget, the better-plan rule compares peaks first, so the gap is then in "
          "points of the default schedule's peak, marked `peak`, and the CI gap only where the "
          "peaks are equal)" +
          ("; beside them FastSA alone at its own defaults and the same work limit, and whether "
           "`auto`'s plan is no worse than it" if alone else "") + ".\n")
    extra_head = (" FastSA alone CI % | FastSA alone CPU s | auto ≤ FastSA alone |" if alone
                  else "")
    print("| graph | nodes | default CPU s | bar s | default RSS MB | default CI % | search CI % "
          "| gap (points) | bars met |" + extra_head)
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |" +
          (" ---: | ---: | --- |" if alone else ""))
    for name, nodes, default, searched, fastsa in rows:
        if "error" in default or "error" in searched:
            print(f"| {name} | {nodes} | | | | | | | error |" + (" | | |" if alone else ""))
            continue
        same = (default["status"] == "over-budget") == (searched["status"] == "over-budget")
        gap, unit = gap_to_search(default, searched) if same else (float("nan"), "")
        rss_ok = memory_bar(nodes) is None or default["rss"] <= memory_bar(nodes)
        met = default["cpu"] <= speed_bar(nodes) and rss_ok and same and gap <= 1.0
        extra = ""
        if fastsa is not None:
            no_worse = score(default) <= score(fastsa)
            extra = (f" {cell(fastsa)} | {fastsa['cpu']:.2f} | "
                     f"{'yes' if no_worse else '**no**'} |")
        print(f"| {name} | {nodes} | {default['cpu']:.2f} | {speed_bar(nodes):g} | "
              f"{default['rss']:.0f} | {cell(default)} | {cell(searched)} | {gap:+.2f}{unit} | "
              f"{'yes' if met else '**no**'} |"
              + extra)


CURVE_MEMBERS = ("fastsa", "rockmate", "rotor", "mincut", "checkmate")


def timed_cell(r):
    """A curve cell: the plan, its CPU seconds, and † when the clock (not the work) ended it."""
    if "error" in r:
        return f"error: {r['error']}"
    clock = " †" if r["stop"] in ("time_limit", "interrupted") else ""
    return f"{cell(r)} ({r['cpu']:.0f} s{clock})"


def curve(binary, paths, names, budget, limits, time_cap):
    print(f"\nQuality over work: `auto` and each member alone with the same work limit, at "
          f"{budget:g} % (CI %, or the peak when over budget; CPU seconds in brackets; † the "
          f"wall-clock backstop, {time_cap:g} s at most, ended the run before its work limit). "
          "Goal: `auto` no worse than the best member at every limit.\n")
    print("| graph | nodes | work limit | auto | auto's winner | " + " | ".join(CURVE_MEMBERS) +
          " | best member | auto ≤ best |")
    print("| --- | ---: | ---: | --- | --- | " + " | ".join("---" for _ in CURVE_MEMBERS) +
          " | --- | --- |")
    for name in names:
        for limit in limits:
            time_limit = min(10 * limit + 10, time_cap)
            a = solve(binary, paths[name], budget, limit, time_limit)
            members = {m: solve(binary, paths[name], budget, limit, time_limit, solver=m)
                       for m in CURVE_MEMBERS}
            best = min(members, key=lambda m: score(members[m]))
            ok = "error" not in a and score(a) <= score(members[best])
            print(f"| {name} | {node_count(paths[name])} | {limit:g} | {timed_cell(a)} | "
                  f"{a.get('winner', '')} | " +
                  " | ".join(timed_cell(members[m]) for m in CURVE_MEMBERS) +
                  f" | {best} | {'yes' if ok else '**no**'} |", flush=True)


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
                        help="comma-separated names (default: all; `none`: the curve alone): " +
                        ", ".join(list(FILES) + [f"{k}_{n}" for k, n in GENERATED]) +
                        "; KIND_NODES_sSEED: a generated graph with another seed")
    parser.add_argument("--repeat", action="store_true",
                        help="run each larger limit twice and compare the plans")
    parser.add_argument("--progress", action="store_true",
                        help="print the best plan over the work spent, largest limit")
    parser.add_argument("--extra", default="",
                        help="more graphs, NAME=PATH,... (e.g. models_bench's --graph-cache files)")
    parser.add_argument("--models", default="",
                        help="bench/models_bench.py's models to trace here and add (e.g. "
                        "mobilenet_v2,gpt4,regnet_y_400mf; needs the remat Python package)")
    parser.add_argument("--graph-cache", default=None, metavar="DIR",
                        help="with --models: keep the traced graphs here (as models_bench's "
                        "--graph-cache) and reload them on later runs")
    parser.add_argument("--budget-for", default="",
                        help="NAME=PCT,...: these graphs at this budget instead of --budget")
    parser.add_argument("--search", type=float, default=0,
                        help="also run `auto` with anytime=true at this work limit per graph and "
                        "compare the first limit's plan and CPU seconds to it (the issue: 60)")
    parser.add_argument("--fastsa-alone", action="store_true",
                        help="with --search: also run FastSA alone at its own defaults and the "
                        "first work limit, and compare `auto`'s plan to it")
    parser.add_argument("--curve", default="",
                        help="work limits (e.g. 3,30,300): `auto` and each member alone at each, "
                        "on the --curve-graphs")
    parser.add_argument("--curve-graphs", default="", help="comma-separated graph names")
    parser.add_argument("--curve-time-cap", type=float, default=1e7,
                        help="the curve's wall-clock backstop per run is 10 x its work limit + "
                        "10 s, at most this (checkmate's MILP on a few hundred nodes spends "
                        "seconds per unit); runs it ends are marked †")
    parser.add_argument("--results", nargs="?", const=bench_results.default_path(
        "auto_speed_bench"), default=None, help="write the figures to bench/results/")
    args = parser.parse_args()
    extra = {}
    for item in filter(None, args.extra.split(",")):
        if "=" not in item:
            parser.error(f"--extra: '{item}' is not NAME=PATH")
        name, path = item.split("=", 1)
        extra[name] = path
    budget_for = {}
    for item in filter(None, args.budget_for.split(",")):
        if "=" not in item:
            parser.error(f"--budget-for: '{item}' is not NAME=PCT")
        name, pct = item.split("=", 1)
        budget_for[name] = float(pct)
    limits = [float(x) for x in args.work_limits.split(",")]
    wanted = [g for g in args.graphs.split(",") if g]
    time_limit = 10 * max(limits) + 10

    with tempfile.TemporaryDirectory() as tmp, \
            bench_results.recorded("auto_speed_bench", args.results):
        models = traced_models([m for m in args.models.split(",") if m], tmp, args.graph_cache)
        paths = graph_paths(args.remat, tmp, wanted) | extra | models
        if wanted == ["none"]:  # the curve alone
            paths = {}
        curve_names = [g for g in args.curve_graphs.split(",") if g]
        print(f"`auto` at {args.budget:g} % of the default schedule's peak" +
              "".join(f", {n} at {b:g} %" for n, b in budget_for.items()) +
              "; CPU seconds and peak resident memory (RSS) of the `remat solve` process; work "
              f"limits {', '.join(f'{x:g}' for x in limits)} (time limit {time_limit:g} s, never "
              "reached).\n")
        print("| graph | nodes | work limit | CPU s | RSS MB | work | stopped | status | peak % | "
              "CI % | winner | ≤ default |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- | --- |")
        progress = []
        mismatches = []
        searched = []
        for name, path in paths.items():
            nodes = node_count(path)
            budget = budget_for.get(name, args.budget)
            default = None
            for limit in limits:
                r = solve(args.remat, path, budget, limit, time_limit)
                r["limit"] = limit
                if default is None:
                    default = r
                print(row(name, nodes, limit, r, default), flush=True)
                if args.repeat and limit != limits[0] and "error" not in r:
                    again = solve(args.remat, path, budget, limit, time_limit)
                    if again.get("sequence") != r["sequence"]:
                        mismatches.append(f"{name} at {limit:g}")
                if limit == max(limits) and "error" not in r:
                    progress.append((name, r))
            if args.search:
                search = search_limit(args.search, default)
                r = solve(args.remat, path, budget, search, 10 * search + 10,
                          params=["anytime=true"])
                r["limit"] = search
                print(row(name, nodes, search, r, default).replace(
                    f"| {search:g} |", f"| {search:g} (search) |", 1), flush=True)
                alone = None
                if args.fastsa_alone:
                    alone = solve(args.remat, path, budget, limits[0], time_limit,
                                  solver="fastsa")
                    alone["limit"] = limits[0]
                    print(row(name, nodes, limits[0], alone, None).replace(
                        f"| {limits[0]:g} |", f"| {limits[0]:g} (fastsa alone) |", 1), flush=True)
                searched.append((name, nodes, default, r, alone))
        if searched:
            search_summary(searched, args.search)
        if args.repeat:
            print("\nDeterminism (each larger limit run twice): " +
                  ("the same plan every time" if not mismatches else
                   "**different plans**: " + ", ".join(mismatches)))
        if args.progress:
            print(f"\nBest plan over the work spent (work limit {max(limits):g}; units: peak %, "
                  "CI %):\n")
            for name, r in progress:
                print_progress(name, r)
        if args.curve:
            every = graph_paths(args.remat, tmp, curve_names) | extra
            curve(args.remat, every | models, curve_names, args.budget,
                  [float(x) for x in args.curve.split(",")], args.curve_time_cap)


if __name__ == "__main__":
    sys.exit(main())
