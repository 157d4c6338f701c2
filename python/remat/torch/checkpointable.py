"""Checkpointable: Rotor's user-facing form (Rotor paper §5) as a drop-in nn.Module.

    ckpt = remat.torch.Checkpointable(nn.Sequential(...), budget="50%")   # or a list of blocks
    loss = loss_fn(ckpt(x), y); loss.backward(); optimizer.step()     # the user's own loop
    ckpt.chain, ckpt.chain_json, ckpt.plan_notation, ckpt.planned_peak_bytes

On the first training call (and whenever the input's shape, dtype, device or the train/eval mode
changes) each block is profiled once: its forward and backward costs, the bytes of its output, of
what autograd saves for its backward (ā), and the peaks of live storages while it runs
(the overheads o_f, o_b), measured by accounting the storages of the tensors aten produces. Costs
(`cost=`): "flops" (the default) counts the FLOPs of every aten call of the block's forward and
backward with trace's cost model (remat.torch.cost.flop_cost), so the same model, input shapes and
budget always give the same chain and the same plan; "measure" takes the wall clock of the one
profiled run instead (microseconds; the plan then depends on timing noise). The
chain (a remat.Chain; `chain_json` is its remat chain JSON text) is solved with a chain solver
(rotor by default; solver="rockmate" is rk-Rotor with keep-all and keep-nothing per block, which
is Rotor's DP) under `budget`: bytes, or text read as the CLI's --budget ("50%" of the store-all
peak of the chain, "90MB"). The plan then
runs through autograd: a custom autograd Function runs the forward part of the plan (F_ck and F_∅
without autograd, F_all with it) and, in backward, the rest (recomputations and the B steps,
torch.autograd.backward through each stage's retained graph), so parameter gradients accumulate
into .grad as with loss.backward().

Recomputed stages replay the random state of their first run (dropout masks are the same) and
keep buffers unchanged (batch-norm running statistics are updated once, by the first run), so
loss, gradients and buffers equal eager PyTorch's. Every run of a stage, recomputations in the
backward included, runs in the autocast state of the forward call (as torch.utils.checkpoint
does); profiling runs in it too, with the cast-weight cache off so it neither reads nor fills the
caller's. Under torch.no_grad() (evaluation) or when nothing requires a gradient, the blocks
simply run in order.

Inside DDP (`DDP(Checkpointable(...))`) and FSDP2 (`fully_shard`, on the blocks and then on the
Checkpointable) the wrappers' hooks run around the blocks as in eager training. FSDP1
(FullyShardedDataParallel) reduces a flat parameter's gradient when autograd first accumulates
it, which the stage-by-stage backward does once per stage: refused.
"""

import time
import weakref

import torch
import torch.nn as nn

import remat
from remat import _remat
from remat.torch import _compat, host_random
from remat.torch import cost as cost_models
from remat.torch import op_kinds

_FORWARD_OPS = ("F_ck", "F_none", "F_all")


class LiveBytes(_compat.TorchDispatchMode):
    """Peak bytes of live storages of the tensors aten produces while active (each storage once),
    plus `pinned` bytes; storages of the .grad of `exclude_grads_of` parameters are not counted
    (they persist like the parameters themselves)."""

    def __init__(self, pinned=0, exclude_grads_of=(), count_flops=False):
        super().__init__()
        self.refs = []
        self.pinned = pinned
        self.params = list(exclude_grads_of)
        self.peak = 0
        self.last = 0
        self.count_flops = count_flops
        self.flops = 0.0  # of the aten calls seen, when count_flops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        # prim calls read metadata (a fake tensor's device): no work, as in a real run.
        if self.count_flops and getattr(func, "namespace", None) != "prim":
            self.flops += _call_flops(func, args, out)
        for t in _compat.tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.refs.append(weakref.ref(t))
        self.last = self.live_bytes()
        self.peak = max(self.peak, self.last)
        return out

    def live_bytes(self):
        excluded = {_compat.storage_key_and_bytes(p.grad)[0] for p in self.params
                    if p.grad is not None}
        seen, alive = {}, []
        for r in self.refs:
            found = _compat.storage_of_weak(r)
            if found is None:
                continue
            alive.append(r)
            key, nbytes = found
            if key is not None and key not in excluded:
                seen[key] = nbytes
        self.refs = alive
        return self.pinned + sum(seen.values())

    def reset_peak(self):
        self.peak = self.live_bytes()


