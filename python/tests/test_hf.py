"""remat.torch on Hugging Face models built from their configs (random weights, no download):
GPT-2 and Llama with 2 layers of width 64 and a vocabulary of 128, called as users call them,
with a dict of input_ids, attention_mask (one sequence padded) and labels, use_cache=False, the
loss read off the output. CPU kernels are deterministic, and a plan runs the same aten calls on
the same inputs as eager (recomputations included), so losses, gradients, parameters after
optimizer steps and the generator's state are compared bitwise."""

import copy

import pytest
import torch
import torch.nn as nn

import remat.torch as rt

transformers = pytest.importorskip("transformers")

VOCAB = 128
# fastsa with a tenth of its default iterations: a plan within 50 % in about a second (the
# default solver, auto, plans these steps in seconds to tens of seconds: a bench's work).
PLANNING = {"budget": "50%", "solver": "fastsa", "iterations_scale": 0.1, "progress": False}


def gpt2():
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=VOCAB,
                                     n_positions=64, bos_token_id=0, eos_token_id=0,
                                     use_cache=False)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def llama():
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64,
                                      intermediate_size=128, num_attention_heads=2,
                                      num_key_value_heads=1, vocab_size=VOCAB,
                                      max_position_embeddings=64, bos_token_id=0,
                                      eos_token_id=0, use_cache=False)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def batch():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (4, 64), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 40:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def hf_loss(output):
    return output.loss


def eager_step(model, inputs, seed=5):
    model = copy.deepcopy(model)
    torch.manual_seed(seed)
    loss = model(**inputs).loss
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()], torch.get_rng_state()


def planned(model, inputs, **options):
    return rt.optimize(model, (), hf_loss, model_inputs=0, model_kwargs=inputs,
                       **{**PLANNING, **options})


def replayed_recomputations(step):
    """Random nodes the plan runs more than once (each recomputation replays its draw)."""
    return [i for i in step.traced.replayed if step.sequence.count(i) > 1]


@pytest.mark.parametrize("make", [gpt2, llama])
def test_optimize_at_half_the_peak_gives_eager_loss_gradients_and_generator(make):
    # Training mode: GPT-2's dropouts draw (and the plan recomputes some by replay); Llama has
    # none. The generator ends where eager's does.
    model = make().train()
    inputs = batch()
    loss, grads, rng = eager_step(model, inputs)
    step = planned(model, inputs)
    assert step.status == "feasible" and step.peak_percent <= 50.0
    assert step.planned_cost > step.baseline_cost  # it recomputes
    if make is gpt2:
        assert replayed_recomputations(step)
    torch.manual_seed(5)
    got = step(**inputs)
    assert torch.equal(got, loss)
    for p, g in zip(model.parameters(), grads):
        assert torch.equal(p.grad, g)
    assert torch.equal(torch.get_rng_state(), rng)
    # The live bytes of the run: the plan's, plus the generator states saved for the replays.
    state_bytes = torch.get_rng_state().numel() * len(replayed_recomputations(step))
    assert step.measured_peak_bytes <= step.planned_peak_bytes + state_bytes


def test_without_padding_llama_attends_with_is_causal_as_eager_does():
    # On fake tensors Hugging Face builds its causal mask as a tensor and repeats the shared key
    # and value heads; eager runs is_causal=True on the shared heads. The trace takes eager's
    # attention: no mask read, the one key and value head read shared, eager's gradients bitwise.
    model = llama().train()
    ids = batch()["input_ids"]
    inputs = {"input_ids": ids, "labels": ids}
    step = planned(model, inputs)
    g = step.traced.graph
    attention = [g.node(i) for i in range(g.num_nodes) if "attention" in g.node(i)["op"]]
    assert len(attention) == 4  # two layers, forward and backward
    calls = [step.traced.node_fx[i] for i in range(g.num_nodes)
             if "attention" in g.node(i)["op"]]
    for call in calls:
        arguments = dict(zip([a.name for a in call.target._schema.arguments], call.args))
        arguments.update(call.kwargs)
        assert arguments.get("attn_mask") is None and arguments["is_causal"] is True
        assert arguments["key"].meta["val"].shape[1] == 1  # num_key_value_heads
    loss, grads, _ = eager_step(model, inputs)
    got = step(**inputs)
    assert torch.equal(got, loss)
    for p, expected in zip(model.parameters(), grads):
        assert torch.equal(p.grad, expected)


def test_saved_plan_loads_onto_a_fresh_model_and_gives_eager_gradients(tmp_path):
    model = gpt2().train()
    inputs = batch()
    step = planned(model, inputs)
    path = str(tmp_path / "gpt2_plan.json")
    step.save_plan(path)
    fresh = gpt2().train()
    loss, grads, _ = eager_step(fresh, inputs)
    loaded = rt.load_plan(fresh, (), hf_loss, path, model_inputs=0, model_kwargs=inputs)
    assert loaded.sequence == step.sequence
    torch.manual_seed(5)
    assert torch.equal(loaded(**inputs), loss)
    for p, g in zip(fresh.parameters(), grads):
        assert torch.equal(p.grad, g)
    other = {**inputs, "attention_mask": None}
    with pytest.raises(ValueError, match="traced with a tensor there"):
        loaded(**other)


