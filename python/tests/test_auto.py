"""`auto`, the default solver: on the traced GPT example (examples/train_gpt.py, 2 layers), at the
peak per-block checkpointing reaches (the `sequential` graph solver, one segment per block), it
is within budget. Runs once graphchain's `sequential` and `rotor` graph rows are registered;
skips with a message until then. Also: `auto` is the default of remat.torch.optimize."""
import inspect
import os
import sys

import pytest
import torch

import remat
import remat.torch as rt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def _gpt_graph(layers=2):
    import train_gpt
    model, batch, loss = train_gpt.make(2, context=32, vocab=64, layers=layers)
    return rt.trace(model, batch, loss, name=f"gpt{layers}").graph


def test_auto_is_the_default_of_optimize():
    assert inspect.signature(rt.optimize).parameters["solver"].default == "auto"
    assert "auto" in remat.solvers()


@pytest.mark.skipif(not {"rotor", "sequential"} <= set(remat.solvers()),
                    reason="needs the rotor and sequential graph solvers (graphchain)")
def test_auto_within_budget_at_the_per_block_checkpointing_peak():
    torch.manual_seed(0)
    g = _gpt_graph()
    per_block = remat.solve(g, "min", "sequential", time_limit=30)
    budget = per_block.peak_bytes
    r = remat.solve(g, budget, "auto", time_limit=60)
    assert r.peak_bytes <= budget, (r.peak_bytes, budget, r.status)
