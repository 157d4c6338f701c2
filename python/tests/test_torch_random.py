"""Random calls (dropout) recomputed by replaying the generator, as torch.utils.checkpoint does.

The traced GPT example's dropouts are recomputable; a low-budget plan that recomputes dropout
masks gives eager PyTorch's gradients bit for bit and leaves the generator where eager leaves it;
without the replay the recomputed masks differ (so the equality tests the replay).
"""

import copy
import os
import sys

import pytest
import torch

import remat
import remat.torch as rt
from remat.torch import execute
from helpers import eager_step, planned_step

SEED = 1234
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
_cache = {}


def gpt():
    """(model, batch, loss_fn, TracedStep) of a 2-layer GPT whose activations outweigh its
    weights (lower bound 30 % of the baseline peak), traced once for the module."""
    if "gpt" not in _cache:
        import train_gpt

        model, batch, loss_fn = train_gpt.make(8, context=64, vocab=64, layers=2)
        _cache["gpt"] = (model, batch, loss_fn, rt.trace(model, batch, loss_fn))
    return _cache["gpt"]


def random_nodes(graph):
    return [i for i in range(graph.num_nodes) if graph.node(i)["kind"] == "random"]


def low_budget_plan():
    """fastsa at 50 % of the baseline peak (within budget only by recomputing masks: with the
    masks kept it stays over)."""
    if "plan" not in _cache:
        g = gpt()[3].graph
        budget = remat.parse_budget(g, "50%")
        _cache["plan"] = (budget, remat.solve(g, budget, "fastsa", time_limit=60, seed=1))
    return _cache["plan"]


def recomputed_random(graph, sequence):
    return [i for i in random_nodes(graph) if list(sequence).count(i) > 1]


def step_and_generator(run):
    """(loss, gradients, buffers) of `run()` from SEED, and the CPU generator state after it."""
    torch.manual_seed(SEED)
    result = run()
    return result, torch.get_rng_state()


def assert_equal_steps(expected, got):
    (loss, grads, _), state = expected
    (got_loss, got_grads, _), got_state = got
    assert torch.equal(loss, got_loss)
    for name in grads:
        assert torch.equal(grads[name], got_grads[name]), f"gradient of {name} differs"
    assert torch.equal(state, got_state), "the generator is not where eager leaves it"


def test_gpt_dropouts_are_recomputable_by_replay():
    _, _, _, t = gpt()
    g = t.graph
    random = random_nodes(g)
    assert len(random) == 1 + 3 * 2  # embedding dropout, then attention, projection, MLP
    assert all(g.node(i)["recomputable"] for i in random) and t.replayed == set(random)
    # Their first computations stay chained by effect values, in traced order.
    for earlier, later in zip(random, random[1:]):
        assert g.node(earlier)["outputs"][-1] in g.node(later)["inputs"]


def test_low_budget_plan_recomputing_masks_equals_eager_and_moves_the_generator_alike():
    model, batch, loss_fn, t = gpt()
    budget, plan = low_budget_plan()
    assert plan.peak_bytes <= budget, (plan.peak_bytes, budget, plan.status)
    replayed = recomputed_random(t.graph, plan.sequence)
    assert replayed, "the plan recomputes no dropout"
    step = rt.Step(model, t, list(plan.sequence))
    saves = [n for n in step.module.graph.nodes if n.target is execute._save_generators]
    assert len(saves) == len(replayed)  # one saved state per recomputed random node, no more
    expected = step_and_generator(lambda: eager_step(model, batch, loss_fn, SEED))
    got = step_and_generator(lambda: planned_step(model, step, batch, SEED, measure=True))
    assert_equal_steps(expected, got)
    # The saved states (5 KB each) are in the measured peak, not in the simulated one.
    assert step.planned_peak_bytes <= step.measured_peak_bytes
    assert step.measured_peak_bytes - step.planned_peak_bytes <= 0.10 * step.planned_peak_bytes


def test_two_planned_steps_equal_two_eager_steps():
    # The second step's dropout draws from where the first left the generator.
    model, batch, loss_fn, t = gpt()
    _, plan = low_budget_plan()
    eager_model, planned_model = copy.deepcopy(model), copy.deepcopy(model)
    step = rt.Step(planned_model, t, list(plan.sequence))
    torch.manual_seed(SEED)
    for _ in range(2):
        loss_fn(eager_model(batch[0]), *batch[1:]).backward()
    eager_state = torch.get_rng_state()
    torch.manual_seed(SEED)
    for _ in range(2):
        step(*batch, measure=False)
    assert torch.equal(torch.get_rng_state(), eager_state)
    for (name, p), q in zip(eager_model.named_parameters(), planned_model.parameters()):
        assert torch.equal(p.grad, q.grad), f"accumulated gradient of {name} differs"


def test_without_the_replay_the_recomputed_masks_differ(monkeypatch):
    model, batch, loss_fn, t = gpt()
    _, plan = low_budget_plan()

    def no_replay(target):
        return lambda states, *args, **kwargs: target(*args, **kwargs)

    monkeypatch.setattr(execute, "_replaying", no_replay)
    step = rt.Step(model, t, list(plan.sequence))
    (loss, grads, _), state = step_and_generator(
        lambda: eager_step(model, batch, loss_fn, SEED))
    (got_loss, got_grads, _), got_state = step_and_generator(
        lambda: planned_step(model, step, batch, SEED, measure=False))
    assert torch.equal(loss, got_loss)  # the forward draws as eager does
    assert not all(torch.equal(grads[n], got_grads[n]) for n in grads)
    assert not torch.equal(state, got_state)  # the recomputations drew more


@pytest.mark.parametrize("shape", [(7,), (3, 1025), (8, 4, 64, 64)])
@pytest.mark.parametrize("p", [0.9, 0.5])
def test_out_of_place_bernoulli_draws_what_in_place_dropout_draws(shape, p):
    # rewrites.py turns empty_like(x).bernoulli_(p) into bernoulli.p(empty(shape), p).
    aten = torch.ops.aten
    torch.manual_seed(SEED)
    x = torch.randn(shape)
    in_place = torch.empty_like(x).bernoulli_(p)
    after_in_place = torch.get_rng_state()
    torch.manual_seed(SEED)
    x = torch.randn(shape)
    fresh = aten.empty.memory_format(list(shape), dtype=x.dtype, layout=x.layout,
                                     device=x.device, pin_memory=False)
    assert torch.equal(aten.bernoulli.p(fresh, p), in_place)
    assert torch.equal(torch.get_rng_state(), after_in_place)
