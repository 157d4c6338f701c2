"""remat for PyTorch: trace a training step, plan it, run the plan with identical gradients.

    step = remat.torch.optimize(model, (x, y), F.cross_entropy, budget="50%", solver="fastsa")
    loss = step(x, y)                  # p.grad of every parameter, as loss.backward() would
    traced = remat.torch.trace(model, (x, y), F.cross_entropy)    # just the remat graph

Works with PyTorch 1.13 and 2.x (the differences live in _compat.py).
"""

from remat.torch.execute import plan_module, run_measured
from remat.torch.optimize import Step, optimize
from remat.torch.trace import TracedStep, TraceError, trace

__all__ = ["Step", "TraceError", "TracedStep", "optimize", "plan_module", "run_measured", "trace"]
