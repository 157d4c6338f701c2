"""Traced training graphs seen as Rotor chains (remat/lower.h): extraction, lowering, and rotor,
revolve and sequential as graph solvers judged by the graph simulator."""

import json
import os
import sys

import pytest
import torch

import remat
import remat.torch as rt
from remat import _remat
from helpers import eager_step, planned_step, traced_once
from models import MODELS

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import train_gpt  # noqa: E402

SEED = 1234
GPT_LAYERS = 2


def traced(name):
    """(model, batch, loss_fn, TracedStep), traced once per model for the whole session."""
    if name == "gpt":
        return traced_once(("train_gpt", 4, 64, GPT_LAYERS),
                           lambda: train_gpt.make(4, context=64, layers=GPT_LAYERS))
    return traced_once(name, MODELS[name])


def chain_of(name):
    graph = traced(name)[3].graph
    return graph, _remat.extract_chain(graph)


def separator_names(graph, extracted):
    return [graph.node(n)["name"] for n in extracted["separators"]]


def store_all_ops(stages):
    return [("F_all", s) for s in range(1, stages + 1)] + [("B", s) for s in range(stages, 0, -1)]


# -- extraction -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, stages", [
    # Four linear layers: a cut after each activation a backward reads (relu, tanh, relu) and
    # after log_softmax; the NLL loss is the loss stage.
    ("mlp", 5),
    # Stem conv | bn+relu | maxpool, eight basic blocks (a cut after each block's final ReLU),
    # then mean (pool) | fc + log_softmax | loss.
    ("resnet18", 14),
    # Embeddings (arange | tokens + positions with dropout), two cuts per layer (the attention
    # and MLP residual adds), the final layer norm, then head + loss.
    ("gpt", 2 * GPT_LAYERS + 4),
])
def test_stage_counts_and_every_node_in_one_stage(name, stages):
    graph, x = chain_of(name)
    assert len(x["stages"]) == stages, separator_names(graph, x)
    seen = [n for s in x["stages"] for n in s["forward"] + s["backward"]]
    assert sorted(seen) == list(range(graph.num_nodes))
    for s in x["stages"]:
        assert s["forward"], "every stage has forward nodes"
        assert all(graph.node(n)["phase"] == "forward" for n in s["forward"])
        # Forward nodes only the backward reads (detaches of activations) run in a backward.
        assert all(graph.node(n)["phase"] == "backward" or n in x["backward_helpers"]
                   for n in s["backward"])
    chain = x["chain"]
    assert isinstance(chain, remat.Chain) and chain.length + 1 == stages
    # Its JSON text is a remat chain that reads back as the same chain.
    assert json.loads(chain.to_json())["format"] == "remat-chain"
    assert remat.Chain.from_json(chain.to_json()) == chain


def test_gpt_cuts_at_residual_adds():
    graph, x = chain_of("gpt")
    names = separator_names(graph, x)
    adds = [n for n in names if n.startswith("add")]
    assert len(adds) == 2 * GPT_LAYERS, names


def test_graph_without_phases_is_one_clear_error():
    g = remat.Graph.build("plain", values=[{"name": "x", "size": 8}, {"name": "y", "size": 8,
                                                                          "output": True}],
                          nodes=[{"name": "f", "cost": 1, "inputs": [0], "outputs": [1]}])
    with pytest.raises(ValueError, match="no chain structure: node 'f' has no phase"):
        remat.solve(g, "100%", "rotor")


def test_single_stage_graph_is_one_clear_error():
    # Only fa separates the forward (fl reads a and b), and no backward node reads its output a,
    # so it is no useful cut: one stage.
    values = [{"name": "x", "size": 8}, {"name": "a", "size": 8}, {"name": "b", "size": 8},
              {"name": "loss", "size": 4, "output": True}, {"name": "g", "size": 8,
                                                            "output": True}]
    nodes = [{"name": "fa", "cost": 1, "inputs": [0], "outputs": [1], "phase": "forward"},
             {"name": "fb", "cost": 1, "inputs": [1], "outputs": [2], "phase": "forward"},
             {"name": "fl", "cost": 1, "inputs": [1, 2], "outputs": [3], "phase": "forward"},
             {"name": "bg", "cost": 1, "inputs": [2, 3], "outputs": [4], "phase": "backward"}]
    g = remat.Graph.build("one stage", values=values, nodes=nodes)
    with pytest.raises(ValueError, match="fewer than 2 stages"):
        remat.solve(g, "100%", "rotor")


