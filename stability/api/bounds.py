"""``st.bounds``: the exact max lr next to PipeMare's closed-form bound (``stability bounds``)."""

from __future__ import annotations

from typing import Any

from stability.analysis.closed_forms import BoundReport, bound_report
from stability.api.resolve import resolve, rule_name


def bounds(rule: Any, **params: Any) -> BoundReport:
    """Exact max lr of ``rule`` and the PipeMare lemma bounding it (Lemmas 1-3, App. B).

    Lemma 1 for sgd (and momentum 0): 2/λ·sin(π/(4τ+2)), exact; Lemma 3 for momentum in
    (0, 1]: 4/λ·sin(π/(4τ+2)), an upper bound; Lemma 2 for discrepancy with Δ > 0, τf > τb
    and no momentum.  ``ratio`` = max_lr / bound.

    >>> import stability as st
    >>> st.bounds("sgd", tau=7).ratio
    1.0
    """
    name = rule_name(rule)
    resolve(name, **params)  # one point: the parameters checked as max-lr checks them
    return bound_report(name, **params)


__all__ = ["BoundReport", "bounds"]
