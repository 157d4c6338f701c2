"""Data-parallel wrappers around a traced step: DDP's gradient synchronisation, FSDP refused.

    step = rt.optimize(DDP(model), (x, y), loss_fn)   # each rank traces and plans `model`
    step(x, y)                                         # plan, then DDP's all-reduce of .grad
    with ddp.no_sync(): step(x, y)                     # local accumulation, as with DDP

A traced step runs aten calls, never the modules' forward, so DDP's reducer (hooks on each
parameter's gradient accumulator, armed by DDP.forward) never fires. DDPSync does after the step
what the reducer does after a backward: when `require_backward_grad_sync` is set (off inside
`no_sync()`), each gradient is divided by the world size and the gradients are summed over the
process group in buckets of DDP's `bucket_bytes_cap`, in reverse parameter order; a parameter
no rank gave a gradient keeps none (DDP with find_unused_parameters). Before the step it
broadcasts rank 0's buffers where DDP.forward would (`broadcast_buffers`).

FSDP (FullyShardedDataParallel, fully_shard) gathers each module's parameters before its
forward and backward and reduce-scatters the gradients in hooks around them; a traced step has
no per-module forward or backward for them to run in, so it is refused with the patterns that
work: `fully_shard` over `Checkpointable` (its blocks run as modules), or DDP.
"""

from remat.torch import _compat
from remat.torch.capture import TraceError

SUPPORTED = ("supported: rt.optimize(DDP(model), ...), or FSDP around remat's module form, "
             "e.g. fully_shard(rt.Checkpointable(blocks)) with fully_shard on each block first "
             "(docs/python.md, 'Distributed training')")


def _ddp_class():
    import torch.distributed as dist

    if not dist.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel


def fsdp_use(model):
    """What in `model` is FSDP-sharded ('module NAME is FSDP', 'parameter NAME is sharded'), or
    None."""
    import torch.distributed as dist

    if not dist.is_available():
        return None
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
    from torch.distributed.tensor import DTensor

    for name, m in model.named_modules():
        if isinstance(m, FullyShardedDataParallel):
            return f"module '{name or '(model)'}' is FullyShardedDataParallel"
        if isinstance(m, FSDPModule):
            return f"module '{name or '(model)'}' is sharded by fully_shard"
    for name, p in model.named_parameters():
        if isinstance(p, DTensor) or _compat.is_fsdp1_flat_parameter(p):
            return f"parameter '{name}' is sharded ({type(p).__name__})"
    return None


def unwrap(model, model_name):
    """(the module to trace, a DDPSync or None): DDP(m) gives m and its synchronisation; an
    FSDP-sharded model, or DDP anywhere but at the root, is a TraceError naming it."""
    sharded = fsdp_use(model)
    if sharded:
        raise TraceError(f"cannot trace {model_name}: {sharded}; FSDP gathers parameters and "
                         "reduces gradients in hooks around each module's forward and backward, "
                         "which a traced step does not run; " + SUPPORTED)
    ddp_class = _ddp_class()
    if ddp_class is None:
        return model, None
    if isinstance(model, ddp_class):
        return model.module, DDPSync(model, model_name)
    nested = next((name for name, m in model.named_modules() if isinstance(m, ddp_class)), None)
    if nested is not None:
        raise TraceError(f"cannot trace {model_name}: module '{nested}' is "
                         "DistributedDataParallel inside the model; wrap the whole model instead "
                         "(rt.optimize(DDP(model), ...))")
    return model, None


class DDPSync:
    """What DDP's reducer and forward do around a backward, done around a planned step."""

    def __init__(self, ddp, model_name):
        unsupported = _compat.ddp_features_remat_cannot_follow(ddp)
        if unsupported:
            raise TraceError(f"cannot trace {model_name}: DistributedDataParallel with "
                             f"{', '.join(unsupported)}, which a planned step cannot reproduce "
                             "(it synchronises plain averaged gradients only); remove it, or use "
                             "DDP(rt.Checkpointable(blocks))")
        self.ddp = ddp

    @property
    def group(self):
        return self.ddp.process_group

    def _ignored(self, name):
        return name in self.ddp.parameters_to_ignore

    def before_step(self):
        """Rank 0's buffers to every rank, where DDP.forward would broadcast them."""
        import torch.distributed as dist

        ddp = self.ddp
        if not (ddp.require_forward_param_sync and ddp.broadcast_buffers):
            return
        for name, buffer in ddp.module.named_buffers():
            if not self._ignored(name):
                dist.broadcast(buffer.data, src=dist.get_global_rank(self.group, 0),
                               group=self.group)

    def after_step(self):
        """Averages .grad over the ranks, as DDP's reducer does, unless inside no_sync()."""
        ddp = self.ddp
        sync = bool(ddp.require_backward_grad_sync)
        # DDP.forward arms the next forward's buffer broadcast only after a synchronised pass.
        ddp.require_forward_param_sync = sync
        if not sync:
            return
        params = [p for name, p in ddp.module.named_parameters()
                  if p.requires_grad and not self._ignored(name)]
        used = self._used_anywhere(params)
        world = self.group.size()
        for bucket in _buckets(list(reversed(params)), ddp.bucket_bytes_cap):
            self._all_reduce_bucket(bucket, world, used)

    def _used_anywhere(self, params):
        """Per parameter: whether any rank has a gradient for it (one small all-reduce)."""
        import torch
        import torch.distributed as dist

        if not params:
            return {}
        flags = torch.tensor([p.grad is not None for p in params], dtype=torch.int32,
                             device=params[0].device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.group)
        return {id(p): bool(f) for p, f in zip(params, flags.tolist())}

    def _all_reduce_bucket(self, bucket, world, used):
        import torch
        import torch.distributed as dist

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in bucket]
        flat = torch.cat([g.reshape(-1) for g in grads]).div_(world)
        dist.all_reduce(flat, group=self.group)
        offset = 0
        for p, g in zip(bucket, grads):
            n = g.numel()
            if used[id(p)]:
                reduced = flat[offset:offset + n].view_as(g)
                if p.grad is None:
                    p.grad = reduced.clone()
                else:
                    p.grad.copy_(reduced)
            offset += n


def _buckets(params, cap_bytes):
    """Consecutive runs of parameters of one dtype and device, each at most `cap_bytes` (a
    parameter larger than the cap is a bucket of its own)."""
    bucket, size = [], 0
    for p in params:
        nbytes = p.numel() * p.element_size()
        if bucket and (size + nbytes > cap_bytes or (p.dtype, p.device) !=
                       (bucket[0].dtype, bucket[0].device)):
            yield bucket
            bucket, size = [], 0
        bucket.append(p)
        size += nbytes
    if bucket:
        yield bucket
