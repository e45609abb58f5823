"""The process-wide torch settings under which the analysis runs a user's model: float32
computed as IEEE float32 (`stability.nets.full_precision`) and checkpointed segments run as
they are (`stability.nets.recomputation`); each restored when the last user leaves."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from stability.nets.full_precision import full_float32
from stability.nets.recomputation import without_recomputation


@contextmanager
def analysis_settings() -> Iterator[None]:
    """Inside: both settings of the module doc (a decorator too: ``@analysis_settings()``)."""
    with full_float32(), without_recomputation():
        yield


__all__ = ["analysis_settings"]
