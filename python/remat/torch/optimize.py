"""optimize(): trace, solve and wrap the plan as a training-step callable.

    step = remat.torch.optimize(model, (x, y), F.cross_entropy, budget="50%", solver="fastsa")
    loss = step(x, y)                   # runs the plan, writes p.grad of every parameter
    step.measured_peak_bytes            # set by the first call (and by any with measure=True)
    step.baseline_peak_bytes, step.planned_peak_bytes   # from the simulator

Gradients accumulate into `.grad` as loss.backward() does. Buffers (batch-norm statistics) are
updated in place as in eager training. On a GPU every call measures torch.cuda's peak; on the CPU
a measured call runs the plan in an interpreter that counts the bytes of live tensor storages.
"""

import warnings

import torch

import remat
from remat.torch.execute import plan_module, run_measured
from remat.torch.trace import trace


class Step:
    """One planned training step of a model; see the module docstring."""

    def __init__(self, model, traced, sequence, solver="given", status="given"):
        self.model = model
        self.traced = traced
        self.sequence = list(sequence)
        self.solver = solver
        self.status = status
        evaluation = remat.simulate(traced.graph, self.sequence)
        if not evaluation.valid:
            raise ValueError(f"{traced.model_name}: invalid plan: {evaluation.error}")
        self.module = plan_module(traced, self.sequence)
        self.baseline_peak_bytes, self.baseline_cost = remat.baseline(traced.graph)
        self.planned_peak_bytes = evaluation.peak_bytes
        self.planned_cost = evaluation.cost
        self.measured_peak_bytes = None

    def flat_inputs(self, batch):
        batch = [self._as_traced(i, x) for i, x in enumerate(batch)]
        params = dict(self.model.named_parameters())
        buffers = dict(self.model.named_buffers())
        fixed = [buffers[n] if n in buffers else params[n].detach()
                 for n in self.traced.fixed_names]
        return [params[n].detach() for n in self.traced.param_names] + fixed + list(batch)

    def _as_traced(self, index, x):
        """The traced graph is specialized to the example batch: same shape, dtype and device;
        a tensor laid out differently is copied into the traced strides."""
        shape, stride, dtype, device = self.traced.data_layouts[index]
        if tuple(x.shape) != shape or x.dtype != dtype or x.device != device:
            raise ValueError(f"{self.traced.model_name} step: batch tensor {index} is "
                             f"{tuple(x.shape)} {x.dtype} on {x.device}; the step was traced "
                             f"for {shape} {dtype} on {device}")
        if tuple(x.stride()) == stride:
            return x
        return torch.empty_strided(shape, stride, dtype=dtype, device=device).copy_(x)

    def __call__(self, *batch, measure=None):
        """Runs the plan on `batch`, accumulates .grad, returns the loss. On the CPU the first
        call (or any with measure=True) runs with live-bytes accounting, which is slower."""
        if len(batch) != self.traced.num_data:
            raise ValueError(f"{self.traced.model_name} step: expected {self.traced.num_data} "
                             f"batch tensors, got {len(batch)}")
        if measure is None:
            measure = self.measured_peak_bytes is None
        inputs = self.flat_inputs(batch)
        on_cuda = any(x.is_cuda for x in inputs if isinstance(x, torch.Tensor))
        if on_cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        if measure and not on_cuda:
            outputs, self.measured_peak_bytes = run_measured(self.module, inputs)
        else:
            with torch.no_grad():
                outputs = self.module(*inputs)
        if on_cuda:
            torch.cuda.synchronize()
            self.measured_peak_bytes = torch.cuda.max_memory_allocated()
        self._accumulate_grads(outputs[1:])
        return outputs[0]

    def _accumulate_grads(self, grads):
        params = dict(self.model.named_parameters())
        for name, grad in zip(self.traced.param_names, grads):
            if grad is None:
                continue
            p = params[name]
            if p.grad is None:
                p.grad = grad.detach()
            else:
                p.grad.add_(grad)

    def __repr__(self):
        measured = ("not measured" if self.measured_peak_bytes is None
                    else remat.format_bytes(self.measured_peak_bytes))
        return (f"<remat step {self.traced.model_name}: solver {self.solver} "
                f"({self.status}), baseline peak {remat.format_bytes(self.baseline_peak_bytes)}"
                f", planned {remat.format_bytes(self.planned_peak_bytes)}, measured {measured}>")


def optimize(model, example_inputs, loss_fn, budget="50%", solver="auto", *, time_limit=10.0,
             seed=1, threads=1, cost="flops", model_inputs=1, **params):
    """Traces one training step, plans it under `budget` with `solver`, returns a Step.

    budget: bytes or text ("50%" of the baseline peak, "90MB"); solver-specific parameters go as
    keyword arguments. Raises TraceError when the model cannot be traced and ValueError for a bad
    budget, solver or parameter.
    """
    traced = trace(model, example_inputs, loss_fn, model_inputs=model_inputs, cost=cost)
    plan = remat.solve(traced.graph, budget, solver, time_limit=time_limit, seed=seed,
                       threads=threads, **params)
    if not plan.feasible:
        warnings.warn(f"remat: {traced.model_name}: {solver} found no plan within "
                      f"{remat.format_bytes(plan.budget_bytes)} ({plan.status}); running the "
                      f"lowest-peak plan found, {remat.format_bytes(plan.peak_bytes)} (memory "
                      f"lower bound {remat.format_bytes(remat.memory_lower_bound(traced.graph))})",
                      stacklevel=2)
    return Step(model, traced, plan.sequence, solver=plan.solver, status=plan.status)
