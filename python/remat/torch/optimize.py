"""optimize(): trace, solve and wrap the plan as a training-step callable.

    step = remat.torch.optimize(model, (x, y), F.cross_entropy, budget=0.5)   # solver="auto"
    loss = step(x, y)                   # runs the plan, writes p.grad of every parameter
    step.summary()                      # what is recomputed and kept, bytes, extra cost
    step.save_plan("plan.json")         # remat-plan JSON; rt.load_plan(...) runs it later
    step.replan("min")                  # another budget, same trace
    step.measured_peak_bytes            # set by the first call (and by any with measure=True)
    step.baseline_peak_bytes, step.planned_peak_bytes   # from the simulator

Gradients accumulate into `.grad` as loss.backward() does. Buffers (batch-norm statistics) are
updated in place as in eager training. On a GPU every call measures torch.cuda's peak (above what
is allocated when the call starts, plus the step's inputs: what the simulator counts); on the CPU
a measured call runs the plan in an interpreter that counts the bytes of live tensor storages.

Each call checks, cheaply, that the model is still the one traced: the same trainable
parameters, the same training/eval mode of every submodule, the same autocast state, the same
batch structure, constants and tensor layouts, and (while it runs) the same sizes from calls
whose output size depends on the data. A change raises ValueError saying what changed, or,
with `optimize(..., retrace=True)`, traces again and plans with the same options (a plan made
for a graph with the same fingerprint is reused: one plan per distinct shape).

A DDP-wrapped model is traced and planned per rank, and the step synchronises the gradients as
DDP would (distributed.py); an FSDP-sharded model is refused.
"""

import collections
import json
import os
import sys
import time
import warnings

import torch

import remat
from remat import _remat
from remat.torch import _compat, distributed
from remat.torch.capture import trainable
from remat.torch.execute import (DataDependentSizeError, plan_module, run_measured,
                                  storage_bytes)
from remat.torch.memory import memory_split, outside_graph_bytes
from remat.torch.trace import DataDependentWithoutMemory, TracedStep, trace, training_modes

# With no time limit given, planning stops by the solver's own iteration counts (the same plan on
# a quiet or a busy machine); this limit is only a safety net, and the step says when it fired.
SAFETY_TIME_LIMIT_S = 600.0

# Plans a retracing step keeps, by graph fingerprint (variable-length batches: one plan per shape).
PLAN_CACHE_SIZE = 8


