"""Shared pieces of the remat.torch tests: small models, eager reference, a hand-made plan."""

import copy

import torch

import remat
import remat.torch as rt

_traced = {}


def traced_once(key, make):
    """(model, batch, loss_fn, TracedStep) of `make()` (a model, batch, loss_fn maker), traced
    once per `key` for the whole session: the test modules share it (they only read it, and plan
    and run copies of the model; rt.trace leaves the model as it was)."""
    if key not in _traced:
        model, batch, loss_fn = make()
        _traced[key] = (model, batch, loss_fn, rt.trace(model, batch, loss_fn))
    return _traced[key]


def eager_step(model, batch, loss_fn, seed):
    """Loss, gradients and buffers of one plain PyTorch step on a copy of `model`."""
    model = copy.deepcopy(model)
    torch.manual_seed(seed)
    loss = loss_fn(model(batch[0]), *batch[1:])
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    return loss.detach(), grads, {n: b.clone() for n, b in model.named_buffers()}


def planned_step(model, step, batch, seed, measure=True):
    """Loss, gradients and buffers of one remat step on a copy of `model`."""
    model = copy.deepcopy(model)
    step.model = model
    torch.manual_seed(seed)
    loss = step(*batch, measure=measure)
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    return loss.detach(), grads, {n: b.clone() for n, b in model.named_buffers()}


def recompute_sequence(graph, keep_every=3):
    """A valid plan that recomputes: the forward as traced, then before each backward node the
    forward values it reads are recomputed (with whatever they need), except every
    `keep_every`-th recomputable forward node and the non-recomputable ones, which are kept.
    Each forward node is recomputed at most once, right before its first backward use, so its
    forward copy is released at the end of the forward's own uses."""
    forward = [n for n in range(graph.num_nodes) if graph.node(n)["phase"] == "forward"]
    backward = [n for n in range(graph.num_nodes) if graph.node(n)["phase"] != "forward"]
    recomputable = [n for n in forward if graph.node(n)["recomputable"]]
    kept = set(recomputable[::keep_every]) | (set(forward) - set(recomputable))
    is_forward = set(forward)
    sequence = list(forward)
    recomputed = set()

    def need(value):
        p = graph.producer(value)
        if p is None or p not in is_forward or p in kept or p in recomputed:
            return
        recomputed.add(p)
        for v in graph.node(p)["inputs"]:
            need(v)
        sequence.append(p)

    for b in backward:
        for v in graph.node(b)["inputs"]:
            need(v)
        sequence.append(b)
    evaluation = remat.simulate(graph, sequence)
    assert evaluation.valid, evaluation.error
    return sequence


def two_pass_sequence(graph):
    """A valid plan in two passes, the shape of `auto`'s fastsa_two_pass (src/solvers/auto/
    two_pass.h): the default schedule without the nodes whose outputs are all graph outputs read
    by no other node (weight gradients), then those nodes, each after everything they need that
    the first pass did not leave resident (graph inputs, outputs, values of non-recomputable
    nodes), recomputed once, in the default order."""
    readers = {}
    for n in range(graph.num_nodes):
        for v in graph.node(n)["inputs"]:
            readers.setdefault(v, []).append(n)
    deferred = {n for n in range(graph.num_nodes)
                if graph.node(n)["recomputable"] and graph.node(n)["outputs"]
                and all(graph.value(v)["output"] and not readers.get(v)
                        for v in graph.node(n)["outputs"])}
    first = [n for n in range(graph.num_nodes) if n not in deferred]

    def left_resident(v):
        p = graph.producer(v)
        return p is None or graph.value(v)["output"] or not graph.node(p)["recomputable"]

    needed, stack = set(deferred), list(deferred)
    while stack:
        for v in graph.node(stack.pop())["inputs"]:
            p = graph.producer(v)
            if not left_resident(v) and p not in needed:
                needed.add(p)
                stack.append(p)
    sequence = first + sorted(needed)
    evaluation = remat.simulate(graph, sequence)
    assert evaluation.valid, evaluation.error
    return sequence


def lowest_peak_recompute_sequence(graph):
    """The recompute_sequence (over a few checkpoint spacings) with the lowest simulated peak."""
    candidates = [recompute_sequence(graph, k) for k in range(2, 9)]
    return min(candidates, key=lambda s: (remat.simulate(graph, s).peak_bytes, len(s)))


def recomputing_solver():
    """fastsa when registered, else mincut, else None."""
    return next((name for name in ("fastsa", "mincut") if name in remat.solvers()), None)
