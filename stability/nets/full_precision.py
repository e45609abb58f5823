"""float32 evaluated as IEEE float32 while the analysis runs a model, whatever the process set.

PyTorch lets float32 matrix products and convolutions run in lower precision: TF32 (10
mantissa bits) for cuDNN convolutions and RNNs by default on Ampere and later GPUs, for CUDA
matrix products after ``torch.set_float32_matmul_precision("high")``, and bfloat16 passes in
oneDNN on CPUs with bfloat16 units after ``"medium"`` (a setting training scripts often make,
and which a problem file imports with them).  Hessian-vector products in 10 bits are noise at
the scale of the differences the analysis reads, so `full_float32` sets every backend's
``fp32_precision`` to ``"ieee"`` (PyTorch's new API only: mixing it with the legacy
``allow_tf32`` flags is an error in torch 2.13) and restores the process's settings after.
The settings are global; entries from several threads (a sweep) are counted under a lock, so
the first sets them and the last restores them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

BACKENDS = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")
"""The ``torch.backends`` entries whose ``fp32_precision`` says how float32 is computed."""

_lock = threading.Lock()
_depth = 0
_saved: list[str] = []


def _backends() -> list:
    return [functools.reduce(getattr, path.split("."), torch.backends) for path in BACKENDS]


@contextmanager
def full_float32() -> Iterator[None]:
    """Inside: float32 computed as IEEE float32 on every backend (module doc)."""
    global _depth
    with _lock:
        if _depth == 0:
            backends = _backends()
            _saved[:] = [b.fp32_precision for b in backends]
            for b in backends:
                b.fp32_precision = "ieee"
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for b, value in zip(_backends(), _saved, strict=True):
                    b.fp32_precision = value


__all__ = ["BACKENDS", "full_float32"]
