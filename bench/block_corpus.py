"""Joint training graphs from tracers other than remat.torch.trace's, for the block and separator
detection of rotor and rockmate; writes them to tests/data/blocks/ (compact JSON).

    ./scripts/python bench/block_corpus.py [--out DIR] [--only NAME,...]

Every model has 4 layers. Costs are FLOPs for matrix products and element counts otherwise (only
their ratios matter to the solvers).

- gpt4_late_views.json: examples/train_gpt.py's GPT (batch 8 x 128 tokens) traced by
  remat.torch.trace, then the backward's helper views (views of forward values or parameters:
  the transposed weights and activations, the detaches) moved to the end of the forward and
  marked forward, where a tracer that sets phases by data flow puts them (PyTorch's make_fx of
  the joint step, read with forward = "does not depend on the loss gradient").
- llama4_make_fx.json: a Llama-style model written here (RMSNorm, grouped-query attention, rotary
  cos/sin tables and the causal mask built once in the model and read by every layer, SwiGLU),
  batch 8 x 128 tokens, traced by plain make_fx of a joint function whose loss gradient is an
  input (as in AOTAutograd), and converted here without remat.torch's tracer: one node per call
  (getitems fold into their call), sizes are storage bytes, a tensor sharing an earlier storage
  is an alias, phases by dependence on the gradient input, forward nodes first.
- gpt4_aot.json, llama4_aot.json: the same two models (the GPT in training mode: its dropouts are
  random calls AOTAutograd records, each drawing from a generator state a node of its own makes,
  which a recomputation replays), their loss included, through AOTAutograd
  (aot_module, no compiler): the functionalized joint graph with primals_* / tangents_* inputs
  that a partition function receives, converted by remat.torch.partition's JointGraph.
- hf_gpt2.json, hf_llama.json, hf_bert.json, hf_t5.json, hf_vit.json: Hugging Face transformers
  models built from their configs (random weights, no download; width 64, 4 heads, dropout 0)
  with a loss on their logits, through torch.compile (fullgraph) with an AOTAutograd backend
  whose partition function keeps the joint graph, converted by JointGraph. Text models get a
  batch of 8 x 128 tokens with one sequence padded (attention_mask); T5 has 4 encoder and 4
  decoder layers (64 target tokens), ViT 16 images of 64 x 64 px in patches of 8.

Every graph keeps views and in-place calls as its tracer recorded them. The files omit the
fields that have defaults (kind "other", temp 0, recomputable true) and write ops without their
"aten." prefix and ".default" overload.
"""

import argparse
import json
import operator
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import torch  # noqa: E402
import torch.fx as fx  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import remat  # noqa: E402

LAYERS = 4


# -- the project's tracer, helper views moved to the end of the forward ----------------------

def late_helper_views(graph_json):
    """The graph with every backward view whose inputs are forward values or graph inputs moved,
    in order, to the end of the forward and marked forward."""
    g = json.loads(graph_json)
    produced_forward = set()
    for n in g["nodes"]:
        if n.get("phase") == "forward":
            produced_forward.update(n["outputs"])
    produced = {v for n in g["nodes"] for v in n["outputs"]}
    moved = []
    for n in g["nodes"]:
        if n.get("phase") == "backward" and n.get("kind") == "view" and all(
                v not in produced or v in produced_forward for v in n["inputs"]):
            moved.append(n)
            produced_forward.update(n["outputs"])
    moved_ids = {n["id"] for n in moved}
    forward = [n for n in g["nodes"] if n.get("phase") == "forward"]
    backward = [n for n in g["nodes"] if n.get("phase") == "backward" and n["id"] not in moved_ids]
    for n in moved:
        n["phase"] = "forward"
    g["nodes"] = forward + moved + backward
    for i, n in enumerate(g["nodes"]):
        n["id"] = i
    return g, len(moved)


def gpt_model():
    import train_gpt

    return train_gpt.make(8, layers=LAYERS)


def gpt_late_views():
    import remat.torch as rt

    traced = rt.trace(*gpt_model(), name="GPT late views")
    g, moved = late_helper_views(traced.graph.to_json())
    return g, f"{moved} backward helper views moved to the end of the forward"


# -- plain make_fx of a joint function, converted here ---------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5 + mask
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, -1)
        return self.o(y)


