#!/usr/bin/env python3
"""examples_bench — the bundled PyTorch examples planned and run: planned against measured peak,
planned step time against eager.

Runs examples/train_resnet.py (torchvision ResNet-18) and examples/train_gpt.py (a small GPT) for
each solver at each budget. Per row: the simulator's baseline and planned peaks, the peak measured
while the plan runs (CPU: bytes of live tensor storages; GPU: torch.cuda.max_memory_allocated over
the step), the recomputed steps, the extra compute, whether loss and gradients equal eager PyTorch
bit for bit, and the median step time against the eager step (timed alternately). On a machine
with a GPU it runs there (`--device cpu` forces the CPU).

    ./scripts/python bench/examples_bench.py --solvers auto,fastsa,mincut --budgets 100%,50%,25%
    ./scripts/python bench/examples_bench.py --results     # also bench/results/examples_bench.md
"""
import argparse
import os
import subprocess
import sys

import bench_results

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = {"resnet18": "train_resnet.py", "gpt": "train_gpt.py"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", default=",".join(EXAMPLES), help="comma-separated: "
                   + ", ".join(EXAMPLES))
    p.add_argument("--solvers", default="auto,fastsa,mincut")
    p.add_argument("--budgets", default="100%,50%,25%")
    p.add_argument("--time-limit", type=float, default=30.0, help="seconds per solve")
    p.add_argument("--steps", type=int, default=5, help="timed steps per variant")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--results", nargs="?", const=bench_results.default_path("examples_bench"),
                   metavar="FILE", help="also write the tables to FILE (default "
                   "bench/results/examples_bench.md)")
    return p.parse_args()


def run_example(script, solver, args):
    command = [sys.executable, os.path.join(HERE, "..", "examples", script),
               "--budgets", args.budgets, "--solver", solver, "--time-limit",
               str(args.time_limit), "--steps", str(args.steps)]
    if args.device:
        command += ["--device", args.device]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"examples_bench: {script} --solver {solver} failed (exit {out.returncode}):\n"
                 + out.stderr[-3000:])
    return out.stdout


def main():
    args = parse_args()
    with bench_results.recorded("examples_bench", args.results):
        for name in args.examples.split(","):
            if name not in EXAMPLES:
                sys.exit(f"examples_bench: unknown example '{name}' (known: {', '.join(EXAMPLES)})")
            for solver in args.solvers.split(","):
                print(f"## {name}, solver {solver}\n\n```")
                print(run_example(EXAMPLES[name], solver, args).rstrip())
                print("```\n", flush=True)


if __name__ == "__main__":
    main()
