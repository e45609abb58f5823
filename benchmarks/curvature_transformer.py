"""Stand-ins for the held-out transformer of the curvature benchmark: three ≈1.4·10⁵-parameter
float32 causal language models, built differently, each one batch of 256 sequences as tensors,
random initialization (seed 0), the mean token cross-entropy as loss.

* ``problem``: PyTorch's own ``nn.TransformerEncoderLayer`` ×3 (pre-norm LayerNorm, GELU,
  4 heads, width 64), vocabulary 64, sequences of 32 tokens of examples/tiny_transformer.py's
  task; 135,616 parameters.
* ``problem_postnorm``: one hand-assembled post-norm block around ``nn.MultiheadAttention``
  (2 heads, width 96, ReLU, no final norm), vocabulary 128, sequences of 16; 138,080
  parameters.
* ``problem_rmsnorm``: five hand-written pre-norm blocks (one fused q/k/v ``Linear``,
  ``F.scaled_dot_product_attention``, 8 heads of 6, ``nn.RMSNorm``, tanh-GELU, width 48),
  vocabulary 32, sequences of 64; 147,104 parameters.

The last two read the repeat task (`repeats`): a random first half, then the same tokens
again.  benchmarks/bench_curvature.py times ``stability net curvature --k 5`` on each against
curvlinops (and PyHessian), each in a process of its own.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, WIDTH, HEADS, LAYERS, FF, LENGTH, SEQUENCES = 64, 64, 4, 3, 192, 32, 256


class CausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Parameter(0.02 * torch.randn(LENGTH, WIDTH))
        layer = nn.TransformerEncoderLayer(
            WIDTH, HEADS, FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)
        mask = torch.triu(torch.full((LENGTH, LENGTH), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, tokens):
        h = self.embed(tokens) + self.position
        h = self.blocks(h, mask=self.mask, is_causal=True)
        return self.head(self.norm(h))


class TokenLoss(nn.CrossEntropyLoss):
    """Mean cross-entropy over every token of the batch (a module with ``reduction="mean"``,
    as curvlinops asks of a loss)."""

    def forward(self, logits, targets):
        return super().forward(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class PostNormLM(nn.Module):
    """``problem_postnorm``'s model (module doc): x ← LN(x + MHA(x)), x ← LN(x + MLP(x))."""

    def __init__(self, vocab=128, width=96, heads=2, ff=384, length=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(0.02 * torch.randn(length, width))
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, ff), nn.ReLU(), nn.Linear(ff, width))
        self.head = nn.Linear(width, vocab)
        mask = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, tokens):
        h = self.embed(tokens) + self.position
        h = self.norm1(h + self.attention(h, h, h, attn_mask=self.mask, need_weights=False)[0])
        return self.head(self.norm2(h + self.mlp(h)))


class RMSBlock(nn.Module):
    """A pre-norm block with its own attention: x ← x + W_o·attn(W_qkv·RMS(x)), x ← x +
    MLP(RMS(x)) (causal ``F.scaled_dot_product_attention``)."""

    def __init__(self, width, heads, ff):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(width), nn.RMSNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(
            nn.Linear(width, ff), nn.GELU(approximate="tanh"), nn.Linear(ff, width)
        )

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, -1).unbind(2)
        a = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class RMSNormLM(nn.Module):
    """``problem_rmsnorm``'s model (module doc)."""

    def __init__(self, vocab=32, width=48, heads=8, ff=192, length=64, layers=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(0.02 * torch.randn(length, width))
        self.blocks = nn.Sequential(*(RMSBlock(width, heads, ff) for _ in range(layers)))
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(self.embed(tokens) + self.position)))


def repeats(count: int, length: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The repeat task (fixed seed): ``count`` sequences of ``length + 1`` tokens, a random
    first half and the same tokens again; (inputs, next-token targets)."""
    g = torch.Generator().manual_seed(2)
    half = torch.randint(0, vocab, (count, (length + 2) // 2), generator=g)
    seq = torch.cat([half, half], dim=1)[:, : length + 1]
    return seq[:, :-1], seq[:, 1:]


def tensors() -> tuple[torch.Tensor, torch.Tensor]:
    """256 sequences of 32 tokens of examples/tiny_transformer.py's task (steps 1 … 3), inputs
    and next-token targets."""
    path = Path(__file__).resolve().parents[1] / "examples" / "tiny_transformer.py"
    spec = importlib.util.spec_from_file_location("tiny_transformer_task", path)
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    return task.sequences(SEQUENCES, LENGTH, max_step=3).tensors


def problem():
    torch.manual_seed(0)
    x, y = tensors()
    return {"model": CausalLM(), "loss": TokenLoss(), "inputs": x, "targets": y}


def problem_postnorm():
    torch.manual_seed(0)
    x, y = repeats(SEQUENCES, 16, 128)
    return {"model": PostNormLM(), "loss": TokenLoss(), "inputs": x, "targets": y}


def problem_rmsnorm():
    torch.manual_seed(0)
    x, y = repeats(SEQUENCES, 64, 32)
    return {"model": RMSNormLM(), "loss": TokenLoss(), "inputs": x, "targets": y}