# -- lowering -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet18", "gpt"])
def test_store_all_lowers_to_the_baseline(name):
    graph, x = chain_of(name)
    sequence = _remat.lower_chain_plan(graph, 100, store_all_ops(len(x["stages"])))
    e = remat.simulate(graph, sequence)
    assert e.valid, e.error
    assert (e.peak_bytes, e.cost) == remat.baseline(graph)
    # The chain's accounting is an upper bound; on these models it is exact for store-all.
    chain_peak = _remat.chain_simulate(x["chain"], store_all_ops(len(x["stages"])))["peak_bytes"]
    assert chain_peak + x["resident_bytes"] >= e.peak_bytes


@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet18", "gpt", "transformer"])
@pytest.mark.parametrize("solver", ["rotor", "revolve", "sequential"])
def test_lowered_plan_fits_when_the_chain_plan_fits_and_costs_its_makespan(name, solver):
    graph, x = chain_of(name)
    base_peak, _ = remat.baseline(graph)
    fitted = 0
    for percent in (95, 80, 70, 60, 50, 40):
        budget = base_peak * percent // 100
        chain_budget = max(0, budget - x["resident_bytes"])
        r = _remat.chain_solve(x["chain"], chain_budget, solver, 10.0, {})
        sequence = _remat.lower_chain_plan(graph, 100, r["ops"])
        e = remat.simulate(graph, sequence)
        assert e.valid, e.error
        assert e.cost == pytest.approx(r["makespan"] + x["fixed_cost"], rel=1e-12)
        if r["peak_bytes"] <= chain_budget:
            fitted += 1
            assert e.peak_bytes <= budget, (percent, e.peak_bytes, budget)
    assert fitted > 0 or solver != "rotor"


@pytest.mark.parametrize("name", ["mlp", "resnet18", "gpt"])
def test_rotor_graph_solver_is_judged_by_the_simulator(name):
    graph = traced(name)[3].graph
    for budget in ("100%", "70%", "50%"):
        r = remat.solve(graph, budget, "rotor", time_limit=10)
        e = remat.simulate(graph, r.sequence)
        assert e.valid and (e.peak_bytes, e.cost) == (r.peak_bytes, r.cost)
        assert r.feasible == (r.peak_bytes <= r.budget_bytes)
        assert r.peak_bytes <= r.baseline_peak_bytes
        if r.status != "infeasible":  # below the memory lower bound no solver runs
            assert dict(r.counters)["stages"] >= 2
        if budget == "100%":
            assert (r.peak_bytes, r.cost) == (r.baseline_peak_bytes, r.baseline_cost)
        assert set(r.recomputed) == {n for n in set(r.sequence) if r.sequence.count(n) > 1}


def per_block_checkpoint_ops(stages, first_block_stage, layers, stages_per_block):
    """torch.utils.checkpoint around each transformer block, as chain ops: embeddings and head
    keep everything; each block keeps only its input in the forward and is rerun (F_all) right
    before its backward."""
    blocks = [list(range(first_block_stage + b * stages_per_block,
                         first_block_stage + (b + 1) * stages_per_block)) for b in range(layers)]
    ops = [("F_all", s) for s in range(1, first_block_stage)]
    for block in blocks:
        ops.append(("F_ck", block[0]))
        ops += [("F_none", s) for s in block[1:]]
    head = list(range(blocks[-1][-1] + 1, stages + 1))
    ops += [("F_all", s) for s in head] + [("B", s) for s in reversed(head)]
    for block in reversed(blocks):
        ops += [("F_all", s) for s in block] + [("B", s) for s in reversed(block)]
    ops += [("B", s) for s in range(first_block_stage - 1, 0, -1)]
    return ops