class Step:
    """One planned training step of a model; see the module docstring."""

    def __init__(self, model, traced, sequence, solver="given", status="given", *,
                 planning=None, retrace=False, time_limit_hit=False, plan_document=None):
        self.traced = traced
        self.model = model
        self.solver = solver
        self.status = status
        self.planning = dict(planning or {})  # the optimize() options, for replan and retrace
        self.retrace = retrace
        self.time_limit_hit = time_limit_hit
        self._set_plan(list(sequence))
        # remat-plan JSON text of this sequence as the solve or the file gave it (stats kept), or
        # None: save_plan then writes one from the sequence.
        self.plan_document = plan_document
        self.measured_peak_bytes = None
        self._trainable = tuple(traced.param_names)
        self._modes = traced.training_modes
        self._plans = collections.OrderedDict()  # fingerprint -> plan, for retrace=True
        self._remember_plan()

    @property
    def model(self):
        return self._model

    @model.setter
    def model(self, model):
        """The model the step trains: for DDP(m), the module traced is m (self._module) and each
        call synchronises the gradients as DDP would (self._sync)."""
        self._model = model
        self._module, self._sync = distributed.unwrap(model, self.traced.model_name)

    def _set_plan(self, sequence):
        traced = self.traced
        evaluation = remat.simulate(traced.graph, sequence)
        if not evaluation.valid:
            raise ValueError(f"{traced.model_name}: invalid plan: {evaluation.error}")
        self.sequence = sequence
        self.module = plan_module(traced, sequence)
        self.baseline_peak_bytes, self.baseline_cost = remat.baseline(traced.graph)
        self.planned_peak_bytes = evaluation.peak_bytes
        self.planned_cost = evaluation.cost
        self.measured_peak_bytes = None

    @property
    def extra_cost_percent(self):
        """Extra compute of the plan over the default schedule, % of the baseline cost."""
        return _percent(self.planned_cost - self.baseline_cost, self.baseline_cost)

    @property
    def peak_percent(self):
        return _percent(self.planned_peak_bytes, self.baseline_peak_bytes)

    # -- checks ---------------------------------------------------------------------------------
    def _what_changed(self, args, kwargs):
        """Text saying how the model or batch differs from the traced ones, or None."""
        named = list(self._module.state_dict(keep_vars=True).items())
        named += [(f"batch tensor {i}", t) for i, t in
                  enumerate(_compat.tree_flatten((args, kwargs))[0]) if isinstance(t, torch.Tensor)]
        dataless = next((n for n, t in named if _compat.is_without_data(t)), None)
        if dataless is not None:
            raise ValueError(
                f"{self.traced.model_name} step: '{dataless}' is a meta or fake tensor: there is "
                "no data to train; a plan made without memory runs on the real model: "
                "step.save_plan(path), then rt.load_plan(model, batch, loss_fn, path)")
        now = tuple(n for n, _ in trainable(self._module))
        if now != self._trainable:
            added = sorted(set(now) - set(self._trainable))
            removed = sorted(set(self._trainable) - set(now))
            parts = []
            if removed:
                parts.append(f"no longer trainable: {', '.join(removed)}")
            if added:
                parts.append(f"newly trainable: {', '.join(added)}")
            return ("the trainable parameters changed (" + "; ".join(parts or ["order"]) + ")")
        modes = training_modes(self._module)
        if modes != self._modes:
            differ = [name or "(model)" for (name, m), (_, t) in zip(modes, self._modes) if m != t]
            was = "training" if self._modes[0][1] else "eval"
            return (f"the training mode changed since tracing (traced in {was} mode; now "
                    f"different for {', '.join(differ[:3]) or 'the module tree'})")
        autocast = _compat.autocast_state()
        if autocast[:1] != self.traced.autocast[:1]:  # the weight-cache flag changes no number
            return (f"the autocast state changed since tracing (traced "
                    f"{_compat.describe_autocast(self.traced.autocast)}, called "
                    f"{_compat.describe_autocast(autocast)}; the traced graph holds the casts)")
        try:
            self.traced.spec.tensors(args, kwargs)
        except ValueError as error:
            return str(error)
        return None

    def _check(self, args, kwargs):
        changed = self._what_changed(args, kwargs)
        if changed is not None:
            self._retrace_or_refuse(changed, args, kwargs)

    def _retrace_or_refuse(self, changed, args, kwargs):
        if not self.retrace:
            raise ValueError(f"{self.traced.model_name} step: {changed}; trace again, or pass "
                             "retrace=True to optimize()")
        # A step traced without memory (load_plan's) is traced again without memory: its
        # default schedule may not fit here.
        traced = trace(self._module, args, self.traced.loss_fn,
                       model_inputs=self.traced.model_inputs, model_kwargs=kwargs,
                       cost=self.planning.get("cost", "auto"), name=self.traced.model_name,
                       fake=True if self.traced.device is not None else None)
        self._adopt(traced)
        cached = self._plans.get(traced.fingerprint)
        warnings.warn(f"remat: {self.traced.model_name}: {changed}; traced again, "
                      + ("the plan of this graph reused" if cached else "planning again"),
                      stacklevel=4)
        if cached is None:
            kept = self._plans
            self.replan(self.planning.get("budget", "50%"))
            self._plans = kept
            self._remember_plan()
        else:
            self._plans.move_to_end(traced.fingerprint)
            sequence, self.solver, self.status, self.time_limit_hit, document = cached
            self._set_plan(sequence)
            self.plan_document = document

    def _remember_plan(self):
        self._plans[self.traced.fingerprint] = (self.sequence, self.solver, self.status,
                                                self.time_limit_hit, self.plan_document)
        while len(self._plans) > PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)

    def _adopt(self, traced):
        self.traced = traced
        self._trainable = tuple(traced.param_names)
        self._modes = traced.training_modes

    # -- running --------------------------------------------------------------------------------
    def flat_inputs(self, args, kwargs=None):
        batch = self.traced.spec.tensors(args, kwargs or {})
        params = dict(self._module.named_parameters())
        buffers = dict(self._module.named_buffers())
        fixed = [buffers[n] if n in buffers else params[n].detach()
                 for n in self.traced.fixed_names]
        return [params[n].detach() for n in self.traced.param_names] + fixed + list(batch)

    def __call__(self, *args, measure=None, **kwargs):
        """Runs the plan on the batch, accumulates .grad (then, under DDP, averages it over the
        ranks), returns the loss. The first call (or any with measure=True) measures its peak
        (measured_peak_bytes): on the CPU with live-bytes accounting, which is slower; on a GPU it
        synchronises before and after and resets torch.cuda's peak statistics. The other calls
        neither synchronise nor touch those statistics."""
        kwargs = dict(sorted(kwargs.items()))
        self._check(args, kwargs)
        if self._sync is not None:
            self._sync.before_step()
        try:
            outputs, changed = self._run(args, kwargs, measure), None
        except DataDependentSizeError as error:
            changed = error.what
        if changed is not None:  # outside the except clause: the refusal stands alone
            self._retrace_or_refuse(changed, args, kwargs)
            outputs = self._run(args, kwargs, measure)
        self._accumulate_grads(outputs[1:])
        if self._sync is not None:
            self._sync.after_step()
        return outputs[0]

    def _run(self, args, kwargs, measure):
        """The plan module's outputs. A run stopped by a data-dependent size that differs from
        the trace's leaves the buffers and the generator as they were."""
        inputs = self.flat_inputs(args, kwargs)
        state = None
        if self.traced.data_dependent_sizes:
            state = (_compat.rng_state({x.device.type for x in inputs}),
                     [(b, b.detach().clone()) for b in self._module.buffers()])
        try:
            return self._run_inputs(inputs, measure)
        except DataDependentSizeError:
            if state is not None:
                _compat.set_rng_state(state[0])
                with torch.no_grad():
                    for b, saved in state[1]:
                        b.copy_(saved)
            raise

    def _run_inputs(self, inputs, measure):
        if measure is None:
            measure = self.measured_peak_bytes is None
        if not measure:
            return self._run_plan(inputs)
        if not any(x.is_cuda for x in inputs if isinstance(x, torch.Tensor)):
            outputs, self.measured_peak_bytes = run_measured(self.module, inputs)
            return outputs
        # Measuring on a GPU costs two synchronisations and the caller's peak statistics: only
        # when asked (the first call by default), as on the CPU.
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        outputs = self._run_plan(inputs)
        # What the simulator counts: the step's inputs and what it allocates. Memory held before
        # the step by other tensors and by the CUDA libraries' workspaces (cuBLAS keeps its own
        # between calls) is the caller's, as on the CPU.
        torch.cuda.synchronize()
        self.measured_peak_bytes = (torch.cuda.max_memory_allocated() - held
                                    + storage_bytes(inputs))
        return outputs

    def _run_plan(self, inputs):
        # Autocast off: the traced graph holds the casts of the autocast state it was traced in
        # (checked equal to the caller's by _check).
        with torch.no_grad(), _compat.autocast(()):
            return self.module(*inputs)

    def _accumulate_grads(self, grads):
        params = dict(self._module.named_parameters())
        for name, grad in zip(self.traced.param_names, grads):
            if grad is None:
                continue
            p = params[name]
            if p.grad is None:
                p.grad = grad.detach()
            else:
                p.grad.add_(grad)

    # -- planning -------------------------------------------------------------------------------
    def replan(self, budget, solver=None, **options):
        """Plans the same trace again under `budget` (no retrace); returns self. The plans kept
        for other shapes (retrace=True) are dropped: they were made with the old options."""
        planning = dict(self.planning)
        planning.update(options)
        if solver is not None:
            planning["solver"] = solver
        planning["budget"] = budget
        result, sequence, hit = plan(self.traced, **planning)
        self.planning = planning
        self.solver, self.status, self.time_limit_hit = result.solver, result.status, hit
        self._set_plan(sequence)
        self.plan_document = document_of(result, sequence)
        self._plans = collections.OrderedDict()
        self._remember_plan()
        return self

    # -- plans as files -------------------------------------------------------------------------
    def plan_json(self):
        """The remat-plan v1 JSON of this step (the format `remat solve -o` writes, by the same
        writer), with the traced graph's fingerprint and, for a solved or loaded plan, the
        solver's stats."""
        if self.plan_document is not None:
            return json.loads(self.plan_document)
        g = self.traced.graph
        budget = self.planning.get("budget_bytes")
        if budget is None:
            budget = self.planned_peak_bytes
        status = self.status
        if status not in ("optimal", "feasible", "over-budget", "infeasible"):
            status = "feasible" if self.planned_peak_bytes <= budget else "over-budget"
        return json.loads(_remat.sequence_plan_json(g, self.sequence, budget, self.solver,
                                                    status))

    def save_plan(self, path):
        """Writes the plan as remat-plan JSON; `remat simulate GRAPH path` and
        `rt.load_plan(model, batch, loss_fn, path)` read it."""
        _remat.write_text_file(os.fspath(path), json.dumps(self.plan_json(), indent=1) + "\n")

    # -- reports --------------------------------------------------------------------------------
    @property
    def memory(self):
        """The baseline peak split into parameters, gradients, optimizer state (the `optimizer`
        given to optimize or plan_for), activations and temporaries, with the memory lower
        bound (remat.torch.memory.MemorySplit)."""
        return memory_split(self.traced, optimizer=self.planning.get("optimizer"),
                            master_weights=self.planning.get("master_weights"))

    def summary(self, file=None, limit=15):
        """Prints (to `file`, default stdout) what the plan recomputes and what it keeps, and
        what the baseline peak is made of (Step.memory)."""
        text = plan_summary(self.traced.graph, self.sequence, limit=limit,
                            title=repr(self))
        split = self.memory
        lines = split.lines()
        if split.outside_graph:
            lines.append(f"planned peak with the optimizer: "
                         f"{remat.format_bytes(self.planned_peak_bytes + split.outside_graph)}")
        print(text + "\n" + "\n".join(lines), file=file or sys.stdout)

    def __repr__(self):
        measured = ("not measured" if self.measured_peak_bytes is None
                    else remat.format_bytes(self.measured_peak_bytes))
        return (f"<remat step {self.traced.model_name}: solver {self.solver} ({self.status}), "
                f"baseline peak {remat.format_bytes(self.baseline_peak_bytes)}, planned "
                f"{remat.format_bytes(self.planned_peak_bytes)} ({self.peak_percent:.1f} %), "
                f"extra compute {self.extra_cost_percent:+.1f} %, measured {measured}>")


