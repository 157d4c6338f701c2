#!/usr/bin/env python3
"""cuda_memory_check — where a plan's measured GPU peak departs from the planned one, call by call.

For each bundled example (examples/train_resnet.py, examples/train_gpt.py) and budget, plans one
training step, then runs the plan's module one call at a time on the GPU and records after each
call: the bytes of live tensor storages (what the simulator counts, as on the CPU) and
torch.cuda's allocated bytes and peak during the call (peak statistics reset before it), all
above what was allocated before the step. Prints the planned peak, the peak of live storages, the
measured peak, and the calls whose peak during the call is furthest above the live storages
around it (workspaces of library calls, allocator rounding, storages the run holds that the plan
does not).

    python3 bench/cuda_memory_check.py --budgets 100%,50%,25% --top 8     # on a GPU machine
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
from remat.torch import _compat  # noqa: E402
from remat.torch.execute import _LiveBytes  # noqa: E402

MB = 1e6


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", default="resnet18,gpt")
    p.add_argument("--budgets", default="100%,50%,25%")
    p.add_argument("--solver", default="auto")
    p.add_argument("--time-limit", type=float, default=10.0)
    p.add_argument("--top", type=int, default=8, help="calls listed per row")
    p.add_argument("--device", default="cuda")
    return p.parse_args()


def example(name):
    if name == "resnet18":
        import train_resnet
        return train_resnet.make(32, 128, 100)
    if name == "gpt":
        import train_gpt
        return train_gpt.make(8)
    sys.exit(f"cuda_memory_check: unknown example '{name}' (known: resnet18, gpt)")


class _CallByCall(_LiveBytes):
    """Runs a plan module recording, per call, live storages and torch.cuda's counters."""

    def __init__(self, module, inputs, cuda):
        super().__init__(module, inputs)
        self.cuda = cuda
        # torch.cuda's counters above what was allocated before the step, plus the inputs (the
        # simulator counts them; they were allocated before).
        self.base = (torch.cuda.memory_allocated() if cuda else 0) - self.live_bytes
        self.rows = []  # (node name, target, live before, live after, allocated after, peak)

    def run_node(self, n):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        live_before = self.live_bytes
        result = super().run_node(n)
        live_after = self.live_bytes
        if self.cuda:
            allocated = torch.cuda.memory_allocated() - self.base
            peak = torch.cuda.max_memory_allocated() - self.base
        else:
            allocated = peak = live_after
        if n.op == "call_function":
            self.rows.append((n.name, getattr(n.target, "__name__", str(n.target)),
                              live_before, live_after, allocated, peak))
        return result


def check(name, budget, args, traced, model, batch):
    g = traced.graph
    plan = remat.solve(g, budget, args.solver, time_limit=args.time_limit, seed=1)
    step = rt.Step(model, traced, plan.sequence, solver=plan.solver, status=plan.status)
    inputs = step.flat_inputs(batch)
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    runner = _CallByCall(step.module, inputs, cuda)
    with torch.no_grad(), _compat.autocast(()):
        runner.run(*inputs)
    if cuda:
        torch.cuda.synchronize()
    rows = runner.rows
    live_peak = max(r[3] for r in rows)
    measured = max(r[5] for r in rows)
    print(f"\n### {name} at {budget}: {plan.status}, planned {step.planned_peak_bytes / MB:.2f} MB,"
          f" live storages {live_peak / MB:.2f} MB, measured (torch.cuda peak) {measured / MB:.2f}"
          f" MB ({100 * (measured / step.planned_peak_bytes - 1):+.1f} % of planned)")
    print("\n| call | op | live before MB | live after MB | allocated after MB | peak in call MB "
          "| peak − max(live) MB |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    ranked = sorted(rows, key=lambda r: -(r[5] - max(r[2], r[3])))
    for r in ranked[:args.top]:
        print(f"| {r[0]} | {r[1]} | {r[2] / MB:.2f} | {r[3] / MB:.2f} | {r[4] / MB:.2f} | "
              f"{r[5] / MB:.2f} | {(r[5] - max(r[2], r[3])) / MB:.2f} |")
    at_peak = max(rows, key=lambda r: r[5])
    print(f"\nmeasured peak in call {at_peak[0]} ({at_peak[1]}): live before {at_peak[2] / MB:.2f}"
          f" MB, after {at_peak[3] / MB:.2f} MB; allocated − live after, largest over the run: "
          f"{max(r[4] - r[3] for r in rows) / MB:.2f} MB")


def main():
    args = parse_args()
    print(f"torch {torch.__version__}, device {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else ""))
    for name in args.examples.split(","):
        model, batch, loss_fn = example(name)
        model = model.to(args.device).train()
        batch = tuple(x.to(args.device) for x in batch)
        traced = rt.trace(model, batch, loss_fn)
        for budget in args.budgets.split(","):
            check(name, budget, args, traced, model, batch)


if __name__ == "__main__":
    main()