class Layer(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.attn = Attention(dim, heads, kv_heads)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.norm1(x), cos, sin, mask)
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab=128, dim=64, heads=4, kv_heads=2, hidden=172, layers=LAYERS):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Layer(dim, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head_dim = dim // heads

    def forward(self, tokens):
        t = tokens.shape[1]
        # Built once and read by every layer, as Hugging Face's Llama does.
        inv_freq = 1.0 / 10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        angles = torch.outer(torch.arange(t).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        mask = torch.full((t, t), float("-inf")).triu(1)
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.head(self.norm(x))


_MATMULS = {"mm", "bmm", "addmm", "baddbmm"}
_RANDOM = ("rand", "bernoulli", "dropout", "normal")
_REDUCTIONS = ("sum", "mean", "amax", "max", "min", "softmax", "norm", "var", "nll_loss")


def _packet(target):
    return getattr(getattr(target, "overloadpacket", None), "__name__", str(target))


def _cost(packet, args, result):
    tensors = [r for r in (result if isinstance(result, (tuple, list)) else [result])
               if isinstance(r, torch.Tensor)]
    if packet in _MATMULS:
        a = args[1] if packet in ("addmm", "baddbmm") else args[0]
        return 2.0 * tensors[0].numel() * a.shape[-1]
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    return float(max([t.numel() for t in tensors + inputs] or [1]))


def _kind(packet, aliases_only):
    if any(word in packet for word in _RANDOM):
        return "random"
    if aliases_only and not packet.endswith("_"):
        return "view"
    if packet in _MATMULS:
        return "compute"
    if any(word in packet for word in _REDUCTIONS):
        return "reduction"
    return "pointwise"


def joint_graph(model, batch, loss_fn, name):
    """remat-graph JSON dict of make_fx(joint): forward, loss, and the gradients of every
    parameter for the loss gradient given as the last input."""
    from torch.fx.experimental.proxy_tensor import make_fx

    names = [n for n, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for _, p in model.named_parameters()]
    tangent = torch.ones(())

    def joint(params, data, tangent):
        out = torch.func.functional_call(model, dict(zip(names, params)), (data[0],))
        loss = loss_fn(out, data[1])
        return [loss, *torch.autograd.grad(loss, params, grad_outputs=tangent)]

    gm = make_fx(joint)(params, list(batch), tangent)
    flat = params + list(batch) + [tangent]
    results = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            results[n] = super().run_node(n)
            return results[n]

    with torch.no_grad():
        Recorder(gm, garbage_collect_values=False).run(*flat)

    values, value_of, root_of_storage = [], {}, {}

    def add_value(fx_node, tensor, value_name):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        entry = {"id": len(values), "name": value_name}
        if key in root_of_storage and storage.nbytes() > 0:
            entry.update(size=0, alias_of=root_of_storage[key])
        else:
            root_of_storage[key] = entry["id"]
            entry["size"] = storage.nbytes()
        values.append(entry)
        return entry["id"]

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n in placeholders:
        value_of[n] = add_value(n, results[n], n.name)
    backward = {placeholders[-1]}  # the loss gradient
    calls = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if any(i in backward for i in n.all_input_nodes):
            backward.add(n)
        if n.target is operator.getitem:
            continue
        result = results[n]
        outputs = []
        if isinstance(result, torch.Tensor):
            outputs.append(add_value(n, result, n.name))
            value_of[n] = outputs[-1]
        elif isinstance(result, (tuple, list)):
            getitems = {u.args[1]: u for u in n.users if u.target is operator.getitem}
            for i, element in enumerate(result):
                if isinstance(element, torch.Tensor):
                    g = getitems.get(i)
                    outputs.append(add_value(g, element, g.name if g else f"{n.name}.{i}"))
                    if g is not None:
                        value_of[g] = outputs[-1]
        calls.append((n, outputs))

    nodes = []
    ordered = ([c for c in calls if c[0] not in backward] + [c for c in calls if c[0] in backward])
    for n, outputs in ordered:
        inputs = []
        for i in n.all_input_nodes:
            if i in value_of and value_of[i] not in inputs:
                inputs.append(value_of[i])
        packet = _packet(n.target)
        aliases_only = bool(outputs) and all("alias_of" in values[v] for v in outputs)
        kind = _kind(packet, aliases_only)
        args = [results[a] if isinstance(a, fx.Node) else a for a in n.args]
        nodes.append({"id": len(nodes), "name": n.name, "op": str(n.target), "kind": kind,
                      "phase": "backward" if n in backward else "forward",
                      "cost": 0.0 if kind == "view" else _cost(packet, args, results[n]),
                      "inputs": inputs, "outputs": outputs,
                      **({"recomputable": False} if kind == "random" else {})})
    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    for o in output_node.args[0]:
        if isinstance(o, fx.Node) and o in value_of:
            values[value_of[o]]["output"] = True
    return {"format": "remat-graph", "version": 1, "name": name, "values": values,
            "nodes": nodes}


def next_token_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def llama_model(layers=LAYERS):
    torch.manual_seed(0)
    tokens = torch.randint(0, 128, (8, 129))
    batch = (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())
    return Llama(layers=layers), batch, next_token_loss


def llama_make_fx():
    return joint_graph(*llama_model(), "Llama make_fx"), "plain make_fx, converted here"


# -- AOTAutograd (PyTorch 2): the joint graph a partition function receives ------------------

class WithLoss(nn.Module):
    """model(inputs) and its loss in one module, so the joint graph holds the loss too."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, x, targets):
        return self.loss_fn(self.model(x), targets)


def capturing_partition(captured):
    """A partition function that converts the joint graph (remat.torch.partition's JointGraph)
    into captured["graph"], then partitions as AOTAutograd's default does."""
    from torch._functorch.partitioners import default_partition
    from remat.torch.partition import JointGraph

    def partition(joint_module, joint_inputs, **kwargs):
        captured["graph"] = JointGraph(joint_module, kwargs.get("num_fwd_outputs")).graph
        return default_partition(joint_module, joint_inputs, **kwargs)

    return partition


def aot_module_graph(module, args, name):
    """The joint graph of aot_module(module)(*args) (no compiler), as a remat graph JSON dict."""
    from remat.torch import _compat

    captured = {}
    compiled = _compat.aot_module(module, _compat.nop_compiler(), _compat.nop_compiler(),
                                  capturing_partition(captured))
    compiled(*args)
    return named(captured["graph"], name)


def compiled_graph(module, kwargs, name):
    """The joint graph of torch.compile(module, fullgraph=True)(**kwargs) through an
    AOTAutograd backend, as a remat graph JSON dict."""
    from torch._dynamo.backends.common import aot_autograd
    from remat.torch import _compat

    captured = {}
    backend = aot_autograd(fw_compiler=_compat.nop_compiler(), bw_compiler=_compat.nop_compiler(),
                           partition_fn=capturing_partition(captured))
    torch._dynamo.reset()
    torch.compile(module, backend=backend, fullgraph=True)(**kwargs)
    torch._dynamo.reset()
    return named(captured["graph"], name)


def named(graph, name):
    g = json.loads(graph.to_json())
    g["name"] = name
    return g


def gpt_aot():
    model, batch, loss_fn = gpt_model()
    return aot_module_graph(WithLoss(model, loss_fn).train(), batch, "GPT aot_module"), \
        "aot_module, JointGraph"


def llama_aot():
    model, batch, loss_fn = llama_model()
    return aot_module_graph(WithLoss(model, loss_fn), batch, "Llama aot_module"), \
        "aot_module, JointGraph"


# -- Hugging Face models from their configs --------------------------------------------------

HF_VOCAB = 128


class HFStep(nn.Module):
    """A Hugging Face model called with keyword inputs, and the cross-entropy of its logits
    (next-token for causal models): the loss is part of the step, as in training."""

    def __init__(self, model, causal):
        super().__init__()
        self.model, self.causal = model, causal

    def forward(self, labels, **inputs):
        logits = self.model(**inputs).logits
        if self.causal:
            logits, labels = logits[:, :-1], labels[:, 1:]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def _tokens(batch, length, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, HF_VOCAB, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, length * 3 // 4:] = 0  # one sequence padded
    return ids, mask


def _text_model(model, causal):
    """(model, causal, keyword inputs): a batch of 8 x 128 tokens, its own labels."""
    ids, mask = _tokens(8, 128)
    return model, causal, {"input_ids": ids, "attention_mask": mask, "labels": ids}


def hf_gpt2():
    import transformers

    config = transformers.GPT2Config(n_layer=LAYERS, n_embd=64, n_head=4, vocab_size=HF_VOCAB,
                                     n_positions=128, resid_pdrop=0, embd_pdrop=0,
                                     attn_pdrop=0, use_cache=False)
    return _text_model(transformers.GPT2LMHeadModel(config), True)


def hf_llama():
    import transformers

    config = transformers.LlamaConfig(num_hidden_layers=LAYERS, hidden_size=64,
                                      intermediate_size=172, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=HF_VOCAB,
                                      max_position_embeddings=128, use_cache=False)
    return _text_model(transformers.LlamaForCausalLM(config), True)


def hf_bert():
    import transformers

    config = transformers.BertConfig(num_hidden_layers=LAYERS, hidden_size=64,
                                     intermediate_size=256, num_attention_heads=4,
                                     vocab_size=HF_VOCAB, max_position_embeddings=128,
                                     hidden_dropout_prob=0, attention_probs_dropout_prob=0)
    return _text_model(transformers.BertForMaskedLM(config), False)


def hf_t5():
    import transformers

    config = transformers.T5Config(num_layers=LAYERS, num_decoder_layers=LAYERS, d_model=64,
                                   d_kv=16, d_ff=256, num_heads=4, vocab_size=HF_VOCAB,
                                   dropout_rate=0, decoder_start_token_id=0, use_cache=False)
    ids, mask = _tokens(8, 128)
    target, target_mask = _tokens(8, 64, seed=1)
    return transformers.T5ForConditionalGeneration(config), False, \
        {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": target,
         "decoder_attention_mask": target_mask, "labels": target}


def hf_vit():
    import transformers

    config = transformers.ViTConfig(num_hidden_layers=LAYERS, hidden_size=64,
                                    intermediate_size=256, num_attention_heads=4, image_size=64,
                                    patch_size=8, num_labels=10, hidden_dropout_prob=0,
                                    attention_probs_dropout_prob=0)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(16, 3, 64, 64, generator=generator)
    return transformers.ViTForImageClassification(config), False, \
        {"pixel_values": images, "labels": torch.randint(0, 10, (16,), generator=generator)}


HF_MODELS = {"hf_gpt2": hf_gpt2, "hf_llama": hf_llama, "hf_bert": hf_bert, "hf_t5": hf_t5,
             "hf_vit": hf_vit}


def hf_step(label):
    """(HFStep module in training mode, its keyword inputs) of a Hugging Face corpus model."""
    torch.manual_seed(0)
    model, causal, inputs = HF_MODELS[label]()
    return HFStep(model, causal).train(), inputs


def hf_graph(label):
    step, inputs = hf_step(label)
    return compiled_graph(step, inputs, f"{label} torch.compile"), "torch.compile, JointGraph"


def traced_models():
    """label -> a function giving (module, args, loss_fn, model_kwargs) for remat.torch.trace:
    the same models as the corpus graphs, for bench/blocks_bench.py --traced."""
    def ours(make):
        def model():
            m, batch, loss_fn = make()
            return m, batch, loss_fn, None
        return model

    def hf(label):
        def model():
            step, inputs = hf_step(label)
            return step, (), (lambda loss: loss), inputs
        return model

    return {"gpt4": ours(gpt_model), "llama4": ours(llama_model),
            **{label: hf(label) for label in HF_MODELS}}


# -- writing ---------------------------------------------------------------------------------

def short_op(op):
    if op.startswith("aten."):
        op = op[len("aten."):]
    return op[:-len(".default")] if op.endswith(".default") else op


def compact(g):
    """The graph dict without the fields that have defaults, ops shortened."""
    for n in g["nodes"]:
        n["op"] = short_op(n.get("op", ""))
        for key, default in (("kind", "other"), ("temp", 0), ("recomputable", True)):
            if n.get(key) == default:
                del n[key]
    for v in g["values"]:
        if v.get("output") is False:
            del v["output"]
    return g


def corpus_text(g):
    """The text of a corpus file: compact JSON, keys sorted."""
    return json.dumps(compact(g), separators=(",", ":"), sort_keys=True) + "\n"


CORPUS = {
    "gpt4_late_views": gpt_late_views,
    "llama4_make_fx": llama_make_fx,
    "gpt4_aot": gpt_aot,
    "llama4_aot": llama_aot,
    **{label: (lambda label=label: hf_graph(label)) for label in HF_MODELS},
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "blocks"))
    parser.add_argument("--only", default=",".join(CORPUS), help="comma-separated names")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only.split(","):
        g, how = CORPUS[name]()
        text = corpus_text(g)
        file_name = name + ".json"
        graph = remat.Graph.from_json(text, file_name)  # validates
        path = os.path.join(args.out, file_name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"{path}: {graph.num_nodes} nodes, {graph.num_values} values ({how}), "
              f"{os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
