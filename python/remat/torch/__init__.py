"""remat for PyTorch: trace a training step, plan it, run the plan with identical gradients.

    step = remat.torch.optimize(model, (x, y), F.cross_entropy, budget=0.5)   # solver="auto"
    loss = step(x, y)                  # p.grad of every parameter, as loss.backward() would
    step.summary(); step.save_plan("plan.json"); step.replan("min")
    step = remat.torch.load_plan(model, (x, y), F.cross_entropy, "plan.json")
    traced = remat.torch.trace(model, (x, y), F.cross_entropy)    # just the remat graph
    step = remat.torch.plan_for(meta_model, (ids, ids), loss_fn, budget="80GB", device="cuda",
                                optimizer="adamw")     # a model too large for here, on fake tensors
    ckpt = remat.torch.Checkpointable(nn.Sequential(...), budget="50%")  # Rotor as an nn.Module
    torch.compile(model, backend=remat.torch.compile_backend(budget="50%"))  # Inductor

Runs on PyTorch 2 (the version differences live in _compat.py).
"""

from remat.torch.checkpointable import Checkpointable, LiveBytes
from remat.torch.compile import compile_backend, measured_peak_bytes
from remat.torch.cost import Roofline
from remat.torch.execute import plan_module, run_measured
from remat.torch.memory import MemorySplit, memory_split
from remat.torch.optimize import Step, load_plan, optimize, plan_summary
from remat.torch.partition import partition
from remat.torch.plan_for import plan_for
from remat.torch.trace import TracedStep, TraceError, trace

__all__ = ["Checkpointable", "LiveBytes", "MemorySplit", "Roofline", "Step", "TraceError",
           "TracedStep", "compile_backend", "load_plan", "measured_peak_bytes", "memory_split",
           "optimize", "partition", "plan_for", "plan_module", "plan_summary", "run_measured",
           "trace"]
