"""The model zoo: small PyTorch models (and torchvision ones) with fixed seeds, and their example inputs.

Each entry builds the model and its inputs for a batch size; weights and inputs depend only on the seed, so the
fixtures are reproducible. Batch norm statistics are randomised so that folding them is really exercised.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class TorchMLP(nn.Module):
    """The seed's `torch_mlp`: Linear(12,16) ReLU Linear(16,16) ReLU Linear(16,4), in a Sequential named `layers`."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.layers(x)


class SmallCNN(nn.Module):
    """Conv-BN-ReLU-MaxPool, a strided Conv-BN-ReLU6, AvgPool, a standalone BN, global pooling and a classifier."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.avg = nn.AvgPool2d(2, stride=1, padding=1)
        self.bn3 = nn.BatchNorm2d(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu6(self.bn2(self.conv2(x)))
        x = self.bn3(self.avg(x))
        x = F.adaptive_avg_pool2d(x, 1)
        return self.head(torch.flatten(x, 1))


class Encoder(nn.Module):
    """One batch-first nn.TransformerEncoderLayer (post-norm, ReLU) on [B, 8, 32]."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.1,
                                                  batch_first=True)

    def forward(self, x):
        return self.encoder(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, heads: int, context: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class GPTBlock(nn.Module):
    """A GPT-style decoder: token + position embeddings (gather), one pre-norm block, and a language-model head."""

    def __init__(self, vocab: int = 64, d_model: int = 32, heads: int = 4, context: int = 16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(context, d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, context)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.fc_out = nn.Linear(4 * d_model, d_model)
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.attn(self.ln1(x))
        x = x + self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return self.head(self.ln_f(x))


def _randomize_batch_norm(model: nn.Module):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)


def _resnet18():
    import torchvision
    return torchvision.models.resnet18(weights=None, num_classes=100)


def _mobilenet_v2():
    import torchvision
    return torchvision.models.mobilenet_v2(weights=None, num_classes=100)


class SmallCNN32(nn.Module):
    """A CIFAR-sized CNN on 3x32x32: two Conv-BN-ReLU-MaxPool blocks (32 and 64 channels) and a Linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        return self.head(torch.flatten(x, 1))


class EncoderLayer(nn.Module):
    """One batch-first nn.TransformerEncoderLayer (post-norm), called on its input alone (no masks)."""

    def __init__(self, d_model: int, heads: int, ff: int, activation: str):
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(d_model=d_model, nhead=heads, dim_feedforward=ff, dropout=0.1,
                                                  activation=activation, batch_first=True)

    def forward(self, x):
        return self.encoder(x)


def _encoder(d_model: int, heads: int, ff: int, activation: str):
    return lambda: EncoderLayer(d_model, heads, ff, activation)


def _torchvision(name: str):
    def factory():
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return factory


# name -> (factory, input maker(batch), committed fixture?)
ZOO = {
    "mlp": (TorchMLP, lambda b: (torch.randn(b, 12),), True),
    "cnn": (SmallCNN, lambda b: (torch.randn(b, 3, 16, 16),), True),
    "transformer": (Encoder, lambda b: (torch.randn(b, 8, 32),), True),
    "gpt": (GPTBlock, lambda b: (torch.randint(0, 64, (b, 8)),), True),
    "resnet18": (_resnet18, lambda b: (torch.randn(b, 3, 64, 64),), False),
    "mobilenet_v2": (_mobilenet_v2, lambda b: (torch.randn(b, 3, 64, 64),), False),
}
BATCHES = (1, 2)

# The real-size models of the benchmark (benchmarks/bench_realsize.cpp), never committed and not part of the
# conformance tests: name -> (factory, input maker(batch), the batch they run at). Torchvision models keep their
# 1000 classes; the encoders are batch-first post-norm layers on sequences of 128.
REAL = {
    "resnet18_224": (_torchvision("resnet18"), lambda b: (torch.randn(b, 3, 224, 224),), 1),
    "resnet50_224": (_torchvision("resnet50"), lambda b: (torch.randn(b, 3, 224, 224),), 1),
    "mobilenet_v2_224": (_torchvision("mobilenet_v2"), lambda b: (torch.randn(b, 3, 224, 224),), 1),
    "efficientnet_b0_224": (_torchvision("efficientnet_b0"), lambda b: (torch.randn(b, 3, 224, 224),), 1),
    "cnn32": (SmallCNN32, lambda b: (torch.randn(b, 3, 32, 32),), 1),
    "encoder_d256": (_encoder(256, 4, 1024, "relu"), lambda b: (torch.randn(b, 128, 256),), 1),
    "encoder_bert": (_encoder(768, 12, 3072, "gelu"), lambda b: (torch.randn(b, 128, 768),), 1),
    "linear1024": (lambda: nn.Linear(1024, 1024), lambda b: (torch.randn(b, 1024),), 64),
}

# The real-size models gen_zoo.py --real16 also writes in f16 and bf16.
REAL16 = ("resnet18_224", "encoder_bert")
# The zoo models tests/conformance also runs in f16 and bf16 (gen_zoo.py --half), at batch 1.
HALF = ("resnet18", "transformer")


def build(name: str, batch: int):
    """(model in eval mode, example inputs) for `name` at `batch`; deterministic."""
    factory, make_inputs, _ = ZOO[name] if name in ZOO else REAL[name]
    torch.manual_seed(1234)
    model = factory()
    _randomize_batch_norm(model)
    model.eval()
    torch.manual_seed(100 + batch)
    return model, make_inputs(batch)
