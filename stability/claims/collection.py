"""The claims of the papers, collected: their ids, quick grids, and evaluation
(`stability.claims` re-exports these)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stability.claims import kosson, pipemare
from stability.claims.claim import Claim


def _registry() -> dict[str, Callable[..., Claim]]:
    return {**pipemare.CLAIMS, **kosson.CLAIMS}


def claim_ids() -> tuple[str, ...]:
    return tuple(_registry())


def quick_parameters() -> dict[str, dict[str, Any]]:
    """Smaller grids per claim (``--quick``, tests): same statements, coarser sampling."""
    return {**pipemare.QUICK, **kosson.QUICK}


def check_claims(ids: Iterable[str] | None = None, *, quick: bool = False) -> list[Claim]:
    """Evaluate the claims ``ids`` (default: all), on the quick grids if ``quick``."""
    registry = _registry()
    ids = list(registry) if ids is None else list(ids)
    unknown = [i for i in ids if i not in registry]
    if unknown:
        raise ValueError(
            f"claim: unknown claim {unknown[0]!r}; known claims: {', '.join(registry)}"
        )
    grids = quick_parameters() if quick else {}
    return [registry[i](**grids.get(i, {})) for i in ids]


__all__ = ["check_claims", "claim_ids", "quick_parameters"]
