"""What a checked claim is: the statement as checked, the verdict and the numbers behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Claim:
    """One checked claim: ``id``, ``source`` (paper, figure/equation), the ``statement`` as
    checked, the verdict ``holds`` and the ``numbers`` behind it."""

    id: str
    source: str
    statement: str
    holds: bool
    numbers: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "statement": self.statement,
            "holds": self.holds,
            "numbers": self.numbers,
        }


def intervals(x, mask) -> list[tuple[float, float]]:
    """Maximal runs of True in ``mask`` over the sorted sample points ``x``, as (first, last)."""
    runs, start = [], None
    for i, flag in enumerate(mask):
        if flag and start is None:
            start = i
        if not flag and start is not None:
            runs.append((float(x[start]), float(x[i - 1])))
            start = None
    if start is not None:
        runs.append((float(x[start]), float(x[len(mask) - 1])))
    return runs
