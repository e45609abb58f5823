"""The papers' stability claims, each checked numerically and graded: which way, how much, where.

A claim is a function returning a `Claim` (`stability.claims.claim`): the statement exactly as
checked (the papers' wording is often looser: the statement says which grid and which
parameters), split into its ``direction``, its ``size`` (read through the normative lexicon,
`stability.claims.lexicon`) and its ``scope``; the graded verdict ``grade`` (``holds``,
``direction_only``, ``partial_range`` with the computed ``range_where_it_holds``, ``fails``),
the optima the paper names against the computed ones, and ``numbers`` (JSON-ready) that show
why.  Claims never force a verdict.

`CLAIMS` lists them in the order of the papers; `check_claims` evaluates some or all.  Every
claim has keyword parameters for its grids (defaults: the papers' ranges); `QUICK` holds
smaller grids for ``stability claims --quick`` and the tests, which re-check every verdict
against an independent computation (tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stability.claims import kosson, pipemare
from stability.claims.claim import Claim, Grade, Optimum, Range, Size
from stability.claims.lexicon import LEXICON, Qualifier, lexicon_table


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


__all__ = [
    "LEXICON",
    "Claim",
    "Grade",
    "Optimum",
    "Qualifier",
    "Range",
    "Size",
    "check_claims",
    "claim_ids",
    "lexicon_table",
    "quick_parameters",
]
