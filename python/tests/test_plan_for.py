"""Planning without memory: meta and fake tensors, plan_for, and the split of the baseline peak."""

import copy
import json
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import remat
import remat.torch as rt
from helpers import eager_step, planned_step
from models import cnn, mlp, transformer


def _meta(model, batch):
    return copy.deepcopy(model).to("meta"), tuple(x.to("meta") for x in batch)


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                         max_position_embeddings=32, attention_dropout=0.0)
    model = LlamaForCausalLM(config)
    ids = torch.randint(0, 128, (2, 16))
    return model, (ids, ids), causal_lm_loss


def causal_lm_loss(output, labels):
    return F.cross_entropy(output.logits.flatten(0, 1).float(), labels.flatten())


# -- a model too large for this machine ----------------------------------------------------------

# Four Llama-7B layers (d = 4096) at batch 8 and sequence 4096 in bf16: a baseline peak of about
# 40 GB, more than this machine has. bench/scale_bench.py traces all 32 layers.
_LARGE_LLAMA = textwrap.dedent("""
    import json, resource, sys, time
    import torch, torch.nn.functional as F
    import remat, remat.torch as rt
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=4,
                         num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                         max_position_embeddings=4096)
    with torch.device("meta"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    ids = torch.empty(8, 4096, dtype=torch.long, device="meta")
    def loss_fn(output, labels):
        return F.cross_entropy(output.logits.flatten(0, 1).float(), labels.flatten())
    start = time.process_time()
    traced = rt.trace(model, (ids, ids), loss_fn, device="cpu")
    trace_s = time.process_time() - start
    base, low = remat.baseline(traced.graph)[0], remat.memory_lower_bound(traced.graph)
    budget = low + (base - low) // 2  # half of what a plan can take off the baseline
    numel = sum(p.numel() for p in model.parameters())
    # The device's memory: AdamW's two fp32 moments and fp32 master weights come off it.
    step = rt.optimize(model, traced, budget=budget + 12 * numel, solver="rockmate",
                       optimizer="adamw", progress=False)
    evaluation = remat.simulate(step.traced.graph, step.sequence)
    split = step.memory
    print(json.dumps({
        "nodes": traced.num_nodes, "trace_s": trace_s, "baseline": base, "lower": low,
        "budget": budget, "graph_budget": step.planning["budget_bytes"],
        "valid": evaluation.valid, "peak": evaluation.peak_bytes,
        "planned_peak": step.planned_peak_bytes, "parameters": split.parameters,
        "optimizer": split.optimizer_state, "master": split.master_weights,
        "split_sum": split.graph_bytes, "params_numel": numel,
        "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
""")


