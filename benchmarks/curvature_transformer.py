"""A stand-in for the held-out transformer of the curvature benchmark (``problem``).

A causal language model of ≈1.5·10⁵ float32 parameters built from PyTorch's own
``nn.TransformerEncoderLayer`` (pre-norm, GELU, 4 heads), random initialization (seed 0), one
batch of 256 sequences of 32 tokens (vocabulary 64) as tensors; the loss is the mean token
cross-entropy.  benchmarks/bench_curvature.py times ``stability net curvature --k 5`` on it
against curvlinops and PyHessian, each in a process of its own.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
