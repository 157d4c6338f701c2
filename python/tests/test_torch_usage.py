"""remat.torch as users hold it: models with RNNs, changing models, any batch structure, plans as
files, budgets that mean what they say, and whole training runs equal to eager PyTorch."""

import copy
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import remat
import remat.torch as rt
from helpers import eager_step, planned_step, traced_once
from models import MODELS

SEED = 1234
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "examples"))


def gpt():
    import train_gpt

    model, batch, loss_fn = train_gpt.make(2, context=16, vocab=64, layers=2)
    return model, batch, loss_fn


class LSTMClassifier(nn.Module):
    def __init__(self, rnn=nn.LSTM):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.rnn = rnn(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        out, _ = self.rnn(self.emb(x))
        return self.head(out[:, -1])


def lstm():
    torch.manual_seed(0)
    return LSTMClassifier(), (torch.randint(0, 50, (4, 7)), torch.randint(0, 5, (4,))), \
        F.cross_entropy


def gru():
    torch.manual_seed(0)
    return LSTMClassifier(nn.GRU), (torch.randint(0, 50, (4, 7)), torch.randint(0, 5, (4,))), \
        F.cross_entropy


TRAINING_MODELS = {"mlp": MODELS["mlp"], "cnn": MODELS["cnn"], "gpt": gpt,
                   "resnet18": MODELS["resnet18"], "lstm": lstm, "gru": gru}


def _cli():
    for where in (("build", "src", "remat"), ("build", "remat")):
        path = os.path.join(REPO, *where)
        if os.path.exists(path):
            return path
    return os.path.join(REPO, "build", "src", "remat")


def quiet_optimize(*args, **kwargs):
    kwargs.setdefault("progress", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rt.optimize(*args, **kwargs)


def adamw_run(model, batch, loss_fn, step=None, steps=3):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for i in range(steps):
        optimizer.zero_grad(set_to_none=True)
        torch.manual_seed(SEED + i)
        if step is None:
            loss_fn(model(batch[0]), *batch[1:]).backward()
        else:
            step(*batch)
        optimizer.step()
    return model


# -- never silently wrong ---------------------------------------------------------------------

@pytest.mark.parametrize("name", list(TRAINING_MODELS))
def test_three_adamw_steps_bitwise_equal_to_eager(name):
    """A recomputing plan (0.6 of the baseline, lower bound allowing) trains to the same bits."""
    # The trace of the model (test_torch's, for its models) is of another copy: Step runs on
    # whichever model it is given.
    model, batch, loss_fn, traced = traced_once(name if name in MODELS else (__name__, name),
                                                TRAINING_MODELS[name])
    eager = adamw_run(copy.deepcopy(model), batch, loss_fn)
    planned_model = copy.deepcopy(model)
    base = remat.baseline(traced.graph)[0]
    budget = max(0.6, remat.memory_lower_bound(traced.graph) / base + 0.02)
    step = quiet_optimize(planned_model, traced, loss_fn, budget=min(budget, 1.0),
                          solver="fastsa", time_limit=2.0, iterations_scale=0.05)
    adamw_run(planned_model, batch, loss_fn, step)
    for (n, p), q in zip(eager.named_parameters(), planned_model.parameters()):
        assert torch.equal(p, q), f"{name}: parameter {n} differs after 3 AdamW steps"
    for (n, b), c in zip(eager.named_buffers(), planned_model.buffers()):
        assert torch.equal(b, c), f"{name}: buffer {n} differs"


def test_lstm_weights_are_traced_parameters_with_eager_gradients():
    model, batch, loss_fn = lstm()
    traced = rt.trace(model, batch, loss_fn)
    rnn_weights = [n for n in traced.param_names if n.startswith("rnn.")]
    assert len(rnn_weights) == 8
    grads = eager_step(model, batch, loss_fn, SEED)[1]
    step = rt.Step(model, traced, remat.default_schedule(traced.graph))
    got = planned_step(model, step, batch, SEED)[1]
    for n in rnn_weights:
        assert torch.equal(grads[n], got[n]), n


class CachedWeight(nn.Module):
    """Reads its weight through a list built at init, as RNNs cache flattened weights."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 8))
        self.cache = [self.weight]

    def forward(self, x):
        return x @ self.cache[0]


def test_parameter_read_as_a_constant_is_an_error_naming_it_and_the_op():
    model = CachedWeight()
    with pytest.raises(rt.TraceError, match=r"'weight' is read as a constant by aten\.mm"):
        rt.trace(model, (torch.randn(4, 8), torch.randn(4, 8)), F.mse_loss)


def test_freezing_after_tracing_raises_or_retraces():
    model, batch, loss_fn = MODELS["mlp"]()
    step = quiet_optimize(model, batch, loss_fn, budget=1.0, solver="none")
    model[0].weight.requires_grad_(False)
    with pytest.raises(ValueError, match=r"no longer trainable: 0\.weight"):
        step(*batch)
    assert model[0].weight.grad is None
    step = quiet_optimize(model, batch, loss_fn, budget=1.0, solver="none", retrace=True)
    model[0].weight.requires_grad_(True)
    model[2].weight.requires_grad_(False)
    with pytest.warns(UserWarning, match="trainable parameters changed"):
        step(*batch)
    assert model[2].weight.grad is None and model[0].weight.grad is not None
    expected = eager_step(model, batch, loss_fn, SEED)[1]
    assert set(expected) == {n for n, p in model.named_parameters() if p.grad is not None}


def test_eval_mode_after_tracing_raises_and_no_grad_eval_is_untouched():
    model, batch, loss_fn = MODELS["cnn"]()
    step = quiet_optimize(model, batch, loss_fn, budget=1.0, solver="none")
    model.eval()
    with torch.no_grad():
        expected = loss_fn(copy.deepcopy(model)(batch[0]), batch[1])
        assert torch.equal(loss_fn(model(batch[0]), batch[1]), expected)
    with pytest.raises(ValueError, match="training mode changed"):
        step(*batch)
    model.train()
    retracing = quiet_optimize(model, batch, loss_fn, budget=1.0, solver="none", retrace=True)
    with pytest.warns(UserWarning, match="training mode changed"):
        model.eval()
        loss = retracing(*batch)
    assert torch.equal(loss, expected)


# -- any batch structure ----------------------------------------------------------------------

class Structured(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 4)
        self.b = nn.Linear(3, 4)

    def forward(self, inputs, *, scale, extra=None):
        x = self.a(inputs["x"]) + self.b(inputs["pair"][0] * inputs["pair"][1])
        if extra is not None:
            x = x + extra[0]
        return x * scale


def test_nested_dict_keyword_and_constant_batches():
    torch.manual_seed(0)
    model = Structured()
    inputs = {"x": torch.randn(5, 6), "pair": [torch.randn(5, 3), torch.randn(5, 3)]}
    extra = (torch.randn(5, 4),)
    y = torch.randn(5, 4)
    kwargs = {"scale": 3, "extra": extra}
    step = quiet_optimize(model, (inputs, y), F.mse_loss, budget=1.0, solver="none",
                          model_kwargs=kwargs)
    eager = copy.deepcopy(model)
    F.mse_loss(eager(inputs, **kwargs), y).backward()
    loss = step(inputs, y, **kwargs)
    assert torch.equal(loss, F.mse_loss(eager(inputs, **kwargs), y))
    for (n, p), q in zip(eager.named_parameters(), model.parameters()):
        assert torch.equal(p.grad, q.grad), n
    with pytest.raises(ValueError, match="constant 3"):
        step(inputs, y, scale=4, extra=extra)
    with pytest.raises(ValueError, match="structure changed"):
        step(inputs, y, scale=3)
    with pytest.raises(ValueError, match="structure changed"):
        step({"x": inputs["x"], "pair": inputs["pair"][:1]}, y, scale=3, extra=extra)


def test_keyword_only_forward_and_non_scalar_loss_messages():
    torch.manual_seed(0)
    model = Structured()
    with pytest.raises(ValueError, match="loss_fn must return a tensor with one element"):
        rt.trace(model, ({"x": torch.randn(2, 6), "pair": [torch.randn(2, 3)] * 2},
                         torch.randn(2, 4)),
                 lambda out, y: F.mse_loss(out, y, reduction="none"),
                 model_kwargs={"scale": 1.0})
    with pytest.raises(ValueError, match="leaf 0 is a object"):
        rt.trace(model, (object(),), F.mse_loss)


# -- plans as files ---------------------------------------------------------------------------

def test_plan_save_load_round_trip_and_wrong_graph(tmp_path):
    model, batch, loss_fn = MODELS["mlp"]()
    step = quiet_optimize(model, batch, loss_fn, budget=0.8, solver="fastsa", time_limit=2.0,
                          iterations_scale=0.05)
    path = str(tmp_path / "plan.json")
    step.save_plan(path)
    loaded = rt.load_plan(copy.deepcopy(model), batch, loss_fn, path)
    assert loaded.sequence == step.sequence
    assert loaded.planned_peak_bytes == step.planned_peak_bytes
    saved = json.load(open(path))
    assert saved["graph_fingerprint"] == step.traced.fingerprint
    # One writer for the CLI and Python: the solver's stats and the budget are kept, and a loaded
    # plan saved again is the same file.
    assert saved["budget_bytes"] == step.planning["budget_bytes"]
    assert saved["stats"]["stop_reason"] in ("converged", "work_limit")
    again = str(tmp_path / "again.json")
    loaded.save_plan(again)
    assert json.load(open(again)) == saved
    other, other_batch, other_loss = MODELS["cnn"]()
    with pytest.raises(ValueError, match="made for another graph"):
        rt.load_plan(other, other_batch, other_loss, path)
    # The CLI reads the Python plan, and the Python loader the CLI's: one fingerprint for both.
    graph_path = str(tmp_path / "mlp.json")
    remat.save(step.traced.graph, graph_path)
    cli = _cli()
    if not os.path.exists(cli):
        pytest.skip("build/remat not built")
    checked = subprocess.run([cli, "simulate", graph_path, path], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    other_graph = str(tmp_path / "cnn.json")
    remat.save(rt.trace(other, other_batch, other_loss).graph, other_graph)
    refused = subprocess.run([cli, "simulate", other_graph, path], capture_output=True, text=True)
    assert refused.returncode == 2 and "made for another graph" in refused.stderr
    cli_plan = str(tmp_path / "cli.json")
    subprocess.run([cli, "solve", graph_path, "--budget", "100%", "--solver", "none", "-o",
                    cli_plan], check=True, capture_output=True)
    from_cli = rt.load_plan(copy.deepcopy(model), batch, loss_fn, cli_plan)
    assert from_cli.sequence == remat.default_schedule(step.traced.graph)
    with pytest.raises(ValueError, match="another graph"):
        rt.load_plan(other, other_batch, other_loss, cli_plan)


def test_summary_names_recomputed_and_kept_values(capsys):
    model, batch, loss_fn = MODELS["mlp"]()
    step = quiet_optimize(model, batch, loss_fn, budget=0.7, solver="fastsa", time_limit=2.0,
                          iterations_scale=0.05)
    step.summary()
    text = capsys.readouterr().out
    assert "recomputed (" in text and "kept for the backward" in text and "extra compute" in text
    assert "aten." in text and "extra compute" in repr(step)


# -- budgets ----------------------------------------------------------------------------------

def test_float_below_bound_and_min_budgets():
    model, batch, loss_fn = MODELS["mlp"]()
    traced = rt.trace(model, batch, loss_fn)
    g = traced.graph
    base = remat.baseline(g)[0]
    lower = remat.memory_lower_bound(g)
    assert remat.parse_budget(g, 0.5) == int(0.5 * base)
    for bad in (0.0, 1.5, -0.2, float("nan")):
        with pytest.raises(ValueError, match="fraction"):
            remat.parse_budget(g, bad)
    with pytest.raises(ValueError, match="below the memory lower bound"):
        quiet_optimize(model, traced, loss_fn, budget=lower - 1, solver="none")
    assert remat.parse_budget(g, "min") == lower
    step = quiet_optimize(model, traced, loss_fn, budget="min", solver="fastsa", time_limit=2.0,
                          iterations_scale=0.05)
    assert step.planned_peak_bytes < 0.9 * base


def test_cli_budget_min(tmp_path):
    cli = _cli()
    if not os.path.exists(cli):
        pytest.skip("build/remat not built")
    model, batch, loss_fn = MODELS["mlp"]()
    g = rt.trace(model, batch, loss_fn).graph
    path = str(tmp_path / "g.json")
    remat.save(g, path)
    out = subprocess.run([cli, "solve", path, "--budget", "min", "--solver", "none", "--json"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["budget_bytes"] == remat.memory_lower_bound(g)


def test_replan_reuses_the_trace():
    model, batch, loss_fn = MODELS["mlp"]()
    step = quiet_optimize(model, batch, loss_fn, budget=1.0, solver="none")
    traced = step.traced
    step.replan(0.7, solver="fastsa", time_limit=2.0, params={"iterations_scale": 0.05})
    assert step.traced is traced and step.planned_peak_bytes < step.baseline_peak_bytes
    again = quiet_optimize(model, traced, None, budget=1.0, solver="none")
    assert again.traced is traced


# -- never worse than the baseline ------------------------------------------------------------

class LSTMCellLM(nn.Module):
    def __init__(self, vocab=40, dim=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.cell = nn.LSTMCell(dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        h = c = torch.zeros(tokens.shape[0], self.cell.hidden_size)
        logits = []
        for t in range(tokens.shape[1]):
            h, c = self.cell(self.emb(tokens[:, t]), (h, c))
            logits.append(self.head(h))
        return torch.stack(logits, 1)


def test_lstmcell_language_model_never_worse_than_the_baseline():
    torch.manual_seed(0)
    model = LSTMCellLM()
    tokens = torch.randint(0, 40, (8, 21))

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, 40), targets.reshape(-1))

    batch = (tokens[:, :-1], tokens[:, 1:])
    traced = rt.trace(model, batch, loss_fn)
    for budget in (0.9, 0.8, 0.75):
        for solver in ("fastsa", "mincut"):
            params = {"iterations_scale": 0.05} if solver == "fastsa" else {}
            step = quiet_optimize(model, traced, loss_fn, budget=budget, solver=solver,
                                  **params)
            assert step.planned_peak_bytes <= step.baseline_peak_bytes, (solver, budget)


def test_python_m_remat_torch_summary_prints_the_tables(tmp_path):
    model, batch, loss_fn = MODELS["mlp"]()
    step = quiet_optimize(model, batch, loss_fn, budget=0.7, solver="fastsa", time_limit=2.0,
                          iterations_scale=0.05)
    graph, plan = str(tmp_path / "g.json"), str(tmp_path / "p.json")
    remat.save(step.traced.graph, graph)
    step.save_plan(plan)
    out = subprocess.run([sys.executable, "-m", "remat.torch", "summary", graph, plan],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "recomputed (" in out.stdout and "kept for the backward" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "remat.torch", "summary", graph, graph],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "expected a 'remat-plan' document" in bad.stderr


@pytest.mark.parametrize("name", ["cnn", "transformer"])
def test_mincut_on_a_joint_graph_seeded_by_ones_like_loss(name):
    """Other tracers seed the backward with ones_like(loss), a backward node reading the loss:
    mincut takes the forward/backward split from `phase` and still saves and recomputes (the
    MLP is left out: mincut reaches 87 % there, seed or not)."""
    model, batch, loss_fn = MODELS[name]()
    traced = rt.trace(model, batch, loss_fn)
    g = traced.graph
    loss = traced.value_fx[traced.output_fx[0]]
    nodes = [g.node(i) for i in range(g.num_nodes)]
    seeds = [n for n in nodes if n["phase"] == "backward" and not n["inputs"]]
    assert seeds
    for seed in seeds:
        seed["inputs"] = [loss]
        seed["op"] = "aten.ones_like.default"
    joint = remat.Graph.build(f"{name} ones_like seed", [g.value(v) for v in range(g.num_values)],
                              nodes)
    base = remat.baseline(joint)[0]
    budget = max(int(0.7 * base), remat.memory_lower_bound(joint))
    r = remat.solve(joint, budget, "mincut")
    counters = dict(r.counters)
    assert counters["saved_values"] > 0 and counters["split_from_phase"] == 1
    assert r.peak_bytes <= budget and r.feasible
    assert remat.simulate(joint, r.sequence).peak_bytes == r.peak_bytes


@pytest.mark.parametrize("name", ["cnn", "transformer", "gpt"])
def test_patched_run_gives_the_graph_of_a_second_run(name, monkeypatch):
    """Tracing patches its recorded run for the in-place rewrites instead of running the step
    again (bench/trace_bench.py); both give the same graph."""
    from remat.torch import trace as _unused  # noqa: F401  (the module, for monkeypatch)
    trace_module = sys.modules["remat.torch.trace"]
    model, batch, loss_fn = {**MODELS, **TRAINING_MODELS}[name]()
    patched = rt.trace(model, batch, loss_fn).graph.to_json()
    monkeypatch.setattr(trace_module, "_RERUN_AFTER_REWRITES", True)
    assert rt.trace(model, batch, loss_fn).graph.to_json() == patched


def test_progress_reports_the_best_peak_and_cost_and_prints_them(capsys):
    model, batch, loss_fn = MODELS["cnn"]()
    traced = rt.trace(model, batch, loss_fn)
    calls = []

    def six(stage, fraction, iterations, best, best_peak, best_cost):
        calls.append((best_peak, best_cost))

    # A schedule that runs to the time limit: a run that converges first (FastSA on this graph
    # does, in about the 0.25 s between reports) may end before its first report.
    lower = remat.memory_lower_bound(traced.graph)
    remat.solve(traced.graph, lower, "fastsa", time_limit=1.0, progress=six, schedule="fixed",
                stage1_iterations=2_000_000_000, stop_at_budget=False)
    base_peak, base_cost = remat.baseline(traced.graph)
    assert calls and all(0 < p <= base_peak and c >= base_cost for p, c in calls)
    report, finish = sys.modules["remat.torch.optimize"]._progress_printer(
        "cnn", sys.stderr, (base_peak, base_cost))
    import time as _time
    _time.sleep(1.05)
    report("stage 2", 0.5, 100, 1.0, base_peak // 2, base_cost * 1.1)
    finish()
    err = capsys.readouterr().err
    assert "best peak" in err and "(50.0 %)" in err and "extra compute +10.0 %" in err
