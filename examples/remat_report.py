"""Shared driver of the PyTorch examples: trace once, plan at each budget, run, compare.

For every budget it prints nodes, values, the simulator's baseline and planned peaks, the peak
measured while the plan runs (CPU: bytes of live tensor storages; GPU: torch.cuda's peak), the
extra compute the plan does, whether loss and gradients equal plain PyTorch bit for bit, and the
median step time against a plain PyTorch step (forward, loss, backward), the two timed
alternately.
"""

import argparse
import copy
import statistics
import time

import torch

import remat
import remat.torch as rt


def parse_args(description, defaults):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--budgets", default=defaults.get("budgets", "50%"),
                        help="comma-separated budgets, e.g. 100%%,50%%,25%% (default %(default)s)")
    parser.add_argument("--solver", default=None,
                        help="solver (default: fastsa if registered, else mincut, else none)")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per solve")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per variant")
    parser.add_argument("--batch", type=int, default=defaults["batch"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=1)
    for name, value in defaults.items():
        if name not in ("budgets", "batch"):
            parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    return parser.parse_args()


def default_solver():
    for name in ("fastsa", "mincut"):
        if name in remat.solvers():
            return name
    return "none"


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _seconds(fn, device):
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _median_seconds_interleaved(fns, steps, device):
    """Median time of each function, run alternately so load changes hit all of them alike."""
    times = [[] for _ in fns]
    for _ in range(steps):
        for fn, spent in zip(fns, times):
            spent.append(_seconds(fn, device))
    return [statistics.median(t) for t in times]


def _eager_step(model, batch, loss_fn):
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(batch[0]), *batch[1:])
    loss.backward()
    return loss


def _same_as_eager(model, step, batch, loss_fn, seed):
    reference = copy.deepcopy(model)
    torch.manual_seed(seed)
    expected = _eager_step(reference, batch, loss_fn)
    planned = copy.deepcopy(model)
    step.model = planned
    torch.manual_seed(seed)
    loss = step(*batch, measure=True)
    step.model = model
    same = torch.equal(loss, expected.detach())
    for (_, p), (_, q) in zip(reference.named_parameters(), planned.named_parameters()):
        same = same and (p.grad is None) == (q.grad is None)
        same = same and (p.grad is None or torch.equal(p.grad, q.grad))
    return same


def run(title, model, batch, loss_fn, args):
    solver = args.solver or default_solver()
    device = args.device
    model = model.to(device).train()
    batch = tuple(x.to(device) for x in batch)
    start = time.perf_counter()
    traced = rt.trace(model, batch, loss_fn)
    trace_s = time.perf_counter() - start
    g = traced.graph
    base_peak, base_cost = remat.baseline(g)
    print(f"{title}: {g.num_nodes} nodes, {g.num_values} values, traced in {trace_s:.1f} s; "
          f"baseline peak {remat.format_bytes(base_peak)}, memory lower bound "
          f"{remat.format_bytes(remat.memory_lower_bound(g))}; solver {solver}; device {device}")
    header = (f"{'budget':>7} {'status':>11} {'baseline':>10} {'planned':>10} {'measured':>10} "
              f"{'reruns':>6} {'extra':>7} {'same':>4} {'step ms':>8} {'eager ms':>8} {'ratio':>6}")
    print(header)
    rows = []
    for budget in [b.strip() for b in args.budgets.split(",") if b.strip()]:
        plan = remat.solve(g, budget, solver, time_limit=args.time_limit, seed=args.seed)
        step = rt.Step(model, traced, plan.sequence, solver=plan.solver, status=plan.status)
        same = _same_as_eager(model, step, batch, loss_fn, args.seed)

        def planned_step():
            model.zero_grad(set_to_none=True)
            return step(*batch)

        eager_s, step_s = _median_seconds_interleaved(
            [lambda: _eager_step(model, batch, loss_fn), planned_step], args.steps, device)
        if device.startswith("cuda"):  # the peak of a warm step
            model.zero_grad(set_to_none=True)
            step(*batch, measure=True)
        extra = 100.0 * (step.planned_cost - base_cost) / base_cost if base_cost else 0.0
        row = dict(budget=budget, status=plan.status, nodes=g.num_nodes, values=g.num_values,
                   baseline=base_peak, planned=step.planned_peak_bytes,
                   measured=step.measured_peak_bytes, recomputed=len(plan.sequence) - g.num_nodes,
                   extra_pct=extra, same=same, step_ms=1e3 * step_s, eager_ms=1e3 * eager_s)
        rows.append(row)
        print(f"{budget:>7} {plan.status:>11} {remat.format_bytes(base_peak):>10} "
              f"{remat.format_bytes(step.planned_peak_bytes):>10} "
              f"{remat.format_bytes(step.measured_peak_bytes):>10} {row['recomputed']:>6} "
              f"{extra:>6.1f}% {'yes' if same else 'NO':>4} {row['step_ms']:>8.1f} "
              f"{row['eager_ms']:>8.1f} {step_s / eager_s:>6.2f}")
    return rows