def _percent(part, whole):
    return 100.0 * part / whole if whole else 0.0


def plan_summary(graph, sequence, limit=15, title=None):
    """Tables of what `sequence` recomputes (op, times, bytes, extra cost) and keeps (values
    produced in the forward and read by the backward, by size)."""
    base_peak, base_cost = remat.baseline(graph)
    evaluation = remat.simulate(graph, list(sequence))
    runs = {}
    for n in sequence:
        runs[n] = runs.get(n, 0) + 1
    recomputed = sorted(((n, k - 1) for n, k in runs.items() if k > 1),
                        key=lambda item: -graph.node(item[0])["cost"] * item[1])
    lines = [title] if title else []
    lines.append(f"peak {remat.format_bytes(evaluation.peak_bytes)} "
                 f"({_percent(evaluation.peak_bytes, base_peak):.1f} % of the baseline "
                 f"{remat.format_bytes(base_peak)}), extra compute "
                 f"{_percent(evaluation.cost - base_cost, base_cost):+.1f} %, "
                 f"{len(sequence) - graph.num_nodes} recomputations")
    lines.append(f"recomputed ({len(recomputed)} nodes):")
    lines.append(f"  {'node':<28} {'op':<36} {'times':>5} {'bytes':>12} {'extra cost':>11}")
    for n, times in recomputed[:limit]:
        node = graph.node(n)
        size = sum(graph.value(v)["size"] for v in node["outputs"])
        lines.append(f"  {node['name'][:28]:<28} {node['op'][:36]:<36} {times:>5} "
                     f"{remat.format_bytes(size):>12} "
                     f"{_percent(node['cost'] * times, base_cost):>10.2f}%")
    if len(recomputed) > limit:
        lines.append(f"  ... {len(recomputed) - limit} more")
    kept = _kept_values(graph, sequence)
    lines.append(f"kept for the backward ({len(kept)} values, "
                 f"{remat.format_bytes(sum(s for _, s in kept))}):")
    lines.append(f"  {'value':<28} {'op':<36} {'bytes':>12}")
    for v, size in kept[:limit]:
        producer = graph.producer(v)
        op = graph.node(producer)["op"] if producer is not None else "(input)"
        lines.append(f"  {graph.value(v)['name'][:28]:<28} {op[:36]:<36} "
                     f"{remat.format_bytes(size):>12}")
    if len(kept) > limit:
        lines.append(f"  ... {len(kept) - limit} more")
    return "\n".join(lines)


