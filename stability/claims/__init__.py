"""The papers' stability claims, each checked numerically, with the verdict and its numbers.

A claim is a function returning a `Claim`: the statement exactly as checked (the papers'
wording is often looser: the statement says which grid and which parameters), whether it
``holds`` there, and ``numbers`` (JSON-ready) that show why.  Claims never force a verdict: a
claim that holds only in part reports ``holds: false`` and where it fails.

`CLAIMS` lists them in the order of the papers; `check_claims` evaluates some or all.  Every
claim has keyword parameters for its grids (defaults: the papers' ranges); `QUICK` holds
smaller grids for ``stability claims --quick`` and the tests, which re-check every verdict
against an independent computation (tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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


def _registry() -> dict[str, Callable[..., Claim]]:
    from stability.claims import kosson, pipemare

    return {**pipemare.CLAIMS, **kosson.CLAIMS}


def claim_ids() -> tuple[str, ...]:
    return tuple(_registry())


def quick_parameters() -> dict[str, dict[str, Any]]:
    """Smaller grids per claim (``--quick``, tests): same statements, coarser sampling."""
    from stability.claims import kosson, pipemare

    return {**pipemare.QUICK, **kosson.QUICK}


def check_claims(ids: Iterable[str] | None = None, *, quick: bool = False) -> list[Claim]:
    """Evaluate the claims ``ids`` (default: all), on the quick grids if ``quick``."""
    registry = _registry()
    ids = list(registry) if ids is None else list(ids)
    unknown = [i for i in ids if i not in registry]
    if unknown:
        raise ValueError(f"unknown claim {unknown[0]!r}; known claims: {', '.join(registry)}")
    grids = quick_parameters() if quick else {}
    return [registry[i](**grids.get(i, {})) for i in ids]


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