def _call_flops(func, args, out):
    """FLOPs of one aten call by trace's cost model (a view costs nothing; an op the model does not
    know its arguments of costs 1, as in partition)."""
    packet = func.overloadpacket.__name__
    is_view = any(r.alias_info is not None and not r.alias_info.is_write
                  for r in func._schema.returns)
    kind = op_kinds.kind_of(packet, is_view)
    try:
        return cost_models.flop_cost(cost_models.OpCall(str(func), packet, kind, tuple(args), out))
    except (TypeError, IndexError, AttributeError):
        return 1.0


def _bytes(tensor):
    return _compat.storage_key_and_bytes(tensor)[1] if isinstance(tensor, torch.Tensor) else 0


class _BufferGuard:
    """Keeps a block's buffers (batch-norm statistics) unchanged across a recomputation."""

    def __init__(self, block):
        self.saved = [(b, b.detach().clone()) for b in block.buffers()]

    def restore(self):
        # Through .data: autograd may hold these buffers (batch norm saves its running
        # statistics), and a tracked in-place write would bump their version counters.
        with torch.no_grad():
            for b, s in self.saved:
                b.data.copy_(s)


class Checkpointable(nn.Module):
    """A sequence of blocks run under a Rotor plan; see the module docstring."""

    def __init__(self, module, budget="50%", *, solver="rotor", work_limit=None, time_limit=None,
                 cost="flops", **params):
        super().__init__()
        if isinstance(module, nn.Sequential):
            blocks = list(module)
        elif isinstance(module, (list, tuple, nn.ModuleList)):
            blocks = list(module)
        else:
            raise ValueError("Checkpointable: expected an nn.Sequential or a list of blocks, got "
                             f"{type(module).__name__}")
        if not blocks or not all(isinstance(b, nn.Module) for b in blocks):
            raise ValueError("Checkpointable: needs at least one block, each an nn.Module")
        self.blocks = nn.ModuleList(blocks)
        self.budget = budget
        self._budget_bytes(1)  # a wrong budget is an error here, not in the first forward
        self.solver = solver
        # Rockmate on opaque blocks: a user block is one rk-block whose only runs autograd can
        # replay are keep-all (F_all) and keep-nothing (F_∅, then F_all before B), so rk-Rotor has
        # one option per block and is exactly Rotor's DP (docs/solvers/rockmate.md); the per-block
        # MILP options need the block's graph: remat.torch.optimize(..., solver="rockmate"). The
        # registry row says which row solves a solver's problem on a chain ("on_chain").
        row = next((r for r in _remat.solver_rows() if r["name"] == solver), None)
        self.chain_solver = row["on_chain"] if row and row["on_chain"] else solver
        # Work units stop the search (the same plan on a loaded machine); seconds are a backstop.
        self.work_limit, self.time_limit, _, _ = remat._solve_settings(work_limit, time_limit)
        if cost not in ("flops", "measure"):
            raise ValueError(f"Checkpointable: cost must be 'flops' or 'measure', got {cost!r}")
        self.cost = cost
        self.params = dict(params)
        self.chain = None
        self.plan = None
        self._key = None

    # -- planning --------------------------------------------------------------------------
    def _profile(self, x, autocast):
        """The remat.Chain of the blocks on input `x` in the `autocast` state (state, RNG,
        .grad and the autocast weight cache left unchanged)."""
        with _compat.autocast(autocast, cache_enabled=False):
            return self._profile_blocks(x)

    def _profile_blocks(self, x):
        rng = _random_states(x)
        params = [p for p in self.parameters() if p.requires_grad]
        self._groups = self._group_in_place(x)
        stages = []
        a = x.detach()
        for index, group in enumerate(self._groups):
            block = _Group([self.blocks[i] for i in group])
            guard = _BufferGuard(block)
            leaf = a.detach().requires_grad_(index > 0 or x.requires_grad)
            flops = self.cost == "flops"
            with LiveBytes(count_flops=flops) as meter:
                start = time.perf_counter()
                with torch.enable_grad():
                    out = block(leaf)
                u_f = meter.flops if flops else (time.perf_counter() - start) * 1e6
                forward_peak = meter.peak
                # ā: what the block's forward leaves alive (its output and what autograd saved;
                # the input and the parameters were made before the meter started).
                abar = meter.live_bytes()
                grad_out = torch.ones_like(out)
                meter.reset_peak()
                base = meter.last
                meter.flops = 0.0
                start = time.perf_counter()
                # Parameter gradients go to .grad, which persists like the parameters: not
                # counted in the run, so not here (unless nothing else needs a gradient).
                inputs = [leaf] if leaf.requires_grad else params
                if out.requires_grad:
                    torch.autograd.grad(out, inputs, grad_out, allow_unused=True)
                u_b = meter.flops if flops else (time.perf_counter() - start) * 1e6
                backward_peak = meter.peak
            guard.restore()
            out_bytes = _bytes(out)
            abar = max(abar, out_bytes)
            delta_in = _bytes(leaf) if leaf.requires_grad else 0
            stages.append(_remat.ChainStage(
                name="blocks " + ",".join(
                    f"{i} ({type(self.blocks[i]).__name__})" for i in group),
                u_f=u_f, u_b=u_b,  # FLOPs, or microseconds with cost="measure"
                a=out_bytes, abar=abar, delta=out_bytes,
                o_f=max(0, forward_peak - abar),
                # Backward: what the meter saw beyond ā, δ^ℓ and δ^{ℓ-1} (parameter gradients
                # included: autograd.grad does not accumulate them, the real run does).
                o_b=max(0, max(backward_peak, base) - abar - out_bytes - delta_in),
            ))
            a = out.detach()
            del out, leaf, grad_out
        _set_random_states(rng)
        # The loss is the user's, unseen here: charged like a cross-entropy, which keeps a
        # tensor the size of its input (log-softmax) and makes one more in its backward.
        last = stages[-1].a
        stages.append(_remat.ChainStage(name="loss", a=0, abar=last, delta=0, o_b=last))
        x_bytes = _bytes(x)
        sizes = _remat.ChainSizes(a=x_bytes, abar=x_bytes,
                                  delta=x_bytes if x.requires_grad else 0)
        return _remat.Chain("Checkpointable", sizes, stages)

    def _group_in_place(self, x):
        """Stages as groups of blocks: a block that writes its input in place (ReLU(inplace=True))
        joins the previous block's stage, since a stage's input is an autograd leaf."""
        groups = []
        a = x.detach()
        with torch.no_grad():
            for index, block in enumerate(self.blocks):
                guard = _BufferGuard(block)
                probe = a.clone()
                before = _compat.version_of(probe)
                out = block(probe)
                guard.restore()
                if not isinstance(out, torch.Tensor):
                    raise ValueError(
                        f"Checkpointable: block {index} ({type(block).__name__}) returns "
                        f"{_describe(out)}; each block must take and return one tensor (wrap the "
                        "block so that it returns the tensor the next block reads, or keep it "
                        "outside the Checkpointable)")
                if _compat.version_of(probe) != before and groups:
                    groups[-1].append(index)
                elif _compat.version_of(probe) != before:
                    raise ValueError(f"Checkpointable: block 0 ({type(block).__name__}) writes "
                                     "the input in place; put it after another block")
                else:
                    groups.append([index])
                a = out
        return groups

    def _budget_bytes(self, store_all_peak):
        try:
            return _remat.budget_bytes(self.budget, store_all_peak)
        except ValueError as e:
            raise ValueError(f"Checkpointable: {e}") from None

    def replan(self, x, autocast=None):
        """Profiles the blocks on `x` (in the caller's autocast state unless `autocast`, a
        _compat.autocast_state(), is given) and solves the chain again."""
        if autocast is None:
            autocast = _compat.autocast_state()
        self.chain = self._profile(x, autocast)
        length = self.chain.length
        self.store_all_peak_bytes = self.chain.store_all()["peak_bytes"]
        self.budget_bytes = self._budget_bytes(self.store_all_peak_bytes)
        plan = _remat.chain_solve(self.chain, self.budget_bytes, self.chain_solver,
                                  self.time_limit, self.params, work_limit=self.work_limit)
        ops = [tuple(op) for op in plan["ops"]]
        loss = length + 1
        first = ops.index(("F_all", loss))
        if ops[first + 1] != ("B", loss):
            raise ValueError(f"Checkpointable: plan does not run B{loss} right after "
                             f"F{loss}all: {plan['notation']}")
        self.plan = plan
        self.plan_notation = plan["notation"]
        self.planned_peak_bytes = plan["peak_bytes"]
        self.status = plan["status"]
        self._forward_ops = ops[:first]
        self._backward_ops = ops[first + 2:]

    @property
    def chain_json(self):
        """The chain's remat chain JSON text (None before the first training call)."""
        return None if self.chain is None else self.chain.to_json()

    def save_chain(self, path):
        if self.chain is None:
            raise ValueError("Checkpointable: no chain yet (call the module on a batch first)")
        _remat.save_chain(self.chain, str(path))

    # -- running ---------------------------------------------------------------------------
    def forward(self, x):
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad or any(p.requires_grad for p in self.parameters()))
        if not needs_grad:
            for block in self.blocks:
                x = block(x)
            return x
        self._refuse_fsdp1()
        autocast = _compat.autocast_state()
        key = (tuple(x.shape), x.dtype, x.device, self.training, autocast[:1])
        if key != self._key:
            self.replan(x, autocast)
            self._key = key
        run = _PlanRun(self, x, autocast)
        anchor = torch.empty(0, requires_grad=True)  # so backward runs when x needs no grad
        return _ChainFunction.apply(run, anchor, x)

    def _refuse_fsdp1(self):
        flat = next((n for n, p in self.named_parameters()
                     if _compat.is_fsdp1_flat_parameter(p)), None)
        if flat is not None:
            raise ValueError(
                f"Checkpointable: parameter '{flat}' is a FullyShardedDataParallel (FSDP1) flat "
                "parameter; FSDP1 reduces its gradient as soon as autograd first accumulates it, "
                "and the plan's backward runs stage by stage, so the gradient would be reduced "
                "in parts. Use FSDP2: fully_shard(block) for each block, then "
                "fully_shard(checkpointable) (docs/python.md, 'Distributed training')")