def _kept_values(graph, sequence):
    """Values the backward reads from their forward-pass copy (made before the first backward
    node ran, so kept through the forward), largest first."""
    first_backward = next((t for t, n in enumerate(sequence)
                           if graph.node(n)["phase"] != "forward"), len(sequence))
    made_at = {}
    kept = set()
    for t, n in enumerate(sequence):
        node = graph.node(n)
        if t >= first_backward:
            kept.update(v for v in node["inputs"] if made_at.get(v, t) < first_backward)
        for v in node["outputs"]:
            made_at[v] = t
    sized = [(v, graph.value(v)["size"]) for v in kept if graph.value(v)["size"] > 0]
    return sorted(sized, key=lambda item: -item[1])


def resolve_budget(graph, budget):
    """The budget in bytes: int bytes, a float fraction of the baseline peak (0.5 = 50 %), text
    ("50%", "90MB") or "min" (the memory lower bound: the least-memory plan). ValueError when it
    is out of range or below the memory lower bound (naming the bound)."""
    return remat.parse_budget(graph, budget, check_lower_bound=True)


def _progress_printer(name, stream, baseline):
    """Progress on stderr, at most once a second once planning has taken a second: stage, done
    fraction, and the best plan so far (peak, % of the baseline, extra compute) when the solver
    reports it (FastSA does), else its best objective."""
    base_peak, base_cost = baseline
    state = {"last": 0.0, "start": time.monotonic(), "printed": False}

    def report(stage, fraction, iterations, best, best_peak, best_cost):
        now = time.monotonic()
        if now - state["last"] < 1.0 or now - state["start"] < 1.0:
            return
        state["last"] = now
        state["printed"] = True
        done = f"{100 * fraction:5.1f} %" if fraction >= 0 else "   ?  "
        if best_peak >= 0 and best_cost >= 0:
            best_text = (f", best peak {remat.format_bytes(best_peak)} "
                         f"({_percent(best_peak, base_peak):.1f} %), extra compute "
                         f"{_percent(best_cost - base_cost, base_cost):+.1f} %")
        else:
            best_text = f", best objective {best:.6g}" if best >= 0 else ""
        print(f"\rremat: planning {name}: {stage} {done}, {iterations} iterations{best_text}   ",
              end="", file=stream, flush=True)

    def finish():
        if state["printed"]:
            print(file=stream, flush=True)

    return report, finish


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def graph_budget(traced, budget, optimizer=None, master_weights=None):
    """The budget of the graph in bytes. With an optimizer, a budget in bytes ("80GB", int) is
    the device's memory: the optimizer's state and master weights, resident through the step
    outside the graph, are taken off it. A fraction, a percentage or "min" is of the graph."""
    if optimizer is not None and _is_absolute(budget):
        state, master, name = outside_graph_bytes(traced, optimizer, master_weights)
        device = remat.parse_budget(traced.graph, budget)
        if device - state - master <= 0:
            raise ValueError(f"{traced.model_name}: the optimizer state ({name}: "
                             f"{remat.format_bytes(state)}) and master weights "
                             f"({remat.format_bytes(master)}) alone exceed the budget "
                             f"{remat.format_bytes(device)}")
        budget = device - state - master
    return resolve_budget(traced.graph, budget)


