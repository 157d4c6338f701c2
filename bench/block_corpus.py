"""Joint training graphs in node orders other than remat.torch.trace's, for the block and
separator detection of rotor and rockmate; writes them to tests/data/blocks/ (compact JSON).

    ./scripts/python bench/block_corpus.py [--out DIR]

- gpt4_late_views.json: examples/train_gpt.py's GPT (4 layers, batch 8 x 128 tokens) traced by
  remat.torch.trace, then the backward's helper views (views of forward values or parameters:
  the transposed weights and activations, the detaches) moved to the end of the forward and
  marked forward, where a tracer that sets phases by data flow puts them (PyTorch's make_fx of
  the joint step, read with forward = "does not depend on the loss gradient").
- llama4_make_fx.json: a Llama-style model written here (RMSNorm, grouped-query attention, rotary
  cos/sin tables and the causal mask built once in the model and read by every layer, SwiGLU),
  4 layers, batch 8 x 128 tokens, traced by plain make_fx of a joint function whose loss gradient
  is an input (as in AOTAutograd), and converted here without remat.torch's tracer: one node per
  call (getitems fold into their call), sizes are storage bytes, a tensor sharing an earlier
  storage is an alias, phases by dependence on the gradient input, forward nodes first.

Both keep views and in-place calls as the tracer recorded them. Costs are FLOPs for matrix
products and element counts otherwise (only their ratios matter to the solvers).
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "blocks"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for file_name, make in [("gpt4_late_views.json", gpt_late_views),
                            ("llama4_make_fx.json", llama_make_fx)]:
        g, how = make()
        text = json.dumps(g, separators=(",", ":"), sort_keys=True) + "\n"
        graph = remat.Graph.from_json(text, file_name)  # validates
        path = os.path.join(args.out, file_name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"{path}: {graph.num_nodes} nodes, {graph.num_values} values ({how}), "
              f"{os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
