"""remat.torch on Hugging Face architectures beyond the tests' GPT-2, Llama, BERT, T5 and ViT: one
row per architecture, built from its config (random weights, no download), in training mode with
dropout on where the config has it.

    ./scripts/python bench/hf_sweep.py [--only NAME,...] [--no-compile] [--timeout 120] [--results]

Every model has 2 layers (stages) of width 64 (vocabulary 128); text models get 4 x 64 tokens with
one sequence padded (attention_mask) and labels, images are 4 x 3 x 64 x 64 (CLIP: both), Whisper
4 x 16 x 64 audio features. Per model:

- optimize: rt.optimize(model, (), output.loss, model_inputs=0, model_kwargs=inputs,
  budget="50%", solver="fastsa", iterations_scale=0.1). `nodes` is the traced graph's size, then
  the plan's status, peak and CI (% of the default schedule, from the simulator); where 50 % is
  below the step's memory lower bound (remat refuses that budget), budget="min" instead
  ("min: " before the status). `bitwise` is y
  where the step's loss, every parameter's gradient, every buffer (batch norm's running
  statistics) and torch.get_rng_state() afterwards equal eager's bitwise (torch.manual_seed(5)
  before each); otherwise what differed.
- compile: two steps of torch.compile(wrapper, backend=rt.compile_backend(budget="50%",
  compiler="eager", fastsa at a tenth of its iterations)) against the same steps under
  "aot_eager_decomp_partition" (Inductor's decompositions and PyTorch's min-cut partition, the
  graphs run as fx modules: the same decompositions and random-op functionalization as remat's
  backend, so the same draws); "ok" where losses, gradients and buffers are allclose, then the
  graphs planned (of those partitioned) and any RematFallbackWarning's reason.
- s: wall seconds of the row (the machine is shared: only the order of magnitude matters).

Each model runs in a forked child process with a time limit, so a crash, an abort or a hang of
one shows in its row and the sweep goes on.
"""

import argparse
import copy
import multiprocessing
import os
import sys
import time
import traceback
import warnings

import bench_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VOCAB, WIDTH, LAYERS, HEADS = 128, 64, 2, 4
BATCH, TOKENS, IMAGE = 4, 64, 64
DROP = 0.1
PLANNING = {"budget": "50%", "solver": "fastsa", "iterations_scale": 0.1, "progress": False}


# -- models and inputs -------------------------------------------------------------------------

def text_batch(labels="tokens"):
    import torch
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (BATCH, TOKENS), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, TOKENS * 5 // 8:] = 0
    ids = ids.masked_fill(mask == 0, 1)  # the pad token of every config below
    if labels == "class":
        return {"input_ids": ids, "attention_mask": mask, "labels": torch.arange(BATCH) % 2}
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def image_batch():
    import torch
    generator = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=generator),
            "labels": torch.arange(BATCH) % 2}


TEXT = {"vocab_size": VOCAB, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
        "use_cache": False}
DECODER = {**TEXT, "num_hidden_layers": LAYERS, "hidden_size": WIDTH, "intermediate_size": 128,
           "num_attention_heads": HEADS, "max_position_embeddings": TOKENS}


def causal_lm(model_type, **config):
    import transformers
    return transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(model_type, **config)), text_batch()


def mistral():
    return causal_lm("mistral", **DECODER, num_key_value_heads=2, sliding_window=16,
                     attention_dropout=DROP)


def qwen2():
    return causal_lm("qwen2", **DECODER, num_key_value_heads=2, attention_dropout=DROP)


def gemma2():  # logit soft-capping, alternating sliding window, sandwich norms
    return causal_lm("gemma2", **DECODER, num_key_value_heads=2, head_dim=16,
                     sliding_window=16, attention_dropout=DROP)


def phi():  # partial rotary, parallel attention and MLP
    return causal_lm("phi", **DECODER, resid_pdrop=DROP, embd_pdrop=DROP,
                     attention_dropout=DROP)


def phi3():  # fused qkv and gate_up projections
    return causal_lm("phi3", **DECODER, num_key_value_heads=2, resid_pdrop=DROP,
                     embd_pdrop=DROP, attention_dropout=DROP)


def gpt_neox():  # parallel residual, partial rotary
    return causal_lm("gpt_neox", **DECODER, hidden_dropout=DROP, attention_dropout=DROP)


def opt():  # learned positions from the mask's cumsum
    return causal_lm("opt", **{**TEXT, "num_hidden_layers": LAYERS, "hidden_size": WIDTH,
                               "ffn_dim": 128, "num_attention_heads": HEADS,
                               "word_embed_proj_dim": WIDTH, "max_position_embeddings": TOKENS,
                               "dropout": DROP, "attention_dropout": DROP})