def test_a_llama_larger_than_this_machine_is_planned_on_fake_tensors_in_little_memory():
    run = subprocess.run([sys.executable, "-c", _LARGE_LLAMA], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["baseline"] > 30 * 2**30  # tens of GB: no real tensor of it could be made here
    assert r["lower"] < r["budget"] < r["baseline"]
    assert r["graph_budget"] == r["budget"]
    assert r["valid"]
    assert r["peak"] == r["planned_peak"] <= r["budget"]
    assert r["split_sum"] == r["baseline"]
    assert r["parameters"] == 2 * r["params_numel"]  # bf16
    assert r["optimizer"] == 8 * r["params_numel"] and r["master"] == 4 * r["params_numel"]
    # The process (PyTorch and transformers imported) stays far below one layer's activations.
    assert r["max_rss"] < 3 * 2**30, r["max_rss"]


# A chain of narrow layers on a long batch: 32 MB activations, a default schedule of about 0.45 GB
# (the memory it would take stays far above what loading the plan adds: a third of it).
# The plan is made on meta tensors; loading it on the real model must not run that schedule.
_LOAD_WITHOUT_THE_DEFAULT_SCHEDULE = textwrap.dedent("""
    import json, sys, torch, torch.nn as nn
    import remat.torch as rt
    def memory(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))
    def make():
        torch.manual_seed(0)
        return nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(16, 16), nn.Tanh())])
    def loss_fn(out, target):
        return ((out - target) ** 2).mean()
    rows = 1 << 19
    with torch.device("meta"):
        meta = make()
    shapes = (torch.empty(rows, 16, device="meta"), torch.empty(rows, 16, device="meta"))
    planned = rt.plan_for(meta, shapes, loss_fn, budget="50%", solver="rockmate", device="cpu",
                          progress=False)
    planned.save_plan(sys.argv[1])
    model = make()
    x, y = torch.randn(rows, 16), torch.randn(rows, 16)
    before = memory("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM from here
    step = rt.load_plan(model, (x, y), loss_fn, sys.argv[1])
    loss = step(x, y, measure=False)
    grew = memory("VmHWM:") - before
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    eager = loss_fn(model(x), y)
    eager.backward()
    equal = loss.item() == eager.item() and all(
        torch.equal(g, p.grad) for g, p in zip(grads, model.parameters()))
    print(json.dumps({"grew": grew, "baseline": planned.baseline_peak_bytes,
                      "planned": planned.planned_peak_bytes, "equal": equal}))
""")


def test_load_plan_runs_a_plan_whose_default_schedule_would_not_fit(tmp_path):
    run = subprocess.run([sys.executable, "-c", _LOAD_WITHOUT_THE_DEFAULT_SCHEDULE,
                          str(tmp_path / "plan.json")], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["planned"] <= r["baseline"] // 2
    # A real trace runs the default schedule (and holds more while it records it).
    assert r["grew"] < 0.75 * r["baseline"], r
    assert r["equal"]


def test_a_loaded_plan_traced_again_for_another_batch_is_traced_without_memory(tmp_path):
    model, (x, y), loss_fn = mlp()
    planned = rt.optimize(model, (x, y), loss_fn, budget="90%", solver="rockmate",
                          progress=False)
    planned.save_plan(tmp_path / "plan.json")
    step = rt.load_plan(model, (x, y), loss_fn, tmp_path / "plan.json", retrace=True)
    assert step.traced.device is not None  # traced on fake tensors
    with pytest.warns(UserWarning, match="traced again"):
        step(x[:512], y[:512])
    assert step.traced.device is not None and step.traced.spec.tensors((x[:512], y[:512]), {})
    # Planned anew at the loaded plan's share of the baseline peak, not at a default.
    assert step.planning["budget"] == pytest.approx(planned.planning["budget_bytes"]
                                                    / planned.baseline_peak_bytes)
    assert step.planned_peak_bytes <= 0.9 * step.baseline_peak_bytes


# -- real and fake traces agree ------------------------------------------------------------------

@pytest.mark.parametrize("make", [mlp, cnn, transformer, tiny_llama],
                         ids=["mlp", "cnn", "transformer", "llama"])
def test_a_step_traced_on_meta_tensors_is_the_graph_and_plan_of_the_real_one(make, tmp_path):
    model, batch, loss_fn = make()
    real = rt.trace(model, batch, loss_fn)
    meta_model, meta_batch = _meta(model, batch)
    fake = rt.trace(meta_model, meta_batch, loss_fn, device="cpu")
    assert fake.fingerprint == real.fingerprint
    assert fake.graph.to_json() == real.graph.to_json()
    base, low = remat.baseline(real.graph)[0], remat.memory_lower_bound(real.graph)
    budget = low + 3 * (base - low) // 4
    real_step = rt.optimize(model, real, budget=budget, solver="rockmate", progress=False)
    fake_step = rt.plan_for(meta_model, meta_batch, loss_fn, budget=budget, solver="rockmate",
                            device="cpu", progress=False)
    assert fake_step.sequence == real_step.sequence
    # The plan made without memory runs on the real model, with eager's gradients.
    fake_step.save_plan(tmp_path / "plan.json")
    loaded = rt.load_plan(model, batch, loss_fn, tmp_path / "plan.json")
    assert loaded.sequence == fake_step.sequence
    loss, grads, _ = eager_step(model, batch, loss_fn, seed=3)
    planned_loss, planned_grads, _ = planned_step(model, loaded, batch, seed=3, measure=False)
    torch.testing.assert_close(planned_loss, loss)
    for name in grads:
        torch.testing.assert_close(planned_grads[name], grads[name], msg=name)


def test_an_autocast_step_traced_on_meta_tensors_is_the_real_one_with_bf16_activations():
    model, batch, loss_fn = transformer()
    meta_model, meta_batch = _meta(model, batch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        real = rt.trace(model, batch, loss_fn)
        fake = rt.trace(meta_model, meta_batch, loss_fn, device="cpu")
    assert fake.graph.to_json() == real.graph.to_json()
    assert fake.autocast == real.autocast
    # The first linear layer's output (batch 32 x 32 tokens x 192) is bf16: 2 bytes an element.
    mm = next(i for i, n in enumerate(fake.node_fx) if "addmm" in str(n.target))
    out = fake.graph.node(mm)["outputs"][0]
    assert fake.graph.value(out)["size"] == 32 * 32 * 192 * 2


def test_on_fake_tensors_the_patched_run_gives_the_graph_of_a_second_run(monkeypatch):
    model, batch, loss_fn = cnn()  # in-place ReLUs: rewritten, their storages moved
    meta_model, meta_batch = _meta(model, batch)
    patched = rt.trace(meta_model, meta_batch, loss_fn, device="cpu").graph.to_json()
    monkeypatch.setattr(sys.modules["remat.torch.trace"], "_RERUN_AFTER_REWRITES", True)
    assert rt.trace(meta_model, meta_batch, loss_fn, device="cpu").graph.to_json() == patched


def test_a_model_made_under_fake_tensor_mode_traces_like_the_real_one():
    model, batch, loss_fn = mlp()
    real = rt.trace(model, batch, loss_fn)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake_model, fake_batch, _ = mlp()
        fake = rt.trace(fake_model, fake_batch, loss_fn)
    assert fake.fingerprint == real.fingerprint
    assert fake.device == torch.device("cpu")


def test_plan_for_a_real_model_makes_no_real_tensor_and_keeps_its_parameters():
    model, batch, loss_fn = cnn()
    before = {n: t.clone() for n, t in model.state_dict().items()}
    step = rt.plan_for(model, batch, loss_fn, budget="90%", solver="rockmate", progress=False)
    assert step.traced.device == torch.device("cpu")
    assert step.traced.fingerprint == rt.trace(model, batch, loss_fn).fingerprint
    for n, t in model.state_dict().items():
        assert torch.equal(t, before[n]), n
    # The model is real: the step planned on fake tensors runs it, with eager's gradients.
    loss, grads, buffers = eager_step(model, batch, loss_fn, seed=5)
    planned_loss, planned_grads, planned_buffers = planned_step(model, step, batch, seed=5)
    torch.testing.assert_close(planned_loss, loss)
    for name in grads:
        torch.testing.assert_close(planned_grads[name], grads[name], msg=name)
    for name in buffers:
        torch.testing.assert_close(planned_buffers[name], buffers[name], msg=name)


def test_checkpointable_on_meta_blocks_profiles_the_chain_of_the_real_ones():
    torch.manual_seed(0)
    blocks = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(6)])
    x = torch.randn(32, 64, requires_grad=True)
    real = rt.Checkpointable(copy.deepcopy(blocks), budget="50%")
    real.replan(x)
    meta = rt.Checkpointable(copy.deepcopy(blocks).to("meta"), budget="50%")
    meta.replan(x.detach().to("meta").requires_grad_())
    assert meta.chain_json == real.chain_json
    assert meta.plan_notation == real.plan_notation


# -- refusals ------------------------------------------------------------------------------------

def test_a_meta_model_needs_the_device_the_plan_is_for():
    meta_model, meta_batch = _meta(*mlp()[:2])
    with pytest.raises(ValueError, match="device=\"cuda\""):
        rt.trace(meta_model, meta_batch, F.cross_entropy)
    with pytest.raises(ValueError, match="not a device a plan runs on"):
        rt.trace(meta_model, meta_batch, F.cross_entropy, device="meta")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="needs a CUDA device here"):
            rt.trace(meta_model, meta_batch, F.cross_entropy, device="cuda")
    with pytest.raises(ValueError, match="fake=False"):
        rt.trace(meta_model, meta_batch, F.cross_entropy, fake=False, device="cpu")