def _is_absolute(budget):
    if isinstance(budget, bool):
        return False
    if isinstance(budget, int):
        return True
    return isinstance(budget, str) and not budget.strip().endswith("%") and \
        budget.strip().lower() != "min"


def plan(traced, budget="50%", solver="auto", *, work_limit=None, time_limit=None, seed=1,
         threads=1,
         progress=True, params=None, optimizer=None, master_weights=None, **_ignored):
    """Solves the traced graph; returns (result, sequence, time_limit_hit). The sequence is the
    solver's plan, or the default schedule when that is better (never worse than the baseline).
    `progress`: True prints to stderr when it is a terminal, False is silent, a callable gets
    (stage, fraction, iterations, best_objective) as remat.solve documents. With `optimizer`,
    a budget in bytes is the device's memory (graph_budget)."""
    g = traced.graph
    budget_bytes = graph_budget(traced, budget, optimizer, master_weights)
    limit = SAFETY_TIME_LIMIT_S if time_limit is None else float(time_limit)
    finish = None
    callback = progress
    if progress is True and _is_terminal(sys.stderr):
        callback, finish = _progress_printer(traced.model_name, sys.stderr,
                                             remat.baseline(g))
    elif progress is True or progress is False:
        callback = None  # no \r-updated line in a log file, as the CLI
    try:
        result = remat.solve(g, budget_bytes, solver, work_limit=work_limit, time_limit=limit,
                             seed=seed, threads=threads, progress=callback, **(params or {}))
    finally:
        if finish is not None:
            finish()
    hit = result.stop_reason in ("time_limit", "interrupted") or result.wall_time_s >= 0.98 * limit
    sequence = list(result.sequence)
    base_peak, base_cost = remat.baseline(g)
    if (result.peak_bytes, result.cost) > (base_peak, base_cost) and \
            result.peak_bytes >= base_peak:
        sequence = remat.default_schedule(g)  # never worse than the baseline
    evaluation = remat.simulate(g, sequence)
    extra = _percent(evaluation.cost - base_cost, base_cost)
    # The solver's notes: what it could not do, or why its plan is not what it looks like (rotor
    # and rockmate on a graph whose forward is mostly one block name the value that crosses it).
    for note in dict(result.lists).get("notes", ()):
        warnings.warn(f"remat: {traced.model_name}: {solver}: {note}", stacklevel=3)
    if not result.feasible:
        warnings.warn(f"remat: {traced.model_name}: {solver} found no plan within "
                      f"{remat.format_bytes(budget_bytes)} ({result.status}); running the "
                      f"lowest-peak plan, {remat.format_bytes(evaluation.peak_bytes)} "
                      f"({_percent(evaluation.peak_bytes, base_peak):.1f} % of the baseline), "
                      f"extra compute {extra:+.1f} % (memory lower bound "
                      f"{remat.format_bytes(remat.memory_lower_bound(g))})", stacklevel=3)
    if hit and time_limit is not None:
        warnings.warn(f"remat: {traced.model_name}: {solver} stopped at the time limit "
                      f"({limit:g} s): the plan depends on machine speed (peak "
                      f"{remat.format_bytes(evaluation.peak_bytes)}, extra compute "
                      f"{extra:+.1f} %)", stacklevel=3)
    elif hit and result.wall_time_s >= 0.98 * limit:
        warnings.warn(f"remat: {traced.model_name}: {solver} hit the safety time limit "
                      f"({limit:g} s): the plan depends on machine speed", stacklevel=3)
    elif hit:
        # A clock of the solver's own (rockmate's milp_time_limit per MILP), not the safety limit.
        warnings.warn(f"remat: {traced.model_name}: {solver} stopped on one of its own wall "
                      f"clocks after {result.wall_time_s:.1f} s (stop reason "
                      f"{result.stop_reason}): the plan depends on machine speed", stacklevel=3)
    return result, sequence, hit


