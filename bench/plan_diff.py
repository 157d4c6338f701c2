"""plan_diff — the same solves through two `remat` binaries (two builds of the project), plan by
plan: whether the sequences are identical, and where not, both peaks and costs (from each build's
simulator, as `remat solve --json` prints them) and the first differing step. A refactor that
must not change plans is checked with it; a fix that changes them on purpose shows up as the
rows it touches.

    ./scripts/python bench/plan_diff.py OLD/remat NEW/remat [--old-args "--time-limit 60"]
        [--new-args "--work-limit 60"] [--graphs G1,G2] [--budgets 90,80,70]
        [--solvers none,fastsa] [--set moccasin|traced|all]

--set moccasin: the MOCCASIN table's graphs (RL 1-4, CM 1-2; REMAT_BENCH_DATA or
../shared/benchmarks/moccasin); --set traced: the traced ResNet-18 and GPT test graphs
(tests/data). Solvers whose runs stop on the wall clock in either build (auto, moccasin,
checkmate in builds without work limits) give plans that depend on the machine's load: compare
them only where both builds stop on work.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MOCCASIN = ["random_layered_n100_", "random_layered_n250_", "random_layered_n500_",
            "random_layered_n1000_", "fcn_8_vgg_32_416_608_3_train",
            "ResNet50_256_224_224_3_train"]
TRACED = ["tests/data/resnet18_b32_i128.json", "tests/data/blocks/hf_gpt2.json",
          "tests/data/blocks/gpt4_aot.json", "tests/data/blocks/gpt4_late_views.json"]


def moccasin_graphs():
    folder = os.environ.get("REMAT_BENCH_DATA",
                            os.path.join(ROOT, "..", "shared", "benchmarks", "moccasin"))
    names = sorted(os.listdir(folder))
    return [os.path.join(folder, next(n for n in names if n.startswith(p))) for p in MOCCASIN]


def solve(binary, graph, budget, solver, extra):
    """(sequence ids, peak, cost, status) or ("error", first line of stderr)."""
    command = [binary, "solve", graph, "--budget", f"{budget}%", "--solver", solver, "--json"]
    out = subprocess.run(command + shlex.split(extra), capture_output=True, text=True)
    if out.returncode != 0:
        return ("error", (out.stderr.strip().splitlines() or ["?"])[-1][:100])
    plan = json.loads(out.stdout)
    return ([step["id"] for step in plan["sequence"]], plan["peak_bytes"], plan["cost"],
            plan.get("status", "?"))


def summary(result):
    if result[0] == "error":
        return result[1]
    return f"{result[1]:,} / {result[2]:.6g} / {result[3]}"


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--old-args", default="")
    parser.add_argument("--new-args", default="")
    parser.add_argument("--set", default="all", choices=["moccasin", "traced", "all"])
    parser.add_argument("--graphs", default="")
    parser.add_argument("--budgets", default="90,80,70")
    parser.add_argument("--solvers", default="none,fastsa")
    args = parser.parse_args()
    if args.graphs:
        graphs = args.graphs.split(",")
    else:
        graphs = (moccasin_graphs() if args.set in ("moccasin", "all") else []) + (
            [os.path.join(ROOT, g) for g in TRACED] if args.set in ("traced", "all") else [])
    same = differ = 0
    print("| graph | budget | solver | plans | old peak / cost / status | new peak / cost / "
          "status |")
    print("| --- | --- | --- | --- | --- | --- |")
    for graph in graphs:
        name = os.path.basename(graph).split(".")[0][:32]
        for budget in args.budgets.split(","):
            for solver in args.solvers.split(","):
                old = solve(args.old, graph, budget, solver, args.old_args)
                new = solve(args.new, graph, budget, solver, args.new_args)
                if old[0] == "error" or new[0] == "error":
                    verdict = "both refuse" if old[0] == new[0] == "error" else "one refuses"
                    print(f"| {name} | {budget} | {solver} | {verdict} | {summary(old)} | "
                          f"{summary(new)} |", flush=True)
                    differ += verdict != "both refuse"
                    same += verdict == "both refuse"
                    continue
                if old[0] == new[0]:
                    verdict = "identical"
                    same += 1
                else:
                    verdict = f"differ from step {first_difference(old[0], new[0])}"
                    differ += 1
                print(f"| {name} | {budget} | {solver} | {verdict} | {summary(old)} | "
                      f"{summary(new)} |", flush=True)
    print(f"\n{same} identical (or refused by both), {differ} different")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