def test_gpt_rotor_matches_per_block_checkpoint_peak_with_no_more_recomputation():
    graph, x = chain_of("gpt")
    stages = len(x["stages"])
    ops = per_block_checkpoint_ops(stages, first_block_stage=3, layers=GPT_LAYERS,
                                   stages_per_block=2)
    assert _remat.chain_simulate(x["chain"], ops)["valid"]
    checkpoint = remat.simulate(graph, _remat.lower_chain_plan(graph, 100, ops))
    assert checkpoint.valid, checkpoint.error
    base_peak, base_cost = remat.baseline(graph)
    assert checkpoint.peak_bytes < base_peak
    r = remat.solve(graph, checkpoint.peak_bytes, "rotor", time_limit=10)
    assert r.feasible, (r.peak_bytes, checkpoint.peak_bytes)
    assert r.peak_bytes <= checkpoint.peak_bytes
    assert r.cost <= checkpoint.cost * (1 + 1e-12)


@pytest.mark.parametrize("name", ["gpt", "cnn"])
def test_optimize_with_rotor_gives_eager_gradients(name):
    model, batch, loss_fn, _ = traced(name)
    step = rt.optimize(model, batch, loss_fn, budget="70%", solver="rotor")
    assert step.solver == "rotor"
    got = planned_step(model, step, batch, SEED, measure=True)
    loss, grads, buffers = eager_step(model, batch, loss_fn, SEED)
    assert torch.equal(loss, got[0])
    for n in grads:
        assert torch.equal(grads[n], got[1][n]), n
    for n in buffers:
        assert torch.equal(buffers[n], got[2][n]), n
    assert step.planned_peak_bytes < step.baseline_peak_bytes


def test_solve_result_carries_bounds_lists_and_statistics():
    graph = traced("mlp")[3].graph
    r = remat.solve(graph, "80%", "rotor")
    assert r.cost_lower_bound is None or r.cost_lower_bound <= r.cost
    lists = dict(r.lists)
    assert lists["separators"] == separator_names(graph, _remat.extract_chain(graph))
    assert isinstance(r.series, list)


def test_solve_chain_on_an_extracted_chain():
    graph, x = chain_of("mlp")
    r = remat.solve_chain(x["chain"], "100%")
    assert r["status"] in ("optimal", "feasible") and r["peak_bytes"] <= r["store_all_peak_bytes"]
    with pytest.raises(ValueError, match="unknown solver .nope."):
        remat.solve_chain(x["chain"], "50%", solver="nope")


class EveryLayerReadsAWideValue(torch.nn.Module):
    """30 layers, each reading `wide` (64 times a layer's width, more than the layers make while
    it lives): the forward is one block, and rotor says why, naming the value."""

    def __init__(self, dim=8, layers=30):
        super().__init__()
        self.wide = torch.nn.Linear(dim, 64 * dim)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(layers))

    def forward(self, x):
        wide = self.wide(x)
        for layer in self.layers:
            x = torch.relu(layer(x)) + wide.mean(-1, keepdim=True)
        return x


def test_rotor_on_one_large_block_warns_naming_the_value():
    torch.manual_seed(0)
    model = EveryLayerReadsAWideValue()
    batch = (torch.randn(16, 8), torch.randn(16, 8))
    traced_step = rt.trace(model, batch, torch.nn.functional.mse_loss)
    with pytest.warns(UserWarning, match="rotor: .* forward nodes are one stage") as caught:
        rt.optimize(model, traced_step, budget="90%", solver="rotor", progress=False)
    note = next(str(w.message) for w in caught if "one stage" in str(w.message))
    named = note.split("value '")[1].split("'")[0]
    wide = traced_step.graph.value(traced_step.graph.find_value(named))
    assert wide["size"] == 16 * 64 * 8 * 4, note  # the wide value, by its size
