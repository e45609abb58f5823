"""Activation checkpointing passed through while the analysis runs a model.

``torch.utils.checkpoint.checkpoint`` (and ``checkpoint_sequential``, and the wrappers built
on it: Hugging Face's ``gradient_checkpointing_enable``, ``checkpoint_wrapper``) trades memory
for time: the forward pass keeps only a segment's inputs and the backward pass recomputes the
segment.  Its values and derivatives are those of the segment itself, but it works by
saved-tensor hooks (``use_reentrant=False``) or an ``autograd.Function`` without
``setup_context`` (``use_reentrant=True``), neither of which ``torch.func`` can transform: a
checkpointed model was refused.  `without_recomputation` makes every checkpoint call run its
segment plainly — the same function, its activations kept — by replacing, in
``torch.utils.checkpoint``, the two objects a call looks up when it runs
(``_checkpoint_without_reentrant_generator`` and ``CheckpointFunction``), and restores them
after.  The replacement is process-wide: entries from several threads are counted under a
lock, so the first replaces and the last restores (as `stability.nets.full_precision`); a
model trained in another thread meanwhile keeps its values and gradients and spends the
memory checkpointing would have saved.  On a torch whose ``torch.utils.checkpoint`` lacks
either name nothing is replaced and a checkpointed model stays refused, naming the cause.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch.utils.checkpoint as checkpointing

_lock = threading.Lock()
_depth = 0
_saved: dict[str, object] = {}


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


@contextmanager
def without_recomputation() -> Iterator[None]:
    """Inside: ``torch.utils.checkpoint`` calls run their segments plainly (module doc)."""
    global _depth
    with _lock:
        if _depth == 0 and all(hasattr(checkpointing, name) for name in REPLACED):
            _saved.update({name: getattr(checkpointing, name) for name in REPLACED})
            for name, replacement in REPLACED.items():
                setattr(checkpointing, name, replacement)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, original in _saved.items():
                    setattr(checkpointing, name, original)
                _saved.clear()


__all__ = ["REPLACED", "without_recomputation"]