def test_tracing_without_memory_refuses_measured_costs():
    meta_model, meta_batch = _meta(*mlp()[:2])
    with pytest.raises(ValueError, match="cost=\"flops\""):
        rt.trace(meta_model, meta_batch, F.cross_entropy, device="cpu", cost="measure")


class _MaskedSum(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        return y[y > 0].sum() + y.mean()


def test_tracing_without_memory_refuses_sizes_that_depend_on_the_data():
    with pytest.raises(ValueError, match="depends on the\\s+data"):
        rt.trace(_MaskedSum().to("meta"), (torch.empty(4, 8, device="meta"),),
                 lambda out: out, model_inputs=1, device="cpu")


def test_a_step_planned_on_a_meta_model_refuses_to_run_and_says_how_to():
    model, batch, loss_fn = mlp()
    meta_model, meta_batch = _meta(model, batch)
    step = rt.plan_for(meta_model, meta_batch, loss_fn, budget="90%", solver="rockmate",
                       device="cpu", progress=False)
    with pytest.raises(ValueError, match="load_plan"):
        step(*batch)
    optimized = rt.optimize(meta_model, meta_batch, loss_fn, budget="90%", solver="rockmate",
                            device="cpu", progress=False)
    assert optimized.sequence == step.sequence
    with pytest.raises(ValueError, match="load_plan"):
        optimized(*meta_batch)
    real_step = rt.optimize(model, batch, loss_fn, budget="90%", solver="rockmate",
                            progress=False)
    with pytest.raises(ValueError, match="meta or fake"):
        real_step(*meta_batch)


# -- the baseline peak, split --------------------------------------------------------------------

def _bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def test_the_split_of_the_baseline_peak_adds_up_to_it_to_the_byte():
    model, batch, loss_fn = cnn()
    step = rt.optimize(model, batch, loss_fn, budget="90%", solver="rockmate", progress=False)
    split = step.memory
    base_peak = remat.baseline(step.traced.graph)[0]
    assert split.peak_bytes == base_peak
    parts = (split.parameters, split.fixed, split.batch, split.gradients, split.activations,
             split.temporaries)
    assert sum(parts) == base_peak
    assert all(p >= 0 for p in parts)
    assert split.parameters == _bytes(model.parameters())
    assert split.fixed == _bytes(model.buffers())  # batch-norm statistics
    assert split.batch == _bytes(batch)
    assert 0 < split.activations and split.gradients <= split.parameters
    assert split.lower_bound == remat.memory_lower_bound(step.traced.graph) <= base_peak
    # At the plan's peak too, the split is the simulator's peak.
    planned = rt.memory_split(step.traced, step.sequence)
    assert planned.graph_bytes == step.planned_peak_bytes


def test_the_summary_states_the_split_and_the_lower_bound(capsys):
    model, batch, loss_fn = mlp()
    step = rt.optimize(model, batch, loss_fn, budget="90%", solver="rockmate", progress=False,
                       optimizer="adamw")
    step.summary()
    out = capsys.readouterr().out
    for name in ("parameters", "gradients", "optimizer state", "activations", "temporaries",
                 "memory lower bound"):
        assert name in out


def test_optimizer_state_is_counted_by_dtype():
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)).to(torch.bfloat16)
    batch = (torch.randn(16, 64, dtype=torch.bfloat16), torch.randint(0, 8, (16,)))
    traced = rt.trace(model, batch, F.cross_entropy)
    numel = sum(p.numel() for p in model.parameters())
    named = rt.memory_split(traced, optimizer="adamw")
    assert named.parameters == 2 * numel
    assert named.optimizer_state == 8 * numel  # two fp32 moments
    assert named.master_weights == 4 * numel  # fp32 copies of the bf16 parameters
    assert named.total == named.peak_bytes + 12 * numel
    torch_adamw = rt.memory_split(traced, optimizer=torch.optim.AdamW(model.parameters()))
    assert torch_adamw.optimizer_state == 4 * numel  # torch keeps them in bf16
    assert torch_adamw.master_weights == 0
    sgd = rt.memory_split(traced, optimizer="sgd")
    assert sgd.optimizer_state == 0 and sgd.master_weights == 4 * numel
    assert rt.memory_split(traced, optimizer="sgd", master_weights=False).outside_graph == 0
    with pytest.raises(ValueError, match="expected one of"):
        rt.memory_split(traced, optimizer="lion")
    with pytest.raises(ValueError, match="not known"):
        rt.memory_split(traced, optimizer=torch.optim.LBFGS(model.parameters()))


def test_with_an_optimizer_a_budget_in_bytes_is_the_device_memory():
    model, batch, loss_fn = mlp()
    traced = rt.trace(model, batch, loss_fn)
    state = 8 * sum(p.numel() for p in model.parameters())  # fp32 parameters: no master copy
    base = remat.baseline(traced.graph)[0]
    step = rt.optimize(model, traced, budget=base + state, solver="rockmate", progress=False,
                       optimizer="adamw")
    assert step.planning["budget_bytes"] == base
    with pytest.raises(ValueError, match="alone exceed"):
        rt.optimize(model, traced, budget=state, solver="rockmate", progress=False,
                    optimizer="adamw")
