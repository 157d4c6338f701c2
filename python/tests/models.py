"""Small models for the remat.torch tests, sized so activations (not weights) dominate memory."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.Tanh(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    batch = (torch.randn(1024, 64), torch.randint(0, 10, (1024,)))
    return model, batch, F.cross_entropy


def cnn():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    batch = (torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))
    return model, batch, F.cross_entropy


class TransformerBlock(nn.Module):
    """Pre-norm self-attention and MLP with dropout, written out so the test needs nothing else."""

    def __init__(self, dim=64, heads=4, dropout=0.1):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = self.drop(att.masked_fill(~mask, float("-inf")).softmax(dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.norm2(x)))))


def transformer():
    torch.manual_seed(0)
    model = nn.Sequential(TransformerBlock(), nn.Flatten(), nn.Linear(32 * 64, 10))
    batch = (torch.randn(32, 32, 64), torch.randint(0, 10, (32,)))
    return model, batch, F.cross_entropy


def resnet18():
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    # Small, but with activations above the weights and gradients (90 MB), so a plan can go
    # well below the baseline: memory lower bound 62 % of the baseline peak.
    batch = (torch.randn(16, 3, 96, 96), torch.randint(0, 10, (16,)))
    return model, batch, F.cross_entropy


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        if x.sum() > 0:  # branches on a tensor's value: make_fx cannot trace this
            return self.fc(x)
        return -self.fc(x)


MODELS = {"mlp": mlp, "cnn": cnn, "transformer": transformer, "resnet18": resnet18}


class TiedEmbedding(nn.Module):
    """Output layer sharing the embedding's weight (listed once by named_parameters)."""

    def __init__(self, vocab=20, dim=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(torch.tanh(self.emb(x)))


def silu_cnn():
    """SiLU, in place and not: make_fx must record the fused silu_backward kernel eager runs (a
    decomposed backward, sigmoid/mul/add, as PyTorch 1.13 traced it, rounds differently)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.SiLU(inplace=True),
                          nn.Conv2d(16, 16, 3, padding=1), nn.SiLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, 10))
    batch = (torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,)))
    return model, batch, F.cross_entropy
