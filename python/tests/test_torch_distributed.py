"""Data-parallel training with remat: two gloo processes on loopback, CPU, one spawn running every
check (starting processes costs seconds). Each rank trains on its own batches; after 3 AdamW
steps losses, gradients and parameters equal those of the same model trained without remat under
the same wrapper, on every rank. With two ranks DDP's average is (a / 2 + b / 2), exact in either
order, so the comparisons are bitwise."""

import copy
import datetime
import os
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

import remat
import remat.torch as rt
from helpers import recompute_sequence

WORLD = 2
# A collective that hangs fails the test instead of the CI run; generous, since on a loaded machine
# the two processes' steps run minutes apart.
TIMEOUT_S = 120
pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def _blocks():
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(8, 32), nn.GELU()), nn.Sequential(nn.Linear(32, 32), nn.Tanh()),
            nn.Dropout(0.2), nn.Sequential(nn.Linear(32, 32), nn.GELU()), nn.Linear(32, 4)]


def _batch(rank, step, size=6):
    torch.manual_seed(100 + 10 * rank + step)
    return torch.randn(size, 8), torch.randint(0, 4, (size,))


def _equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def _full(tensors):
    return [t.full_tensor() if hasattr(t, "full_tensor") else t.detach().clone() for t in tensors]


def _train(model, forward_backward, rank, sizes=(6, 6, 3)):
    """3 AdamW steps; the second accumulates a no_sync() micro-batch first when the model is DDP.
    Returns the losses and, per step, the gradients before the optimizer step."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses, grads = [], []
    for step, size in enumerate(sizes):
        if step == 1 and isinstance(model, nn.parallel.DistributedDataParallel):
            with model.no_sync():
                losses.append(forward_backward(*_batch(rank, 10 + step, size), step))
        losses.append(forward_backward(*_batch(rank, step, size), step))
        grads.append(_full([p.grad for p in model.parameters()]))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return losses, grads, _full(model.parameters())


def _eager(model):
    def forward_backward(x, y, step):
        torch.manual_seed(step)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss.detach()

    return forward_backward


def _check_optimize_ddp(rank):
    """The default schedule and a recomputing plan, each traced once per batch size (the
    smaller last batch is a step of its own)."""
    reference = nn.parallel.DistributedDataParallel(_mlp())
    expected = _train(reference, _eager(reference), rank)
    traces = {}
    for recompute in (False, True):
        ddp = nn.parallel.DistributedDataParallel(_mlp())
        steps = {}

        def planned(x, y, step):
            if len(x) not in traces:
                traces[len(x)] = rt.trace(ddp, (x, y), F.cross_entropy)
            if len(x) not in steps:
                graph = traces[len(x)].graph
                order = recompute_sequence(graph) if recompute else remat.default_schedule(graph)
                steps[len(x)] = rt.Step(ddp, traces[len(x)], order)
            torch.manual_seed(step)
            return steps[len(x)](x, y, measure=False).detach()

        got = _train(ddp, planned, rank)
        what = f"rank {rank}: optimize(DDP(model)), {'a recomputing' if recompute else 'no'} plan"
        assert _equal(got[0], expected[0]), f"{what}: losses {got[0]} != {expected[0]}"
        for step, (g, e) in enumerate(zip(got[1], expected[1])):
            assert _equal(g, e), f"{what}: gradients differ from eager DDP's at step {step}"
        assert _equal(got[2], expected[2]), f"{what}: parameters differ after 3 AdamW steps"
        assert torch.equal(ddp.module[1].running_mean, reference.module[1].running_mean), what


def _check_checkpointable_in(wrap, rank, name):
    reference = wrap(nn.Sequential(*_blocks()), sharded_blocks=True)
    model = wrap(rt.Checkpointable(_blocks(), budget="60%"), sharded_blocks=True)
    expected = _train(reference, _eager(reference), rank)
    got = _train(model, _eager(model), rank)
    inner = model.module if hasattr(model, "module") else model
    what = f"rank {rank}: {name}(Checkpointable) with plan {inner.plan_notation}"
    assert "∅" in inner.plan_notation or "ck" in inner.plan_notation, f"{what} recomputes nothing"
    assert _equal(got[0], expected[0]), f"{what}: losses {got[0]} != {expected[0]}"
    for step, (g, e) in enumerate(zip(got[1], expected[1])):
        assert _equal(g, e), f"{what}: gradients differ at step {step}"
    assert _equal(got[2], expected[2]), f"{what}: parameters differ after 3 AdamW steps"


def _ddp(module, sharded_blocks):
    return nn.parallel.DistributedDataParallel(module)


def _fsdp2(module, sharded_blocks):
    from torch.distributed.fsdp import fully_shard

    for block in getattr(module, "blocks", module):
        if sharded_blocks and any(p.requires_grad for p in block.parameters()):
            fully_shard(block)
    fully_shard(module)
    return module


def _check_refusals(rank):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.distributed.fsdp import FullyShardedDataParallel

    batch = _batch(rank, 0)
    with pytest.raises(rt.TraceError, match=r"sharded by fully_shard.*Checkpointable"):
        rt.optimize(_fsdp2(_mlp(), sharded_blocks=False), batch, F.cross_entropy,
                    progress=False)
    hooked = nn.parallel.DistributedDataParallel(_mlp())
    hooked.register_comm_hook(None, allreduce_hook)
    with pytest.raises(rt.TraceError, match="communication hook"):
        rt.optimize(hooked, batch, F.cross_entropy, progress=False)
    fsdp1 = FullyShardedDataParallel(rt.Checkpointable(_blocks()), device_id=torch.device("cpu"))
    with pytest.raises(rt.TraceError, match="FullyShardedDataParallel"):
        rt.optimize(fsdp1, batch, F.cross_entropy, progress=False)
    with pytest.raises(ValueError, match=r"FSDP1.*fully_shard"):
        fsdp1(batch[0])


def _worker(rank, init_file):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        _check_optimize_ddp(rank)
        _check_checkpointable_in(_ddp, rank, "DDP")
        _check_checkpointable_in(_fsdp2, rank, "fully_shard")
        _check_refusals(rank)
    finally:
        dist.destroy_process_group()


def test_ddp_and_fsdp_training_with_remat_equals_training_without_on_every_rank(tmp_path,
                                                                                  monkeypatch):
    """optimize(DDP(model)) (gradients averaged as DDP's reducer does, no_sync() honoured, rank
    0's batch-norm buffers broadcast), DDP(Checkpointable) and fully_shard(Checkpointable) train
    like the unplanned model; FSDP under optimize, a DDP communication hook and FSDP1 around a
    Checkpointable are refused by name."""
    if os.path.exists("/sys/class/net/lo"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    context = mp.start_processes(_worker, args=(str(tmp_path / "rendezvous"),), nprocs=WORLD,
                                 join=False, start_method="spawn")
    deadline = time.monotonic() + 4 * TIMEOUT_S
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the {WORLD} processes did not finish in {4 * TIMEOUT_S} s")
