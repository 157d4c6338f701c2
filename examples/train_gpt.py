"""A small GPT (written here) on random tokens: plan one training step under a memory budget with
remat, check that loss and gradients equal plain PyTorch (dropout seeded), and compare peak memory
and step time.

    ./scripts/python examples/train_gpt.py --budgets 100%,50%,25%
    python -m remat.torch trace examples/train_gpt.py:make -o gpt.json    # the graph alone
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from remat_report import parse_args, run


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = self.drop(att.masked_fill(~causal, float("-inf")).softmax(dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, dropout)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=512, context=128, dim=128, heads=4, layers=4, dropout=0.1):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(context, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*[Block(dim, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tokens(idx) + self.positions(positions))
        return self.head(self.ln(self.blocks(x)))


def next_token_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make(batch_size, context=128, vocab=512, layers=4):
    torch.manual_seed(0)
    model = GPT(vocab=vocab, context=context, layers=layers)
    tokens = torch.randint(0, vocab, (batch_size, context + 1))
    return model, (tokens[:, :-1], tokens[:, 1:]), next_token_loss


def main():
    args = parse_args(__doc__.splitlines()[0], {"batch": 8, "context": 128, "vocab": 512,
                                                 "layers": 4})
    model, batch, loss_fn = make(args.batch, args.context, args.vocab, args.layers)
    run(f"GPT {args.layers} layers, batch {args.batch}x{args.context} tokens", model, batch,
        loss_fn, args)


if __name__ == "__main__":
    main()
