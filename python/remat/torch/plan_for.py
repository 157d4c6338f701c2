"""plan_for(): plan a model that does not fit here, for the machine it will train on.

    with torch.device("meta"):
        model = build_model(config).to(torch.bfloat16)         # no memory taken
    ids = torch.empty(1, 2048, dtype=torch.long, device="meta")  # the batch: shapes and dtypes
    step = remat.torch.plan_for(model, (ids, ids), loss_fn, budget="80GB", device="cuda",
                                optimizer="adamw")
    step.summary()                      # the plan, and the baseline peak split by what it holds
    step.save_plan("plan.json")
    # on the training machine, with the real model and batch:
    step = remat.torch.load_plan(model, (ids, ids), loss_fn, "plan.json")

The step is traced on fake tensors (trace(..., fake=True)): the joint graph, sizes and FLOP costs
of a model far larger than this machine come out without making one tensor of its size. The
plan records the graph's fingerprint; load_plan traces the real step on the training machine and
refuses a plan made for another graph (another device, dtype, batch shape or model).
"""

from remat.torch.optimize import optimize
from remat.torch.trace import trace


def plan_for(model, batch, loss_fn, budget="50%", solver="auto", *, device=None,
             optimizer=None, master_weights=None, work_limit=None, time_limit=None, seed=1,
             threads=1, model_inputs=1, model_kwargs=None, progress=True, cost="auto",
             **params):
    """Traces one training step of `model` on `batch` without memory (fake tensors, for
    `device`), plans it under `budget` with `solver` and returns the Step: its summary(),
    memory (the baseline peak split into parameters, gradients, optimizer state, activations and
    temporaries, with the memory lower bound) and save_plan(path). The Step does not run here
    unless the model and batch are real; load_plan runs the saved plan on the real model.

    model: on the meta device, fake, or real (it is not run). batch: as trace takes it, meta
    tensors giving the shapes and dtypes. device: the device the plan is for ("cuda", "cpu";
    required when every tensor is on meta, else that of the real tensors). optimizer ("adamw",
    "adam", "sgd", "sgd-momentum", a torch.optim.Optimizer or int bytes) and master_weights:
    the memory the optimizer keeps (remat.torch.memory); with it, a budget in bytes ("80GB") is
    the device's memory and the optimizer's share is taken off it. cost: "auto" (the
    roofline on CUDA, FLOPs elsewhere), "flops", "roofline" or a callable (a fake call cannot be
    timed). Other arguments as optimize.
    """
    traced = trace(model, batch, loss_fn, model_inputs=model_inputs, model_kwargs=model_kwargs,
                   fake=True, device=device, cost=cost)
    return optimize(model, traced, loss_fn, budget=budget, solver=solver,
                    work_limit=work_limit, time_limit=time_limit, seed=seed, threads=threads,
                    progress=progress, cost=cost,
                    optimizer=optimizer, master_weights=master_weights, **params)
