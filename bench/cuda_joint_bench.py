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
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402
import joint_graph_file  # noqa: E402
from compile_bench import (TORCH_SOLVERS, RecordingPartition, SimulatingPartition,  # noqa: E402
                           fractions_of, listed)
from remat.torch import _compat  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "joint")


def pytorch_plan(joint, outputs, config, save_random=False):
    """PartitionStats (with the simulator's figures: compile_bench.simulated) of PyTorch's
    partition of a copy of `joint` under torch._functorch.config `config`; with `save_random`,
    random calls are ones it must save."""
    partitioner = RecordingPartition("pytorch", save_random)
    with torch._functorch.config.patch(config):
        partitioner(copy.deepcopy(joint), None, num_fwd_outputs=outputs)
    return partitioner.graphs[0]


def budget_plan(joint, outputs, fraction, solver, save_random=False):
    """pytorch_plan under PyTorch's activation memory budget `fraction`, solved by `solver`."""
    return pytorch_plan(joint, outputs, {"activation_memory_budget": fraction,
                                         "activation_memory_budget_solver": solver}, save_random)


def remat_plan(joint, outputs, fraction, budget_bytes=None):
    """(PartitionStats with the simulator's figures, CPU s) of the compile backend's partition of
    a copy of `joint` (remat auto; its default partition first, the fallback where remat's plan
    needs more) at `fraction`, or at `budget_bytes` of activation memory."""
    partitioner = SimulatingPartition(fraction, "auto",
                                      None if budget_bytes is None else [budget_bytes])
    start = time.process_time()
    partitioner(copy.deepcopy(joint), None, num_fwd_outputs=outputs)
    return partitioner.graphs[0], time.process_time() - start


def row(name, fraction, label, stats, status=""):
    megabytes = ("-" if stats.simulated_activation_bytes is None
                 else f"{stats.simulated_activation_bytes / 1e6:.3f}")
    return (f"| {name} | {fraction} | {label} | {megabytes} | "
            f"{stats.recomputed_flops / 1e6:.1f} | {status} |")


def bench_graph(name, fractions):
    joint, keywords = joint_graph_file.read(os.path.join(DATA, f"{name}.json.gz"))
    outputs = keywords["num_fwd_outputs"]
    with _compat.default_partition_config():
        default = pytorch_plan(joint, outputs, {})
    lines = [row(name, "-", "pytorch default", default)]
    print(lines[-1], flush=True)
    for fraction in fractions:
        theirs = {}
        for solver in TORCH_SOLVERS:
            theirs[solver] = budget_plan(joint, outputs, fraction, solver)
            if theirs[solver].redrawn:  # its gradients are not eager's: also its plan saving them
                theirs[f"{solver}, random saved"] = budget_plan(joint, outputs, fraction, solver,
                                                                save_random=True)
        for solver, stats in theirs.items():
            redrawn = f"{stats.redrawn} random calls drawn again" if stats.redrawn else ""
            lines.append(row(name, fraction, f"pytorch {solver}", stats, redrawn))
            print(lines[-1], flush=True)
        # remat never draws a random call again: against PyTorch's best plan that does not.
        best_solver, best = min(((s, f) for s, f in theirs.items() if not f.redrawn),
                                key=lambda item: (item[1].simulated_activation_bytes,
                                                  item[1].recomputed_flops))
        ours, seconds = remat_plan(joint, outputs, fraction)
        lines.append(row(name, fraction, "remat auto", ours,
                         f"{ours.status}, {seconds:.1f} CPU s"))
        print(lines[-1], flush=True)
        at_peak, seconds = remat_plan(joint, outputs, 1.0, best.simulated_activation_bytes)
        dominated = (at_peak.simulated_activation_bytes <= best.simulated_activation_bytes
                     and at_peak.recomputed_flops <= best.recomputed_flops)
        lines.append(row(name, fraction, f"remat auto at {best_solver}'s memory", at_peak,
                         f"{at_peak.status}, {seconds:.1f} CPU s; dominates {best_solver}: "
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
    graphs = listed(p, "--graphs", args.graphs, known, "graph")
    fractions = fractions_of(p, args.fractions)
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
