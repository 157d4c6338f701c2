"""Sizes that depend on the data (boolean masks, nonzero, masked_select, unique): a traced step
holds the sizes of the batch it was traced with, checks them on every call, and refuses (or, with
retrace=True, traces again) a batch whose data gives other sizes; Python control flow on such a
size is refused at trace time. A retracing step keeps one plan per graph it has seen."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import remat
import remat.torch as rt
from helpers import recompute_sequence


class Selected(nn.Module):
    """Mean of the rows a boolean mask selects, divided by their count (tokens routed to an
    expert), after a batch norm (a buffer the step writes) and a dropout (the generator)."""

    def __init__(self, select="mask"):
        super().__init__()
        self.select = select
        self.lin = nn.Linear(4, 8)
        self.norm = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = self.drop(self.norm(self.lin(x)))
        keep = x[:, 0] > 0
        if self.select == "mask":
            rows = h[keep]
        elif self.select == "nonzero":
            rows = h.index_select(0, torch.nonzero(keep).squeeze(1))
        elif self.select == "masked_select":
            rows = torch.masked_select(h, keep[:, None]).view(-1, 8)
        else:  # unique: the number of distinct rounded inputs scales the output
            rows = h * torch.unique(x.round()).numel()
        return self.head(rows.sum(0, keepdim=True) / rows.shape[0])


class Routed(nn.Module):
    """Python control flow on a data-dependent count."""

    def __init__(self):
        super().__init__()
        self.lin, self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x):
        h = self.lin(x)
        n = h[h[:, 0] > 0].shape[0]
        return self.a(h) if n > 4 else self.b(h)


def batch_with_count(model, count, seed=0):
    """A batch of 10 rows where `count` rows have a positive first element (the rows Selected
    keeps) or, for Selected("unique"), the rounded inputs have `count` distinct values."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(1000):
        x = torch.randn(10, 4, generator=generator)
        unique = getattr(model, "select", None) == "unique"
        got = torch.unique(x.round()).numel() if unique else int((x[:, 0] > 0).sum())
        if got == count:
            return x, torch.zeros(1, 3)
    raise AssertionError(f"no batch with the count {count}")


def eager(model, x, y, seed):
    model = copy.deepcopy(model)
    torch.manual_seed(seed)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()], model.norm.running_mean


def planned(step, model, x, y, seed):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss = step(x, y)
    return loss.detach(), [p.grad for p in model.parameters()], model.norm.running_mean


def assert_equal(got, expected):
    assert torch.equal(got[0], expected[0])
    assert all(torch.equal(g, e) for g, e in zip(got[1], expected[1]))
    assert torch.equal(got[2], expected[2])


@pytest.mark.parametrize("select", ["mask", "nonzero", "masked_select", "unique"])
def test_a_changed_data_dependent_size_is_refused_by_name_and_changes_nothing(select):
    torch.manual_seed(0)
    model = Selected(select)
    five, four = batch_with_count(model, 5), batch_with_count(model, 4, seed=1)
    traced = rt.trace(model, five, F.mse_loss)
    assert traced.data_dependent_sizes, "the trace records no data-dependent size"
    step = rt.Step(model, traced, recompute_sequence(traced.graph))
    before = copy.deepcopy(model)
    assert_equal(planned(step, model, *five, seed=3), eager(before, *five, seed=3))
    model.zero_grad(set_to_none=True)
    buffers = [b.clone() for b in model.buffers()]
    torch.manual_seed(4)
    generator = torch.get_rng_state()
    with pytest.raises(ValueError, match=r"depends on the data .*retrace=True"):
        step(*four)
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(b, c) for b, c in zip(model.buffers(), buffers))
    assert torch.equal(torch.get_rng_state(), generator)


def test_a_changed_count_retraces_with_retrace_true_and_trains_like_eager():
    torch.manual_seed(0)
    model = Selected("mask")
    five, four = batch_with_count(model, 5), batch_with_count(model, 4, seed=1)
    step = rt.optimize(model, five, F.mse_loss, budget="100%", solver="none", retrace=True,
                       progress=False)
    with pytest.raises(ValueError, match=r"index \(index\) gave shape \(4, 8\) where the traced "
                                         r"batch gave \(5, 8\)"):
        rt.Step(model, step.traced, step.sequence)(*four)
    expected = eager(model, *four, seed=5)
    with pytest.warns(UserWarning, match=r"gave shape \(4, 8\).*traced again, planning again"):
        got = planned(step, model, *four, seed=5)
    assert_equal(got, expected)


def test_control_flow_on_a_data_dependent_size_is_refused_when_traced():
    torch.manual_seed(0)
    model = Routed()
    with pytest.raises(rt.TraceError, match=r"Routed: data-dependent control flow on a size: "
                                            r"the step's Python code branches on or computes "
                                            r"with `u0 > 4`"):
        rt.trace(model, (torch.randn(10, 4), torch.zeros(10, 3)), F.mse_loss)


def test_retrace_keeps_one_plan_per_shape(monkeypatch):
    """Variable-length batches: each distinct shape is planned once, then its plan is reused."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    solves = []
    solve = remat.solve
    monkeypatch.setattr(remat, "solve", lambda *a, **k: solves.append(a[1]) or solve(*a, **k))

    def batch(size):
        return torch.randn(size, 4), torch.randint(0, 3, (size,))

    step = rt.optimize(model, batch(8), F.cross_entropy, budget="100%", solver="none",
                       retrace=True, progress=False)
    messages = []
    for size in (5, 8, 5, 3):
        with pytest.warns(UserWarning) as warned:
            step(*batch(size), measure=False)
        messages.append(str(warned[0].message))
    assert len(solves) == 3, solves  # sizes 8, 5 and 3
    assert ["reused" in m for m in messages] == [False, True, True, False], messages
    x, y = batch(5)
    model.zero_grad(set_to_none=True)
    with pytest.warns(UserWarning, match="reused"):
        loss = step(x, y)
    reference = copy.deepcopy(model)
    reference.zero_grad(set_to_none=True)
    expected = F.cross_entropy(reference(x), y)
    expected.backward()
    assert torch.equal(loss, expected.detach())
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(model.parameters(),
                                                           reference.parameters()))