def _random_states(x):
    """The states of the generators a block on `x` may draw from: torch's on x's device and
    Python's and numpy's global ones (host_random)."""
    return _compat.rng_state({x.device.type}), host_random.state()


def _set_random_states(states):
    torch_states, host_states = states
    _compat.set_rng_state(torch_states)
    host_random.set_state(host_states)


def _describe(value):
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


class _Group(nn.Module):
    """Blocks run one after the other as one stage (not registered: the owner holds them)."""

    def __init__(self, blocks):
        super().__init__()
        self.__dict__["members"] = blocks

    def forward(self, x):
        for block in self.members:
            x = block(x)
        return x

    def buffers(self, recurse=True):
        for block in self.members:
            yield from block.buffers(recurse)


class _PlanRun:
    """The state of one execution of the plan: a^ℓ, (leaf, output) for ā^ℓ, δ^ℓ by stage."""

    def __init__(self, owner, x, autocast):
        self.owner = owner
        self.autocast = autocast  # the forward call's, replayed by every run of a stage
        self.blocks = [_Group([owner.blocks[i] for i in g]) for g in owner._groups]
        self.x_requires_grad = x.requires_grad
        self.a = {0: x.detach()}
        self.abar = {}
        self.delta = {}
        self.rng = {}

    def input_of(self, stage):
        if stage - 1 in self.a:
            return self.a[stage - 1]
        return self.abar[stage - 1][1].detach()

    def forward(self, kind, stage):
        block = self.blocks[stage - 1]
        inp = self.input_of(stage)
        first = stage not in self.rng
        guard = None
        # A run again draws what the first run drew: torch's generators and, for blocks that
        # draw with numpy or Python's random module, those too (host_random).
        if first:
            self.rng[stage] = _random_states(inp)
        else:
            outer = _random_states(inp)
            _set_random_states(self.rng[stage])
            guard = _BufferGuard(block)
        if kind == "F_all":
            with torch.enable_grad(), _compat.autocast(self.autocast):
                leaf = inp.detach().requires_grad_(stage > 1 or self.x_requires_grad)
                self.abar[stage] = (leaf, block(leaf))
        else:
            with torch.no_grad(), _compat.autocast(self.autocast):
                self.a[stage] = block(inp)
        if guard is not None:
            guard.restore()
            _set_random_states(outer)
        if kind == "F_none" and stage not in self.abar:
            self.a.pop(stage - 1, None)

    def backward(self, stage):
        leaf, out = self.abar.pop(stage)
        grad = self.delta.pop(stage)
        if out.requires_grad:
            torch.autograd.backward(out, grad)
        self.delta[stage - 1] = leaf.grad if leaf.requires_grad else None
        self.a.pop(stage - 1, None)

    def run(self, ops):
        for kind, stage in ops:
            if kind in _FORWARD_OPS:
                self.forward(kind, stage)
            else:
                self.backward(stage)

    def output(self):
        last = len(self.blocks)
        if last in self.abar:
            return self.abar[last][1].detach()
        return self.a[last]


class _ChainFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, anchor, x):
        run.run(run.owner._forward_ops)
        ctx.run = run
        return run.output()

    @staticmethod
    def backward(ctx, grad):
        run = ctx.run
        run.delta[len(run.blocks)] = grad
        run.run(run.owner._backward_ops)
        ctx.run = None
        return None, None, run.delta.get(0)
