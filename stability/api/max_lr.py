"""``st.max_lr``: the exact maximal stable step size of a rule (``stability max-lr``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from stability.analysis.boundary import MaxLr
from stability.analysis.boundary import max_lr as _max_lr
from stability.api.resolve import resolve


def max_lr(rule: Any, *, method: str = "auto", **params: Any) -> MaxLr:
    """Exact max stable lr of ``rule`` (a name or rule value) with ``params`` (the rule flags).

    ``method``: ``"auto"`` (boundary locus when the characteristic polynomial is affine in
    lr, PipeMare App. B.1's D-decomposition; else certified bisection), ``"locus"`` or
    ``"bisection"``; periodic rules are bisected on their Floquet monodromy.  See
    `stability.analysis.boundary.max_lr` for the method and its accuracy.

    >>> import stability as st
    >>> round(st.max_lr("sgd", tau=10).max_lr, 12)  # PipeMare Lemma 1: 2·sin(π/(4τ + 2))
    0.149460187173
    """
    r = resolve(rule, **params)
    return dataclasses.replace(_max_lr(r.rule, r.model, method=method), rule=r.name)


__all__ = ["MaxLr", "max_lr"]
