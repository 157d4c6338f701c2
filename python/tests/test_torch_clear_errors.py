"""Mistakes that used to fail deep inside PyTorch now fail with one message saying what is wrong,
and planning progress goes to a terminal only."""

import io
import random
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


class HostRandom(nn.Module):
    """A mask drawn with numpy, or a layer skipped when Python's random.uniform(0, 1) < 0.5 (as
    some Hugging Face models' layerdrop draws): numbers a trace would keep as constants or as
    the branch they chose."""

    def __init__(self, source):
        super().__init__()
        self.source = source
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        h = torch.relu(self.a(x))
        if self.source == "numpy":
            import numpy as np
            h = h * torch.from_numpy((np.random.rand(*h.shape) > 0.5).astype("float32"))
        elif random.uniform(0, 1) >= 0.5:
            h = torch.tanh(h)
        return self.b(h)


@pytest.mark.parametrize("source, named", [("numpy", r"numpy's global generator"),
                                           ("python", r"Python's `random` module")])
def test_a_step_drawing_numbers_outside_torch_is_refused_and_their_state_kept(source, named):
    import numpy as np
    random.seed(3)
    np.random.seed(3)
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with pytest.raises(ValueError, match=rf"cannot trace HostRandom: the step draws random "
                                         rf"numbers from {named}.*every step would reuse them"):
        rt.optimize(HostRandom(source), (torch.randn(3, 4),), lambda out: out.sum(),
                    budget="min", progress=False)
    assert random.getstate() == python_state
    assert (np.random.get_state()[1] == numpy_state[1]).all()
    assert np.random.get_state()[2] == numpy_state[2]
