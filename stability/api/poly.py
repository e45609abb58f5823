"""``st.poly``: the characteristic polynomial derived from a rule's step (``stability poly``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stability.api.commands import command
from stability.api.resolve import resolve, rule_name
from stability.options import check_options
from stability.result import Result, output


@dataclass(frozen=True)
class Poly(Result):
    """p(ω) of the rule on the quadratic model at one step size, monic, zero roots divided out."""

    rule: str = output("the rule's registry name")
    lr: float = output("step size")
    coefficients: tuple[float, ...] = output("coefficients, highest degree first (numpy order)")
    degree: int = output("degree of p(ω)")
    sympy: str | None = output(
        "p(ω) in sympy syntax, exact, in the rule's real parameters, lr and lam "
        "(null unless symbolic)"
    )


def poly(rule: Any, *, lr: float, symbolic: bool = False, **params: Any) -> Poly:
    """Characteristic polynomial of ``rule`` at ``lr``, derived from the rule's step.

    The state matrix is read off the step by probing (`stability.dynamics.linear`), e.g. for
    sgd p(ω) = ω^{τ+1} − ω^τ + lr·λ (PipeMare eq. 13 at β = 0).  ``symbolic`` adds the sympy
    polynomial in the rule's real parameters (`stability.dynamics.symbolic`).

    >>> import stability as st
    >>> st.poly("sgd", tau=2, lr=0.5, lam=2).coefficients
    (1.0, -1.0, 0.0, 1.0)
    """
    from stability.dynamics.linear import characteristic_polynomial

    r = resolve(rule, **params)
    check_options(command("poly").options, {"lr": lr, "symbolic": symbolic})
    period = getattr(r.rule, "period", 1)
    if period > 1:  # the refusal names the rule (issue 25: a refusal names its parameter)
        raise ValueError(
            f"rule {rule_name(rule)!r} is periodic (period {period}): it has no time-invariant "
            "characteristic polynomial; use radius / max-lr (Floquet monodromy)"
        )
    p = characteristic_polynomial(r.rule, r.model).at(lr).normalized()
    text = None
    if symbolic:
        if r.spec is None:
            raise ValueError(
                "symbolic needs a registered rule name (its parameters become symbols)"
            )
        from stability.dynamics.symbolic import symbolic_polynomial
        from stability.limits import SYMBOLIC_MAX_DEGREE

        if p.degree > SYMBOLIC_MAX_DEGREE:
            raise ValueError(
                f"symbolic: the exact polynomial is derived up to degree {SYMBOLIC_MAX_DEGREE} "
                f"(docs/limits.md), this one has degree {p.degree}: lower the delay (tau) or "
                "drop --symbolic"
            )

        text = str(
            symbolic_polynomial(r.spec, **{k: v for k, v in params.items() if v is not None})
        )
    coefficients = tuple(float(c) for c in p.dense().real)
    return Poly(r.name, float(lr), coefficients, p.degree, text)


__all__ = ["Poly", "poly"]