def bloom():  # ALiBi
    return causal_lm("bloom", **TEXT, n_layer=LAYERS, hidden_size=WIDTH, n_head=HEADS,
                     hidden_dropout=DROP, attention_dropout=DROP)


def falcon():  # multi-query, parallel attention
    return causal_lm("falcon", **TEXT, num_hidden_layers=LAYERS, hidden_size=WIDTH,
                     num_attention_heads=HEADS, multi_query=True, parallel_attn=True,
                     hidden_dropout=DROP, attention_dropout=DROP)


def mixtral():  # mixture of experts: top-2 routing over 4 experts, the router's loss
    return causal_lm("mixtral", **DECODER, num_key_value_heads=2, num_local_experts=4,
                     num_experts_per_tok=2, output_router_logits=True,
                     attention_dropout=DROP)


def qwen2_moe():  # experts and a shared expert behind a sigmoid gate
    return causal_lm("qwen2_moe", **DECODER, num_key_value_heads=2, num_experts=4,
                     num_experts_per_tok=2, moe_intermediate_size=64,
                     shared_expert_intermediate_size=64, output_router_logits=True,
                     attention_dropout=DROP)


def bart():  # encoder-decoder, decoder inputs shifted from the labels
    import transformers
    config = transformers.AutoConfig.for_model(
        "bart", **TEXT, d_model=WIDTH, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=128,
        decoder_ffn_dim=128, max_position_embeddings=TOKENS, decoder_start_token_id=2,
        dropout=DROP, attention_dropout=DROP, activation_dropout=DROP)
    return transformers.AutoModelForSeq2SeqLM.from_config(config), text_batch()


def roberta():  # positions from the padding
    import transformers
    config = transformers.AutoConfig.for_model(
        "roberta", **TEXT, num_hidden_layers=LAYERS, hidden_size=WIDTH, intermediate_size=128,
        num_attention_heads=HEADS, max_position_embeddings=TOKENS + 2,
        hidden_dropout_prob=DROP, attention_probs_dropout_prob=DROP)
    return transformers.AutoModelForMaskedLM.from_config(config), text_batch()


def deberta_v2():  # disentangled relative-position attention
    import transformers
    config = transformers.AutoConfig.for_model(
        "deberta-v2", **TEXT, num_hidden_layers=LAYERS, hidden_size=WIDTH,
        intermediate_size=128, num_attention_heads=HEADS, max_position_embeddings=TOKENS,
        relative_attention=True, pos_att_type=["p2c", "c2p"], hidden_dropout_prob=DROP,
        attention_probs_dropout_prob=DROP)
    return transformers.AutoModelForMaskedLM.from_config(config), text_batch()


def distilbert():  # sequence classification head
    import transformers
    config = transformers.AutoConfig.for_model(
        "distilbert", vocab_size=VOCAB, pad_token_id=1, n_layers=LAYERS, dim=WIDTH,
        hidden_dim=128, n_heads=HEADS, max_position_embeddings=TOKENS, dropout=DROP,
        attention_dropout=DROP, seq_classif_dropout=DROP)
    return (transformers.AutoModelForSequenceClassification.from_config(config),
            text_batch(labels="class"))


