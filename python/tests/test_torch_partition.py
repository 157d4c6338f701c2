"""remat.torch.partition under AOTAutograd (aot_module with no compiler): the loss and
gradients of eager PyTorch, and the saved set against functorch's min-cut partitioner."""

import copy
import functools
import os
import sys

import pytest
import torch

import remat.torch as rt
from remat.torch import _compat
from remat.torch.partition import merge_common_subexpressions, partition_stats
from models import MODELS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "examples"))


def gpt():
    import train_gpt

    return train_gpt.make(2, context=32, vocab=64, layers=2)


CASES = {"mlp": MODELS["mlp"], "resnet18": MODELS["resnet18"], "gpt": gpt}


def compiled_step(model, batch, loss_fn, partition_fn):
    """Loss, gradients and the partition's figures of one AOTAutograd step on a copy; the
    generator's state after the step is in the figures ("rng")."""
    model = copy.deepcopy(model)
    figures = {}

    def recording(joint, inputs, **kwargs):
        fw, bw = partition_fn(joint, inputs, **kwargs)
        figures["stats"] = partition_stats(fw, bw, len(_compat.joint_outputs(joint)[0]))
        return fw, bw

    compiled = _compat.aot_module(model, _compat.nop_compiler(), _compat.nop_compiler(),
                                  recording)
    torch.manual_seed(7)
    loss = loss_fn(compiled(batch[0]), *batch[1:])
    loss.backward()
    figures["stats"].rng = torch.get_rng_state()
    return loss.detach(), [p.grad for p in model.parameters()], figures["stats"]


@functools.cache
def partitioned_step(name):
    """compiled_step of CASES[name] with rt.partition, and the solver rt.partition.last names
    right after it: run once per model for the module (the two tests below read it; the model is
    made anew from its seed each time, so it is the same step)."""
    model, batch, loss_fn = CASES[name]()
    return compiled_step(model, batch, loss_fn, rt.partition) + (rt.partition.last.solver,)


@pytest.mark.parametrize("name", list(CASES))
def test_partition_gives_eager_loss_and_gradients(name):
    # The generator ends where eager's does: the backward draws nothing (the GPT example's
    # dropouts would draw again there if the extraction kept their dead copies).
    model, batch, loss_fn = CASES[name]()
    eager = copy.deepcopy(model)
    torch.manual_seed(7)
    loss = loss_fn(eager(batch[0]), *batch[1:])
    loss.backward()
    eager_rng = torch.get_rng_state()
    got_loss, got_grads, stats, solver = partitioned_step(name)
    assert torch.equal(loss, got_loss)
    for p, g in zip(eager.parameters(), got_grads):
        assert torch.equal(p.grad, g)
    assert torch.equal(stats.rng, eager_rng)
    assert stats.saved and solver == "mincut"


@pytest.mark.parametrize("name", list(CASES))
def test_partition_saves_no_more_than_functorch_min_cut(name):
    # bench/partition_bench.py prints the table. On the GPT example both save the same bytes;
    # functorch recomputes the 7 dropout-mask scalings, remat the (merged) causal mask.
    model, batch, loss_fn = CASES[name]()
    _, theirs_grads, theirs = compiled_step(model, batch, loss_fn,
                                            _compat.functorch_min_cut_partition())
    _, ours_grads, ours, _ = partitioned_step(name)
    assert all(torch.equal(a, b) for a, b in zip(theirs_grads, ours_grads))
    assert ours.saved_bytes <= theirs.saved_bytes
    assert len(ours.recomputed) <= len(theirs.recomputed)


def test_partition_with_another_solver_and_a_budget():
    model, batch, loss_fn = MODELS["mlp"]()
    partition_fn = functools.partial(rt.partition, solver="fastsa", budget="70%",
                                     iterations_scale=0.05)
    _, grads, _ = compiled_step(model, batch, loss_fn, partition_fn)
    assert rt.partition.last.solver == "fastsa"
    eager = copy.deepcopy(model)
    loss_fn(eager(batch[0]), *batch[1:]).backward()
    for p, g in zip(eager.parameters(), grads):
        assert torch.equal(p.grad, g)


