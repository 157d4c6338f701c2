"""Call workspaces (node temp): recorded while tracing on a GPU, counted by the simulator while
the call runs, left out of the fingerprint. CI has no GPU: the GPU's probe is stood in for by one
that reports a fixed workspace for every convolution (bench/cuda_memory_check.py measures the
real one on a GPU)."""

import sys

import pytest

import remat
import remat.torch as rt
from remat.torch import effects
from models import cnn

WORKSPACE = 3 << 20  # larger than any tensor of the model: it makes the peak


class _FixedWorkspace:
    def start(self):
        pass

    def stop(self):
        return WORKSPACE


def _convolution_probe(n, args, kwargs):
    return _FixedWorkspace() if "convolution" in str(n.target) else None


def _trace(model, batch, loss_fn):
    return rt.trace(model, batch, loss_fn)


@pytest.fixture
def traced_both_ways(monkeypatch):
    model, batch, loss_fn = cnn()
    plain = _trace(model, batch, loss_fn)
    monkeypatch.setattr(effects, "workspace_probe", _convolution_probe)
    with_workspace = _trace(model, batch, loss_fn)
    return plain, with_workspace


def _temps(g):
    return [g.node(i)["temp"] for i in range(g.num_nodes)]


def test_each_call_keeps_the_workspace_it_took_while_traced(traced_both_ways):
    plain, traced = traced_both_ways
    temps = _temps(traced.graph)
    convolutions = [i for i in range(traced.graph.num_nodes)
                    if "convolution" in traced.graph.node(i)["op"]]
    assert convolutions and all(temps[i] == WORKSPACE for i in convolutions)
    assert sum(temps) == WORKSPACE * len(convolutions)
    assert not any(_temps(plain.graph))


def test_the_simulator_counts_a_workspace_while_its_call_runs(traced_both_ways):
    plain, traced = traced_both_ways
    plain_peak, _ = remat.baseline(plain.graph)
    peak, _ = remat.baseline(traced.graph)
    assert plain_peak < peak <= plain_peak + WORKSPACE
    schedule = remat.default_schedule(traced.graph)
    timeline = remat.simulate(traced.graph, schedule, timeline=True).timeline
    plain_timeline = remat.simulate(plain.graph, schedule, timeline=True).timeline
    extra = [a - b for a, b in zip(timeline, plain_timeline)]
    runs_convolution = ["convolution" in traced.graph.node(i)["op"] for i in schedule]
    assert extra == [WORKSPACE if c else 0 for c in runs_convolution]


def test_a_plan_made_without_workspaces_loads_and_warns_when_they_break_its_budget(
        traced_both_ways, tmp_path):
    plain, traced = traced_both_ways
    assert plain.fingerprint == traced.fingerprint
    model, batch, loss_fn = cnn()
    plain_peak, _ = remat.baseline(plain.graph)
    step = rt.optimize(model, batch, loss_fn, budget=plain_peak, solver="none")
    path = tmp_path / "plan.json"
    step.save_plan(path)
    with pytest.warns(UserWarning, match="above the budget"):
        sequence, _, _ = sys.modules["remat.torch.optimize"].read_plan(traced, path)
    assert remat.simulate(traced.graph, sequence).peak_bytes > plain_peak