def optimize(model, example_inputs, loss_fn=None, budget="50%", solver="auto", *,
             work_limit=None, time_limit=None, seed=1, threads=1, cost="auto", model_inputs=1,
             model_kwargs=None, retrace=False, progress=True, optimizer=None,
             master_weights=None, device=None, **params):
    """Traces one training step (or takes a TracedStep), plans it under `budget` with `solver`,
    returns a Step.

    budget: int bytes, a float fraction of the baseline peak (0.5 = 50 %), text ("50%",
    "90MB") or "min" (the least-memory plan). Solver-specific parameters go as keyword
    arguments. `example_inputs` may be a TracedStep (from rt.trace or a Step's .traced): it is
    planned again without tracing. work_limit: work units (remat.solve; default 60) that stop
    planning, so the plan does not depend on machine load; time_limit: seconds, a safety net. progress: True prints
    planning progress to stderr, False is silent, or a callable (see remat.solve). Raises
    TraceError when the model cannot be traced and ValueError for a bad budget (below the
    memory lower bound included), solver or parameter.

    optimizer ("adamw", "adam", "sgd", a torch.optim.Optimizer or int bytes) and master_weights
    count the optimizer's memory in the summary (Step.memory), and make a budget in bytes the
    device's memory (graph_budget). A model or batch of meta or fake tensors is traced without
    memory for `device` (trace); its Step plans and saves, but runs only on the real model
    (load_plan).
    """
    if isinstance(params.get("params"), dict):  # params={...} as replan() takes it
        params = {**params.pop("params"), **params}
    if isinstance(example_inputs, TracedStep):
        traced = example_inputs
        if loss_fn is not None:
            traced.loss_fn = loss_fn
    else:
        if loss_fn is None:
            raise ValueError("optimize: loss_fn is required unless a TracedStep is given")
        traced = trace(model, example_inputs, loss_fn, model_inputs=model_inputs,
                       model_kwargs=model_kwargs, cost=cost, device=device)
    planning = {"budget": budget, "solver": solver, "work_limit": work_limit,
                "time_limit": time_limit, "seed": seed,
                "threads": threads, "progress": progress, "params": params, "cost": cost,
                "optimizer": optimizer, "master_weights": master_weights}
    result, sequence, hit = plan(traced, **planning)
    step = Step(model, traced, sequence, solver=result.solver, status=result.status,
                planning=planning, retrace=retrace, time_limit_hit=hit,
                plan_document=document_of(result, sequence))
    step.planning["budget_bytes"] = result.budget_bytes
    return step