def test_planning_work_per_partition_is_bounded(monkeypatch):
    # Structural, not timed (bench/compile_bench.py prints the seconds): code is generated only
    # for the two modules of the plan returned (before, every lowering of every candidate plan
    # built and generated its two modules), the rewrites both candidate graphs share run once,
    # and auto's portfolio solves and lowers at most three plans per candidate graph (its
    # solver's, the greedy plan and FastSA from it), and one more on the graph of unshared
    # copies (FastSA from the knapsack-shaped start).
    import importlib

    import remat
    import torch.fx as fx

    partition_module = importlib.import_module("remat.torch.partition")
    counts = {"planned modules": 0, "split": 0, "lowerings": 0, "solves": 0,
              "forward extractions": 0}

    def counting(name, original):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return original(*args, **kwargs)

        return wrapper

    recompile = fx.GraphModule.recompile

    def counting_recompile(self):
        if partitioning and any(_compat.PLANNED_CALL in n.meta for n in self.graph.nodes):
            counts["planned modules"] += 1
        return recompile(self)

    partitioning = False

    def partition_fn(*args, **kwargs):  # AOTAutograd's own later passes are not counted
        nonlocal partitioning
        partitioning = True
        try:
            return rt.partition(*args, solver="auto", budget="50%", work_limit=1, **kwargs)
        finally:
            partitioning = False

    monkeypatch.setattr(fx.GraphModule, "recompile", counting_recompile)
    monkeypatch.setattr(partition_module, "split_statistic_tails",
                        counting("split", partition_module.split_statistic_tails))
    monkeypatch.setattr(partition_module, "lower_plan",
                        counting("lowerings", partition_module.lower_plan))
    monkeypatch.setattr(remat._remat, "solve", counting("solves", remat._remat.solve))
    monkeypatch.setattr(_compat, "forward_node_names",
                        counting("forward extractions", _compat.forward_node_names))
    model, batch, loss_fn = gpt()
    compiled_step(model, batch, loss_fn, partition_fn)
    stats = rt.partition.last
    assert stats.planned_activation_bytes < stats.baseline_activation_bytes  # a plan, not the
    assert counts["planned modules"] == 2  # default's fallback; the forward and backward
    assert counts["split"] == 1
    # The forward's calls are extracted before the rewrites and after split_statistic_tails
    # (where it changed the graph).
    assert 1 <= counts["forward extractions"] <= 2
    assert 1 <= counts["lowerings"] <= 7 and 1 <= counts["solves"] <= 7


def test_common_subexpressions_merged_only_when_pure():
    # Two layers building the same mask merge; random draws, in-place writes and the storages
    # they write (empty_like then bernoulli_, clone then add_) stay separate.
    def step(x):
        mask_a = torch.ones(4, 4, dtype=torch.bool).tril()
        mask_b = torch.ones(4, 4, dtype=torch.bool).tril()
        drop_a = torch.empty_like(x).bernoulli_(0.5)
        drop_b = torch.empty_like(x).bernoulli_(0.5)
        c, d = x.clone(), x.clone()
        c.add_(1)
        d.add_(1)
        return mask_a, mask_b, drop_a, drop_b, c, d

    x = torch.randn(4, 4)
    gm = _compat.make_fx(step)(x)
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    torch.manual_seed(3)
    before = gm(x)
    assert merge_common_subexpressions(gm) == 2
    after_calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert len(after_calls) == len(calls) - 2
    assert sum(_compat.packet_name(t) == "empty_like" for t in after_calls) == 2
    assert sum(_compat.packet_name(t) == "clone" for t in after_calls) == 2
    torch.manual_seed(3)
    after = gm(x)
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    assert not torch.equal(after[2], after[3])


def test_the_greedy_solver_recomputes_the_step_giving_most_memory_per_cost():
    # a (cheap to make) and b (dear) are both read by the backward: making a again before its
    # backward reader lowers the peak as much as making b again, at a thousandth of the cost.
    import remat

    sizes = [("x", 1), ("a", 100), ("b", 100), ("loss", 1), ("start", 0), ("grad_b", 100),
             ("grad_a", 1)]
    values = [{"name": name, "size": size} for name, size in sizes]
    values[-1]["output"] = True
    nodes = [{"name": "make_a", "cost": 1, "inputs": [0], "outputs": [1]},
             {"name": "make_b", "cost": 1000, "inputs": [1], "outputs": [2]},
             {"name": "loss", "cost": 1, "inputs": [2], "outputs": [3], "recomputable": False},
             {"name": "start", "cost": 0, "inputs": [3], "outputs": [4], "recomputable": False},
             {"name": "grad_b", "cost": 1, "inputs": [2, 4], "outputs": [5]},
             {"name": "grad_a", "cost": 1, "inputs": [1, 5], "outputs": [6]}]
    for i, node in enumerate(nodes):
        node["phase"] = "forward" if i < 3 else "backward"
    graph = remat.Graph.build("two activations", values, nodes)
    default = remat.simulate(graph, remat.default_schedule(graph))
    result = remat.solve(graph, default.peak_bytes - 1, "greedy")
    assert list(result.sequence) == [0, 1, 2, 3, 4, 0, 5]
    assert result.peak_bytes == default.peak_bytes - 99
    assert result.cost == default.cost + 1


def test_the_shared_copies_graph_is_planned_only_where_the_unshared_one_fits(monkeypatch):
    # The graph whose recomputed chains each reader copies for itself holds the copies the least:
    # where its plan is over the budget, the graph sharing them is not planned (it would take
    # most of the planning time, for a plan over the budget too).
    import importlib

    partition_module = importlib.import_module("remat.torch.partition")
    planned = []
    plan = partition_module._plan

    def recording(planned_module, joint, *args, **kwargs):
        planned.append(joint)
        return plan(planned_module, joint, *args, **kwargs)

    monkeypatch.setattr(partition_module, "_plan", recording)
    model, batch, loss_fn = gpt()
    for budget, graphs, status in ((None, 2, "no budget"), ("5%", 1, "over-budget")):
        planned.clear()
        compiled_step(model, batch, loss_fn,
                      functools.partial(rt.partition, solver="auto", budget=budget, work_limit=1))
        assert len(planned) == graphs and rt.partition.last.status == status


