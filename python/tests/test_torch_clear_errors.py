"""Mistakes that used to fail deep inside PyTorch now fail with one message saying what is wrong,
and planning progress goes to a terminal only."""

import io
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import remat
import remat.torch as rt


def test_a_checkpointable_block_returning_a_tuple_is_named():
    ck = rt.Checkpointable([nn.Linear(4, 4), nn.LSTM(4, 4), nn.Linear(4, 2)])
    with pytest.raises(ValueError, match=r"block 1 \(LSTM\) returns a tuple of 2; each block must "
                                         r"take and return one tensor"):
        ck(torch.randn(3, 4, requires_grad=True))


class Checkpointed(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        h = checkpoint(lambda t: torch.tanh(self.a(t)), x, use_reentrant=self.reentrant)
        return self.b(h)


def test_non_reentrant_checkpoint_inside_the_model_is_named_and_replaced_by_remat():
    batch = (torch.randn(3, 4), torch.randn(3, 2))
    with pytest.raises(rt.TraceError, match=r"Checkpointed: it calls torch.utils.checkpoint "
                                            r"\(non-reentrant\).*remat plans .* and replaces it"):
        rt.trace(Checkpointed(reentrant=False), batch, F.mse_loss)


def _solve_progress(monkeypatch, stderr):
    """The progress argument plan() passes to remat.solve with progress=True."""
    seen = []
    solve = remat.solve

    def recording(*args, **kwargs):
        seen.append(kwargs.get("progress"))
        return solve(*args, **kwargs)

    monkeypatch.setattr(remat, "solve", recording)
    monkeypatch.setattr(sys, "stderr", stderr)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    rt.optimize(model, (torch.randn(3, 4), torch.randn(3, 2)), F.mse_loss, budget="100%",
                solver="none", progress=True)
    return seen[0]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_planning_progress_is_drawn_on_a_terminal_only(monkeypatch):
    assert _solve_progress(monkeypatch, io.StringIO()) is None  # a log file: no \r lines
    assert callable(_solve_progress(monkeypatch, _Terminal()))