def load_plan(model, example_inputs, loss_fn, path, *, model_inputs=1, model_kwargs=None,
              cost="auto", retrace=False, fake=None):
    """Traces the step and runs the plan stored at `path` (remat-plan JSON from
    step.save_plan or `remat solve GRAPH -o`). ValueError when the plan was made for another
    graph (its graph_fingerprint, or its step names, differ from the traced graph's).

    The step is traced on fake tensors (fake=None, the default), so a model whose default
    schedule does not fit on this device loads its plan too: the real step runs only as the plan
    says. A real trace is made where one is needed: cost="measure" (it times real calls) and a
    step whose output sizes depend on the data. fake=False always traces for real (the traced
    graph then holds the calls' workspaces, which a fake call cannot know); fake=True never.
    With retrace=True a batch of another shape is traced again the same way and planned at the
    share of the baseline peak the plan was made for."""
    traced = _trace_for_plan(model, example_inputs, loss_fn, model_inputs, model_kwargs, cost,
                             fake)
    sequence, info, text = read_plan(traced, path)
    step = Step(model, traced, sequence, solver=info.get("solver", "file"),
                status=info.get("status", "given"), retrace=retrace,
                planning={"budget_bytes": info.get("budget_bytes"), "cost": cost},
                plan_document=text)
    # With retrace=True another batch shape is planned anew: at the share of the baseline peak
    # the plan was made for (its budget, else its peak).
    budget = info.get("budget_bytes")
    if not isinstance(budget, int) or budget <= 0:
        budget = step.planned_peak_bytes
    step.planning["budget"] = min(1.0, budget / max(1, step.baseline_peak_bytes))
    return step


