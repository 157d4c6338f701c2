"""remat's partition against PyTorch's activation_memory_budget on joint graphs a GPU machine made
(tests/data/joint/*_cuda.json.gz: compile_bench's models on an H100, PyTorch 2.11, CUDA kernels
and Inductor's CUDA decompositions; bench/partition_dump.py writes them), partitioned here on fake
CUDA tensors, without a GPU. Every figure is remat's simulator's of the two graphs each
partitioner makes (simulate_partition: one model for both), and the FLOPs each recomputes:

    ./scripts/python bench/cuda_joint_bench.py                  # every graph, 0.8/0.5/0.3/0.1
    ./scripts/python bench/cuda_joint_bench.py --graphs hf_llama_cuda --fractions 0.8

For each fraction: PyTorch's default partition, its budget solvers' plans, remat `auto` at the
fraction (as the compile backend plans it: within the default partition's memory where only
the backward's copies are recomputed) and remat at the memory of PyTorch's best plan that draws
no random call again (a plan that does gives other gradients than eager's; remat's never do),
and whether remat dominates that plan (no more memory, no more FLOPs). Writes
bench/results/cuda_joint_bench.md (--results).
"""

import argparse
import copy
import glob
import importlib
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402
import joint_graph_file  # noqa: E402
from remat.torch import _compat  # noqa: E402

partition_module = importlib.import_module("remat.torch.partition")
compile_module = importlib.import_module("remat.torch.compile")
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "joint")
TORCH_SOLVERS = ("greedy", "ilp", "dp")


def pytorch_plan(joint, outputs, fraction, solver, save_random=False):
    """(simulated activation bytes, recomputed FLOPs, random calls drawn again) of PyTorch's
    budget partition; with `save_random`, random calls are ones it must save."""
    theirs = copy.deepcopy(joint)
    config = {"activation_memory_budget": fraction, "activation_memory_budget_solver": solver}
    with torch._functorch.config.patch(config):
        fw, bw = _compat.min_cut_partition(theirs, None, save_random=save_random,
                                           num_fwd_outputs=outputs)
    simulated = partition_module.simulate_partition(theirs, fw, bw, outputs)
    stats = partition_module.partition_stats(fw, bw, outputs)
    return simulated.activation_bytes, stats.recomputed_flops, stats.redrawn


def remat_plan(joint, outputs, budget, memory_cap):
    """(simulated activation bytes, recomputed FLOPs, status, CPU s) of remat's partition."""
    ours = copy.deepcopy(joint)
    start = time.process_time()
    fw, bw = partition_module.partition(ours, None, solver="auto", budget=budget,
                                        work_limit=partition_module.scaled_work_limit,
                                        memory_cap=memory_cap, num_fwd_outputs=outputs)
    seconds = time.process_time() - start
    stats = partition_module.partition.last
    simulated = partition_module.simulate_partition(ours, fw, bw, outputs).activation_bytes
    worse = compile_module._worse_than_default(ours, fw, bw, memory_cap, outputs)
    status = stats.status if worse is None else "falls back: " + worse
    return simulated, stats.recomputed_flops, status, seconds


def row(name, fraction, label, figures, status=""):
    megabytes, flops = figures[0] / 1e6, figures[1] / 1e6
    return f"| {name} | {fraction} | {label} | {megabytes:.3f} | {flops:.1f} | {status} |"


def bench_graph(name, fractions):
    joint, keywords = joint_graph_file.read(os.path.join(DATA, f"{name}.json.gz"))
    outputs = keywords["num_fwd_outputs"]
    (fw, bw), default_bytes = compile_module._default_partition(
        _compat.copy_graph_module(joint), None, {"num_fwd_outputs": outputs}, outputs)
    default_flops = partition_module.partition_stats(fw, bw, outputs).recomputed_flops
    lines = [row(name, "-", "pytorch default", (default_bytes, default_flops))]
    print(lines[-1], flush=True)
    for fraction in fractions:
        theirs = {}
        for solver in TORCH_SOLVERS:
            theirs[solver] = pytorch_plan(joint, outputs, fraction, solver)
            if theirs[solver][2]:  # its gradients are not eager's: also its plan that saves them
                theirs[f"{solver}, random saved"] = pytorch_plan(joint, outputs, fraction,
                                                                 solver, save_random=True)
        for solver, figures in theirs.items():
            redrawn = f"{figures[2]} random calls drawn again" if figures[2] else ""
            lines.append(row(name, fraction, f"pytorch {solver}", figures, redrawn))
            print(lines[-1], flush=True)
        # remat never draws a random call again: against PyTorch's best plan that does not.
        best_solver, best = min(((s, f) for s, f in theirs.items() if not f[2]),
                                key=lambda item: (item[1][0], item[1][1]))
        ours = remat_plan(joint, outputs, fraction, default_bytes)
        lines.append(row(name, fraction, "remat auto", ours, f"{ours[2]}, {ours[3]:.1f} CPU s"))
        print(lines[-1], flush=True)
        at_peak = remat_plan(joint, outputs, int(best[0]), default_bytes)
        dominated = at_peak[0] <= best[0] and at_peak[1] <= best[1]
        lines.append(row(name, fraction, f"remat auto at {best_solver}'s memory", at_peak,
                         f"{at_peak[2]}, {at_peak[3]:.1f} CPU s; dominates {best_solver}: "
                         f"{'yes' if dominated else 'no'}"))
        print(lines[-1], flush=True)
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    known = sorted(os.path.basename(f)[:-len(".json.gz")]
                   for f in glob.glob(os.path.join(DATA, "*_cuda.json.gz")))
    p.add_argument("--graphs", default=",".join(known), help=f"of {', '.join(known)}")
    p.add_argument("--fractions", default="0.8,0.5,0.3,0.1")
    p.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results",
                                                      "cuda_joint_bench.md"))
    args = p.parse_args()
    graphs = args.graphs.split(",")
    unknown = [g for g in graphs if g not in known]
    if unknown:
        p.error(f"--graphs: unknown graph {unknown[0]!r} (known: {', '.join(known)})")
    try:
        fractions = [float(f) for f in args.fractions.split(",")]
    except ValueError:
        p.error(f"--fractions: {args.fractions!r} is not a comma-separated list of numbers")
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    lines = ["| graph | fraction | partition | simulated activation MB | recomputed MFLOP "
             "| status |", "|" + " --- |" * 6]
    print("\n".join(lines), flush=True)
    for name in graphs:
        lines += bench_graph(name, fractions)
    with open(args.results, "w") as f:
        f.write(bench_results.header("cuda_joint_bench") + "\n" + "\n".join(lines) + "\n")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