def _recording_lowerings(monkeypatch):
    """partition's module, and a list that records (planned module, joint, sequence) for each
    plan partition lowers from then on."""
    import importlib

    partition_module = importlib.import_module("remat.torch.partition")
    lowered = []
    lower = partition_module._lower

    def recording(planned_module, joint, sequence, planner):
        lowered.append((planned_module, joint, list(sequence)))
        return lower(planned_module, joint, sequence, planner)

    monkeypatch.setattr(partition_module, "_lower", recording)
    return partition_module, lowered


def test_lowering_without_extraction_runs_what_the_extracted_graphs_run(monkeypatch):
    # partition compares plans lowered without AOTAutograd's extraction (their graphs' inputs and
    # outputs made as it makes them) and lowers only the plan it returns with it: for every plan
    # auto's portfolio lowered (dropouts replayed among them), both lowerings run the same calls.
    partition_module, lowered = _recording_lowerings(monkeypatch)
    model, batch, loss_fn = gpt()
    compiled_step(model, batch, loss_fn,
                  functools.partial(rt.partition, solver="auto", budget="50%", work_limit=1))
    assert len(lowered) >= 3
    assert any(sequence.count(r) > 1 for _, joint, sequence in lowered for r in joint.replay_state)

    def calls(graph):
        return [(n.op, str(n.target)) for n in graph.nodes if n.op != "placeholder"]

    for planned_module, joint, sequence in lowered:
        fw, bw, executed = partition_module.lower_plan(planned_module, joint, sequence)
        fw_graph, bw_graph, compared = partition_module.lower_plan(planned_module, joint, sequence,
                                                                   build_modules=False)
        assert compared == executed
        assert calls(fw_graph) == calls(fw.graph) and calls(bw_graph) == calls(bw.graph)


def fusion_calls(reads, fusible, phase=None):
    """fusion_groups' calls: call i reads the values of calls `reads[i]` and makes value i."""
    return [(None, {"inputs": list(read), "outputs": [i], "kind": "pointwise",
                    "phase": "forward" if phase is None else phase[i], "fusible": fusible[i]})
            for i, read in enumerate(reads)]


def fused_groups(calls):
    from remat.torch.partition import fusion_groups

    return fusion_groups(calls, lambda n, node: node["fusible"])


def test_fusion_groups_refuse_a_merge_that_makes_the_groups_read_each_other():
    # c reads a directly and through m, which no compiler fuses: a and c in one kernel would run
    # both before and after m.
    assert fused_groups(fusion_calls([[], [0], [0, 1]], [True, False, True])) == [[0], [1], [2]]
    # Without m between them, they fuse.
    assert fused_groups(fusion_calls([[], [0], [0]], [True, False, True])) == [[0, 2], [1]]


@pytest.mark.parametrize("seed", range(4))
def test_fusion_groups_of_random_graphs_run_in_an_order_that_follows_their_reads(seed):
    # fusion_groups keeps a topological order of the groups as they merge (its cycle check
    # searches only between two positions): with an order gone wrong, a merge would close a
    # cycle, and the groups would not all come out, or not after what they read.
    import random

    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randint(2, 40)
        reads = [rng.sample(range(i), min(i, rng.randint(0, 3))) for i in range(n)]
        calls = fusion_calls(reads, [rng.random() < 0.7 for _ in range(n)],
                             [rng.choice(["forward", "forward", "backward"]) for _ in range(n)])
        groups = fused_groups(calls)
        assert sorted(i for g in groups for i in g) == list(range(n))
        group_of = {i: k for k, g in enumerate(groups) for i in g}
        for i, read in enumerate(reads):
            assert all(group_of[r] <= group_of[i] for r in read)
        assert all(len({calls[i][1]["phase"] for i in g}) == 1 for g in groups)


def test_a_random_call_run_again_in_the_graph_that_drew_it_reads_its_first_output(monkeypatch):
    # Under Inductor with fallback_random, a graph that saves a generator state and replays it
    # itself does not compile (PyTorch's fake run_and_save_rng_state gives a real state): a plan
    # running a dropout twice in the forward is lowered with one run there, and the sequence run
    # (what the simulator's peak is of) says so.
    partition_module, lowered = _recording_lowerings(monkeypatch)
    model, batch, loss_fn = gpt()
    compiled_step(model, batch, loss_fn,
                  functools.partial(rt.partition, solver="auto", budget="50%", work_limit=1))
    planned_module, joint, sequence = lowered[0]
    start = sequence.index(joint.backward_start)
    random = next(r for r in joint.replay_state if r in sequence[:start])
    again = sequence[:sequence.index(random) + 1] + sequence[sequence.index(random):]
    _, replay = _compat.rng_replay_operators()
    fw, bw, executed = partition_module.lower_plan(planned_module, joint, again)
    assert not any(n.target is replay for n in fw.graph.nodes)
    assert executed[:executed.index(joint.backward_start)].count(random) == 1
    plain = partition_module.lower_plan(planned_module, joint, sequence)[2]
    assert executed == plain