def _trace_for_plan(model, example_inputs, loss_fn, model_inputs, model_kwargs, cost, fake):
    options = {"model_inputs": model_inputs, "model_kwargs": model_kwargs, "cost": cost}
    if fake is None and not (isinstance(cost, str) and cost == "measure"):
        try:
            return trace(model, example_inputs, loss_fn, fake=True, **options)
        except DataDependentWithoutMemory:
            pass  # traced for real below
    return trace(model, example_inputs, loss_fn, fake=fake, **options)


def document_of(result, sequence):
    """The plan file text of a solve's result when `sequence` is its plan (not the default
    schedule put in its place), else None."""
    return result.plan_json if list(result.sequence) == list(sequence) else None


def read_plan(traced, path):
    """(sequence, plan JSON as a dict, its text) of a plan file, read by the one plan reader:
    ValueError when it is not a remat plan, or was made for another graph (its
    graph_fingerprint or its step names differ from the traced graph's), or is not valid."""
    g = traced.graph
    sequence, _, _, text = _remat.read_plan(g, os.fspath(path))
    evaluation = remat.simulate(g, sequence)
    if not evaluation.valid:
        raise ValueError(f"{path}: the plan is not valid for the traced graph: "
                         f"{evaluation.error}")
    info = json.loads(text)
    budget = info.get("budget_bytes")
    if isinstance(budget, int) and evaluation.peak_bytes > budget:
        # The fingerprint leaves out the calls' workspaces (node temps): a plan made on fake
        # tensors, or on another GPU, can peak higher on the traced graph than where it was made.
        warnings.warn(f"{path}: on the traced graph the plan peaks at "
                      f"{remat.format_bytes(evaluation.peak_bytes)}, above the budget of "
                      f"{remat.format_bytes(budget)} it was made for (the graph's call "
                      f"workspaces, {remat.format_bytes(_max_temp(g))} at most, differ from "
                      "those of the graph it was planned on); plan it here to fit",
                      stacklevel=3)
    return list(sequence), info, text


def _max_temp(g):
    return max((g.node(i)["temp"] for i in range(g.num_nodes)), default=0)
