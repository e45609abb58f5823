r"""Exact stability verdicts: the Schur-Cohn test on the derived polynomial, in rational arithmetic.

Near the threshold a float64 spectral radius cannot decide stability: at lr = α*(1 ± 1e-12)
the dominant root is 1 ± ~1e-12, within the rounding error of companion eigenvalues for long
delays.  For rational parameters the question has an exact answer, computed here without
floating point:

1. the rule and the quadratic model are built with `fractions.Fraction` parameters (decimal
   text is read exactly: "0.4450418679126288000000123" is 4450418679126288000000123/10^25);
   the rule code is type-generic, so `stability.dynamics.linear.linearize` at ``lr = Fraction(...)``
   derives the characteristic polynomial with exact rational coefficients;
2. the **Schur-Cohn test** decides whether every root lies strictly inside the unit circle.

Schur-Cohn (Schur 1917, Cohn 1922; as in Jury's table).  For p(z) = Σ a_k z^k of degree n with
real coefficients, let p*(z) = z^n p(1/z) (the reversed polynomial); |p*| = |p| on |z| = 1.
If |a_0| < |a_n|, Rouché's theorem applied to a_n·p − a_0·p* shows that it has as many roots
inside the unit circle as p, and the same roots on it; it vanishes at 0, so

    q(z) = (a_n·p(z) − a_0·p*(z)) / z           (degree n − 1, leading a_n² − a_0² > 0)

has all roots strictly inside iff p has.  If |a_0| ≥ |a_n| the product of the root moduli,
|a_0/a_n|, is ≥ 1, so p is not stable.  Hence: p is stable iff |a_0| < |a_n| at every step
down to degree 0.  The "singular" cases of the root-counting recursion (|a_0| = |a_n|, or a
reduced polynomial vanishing identically, which happens when roots lie on the circle or come
in pairs z, 1/z̄) all stop the recursion with |a_0| ≥ |a_n|, i.e. the verdict "not stable",
which is right: roots on the unit circle are not asymptotically stable.

Coefficients are scaled to integers once; each step is fraction-free with the content (gcd)
divided out, so sizes stay near the Schur-Cohn minors' (benchmarks in the README).

Not certifiable (`NotCertifiable`, reported as ``certified: false`` by the CLI): parameters
that are irrational or computed in floating point, e.g. the T2 decay γ = D^{1/(τf − τb)} when
D is not a (τf − τb)-th power of a rational; array (grid) parameters; periodic rules.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from stability.analysis.closed_forms import t2_optimal_gamma
from stability.limits import CERTIFY_MAX_DEGREE
from stability.rules.spec import RuleSpec


class NotCertifiable(ValueError):
    """The stability question cannot be decided exactly (a parameter is not rational)."""


@dataclass(frozen=True)
class SchurCohn:
    """Verdict of `schur_cohn`: ``stable`` iff all roots are strictly inside the unit circle.

    ``failed_degree``: degree of the reduced polynomial at which |a_0| ≥ |a_n| (None if stable).
    """

    stable: bool
    degree: int
    failed_degree: int | None


def schur_cohn(coefficients, progress: Callable[[int, int], None] | None = None) -> SchurCohn:
    """Exact Schur-Cohn test (module doc) of a real polynomial, coefficients highest degree first.

    Coefficients may be ints, Fractions or decimal strings; the leading one must be nonzero.
    ``progress(done, total)`` is called after each reduction step (total = the degree).
    """
    c = [exact_rational(x, "coefficient") for x in coefficients]
    if not c or c[0] == 0:
        raise ValueError("the leading coefficient must be nonzero (highest degree first)")
    scale = math.lcm(*(x.denominator for x in c))
    a = [int(x * scale) for x in c]
    degree = len(a) - 1
    while len(a) > 1:
        lead, const = a[0], a[-1]
        if abs(const) >= abs(lead):
            return SchurCohn(False, degree, len(a) - 1)
        n = len(a) - 1
        a = [lead * a[i] - const * a[n - i] for i in range(n)]  # (a_n p − a_0 p*)/z
        g = math.gcd(*a)
        a = [x // g for x in a]
        if progress is not None:
            progress(degree - n + 1, degree)
    return SchurCohn(True, degree, None)


def exact_rational(value: Any, name: str) -> Fraction:
    """A parameter as an exact `Fraction`.

    Fractions and ints as they are; strings exactly as decimal (or p/q) text; floats as the
    shortest decimal that prints as them (``0.1`` → 1/10, the value a user typed), not as
    their binary expansion.  Anything else: `NotCertifiable`.
    """
    if isinstance(value, bool):
        raise NotCertifiable(f"{name} must be a number, got {value!r}")
    if isinstance(value, (Fraction, int)):
        return Fraction(value)
    exact_text = getattr(value, "exact", None)  # a float parsed from text that kept it
    if isinstance(exact_text, Fraction):
        return exact_text
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"{name} must be a rational number, got {value!r}") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
        return Fraction(repr(value))
    raise NotCertifiable(f"{name} = {value!r} is not a rational number")


def exact_root(x: Fraction, k: int) -> Fraction | None:
    """The rational k-th root of x ≥ 0 if there is one, else None (exact integer roots)."""
    if x < 0:
        return None
    p, q = _integer_root(x.numerator, k), _integer_root(x.denominator, k)
    return None if p is None or q is None else Fraction(p, q)


def _integer_root(n: int, k: int) -> int | None:
    """The integer r ≥ 0 with r^k = n ≥ 0, or None (integer Newton iteration from above)."""
    if n < 2:
        return n
    x = 1 << (n.bit_length() // k + 1)  # ≥ n^{1/k}
    while True:
        y = ((k - 1) * x + n // x ** (k - 1)) // k
        if y >= x:
            break
        x = y
    return x if x**k == n else None


def exact_build(spec: RuleSpec, **values: Any):
    """``(rule, model)`` with every real parameter an exact Fraction, or `NotCertifiable`.

    Decimal values become Fractions (`exact_rational`), registry defaults too.  Values the
    builders would compute in floating point are supplied exactly: the T2 decay γ from
    ``decay`` = D (γ = D^{1/(τf−τb)}, if rational) and the default γ* = (k−1)/(k+1) of
    PipeMare eq. 14.  The engines' literal constants (0.0, 1.0) become Fractions; any other
    float left in the rule or model, an array or a periodic rule is refused.
    """
    reals = {p.name for p in spec.params if p.kind == "real"}

    def exact(name, value):
        return exact_rational(value, name) if name in reals and value is not None else value

    given = {k: exact(k, v) for k, v in values.items()}
    params = {k: exact(k, v) for k, v in spec.resolve(**given).items()}
    if params.get("decay") is not None and params["tau_fwd"] > params["tau_bkwd"]:
        k = params["tau_fwd"] - params["tau_bkwd"]
        gamma = exact_root(params["decay"], k)
        if gamma is None:
            raise NotCertifiable(
                f"gamma = decay^(1/{k}) = ({params['decay']})^(1/{k}) is irrational; "
                "give gamma (a rational) to certify"
            )
        params["decay"], params["gamma"] = None, gamma
    rule, model = spec.build(**params)
    if getattr(rule, "period", 1) > 1:
        raise NotCertifiable("periodic rules have no characteristic polynomial to certify")
    optimal = None
    if (
        "gamma" in params
        and params["gamma"] is None
        and params.get("tau_fwd", 0) > params.get("tau_bkwd", 0)
    ):
        optimal = t2_optimal_gamma(params["tau_fwd"], params["tau_bkwd"])
    return _exact_fields(rule, optimal), _exact_fields(model, None)


def _exact_fields(obj: Any, optimal_gamma: Fraction | None) -> Any:
    """``obj`` (a frozen dataclass) with its float fields made exact, or `NotCertifiable`."""
    if not dataclasses.is_dataclass(obj):
        raise NotCertifiable(f"{type(obj).__name__} is not a dataclass of parameters")
    fixes = {}
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        if hasattr(value, "shape"):
            raise NotCertifiable(f"{field.name} is an array; certify one parameter point")
        if not isinstance(value, float):
            continue
        if value == int(value):  # the engines' literal constants 0.0 and 1.0
            fixes[field.name] = Fraction(int(value))
        elif field.name == "gamma" and optimal_gamma is not None:
            if not math.isclose(float(optimal_gamma), value, rel_tol=1e-15):
                raise NotCertifiable(f"gamma = {value!r} is not PipeMare's γ* = {optimal_gamma}")
            fixes["gamma"] = optimal_gamma  # the builder's default γ* (PipeMare eq. 14)
        else:
            raise NotCertifiable(f"{field.name} = {value!r} is computed in floating point")
    return dataclasses.replace(obj, **fixes)


@dataclass(frozen=True)
class Certificate:
    """An exact verdict: ``stable`` iff every root of the derived polynomial at ``lr`` is
    strictly inside the unit circle (``degree`` = its degree, zero roots divided out)."""

    stable: bool
    lr: Fraction
    degree: int
    method: str = "Schur-Cohn in exact rational arithmetic"


def certify(
    spec: RuleSpec,
    lr: Any,
    progress: Callable[[int, int], None] | None = None,
    **values: Any,
) -> Certificate:
    """Exact stability of a registered rule at step size ``lr`` (rational; see `exact_rational`).

    Raises `NotCertifiable` when a parameter is not rational (module doc) or the size of the
    rule's state (the degree's upper bound, checked first) exceeds `CERTIFY_MAX_DEGREE`.
    ``progress`` as in `schur_cohn`.
    """
    from stability.dynamics.linear import linearize
    from stability.dynamics.monodromy import state_layout

    lr = exact_rational(lr, "lr")
    if lr <= 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    rule, model = exact_build(spec, **values)
    degree = len(state_layout(rule))  # the state's size: the polynomial's degree at most
    if degree > CERTIFY_MAX_DEGREE:
        raise NotCertifiable(
            f"the exact test is limited to degree {CERTIFY_MAX_DEGREE} (its cost grows like the "
            f"degree cubed; docs/limits.md), got a state of {degree} values (degree ≤ that)"
        )
    poly = linearize(rule, model, lr).polynomial()
    inexact = [c for c in poly.terms.values() if not isinstance(c, (int, Fraction))]
    if inexact:
        raise NotCertifiable(
            f"the derived polynomial has a non-rational coefficient {inexact[0]!r}"
        )
    coefficients = [poly.coefficient(k) for k in range(poly.degree, -1, -1)]
    verdict = schur_cohn(coefficients, progress)
    return Certificate(verdict.stable, lr, verdict.degree)
