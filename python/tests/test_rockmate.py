"""Rockmate on traced models: rk-GB blocks and classes, plan quality against rotor (and the
Checkmate MILP on a small GPT), and gradients through optimize(solver="rockmate")."""

import os
import sys

import pytest
import torch

import remat
import remat.torch as rt
from remat import _remat
from helpers import eager_step, planned_step
from models import MODELS

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import train_gpt  # noqa: E402

SEED = 1234
# Small grids keep the tests fast; the bench runs the default 10x10.
FAST = {"budgets": "3x3", "milp_time_limit": "1"}
_traced = {}


def traced(name):
    if name not in _traced:
        if name.startswith("gpt"):
            layers = int(name[3:])
            model, batch, loss_fn = train_gpt.make(4, context=64, layers=layers)
        else:
            model, batch, loss_fn = MODELS[name]()
        _traced[name] = (model, batch, loss_fn, rt.trace(model, batch, loss_fn))
    return _traced[name]


def test_gpt_blocks_and_classes():
    graph = traced("gpt4")[3].graph
    b = _remat.rockmate_blocks(graph)
    blocks, classes = b["blocks"], b["classes"]
    # Every node in exactly one block.
    seen = sorted(n for blk in blocks for n in blk["nodes"])
    assert seen == list(range(graph.num_nodes))
    # arange | embeddings | (attention | MLP) x 4 | final layer norm | head + loss.
    assert len(blocks) == 2 + 2 * 4 + 2
    layer_classes = [blk["class"] for blk in blocks[2:10]]
    attention, mlp = layer_classes[0], layer_classes[1]
    assert attention != mlp
    assert layer_classes == [attention, mlp] * 4  # the last layer too
    assert sorted(classes[attention]["members"]) == [2, 4, 6, 8]
    assert sorted(classes[mlp]["members"]) == [3, 5, 7, 9]
    # Embedding and head are blocks of their own classes.
    for i in (0, 1, 10, 11):
        assert classes[blocks[i]["class"]]["members"] == [i]
    assert len(classes) == 6
    assert len({c["hash"] for c in classes}) == 6


def counters(r):
    return dict(r.counters)


@pytest.mark.parametrize("name", ["gpt4", "resnet18"])
def test_quality_against_rotor(name):
    graph = traced(name)[3].graph
    for budget in ("70%", "50%", "40%"):
        rk = remat.solve(graph, budget, "rockmate", time_limit=60, **FAST)
        ro = remat.solve(graph, budget, "rotor", time_limit=60)
        e = remat.simulate(graph, rk.sequence)
        assert e.valid, e.error
        assert (e.peak_bytes, e.cost) == (rk.peak_bytes, rk.cost)
        if rk.feasible:
            assert rk.peak_bytes <= rk.budget_bytes
        assert rk.feasible or not ro.feasible, budget
        if rk.feasible and ro.feasible:
            assert rk.cost <= ro.cost * (1 + 1e-12), budget
        c = counters(rk)
        if rk.status != "infeasible" and "store_all" not in c and "used_default_schedule" not in c:
            assert rk.peak_bytes <= c["dp_memory_bound"], budget
            assert c["bound_violations"] == 0


@pytest.mark.parametrize("name", ["gpt2", "cnn"])
def test_optimize_with_rockmate_gives_eager_gradients(name):
    model, batch, loss_fn, _ = traced(name)
    step = rt.optimize(model, batch, loss_fn, budget="70%", solver="rockmate", params=FAST)
    assert step.solver == "rockmate"
    got = planned_step(model, step, batch, SEED, measure=True)
    loss, grads, buffers = eager_step(model, batch, loss_fn, SEED)
    assert torch.equal(loss, got[0])
    for n in grads:
        assert torch.equal(grads[n], got[1][n]), n
    for n in buffers:
        assert torch.equal(buffers[n], got[2][n]), n
