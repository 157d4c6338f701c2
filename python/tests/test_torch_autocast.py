"""Mixed precision: remat under torch.autocast (CPU, bfloat16) computes what eager autocast does.
Checkpointable replays the forward's autocast state in every recomputation, as
torch.utils.checkpoint does; a traced step holds the casts of the state it was traced in and
refuses another."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import remat
import remat.torch as rt
from helpers import recompute_sequence

BF16 = {"device_type": "cpu", "dtype": torch.bfloat16}


def blocks():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Dropout(0.1), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 4))


def batch(size, seed=0):
    torch.manual_seed(seed)
    return torch.randn(size, 16), torch.randint(0, 4, (size,))


def autocast_grads(model, x, y, seed=7):
    """Loss and gradients of one step under bf16 autocast (backward outside it, as users do)."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    with torch.autocast(**BF16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


def assert_same(got, expected, what):
    (loss, grads), (expected_loss, expected_grads) = got, expected
    assert torch.equal(loss, expected_loss), what
    assert all(g is not None for g in grads), f"{what}: a parameter got no gradient"
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e, msg=what)


@pytest.mark.parametrize("budget", ["100%", "40%"])
def test_checkpointable_under_autocast_gives_eager_autocast_gradients(budget):
    """Keep-all and a recomputing plan: the first step (profiling), the next, and the step after
    a batch-size change (profiling again)."""
    eager = blocks()
    ck = rt.Checkpointable(copy.deepcopy(eager), budget=budget)
    for step, size in enumerate((12, 12, 5)):
        x, y = batch(size, step)
        got = autocast_grads(ck, x, y)
        assert_same(got, autocast_grads(eager, x, y), f"step {step}, plan {ck.plan_notation}")
    recomputes = "∅" in ck.plan_notation or "ck" in ck.plan_notation
    assert recomputes == (budget != "100%"), ck.plan_notation


class _CountWeightCasts(TorchDispatchMode):
    def __init__(self, weights):
        super().__init__()
        self.weights = {id(w) for w in weights}
        self.casts = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._to_copy.default and id(args[0]) in self.weights:
            self.casts += 1
        return func(*args, **(kwargs or {}))


def test_profiling_leaves_the_autocast_weight_cache_alone():
    """Inside one autocast region the first cast of a weight is cached; profiling the blocks
    must neither fill that cache (the eager forward after it casts the weights itself) nor read
    it."""
    model = blocks()
    ck = rt.Checkpointable(model, budget="40%")
    x, _ = batch(12)
    weights = [p for p in model.parameters()]

    def casts_of_a_forward(profile_first):
        with torch.autocast(**BF16):
            if profile_first:
                ck.replan(x)
            with _CountWeightCasts(weights) as counter:
                model(x)
        return counter.casts

    assert casts_of_a_forward(profile_first=True) == casts_of_a_forward(profile_first=False) > 0


def _optimize(model, x, y, recompute):
    traced = rt.trace(model, (x, y), F.cross_entropy)
    order = recompute_sequence(traced.graph) if recompute else remat.default_schedule(traced.graph)
    return rt.Step(model, traced, order)


@pytest.mark.parametrize("recompute", [False, True], ids=["default", "recomputing"])
def test_step_traced_under_autocast_gives_eager_autocast_gradients(recompute):
    eager, model = blocks(), blocks()
    x, y = batch(12)
    with torch.autocast(**BF16):
        step = _optimize(model, x, y, recompute)
    assert any(str(n.target) == "aten._to_copy.default" for n in step.traced.module.graph.nodes)
    for seed in (7, 8):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(seed)
        with torch.autocast(**BF16):
            loss = step(x, y, measure=seed == 7)
        got = (loss.detach(), [p.grad for p in model.parameters()])
        assert_same(got, autocast_grads(eager, x, y, seed), f"seed {seed}")


def test_step_called_in_another_autocast_state_is_refused_by_name_or_retraced():
    model = blocks()
    x, y = batch(12)
    with torch.autocast(**BF16):
        mixed = _optimize(model, x, y, recompute=False)
    with pytest.raises(ValueError, match=r"autocast state changed since tracing \(traced under "
                                         r"autocast cpu bfloat16, called without autocast"):
        mixed(x, y)
    full = _optimize(model, x, y, recompute=False)
    with pytest.raises(ValueError, match="traced without autocast, called under autocast cpu"):
        with torch.autocast(**BF16):
            full(x, y)
    assert all(p.grad is None for p in model.parameters())  # refused before running
    full = rt.optimize(model, (x, y), F.cross_entropy, budget="100%", solver="none",
                       retrace=True, progress=False)
    eager = blocks()
    with pytest.warns(UserWarning, match="autocast state changed"):
        with torch.autocast(**BF16):
            torch.manual_seed(7)
            loss = full(x, y)
    assert_same((loss, [p.grad for p in model.parameters()]), autocast_grads(eager, x, y),
                "retraced under autocast")
