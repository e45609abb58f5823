"""A stand-in for the held-out transformer of the curvature benchmark (``problem``).

A causal language model of ≈1.5·10⁵ float32 parameters built from PyTorch's own
``nn.TransformerEncoderLayer`` (pre-norm, GELU, 4 heads), random initialization (seed 0), one
batch of 256 sequences of 32 tokens (vocabulary 64) as tensors; the loss is the mean token
cross-entropy.  benchmarks/bench_curvature.py times ``stability net curvature --k 5`` on it
against curvlinops and PyHessian, each in a process of its own.
"""

from __future__ import annotations

import torch
from torch import nn

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
        return super().forward(logits.reshape(-1, VOCAB), targets.reshape(-1))


def tensors() -> tuple[torch.Tensor, torch.Tensor]:
    """256 sequences of a noisy copy-with-shift task, inputs and next-token targets."""
    g = torch.Generator().manual_seed(1)
    start = torch.randint(0, VOCAB, (SEQUENCES, 1), generator=g)
    step = torch.randint(1, 4, (SEQUENCES, 1), generator=g)
    seq = (start + step * torch.arange(LENGTH + 1)) % VOCAB
    noise = torch.rand(seq.shape, generator=g) < 0.1
    seq = torch.where(noise, torch.randint(0, VOCAB, seq.shape, generator=g), seq)
    return seq[:, :-1], seq[:, 1:]


def problem():
    torch.manual_seed(0)
    x, y = tensors()
    return {"model": CausalLM(), "loss": TokenLoss(), "inputs": x, "targets": y}