class CheckpointedBlocks(nn.Module):
    """HF's decoder blocks as one Checkpointable, in place of the model's list of blocks: the
    hidden states go through the chain; the block call's other arguments (the attention mask
    HF built, positions) are bound for the blocks while the chain runs."""

    def __init__(self, blocks, **options):
        super().__init__()
        self.call = {}
        self.chain = rt.Checkpointable([_BoundBlock(b, self.call) for b in blocks], **options)

    def forward(self, hidden_states, *args, **kwargs):
        self.call.update(args=args, kwargs=kwargs)
        return self.chain(hidden_states)


class _BoundBlock(nn.Module):
    def __init__(self, block, call):
        super().__init__()
        self.block, self.call = block, call

    def forward(self, x):
        return self.block(x, *self.call["args"], **self.call["kwargs"])


def adamw_steps(model, inputs, steps=3):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for i in range(steps):
        optimizer.zero_grad(set_to_none=True)
        torch.manual_seed(100 + i)
        loss = model(**inputs).loss
        loss.backward()
        losses.append(loss.detach())
        optimizer.step()
    return losses, [p.detach().clone() for p in model.parameters()], torch.get_rng_state()


def test_checkpointable_over_gpt2_blocks_trains_like_eager():
    # Dropout in training mode: the recomputed stage replays its first run's draws.
    model = gpt2().train()
    inputs = batch()
    eager = adamw_steps(copy.deepcopy(model), inputs)
    model.transformer.h = nn.ModuleList([CheckpointedBlocks(list(model.transformer.h),
                                                            budget="50%")])
    got = adamw_steps(model, inputs)
    chain = model.transformer.h[0].chain
    assert "ck" in chain.plan_notation  # a stage's forward runs again before its backward
    assert all(torch.equal(a, b) for a, b in zip(eager[0], got[0]))
    assert all(torch.equal(a, b) for a, b in zip(eager[1], got[1]))
    assert torch.equal(eager[2], got[2])


def mixtral():
    config = transformers.MixtralConfig(num_hidden_layers=2, hidden_size=64,
                                        intermediate_size=128, num_attention_heads=2,
                                        num_key_value_heads=1, num_local_experts=4,
                                        num_experts_per_tok=2, output_router_logits=True,
                                        vocab_size=VOCAB, max_position_embeddings=64,
                                        bos_token_id=0, eos_token_id=0, use_cache=False)
    torch.manual_seed(0)
    return transformers.MixtralForCausalLM(config)


def test_mixture_of_experts_routes_each_batch_as_eager_does():
    # Mixtral's experts run aten._grouped_mm over the tokens sorted by expert, with group
    # offsets counted from the router's choice: sizes fixed, values data-dependent. On the CPU
    # eager runs it in float32, which PyTorch's meta function refuses; the trace takes eager's
    # call. The plan computes the routing of each batch it runs: another batch routes otherwise
    # and still gives eager's loss (the router's balancing loss included) and gradients.
    model = mixtral().train()
    inputs = batch()
    step = planned(model, inputs)
    assert step.planned_cost > step.baseline_cost  # it recomputes
    ops = [step.traced.graph.node(i)["op"] for i in range(step.traced.graph.num_nodes)]
    assert any("_grouped_mm" in op for op in ops)
    other = {**inputs, "input_ids": inputs["input_ids"].flip(0)}
    for data in (inputs, other):
        loss, grads, _ = eager_step(model, data)
        model.zero_grad(set_to_none=True)
        assert torch.equal(step(**data), loss)
        for p, expected in zip(model.parameters(), grads):
            assert torch.equal(p.grad, expected)


def test_layerdrop_is_refused_naming_the_branch_on_a_random_value():
    # BART with layerdrop draws torch.rand([]) per layer and skips the layer on its value: one
    # trace cannot hold both outcomes. The error says it is a value, not a size, and what to do;
    # it is a ValueError (TraceError), as every refusal of a model remat cannot run is.
    config = transformers.BartConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2,
                                     decoder_layers=2, encoder_attention_heads=2,
                                     decoder_attention_heads=2, encoder_ffn_dim=128,
                                     decoder_ffn_dim=128, max_position_embeddings=64,
                                     pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                     decoder_start_token_id=2, encoder_layerdrop=0.3,
                                     use_cache=False)
    torch.manual_seed(0)
    model = transformers.BartForConditionalGeneration(config).train()
    with pytest.raises(ValueError, match=r"BartForConditionalGeneration: data-dependent "
                                         r"control flow on a tensor's value: .* layerdrop"):
        rt.trace(model, (), hf_loss, model_inputs=0, model_kwargs=batch())