def whisper():  # convolutions over audio features, encoder-decoder
    import torch
    import transformers
    config = transformers.AutoConfig.for_model(
        "whisper", vocab_size=VOCAB, num_mel_bins=16, encoder_layers=LAYERS,
        decoder_layers=LAYERS, d_model=WIDTH, encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS, encoder_ffn_dim=128, decoder_ffn_dim=128,
        max_source_positions=TOKENS // 2, max_target_positions=TOKENS, pad_token_id=1,
        bos_token_id=0, eos_token_id=2, decoder_start_token_id=0, dropout=DROP,
        attention_dropout=DROP, activation_dropout=DROP, use_cache=False)
    features = torch.randn(BATCH, 16, TOKENS, generator=torch.Generator().manual_seed(0))
    return (transformers.AutoModelForSpeechSeq2Seq.from_config(config),
            {"input_features": features, "labels": text_batch()["labels"][:, :TOKENS // 2]})


def wav2vec2():  # convolutional feature encoder, SpecAugment masks (numpy), layerdrop
    import torch
    import transformers
    config = transformers.AutoConfig.for_model(
        "wav2vec2", vocab_size=32, hidden_size=WIDTH, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=128, conv_dim=(16, 16), conv_stride=(5, 2),
        conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
        layerdrop=0.0, mask_time_prob=0.2, mask_time_length=2, pad_token_id=0,
        hidden_dropout=DROP, attention_dropout=DROP, ctc_loss_reduction="mean")
    generator = torch.Generator().manual_seed(0)
    return (transformers.Wav2Vec2ForCTC(config),
            {"input_values": torch.randn(BATCH, 1600, generator=generator),
             "labels": torch.randint(1, 32, (BATCH, 10), generator=generator)})


def swin():  # shifted windows, stochastic depth
    import transformers
    config = transformers.AutoConfig.for_model(
        "swin", image_size=IMAGE, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
        window_size=4, hidden_dropout_prob=DROP, attention_probs_dropout_prob=DROP,
        drop_path_rate=DROP, num_labels=2)
    return transformers.AutoModelForImageClassification.from_config(config), image_batch()


def convnext():  # depthwise convolutions, layer scale, stochastic depth
    import transformers
    config = transformers.AutoConfig.for_model(
        "convnext", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, drop_path_rate=DROP,
        image_size=IMAGE, num_labels=2)
    return transformers.AutoModelForImageClassification.from_config(config), image_batch()


def resnet():  # batch normalization: running statistics updated by the step
    import transformers
    config = transformers.AutoConfig.for_model(
        "resnet", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
        layer_type="basic", num_labels=2)
    return transformers.AutoModelForImageClassification.from_config(config), image_batch()


def clip():  # two towers and a contrastive loss
    import transformers
    config = transformers.CLIPConfig(
        text_config={"vocab_size": VOCAB, "hidden_size": WIDTH, "intermediate_size": 128,
                     "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
                     "max_position_embeddings": TOKENS, "pad_token_id": 1, "bos_token_id": 0,
                     "eos_token_id": 2, "attention_dropout": DROP},
        vision_config={"hidden_size": WIDTH, "intermediate_size": 128,
                       "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
                       "image_size": IMAGE, "patch_size": 16, "attention_dropout": DROP},
        projection_dim=32)
    batch = text_batch()
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
              "pixel_values": image_batch()["pixel_values"], "return_loss": True}
    return transformers.CLIPModel(config), inputs


MODELS = {f.__name__: f for f in (mistral, qwen2, gemma2, phi, phi3, gpt_neox, opt, bloom, falcon,
                                  mixtral, qwen2_moe, bart, whisper, wav2vec2, roberta,
                                  deberta_v2, distilbert, swin, convnext, resnet, clip)}


def build(name):
    import torch
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    return model.train(), inputs


# -- the two checks ------------------------------------------------------------------------------

def hf_loss(output):
    return output.loss


def first_difference(loss, grads, rng, buffers, expected):
    import torch
    if not torch.equal(loss, expected[0]):
        return f"loss {loss.item():.6g} != {expected[0].item():.6g}"
    for (name, g), e in zip(grads, expected[1]):
        if (g is None) != (e is None):
            return f"grad {name}: {'none' if g is None else 'set'} (eager: " \
                   f"{'none' if e is None else 'set'})"
        if g is not None and not torch.equal(g, e):
            return f"grad {name}: max diff {(g - e).abs().max().item():.3g}"
    if not torch.equal(rng, expected[2]):
        return "generator state"
    for (name, b), e in zip(buffers, expected[3]):
        if not torch.equal(b, e):
            return f"buffer {name} after the step"
    return None


def optimize_check(name):
    import torch
    import remat.torch as rt
    model, inputs = build(name)
    eager = copy.deepcopy(model)
    torch.manual_seed(5)
    loss = eager(**inputs).loss
    loss.backward()
    expected = (loss.detach(), [p.grad for p in eager.parameters()], torch.get_rng_state(),
                [b.clone() for b in eager.buffers()])
    try:
        step = rt.optimize(model, (), hf_loss, model_inputs=0, model_kwargs=inputs, **PLANNING)
        budget = ""
    except ValueError as e:
        if "below the memory lower bound" not in str(e):
            raise
        step = rt.optimize(model, (), hf_loss, model_inputs=0, model_kwargs=inputs,
                           **{**PLANNING, "budget": "min"})
        budget = "min: "
    torch.manual_seed(5)
    got = step(**inputs)
    grads = [(n, p.grad) for n, p in model.named_parameters()]
    difference = first_difference(got.detach(), grads, torch.get_rng_state(),
                                  list(model.named_buffers()), expected)
    return {"nodes": step.traced.graph.num_nodes, "status": budget + step.status,
            "peak": step.peak_percent, "ci": step.extra_cost_percent,
            "bitwise": "y" if difference is None else f"n: {difference}"}


def compiled_steps(model, inputs, backend, steps=2):
    import numpy
    import torch
    torch._dynamo.reset()
    model = copy.deepcopy(model)

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, batch):
            return self.model(**batch).loss

    step = torch.compile(Step(), backend=backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    torch.manual_seed(11)
    numpy.random.seed(11)  # Wav2Vec2's SpecAugment masks
    record = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = step(inputs)
        loss.backward()
        record.append((loss.detach(), [p.grad.clone() if p.grad is not None else None
                                       for p in model.parameters()]
                       + [b.clone() for b in model.buffers()]))
        optimizer.step()
    return record


def compile_check(name):
    import torch
    import remat.torch as rt
    from remat.torch.compile import RematFallbackWarning
    model, inputs = build(name)
    backend = rt.compile_backend(budget="50%", compiler="eager", solver="fastsa",
                                 iterations_scale=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = compiled_steps(model, inputs, backend)
        except Exception as e:
            try:
                compiled_steps(model, inputs, "aot_eager_decomp_partition")
                reference = "the reference runs"
            except Exception:  # noqa: BLE001 - not remat's failure
                reference = "the reference fails too"
            raise RuntimeError(f"{type(e).__name__} ({reference})") from e
    expected = compiled_steps(model, inputs, "aot_eager_decomp_partition")
    result = "ok"
    for i, ((loss, grads), (e_loss, e_grads)) in enumerate(zip(got, expected)):
        if not torch.allclose(loss, e_loss):
            result = f"loss of step {i}: {loss.item():.6g} != {e_loss.item():.6g}"
            break
        bad = [j for j, (g, e) in enumerate(zip(grads, e_grads))
               if (g is None) != (e is None) or (g is not None and not torch.allclose(g, e))]
        if bad:
            result = f"step {i}: {len(bad)} gradients or buffers differ"
            break
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, RematFallbackWarning)]
    planned = sum(1 for g in backend.graphs if g.solver != "pytorch-min-cut")
    result += f" ({planned}/{len(backend.graphs)} graphs planned)"
    if fallbacks:
        result += "; fallback: " + " | ".join(f[:160] for f in fallbacks)
    return {"compile": result}


def _child(name, check, pipe):
    warnings.simplefilter("ignore")  # the budget's and HF's warnings; fallbacks are recorded
    try:
        pipe.send(check(name))
    except BaseException as e:  # noqa: BLE001 - the row says what went wrong
        last = traceback.extract_tb(e.__traceback__)[-1]
        pipe.send({"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                            f" ({os.path.basename(last.filename)}:{last.lineno})"})


def isolated(name, check, timeout):
    """check(name) in a forked child: its result, or what ended it."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(name, check, send))
    child.start()
    send.close()
    if receive.poll(timeout):
        try:
            result = receive.recv()
        except EOFError:
            result = None
    else:
        result = {"error": f"hang: no result in {timeout} s"}
        child.kill()
    child.join()
    if result is None:
        result = {"error": f"child died (exit code {child.exitcode})"}
    return result


def row(name, args):
    start = time.time()
    r = isolated(name, optimize_check, args.timeout)
    if "error" in r:
        r = {"nodes": "-", "status": "error", "peak": None, "ci": None,
             "bitwise": r["error"]}
    if args.no_compile:
        r["compile"] = "-"
    else:
        c = isolated(name, compile_check, args.timeout)
        r["compile"] = c.get("compile", c.get("error"))
    r["seconds"] = time.time() - start
    return r


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated names (default: all)")
    parser.add_argument("--no-compile", action="store_true", help="skip the compile check")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds each check of a model may take (default 120)")
    parser.add_argument("--results", nargs="?", const=bench_results.default_path("hf_sweep"),
                        default=None, help="also write the table to PATH (default "
                                           "bench/results/hf_sweep.md)")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)} (known: {', '.join(MODELS)})")
    import torch
    torch.set_num_threads(1)  # deterministic kernels, and the machine is shared
    with bench_results.recorded("hf_sweep", args.results):
        print(f"{'model':<11} {'nodes':>6} {'status':<16} {'peak %':>6} {'CI %':>6} "
              f"{'s':>5}  bitwise / compile")
        for name in names:
            r = row(name, args)
            print(f"{name:<11} {r['nodes']:>6} {r['status']:<16} {fmt(r['peak'], '6.1f')} "
                  f"{fmt(r['ci'], '6.1f')} {r['seconds']:5.0f}  {r['bitwise']}\n"
                  f"{'':<11} {'':>6} {'':<16} {'':>6} {'':>6} {'':>5}  compile: {r['compile']}",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
