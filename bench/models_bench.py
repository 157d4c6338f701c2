#!/usr/bin/env python3
"""models_bench — every applicable solver and `auto` on traced real models.

Traces one training step of torchvision ResNet-18, ResNet-50, MobileNet-V2, DenseNet-121,
EfficientNet-B0, RegNet-Y-400MF, ViT-B/16 and the GPT example (examples/train_gpt.py, context 64)
at 4 and 12 layers, batch 32, images 128 x 128, then runs each registered solver and `auto` at
90 / 70 / 50 / 40 / 25 % of the baseline peak. The batch is chosen so that activations, not
parameters and gradients, hold most of the peak, as in the FastSA paper (batch 512): at batch 8
ResNet-18's lower bound is 64.7 % and ViT-B/16's (at 64 x 64) 99.9 %; at batch 32 they are 49.4 %
and 40.8 %. Budgets under the memory lower bound are marked, not run; a solver that refuses the
graph (no phases, no chain structure, too large) is "n/a". Prints peak %, CI % and the CPU
seconds of the solve (this process, one thread) per cell, then the summary lines, one per solver
and budget: the geometric mean of the cost ratio (as CI %) over the models where that budget is
at or above the lower bound and the solver took the graph (over-budget plans included), and how
many of them are within budget. Each `auto` cell's
winner and members (the plan's lists `auto_winner` and `auto_members`) go to stderr as HTML
comments.

Every figure comes from the simulator (remat.solve re-simulates). Slow on a small machine:
narrow it with --models, --budgets, --solvers and --time-limit; --graph-cache DIR traces each
model once (ViT-B/16 takes several minutes and 6 GB) and reloads it on later runs of the same
tracer (the file name carries a digest of python/remat/torch's source).

    ./scripts/python bench/models_bench.py \\
        --models resnet18,gpt4 --budgets 50,25 --solvers auto,fastsa --time-limit 60

--results writes the table to bench/results/models_bench.md (or the file given) as well.
"""
import argparse
import hashlib
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

import remat
import remat.torch as rt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import bench_results  # noqa: E402 (bench/, beside this file)

BUDGETS = [90, 70, 50, 40, 25]


def _vision(factory, image, batch, classes=10, **kwargs):
    def make():
        import torchvision.models as tvm
        torch.manual_seed(0)
        model = getattr(tvm, factory)(num_classes=classes, **kwargs)
        x = torch.randn(batch, 3, image, image)
        y = torch.randint(0, classes, (batch,))
        return model, (x, y), F.cross_entropy
    return make


def _gpt(layers, batch):
    def make():
        import train_gpt
        return train_gpt.make(batch, context=64, vocab=256, layers=layers)
    return make


def model_table(image, batch, vit_image=128):
    return {
        "resnet18": _vision("resnet18", image, batch),
        "resnet50": _vision("resnet50", image, batch),
        "mobilenet_v2": _vision("mobilenet_v2", image, batch),
        "densenet121": _vision("densenet121", image, batch),
        "efficientnet_b0": _vision("efficientnet_b0", image, batch),
        "regnet_y_400mf": _vision("regnet_y_400mf", image, batch),
        "vit_b_16": _vision("vit_b_16", vit_image, batch, image_size=vit_image),
        "gpt4": _gpt(4, batch),
        "gpt12": _gpt(12, batch),
    }


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="all", help="comma-separated (default: all): " +
                   ",".join(model_table(64, 2)))
    p.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="percent, comma-separated")
    p.add_argument("--solvers", default="all",
                   help="comma-separated (default: every registered solver but 'none', and auto)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (safety net)")
    p.add_argument("--image", type=int, default=128, help="image side for the CNNs")
    p.add_argument("--vit-image", type=int, default=128, help="image side for ViT-B/16")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--results", nargs="?", const=bench_results.default_path("models_bench"),
                   metavar="FILE", help="also write the table to FILE (default "
                   "bench/results/models_bench.md)")
    p.add_argument("--graph-cache", metavar="DIR",
                   help="keep traced graphs here as remat JSON and load them on later runs "
                        "(named by model, batch and image side)")
    return p.parse_args()


def tracer_revision():
    """A digest of the tracer's source: a cached graph traced by another tracer (before the
    convolution_backward split, say) is traced again instead of being reused."""
    package = os.path.dirname(os.path.abspath(rt.__file__))
    digest = hashlib.sha256()
    for file in sorted(f for f in os.listdir(package) if f.endswith(".py")):
        with open(os.path.join(package, file), "rb") as source:
            digest.update(file.encode() + b"\0" + source.read())
    return digest.hexdigest()[:10]


