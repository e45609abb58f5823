"""What the analysis sets in torch, process-wide, while it runs a user's model.

**float32 as IEEE float32** (`full_float32`).  PyTorch lets float32 matrix products and
convolutions run in lower precision: TF32 (10 mantissa bits) for cuDNN convolutions and RNNs by
default on Ampere and later GPUs, for CUDA matrix products after
``torch.set_float32_matmul_precision("high")``, and bfloat16 passes in oneDNN on CPUs with
bfloat16 units after ``"medium"`` (a setting training scripts often make, and which a problem
file imports with them).  Hessian-vector products in 10 bits are noise at the scale of the
differences the analysis reads, so every backend's ``fp32_precision`` is set to ``"ieee"``
(PyTorch's new API only: mixing it with the legacy ``allow_tf32`` flags is an error in torch
2.13).

**Checkpointed segments run as they are** (`without_recomputation`).
``torch.utils.checkpoint.checkpoint`` (and ``checkpoint_sequential``, and the wrappers built on
it: Hugging Face's ``gradient_checkpointing_enable``, ``checkpoint_wrapper``) trades memory for
time: the forward pass keeps only a segment's inputs and the backward pass recomputes the
segment.  Its values and derivatives are those of the segment itself, but it works by
saved-tensor hooks (``use_reentrant=False``) or an ``autograd.Function`` without
``setup_context`` (``use_reentrant=True``), neither of which ``torch.func`` can transform: a
checkpointed model was refused.  Inside, every checkpoint call runs its segment plainly — the
same function, its activations kept — because the two objects a call looks up in
``torch.utils.checkpoint`` when it runs (``_checkpoint_without_reentrant_generator`` and
``CheckpointFunction``) are replaced by pass-throughs.  On a torch whose module lacks either
name nothing is replaced and a checkpointed model stays refused, naming the cause.

**Attention on its reference path** (`reference_attention`).  In eval mode without autograd,
``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` take a fused "fast path"
(``torch._transformer_encoder_layer_fwd``), and ``nn.TransformerEncoder`` with a key padding
mask packs the batch into a nested tensor, whose padded positions come out 0.  The analysis
differentiates the reference path, so a loss evaluated without gradients (a loss curve, a
measured run's divergence test, f*) was another function wherever padded positions reach the
output: 0.7476 against 0.7658 on a two-layer encoder with mean pooling over all positions.
``torch.backends.mha.set_fastpath_enabled(False)`` keeps every evaluation on the reference path
(and silences the nested-tensor "prototype stage" notice that came with it).

All three are global, so each is a `_Held` setting: entries from several threads (a sweep) are
counted under a lock, the first applies it and the last restores what the process had.  A
model trained in another thread meanwhile computes in IEEE float32 and spends the memory
checkpointing would have saved; its values and gradients are its own.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.utils.checkpoint as checkpointing

BACKENDS = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")
"""The ``torch.backends`` entries whose ``fp32_precision`` says how float32 is computed."""


def _backends() -> list:
    return [functools.reduce(getattr, path.split("."), torch.backends) for path in BACKENDS]


def _segment_as_is(*_args, **_kwargs) -> Iterator[None]:
    """The non-reentrant checkpoint's generator, doing nothing before or after the segment."""
    yield


class _SegmentAsIs:
    """The reentrant checkpoint's ``autograd.Function``: the segment called as it is."""

    @staticmethod
    def apply(function, _preserve_rng_state, *args):
        return function(*args)


REPLACED = {
    "_checkpoint_without_reentrant_generator": _segment_as_is,
    "CheckpointFunction": _SegmentAsIs,
}
"""The names a checkpoint call looks up in ``torch.utils.checkpoint`` → what runs instead."""


class _Held:
    """A process-wide setting held while any entry is inside: ``apply()`` sets it and returns
    how to restore what was there; the first entry of any thread applies, the last restores."""

    def __init__(self, apply: Callable[[], Callable[[], None]]):
        self._apply = apply
        self._lock = threading.Lock()
        self._depth = 0
        self._restore: Callable[[], None] = lambda: None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._restore = self._apply()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._restore()


def _ieee_float32() -> Callable[[], None]:
    backends = _backends()
    saved = [b.fp32_precision for b in backends]
    for b in backends:
        b.fp32_precision = "ieee"

    def restore() -> None:
        for b, value in zip(backends, saved, strict=True):
            b.fp32_precision = value

    return restore


def _reference_attention() -> Callable[[], None]:
    saved = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    return lambda: torch.backends.mha.set_fastpath_enabled(saved)


def _plain_checkpoints() -> Callable[[], None]:
    if not all(hasattr(checkpointing, name) for name in REPLACED):
        return lambda: None
    saved = {name: getattr(checkpointing, name) for name in REPLACED}
    for name, replacement in REPLACED.items():
        setattr(checkpointing, name, replacement)

    def restore() -> None:
        for name, original in saved.items():
            setattr(checkpointing, name, original)

    return restore


full_float32 = _Held(_ieee_float32)
"""Inside: float32 computed as IEEE float32 on every backend (module doc)."""

without_recomputation = _Held(_plain_checkpoints)
"""Inside: ``torch.utils.checkpoint`` calls run their segments plainly (module doc)."""

reference_attention = _Held(_reference_attention)
"""Inside: attention modules never take their fused fast path (module doc)."""


@contextmanager
def analysis_settings() -> Iterator[None]:
    """Inside: the three settings of the module doc (a decorator too: ``@analysis_settings()``)."""
    with full_float32(), without_recomputation(), reference_attention():
        yield


__all__ = [
    "BACKENDS",
    "REPLACED",
    "analysis_settings",
    "full_float32",
    "reference_attention",
    "without_recomputation",
]
