"""``st.max_lr``: the exact maximal stable step size of a rule (``stability max-lr``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stability.analysis.boundary import max_lr as _max_lr
from stability.api.resolve import resolve
from stability.api.result import Result, output


@dataclass(frozen=True)
class MaxLr(Result):
    """The first lr > 0 at which a root of the rule's dynamics reaches the unit circle."""

    rule: str = output("the rule's registry name")
    max_lr: float | None = output("max stable step size; null: stable for every lr > 0", "lr")
    crossing_angle: float | None = output("argument θ ∈ [0, π] of the root e^{iθ} there", "rad")
    method: str = output("how it was computed (boundary locus, bisection, Floquet)")


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
    found = _max_lr(r.rule, r.model, method=method)
    return MaxLr(r.name, found.max_lr, found.crossing_angle, found.method)