def load_or_trace(name, make, args):
    image = args.vit_image if name == "vit_b_16" else args.image
    cached = None
    if args.graph_cache:
        os.makedirs(args.graph_cache, exist_ok=True)
        cached = os.path.join(args.graph_cache,
                              f"{name}-b{args.batch}-i{image}-t{tracer_revision()}.json")
        if os.path.exists(cached):
            return remat.load(cached)
    model, batch, loss = make()
    g = rt.trace(model, batch, loss, name=name).graph
    if cached:
        remat.save(g, cached)
    return g


def geomean_ci(ratios):
    return 100.0 * (math.exp(sum(math.log(r) for r in ratios) / len(ratios)) - 1.0)


def summary_line(solver, budget, cells, not_applicable, num_models):
    """One summary line: how many solved models fit `budget`, and their geomean CI."""
    within = sum(1 for ok, _ in cells if ok)
    under_lb = num_models - len(cells) - not_applicable
    skipped = [f"{under_lb} under the lower bound"] if under_lb else []
    if not_applicable:
        skipped.append(f"{not_applicable} not applicable")
    geomean = (f"geomean CI {geomean_ci([r for _, r in cells]):+.2f} %" if cells
               else "no geomean (no model solved)")
    return (f"{solver} at {budget} %: {within} of {len(cells)} models within budget "
            f"(of {num_models}" + "".join(f"; {x}" for x in skipped) + f"); {geomean}")


def main():
    args = parse_args()
    with bench_results.recorded("models_bench", args.results):
        run(args)


def run(args):
    table = model_table(args.image, args.batch, args.vit_image)
    models = list(table) if args.models == "all" else args.models.split(",")
    for m in models:
        if m not in table:
            sys.exit(f"models_bench: unknown model '{m}' (known: {', '.join(table)})")
    budgets = [int(b) for b in args.budgets.split(",")]
    solvers = [s for s in remat.solvers() if s not in ("none", "auto")] + ["auto"] \
        if args.solvers == "all" else args.solvers.split(",")
    print(f"# models_bench (batch {args.batch}, image {args.image}, ViT image {args.vit_image}, "
          f"time limit "
          f"{args.time_limit:g} s per solve, torch {torch.__version__})\n")
    print("| model | nodes | lower bound % | solver | " +
          " | ".join(f"{b} %: peak / CI / CPU s" for b in budgets) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in budgets) + " |")
    # (within budget, cost ratio) per solver and budget, for the summary lines
    results = {(s, b): [] for s in solvers for b in budgets}
    not_applicable = {(s, b): 0 for s in solvers for b in budgets}
    for m in models:
        t0 = time.perf_counter()
        g = load_or_trace(m, table[m], args)
        trace_s = time.perf_counter() - t0
        base_peak, base_cost = remat.baseline(g)
        lb = remat.memory_lower_bound(g)
        lb_pct = 100.0 * lb / base_peak
        for solver in solvers:
            cells = []
            for b in budgets:
                budget = base_peak * b // 100
                if budget < lb:
                    cells.append("under LB")
                    continue
                cpu = time.process_time()
                try:
                    r = remat.solve(g, budget, solver, time_limit=args.time_limit)
                except ValueError as e:
                    cells.append("n/a")
                    not_applicable[solver, b] += 1
                    print(f"<!-- {m} {solver} {b}%: {e} -->", file=sys.stderr)
                    continue
                peak = 100.0 * r.peak_bytes / base_peak
                ci = 100.0 * (r.cost - base_cost) / base_cost
                mark = "" if r.peak_bytes <= budget else " (over)"
                cells.append(f"{peak:.1f}{mark} / {ci:+.2f} / {time.process_time() - cpu:.1f}")
                results[solver, b].append((r.peak_bytes <= budget, r.cost / base_cost))
                if solver == "auto":
                    lists = dict(r.lists)
                    print(f"<!-- {m} auto {b}%: winner {', '.join(lists.get('auto_winner', []))}; "
                          f"members: {'; '.join(lists.get('auto_members', []))} -->",
                          file=sys.stderr, flush=True)
            print(f"| {m} | {g.num_nodes} | {lb_pct:.1f} | {solver} | " + " | ".join(cells) + " |",
                  flush=True)
        print(f"<!-- {m}: traced (or loaded) in {trace_s:.1f} s -->", file=sys.stderr)
    print()
    for solver in solvers:
        for b in budgets:
            print(summary_line(solver, b, results[solver, b], not_applicable[solver, b],
                               len(models)))

if __name__ == "__main__":
    main()
