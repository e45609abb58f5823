r"""Closed-form results of the papers: PipeMare Lemmas 1-4 and eq. 14, Kosson App. I.

Each function cites the equation it implements; each is tested against an independent
computation (exact sympy / cyclotomic arithmetic, mpmath roots, the derived dynamics' exact
max lr) in tests/test_bounds.py and tests/test_symbolic.py.

Evaluation: scalar arguments are evaluated in mpmath at 40 digits and rounded once, so a
closed form and an mpmath-refined exact max lr of the same number agree to the last bit
(`bound_report` then gives ratio 1.0 for Lemma 1); array arguments (sweeps) in float64 NumPy.

**Lemma 1 crossing angles** (derived here; PipeMare App. B.1 prints the wrong angle).  On the
unit circle PipeMare writes ω = (1 − iy)/(1 + iy), so

    arg ω = Arg(1 − iy) − Arg(1 + iy) = −2·Arg(1 + iy),

and with Arg(1 + iy) = (π + 4πn)/(4τ + 2) (App. B.1) the root is ω = e^{−iθ_n} with
θ_n = (1 + 4n)π/(2τ + 1); its conjugate e^{+iθ_n} is a root too (real coefficients).  The
printed "Arg(ω) = ±(π + 4πn)/(4τ + 2)" is the argument of 1 + iy — half the angle of ω; and
for even τ, n = τ/2 gives θ = π, the single real root ω = −1 (printed: π/2).  For n = 0 the
angle π/(2τ + 1) is `stability.analysis.boundary.max_lr`'s ``crossing_angle`` for delayed SGD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from stability.checks import check_delay, check_real, is_literal_zero
from stability.result import Result, output

DIGITS = 40
"""Working precision (decimal digits) of the scalar closed forms."""

T2_DECAY_LIMIT = math.exp(-2)
"""lim_{k→∞} (1 − 2/(k + 1))^k = e^{−2} ≈ 0.135: the decay D PipeMare suggests (App. B.4)."""


# -- evaluation: mpmath for scalars, NumPy for grids ---------------------------------------


def _grid(*values: Any) -> bool:
    return any(isinstance(v, np.ndarray) for v in values)


def _num(x: Any, grid: bool) -> Any:
    import mpmath

    return np.asarray(x, dtype=float) if grid else mpmath.mpf(x)


def _sinpi(x: Any, grid: bool) -> Any:
    """sin(π·x)."""
    import mpmath

    return np.sin(np.pi * x) if grid else mpmath.sinpi(x)


def _out(x: Any, grid: bool) -> Any:
    return x if grid else float(x)


def _precision():
    import mpmath

    return mpmath.workdps(DIGITS)


# -- PipeMare Lemma 1 (App. B.1): delayed SGD ------------------------------------------------


def lemma1_threshold(tau: Any, lam: Any = 1.0) -> Any:
    """α* = 2/λ·sin(π/(4τ + 2)): delayed SGD is stable iff 0 < α < α* (PipeMare Lemma 1, eq. 3)."""
    grid = _grid(tau, lam)
    with _precision():
        return _out(2 / _num(lam, grid) * _sinpi(1 / (4 * _num(tau, grid) + 2), grid), grid)


@dataclass(frozen=True)
class Crossing:
    """One unit-circle crossing of PipeMare eq. 3 (App. B.1, angles derived in the module doc).

    At step size ``lr`` = α_n = 2/λ·sin((π + 4πn)/(4τ + 2)) the roots e^{±i·angle} lie on the
    unit circle, ``angle`` = θ_n = (1 + 4n)π/(2τ + 1) ∈ (0, π]; ``roots`` is 2 (a conjugate
    pair) or 1 (θ = π: the real root ω = −1, even τ only).
    """

    n: int
    lr: float
    angle: float
    roots: int


def lemma1_crossings(tau: int, lam: float = 1.0) -> tuple[Crossing, ...]:
    """All step sizes at which a root of PipeMare eq. 3 is on the unit circle, smallest first.

    n = 0, …, ⌊τ/2⌋ (PipeMare App. B.1: larger n repeat these α values); together they carry
    τ + 1 roots, each crossing outward, so α_0 = `lemma1_threshold` is the only one that
    matters for stability.
    """
    tau = check_delay("tau", tau)
    lam = check_real("lam", lam, low=0.0, low_open=True)
    out = []
    with _precision():
        import mpmath

        for n in range(tau // 2 + 1):
            lr = 2 / mpmath.mpf(lam) * mpmath.sinpi(mpmath.mpf(1 + 4 * n) / (4 * tau + 2))
            angle = mpmath.pi * (1 + 4 * n) / (2 * tau + 1)
            roots = 1 if 1 + 4 * n == 2 * tau + 1 else 2
            out.append(Crossing(n, float(lr), float(angle), roots))
    return tuple(out)


@dataclass(frozen=True)
class DoubleRoot:
    """PipeMare App. B.1: p and p' of eq. 3 vanish together at ω = ``root`` for α = ``lr``.

    ``root`` = τ/(τ + 1) is then the spectral radius, the smallest any α reaches: the fastest
    per-step rate of delayed SGD (tested in tests/test_bounds.py).
    """

    lr: float
    root: float


def lemma1_double_root(tau: Any, lam: Any = 1.0) -> DoubleRoot:
    """α = 1/(λ(τ + 1))·(τ/(τ + 1))^τ with double root ω = τ/(τ + 1) (PipeMare App. B.1)."""
    grid = _grid(tau, lam)
    with _precision():
        t = _num(tau, grid)
        root = t / (t + 1)
        lr = root**t / (_num(lam, grid) * (t + 1))
        return DoubleRoot(_out(lr, grid), _out(root, grid))


# -- PipeMare Lemma 2 (App. B.3) and Lemma 3 (App. B.2) --------------------------------------


def lemma2_bound(tau_fwd: Any, tau_bkwd: Any, delta: Any, lam: Any = 1.0) -> Any:
    """min(2/(Δ(τf − τb)), 2/λ·sin(π/(4τf + 2))) (PipeMare Lemma 2, eq. 5).

    For Δ > 0 and τf > τb, some α ≤ this bound puts a root of eq. 5's polynomial on or
    outside the unit circle, so the exact max lr of `discrepancy` (no momentum) is ≤ it.
    """
    grid = _grid(tau_fwd, tau_bkwd, delta, lam)
    if np.any(np.asarray(delta) <= 0) or np.any(np.asarray(tau_fwd) <= np.asarray(tau_bkwd)):
        raise ValueError("Lemma 2 needs delta > 0 and tau_fwd > tau_bkwd (PipeMare Lemma 2)")
    with _precision():
        gap = _num(tau_fwd, grid) - _num(tau_bkwd, grid)
        by_delta = 2 / (_num(delta, grid) * gap)
        by_delay = 2 / _num(lam, grid) * _sinpi(1 / (4 * _num(tau_fwd, grid) + 2), grid)
        return _out(np.minimum(by_delta, by_delay) if grid else min(by_delta, by_delay), grid)


def lemma3_bound(tau: Any, lam: Any = 1.0) -> Any:
    """4/λ·sin(π/(4τ + 2)) (PipeMare Lemma 3, eq. 13).

    For heavy-ball momentum 0 < β ≤ 1 some α ≤ this bound is unstable, so the exact max lr
    of delayed momentum is ≤ it: momentum does not escape the O(1/τ) threshold.
    """
    return 2 * lemma1_threshold(tau, lam)


# -- PipeMare eq. 14 (App. B.4): the T2 decay ------------------------------------------------


def t2_optimal_gamma(tau_fwd: int, tau_bkwd: int) -> Fraction:
    """γ* = 1 − 2/(τf − τb + 1) = (k − 1)/(k + 1), k = τf − τb, exactly (PipeMare eq. 14).

    The γ that makes p''(1) of the App. B.4 polynomial independent of Δ (p(1) and p'(1)
    are for every γ).  `stability.rules.discrepancy.optimal_gamma` is its float.
    """
    k = _gap(tau_fwd, tau_bkwd)
    return Fraction(k - 1, k + 1)


def t2_optimal_decay(tau_fwd: int, tau_bkwd: int) -> Fraction:
    """D* = γ*^{τf − τb}, exactly; → e^{−2} (`T2_DECAY_LIMIT`) as τf − τb → ∞ (App. B.4)."""
    return t2_optimal_gamma(tau_fwd, tau_bkwd) ** _gap(tau_fwd, tau_bkwd)


def t2_second_derivative_delta_coefficient(tau_fwd: int, tau_bkwd: int, gamma: Any) -> Any:
    """∂p''(1)/∂(αΔ) = −k(1 + γ − (1 − γ)k), k = τf − τb (PipeMare App. B.4).

    Zero exactly at γ = γ* (eq. 14); p(1) = αλ(1 − γ) and p'(1) = αλ + 1 − γ carry no Δ.
    """
    k = _gap(tau_fwd, tau_bkwd)
    return -k * (1 + gamma - (1 - gamma) * k)


def _gap(tau_fwd: int, tau_bkwd: int) -> int:
    tau_fwd, tau_bkwd = check_delay("tau_fwd", tau_fwd), check_delay("tau_bkwd", tau_bkwd)
    if tau_fwd <= tau_bkwd:
        raise ValueError(f"T2 needs tau_fwd > tau_bkwd (got {tau_fwd}, {tau_bkwd})")
    return tau_fwd - tau_bkwd


# -- PipeMare Lemma 4 (App. B.4), as a numeric check -----------------------------------------


@dataclass(frozen=True)
class Lemma4Check:
    """α_thresh(τ) and |ω_thresh(τ) − 1| along a delay sequence, with Lemma 4's constant.

    PipeMare Lemma 4: for p_τ = (ω − 1)f(ω)ω^τ − α g(ω)ω^τ − α h(ω) with f ≠ 0 on the circle,
    any root on the unit circle at step α has |ω − 1| ≤ C·α, C = (max|g| + max|h|)/min|f|;
    so α_thresh → 0 forces ω_thresh → 1.  ``constant`` is C for the family.
    """

    taus: tuple[int, ...]
    max_lr: tuple[float, ...]
    distance: tuple[float, ...]
    constant: float


def lemma4_check(name: str, taus, **params: Any) -> Lemma4Check:
    """Lemma 4 along ``taus`` for ``sgd``, ``momentum`` (delay ``tau``) or ``discrepancy``
    (delay ``tau_fwd``, with ``tau_bkwd`` fixed in ``params``), at the exact max lr.

    C: sgd (f = 1, h = −λ) λ; momentum (f = ω − β, h = −λ) λ/(1 − β); discrepancy
    (f = ω^{τb}, g = Δ, h = −(λ + Δ), lemma's τ = τf − τb) |Δ| + |λ + Δ|.
    """
    from stability.analysis.boundary import max_lr
    from stability.rules.registry import get_spec

    spec = get_spec(name)
    delay = {"sgd": "tau", "momentum": "tau", "discrepancy": "tau_fwd"}.get(name)
    if delay is None:
        raise ValueError(f"lemma4_check covers sgd, momentum and discrepancy, got {name!r}")
    lrs, distances = [], []
    for tau in taus:
        rule, model = spec.build(**{delay: tau}, **params)
        r = max_lr(rule, model, precise=True)
        if r.crossing_angle is None:
            raise ValueError(f"{name} at {delay}={tau} has no unit-circle crossing")
        lrs.append(r.max_lr)
        distances.append(2 * math.sin(r.crossing_angle / 2))  # |e^{iθ} − 1|
    lam, m = float(model.lam), float(getattr(rule, "momentum", 0.0))
    delta = float(model.delta)
    if m >= 1:
        raise ValueError("Lemma 4 needs f ≠ 0 on the unit circle: momentum must be < 1")
    constant = {"sgd": lam, "momentum": lam / (1 - m), "discrepancy": abs(delta) + abs(lam + delta)}
    return Lemma4Check(tuple(taus), tuple(lrs), tuple(distances), constant[name])


# -- Kosson App. I: when GSC, LWP and SC_D have the same dynamics -----------------------------


def gsc_lwp_residuals(sc_a: Any, sc_b: Any, horizon: Any, momentum: Any) -> tuple[Any, Any]:
    """(a + b − (1 + T), m·b − T): both zero iff GSC ≡ LWP^w on a quadratic (Kosson eq. 44-45).

    Then Kosson eq. 21 and eq. 22 are the same polynomial, term by term.
    """
    return sc_a + sc_b - (1 + horizon), momentum * sc_b - horizon


def lwp_horizon_for_sc(momentum: Any, delay: Any) -> Any:
    """T = m(1 − m^D)/(1 − m): LWP with this horizon ≡ SC_D (Kosson eq. 46; T = 0 at m = 0)."""
    from stability.rules.lwp_sc import geometric_sum

    return momentum * geometric_sum(momentum, delay)


def gsc_for_lwp_horizon(horizon: Any, momentum: Any) -> tuple[Any, Any]:
    """(a, b) = (1 − (1 − m)T/m, T/m): GSC ≡ LWP with horizon T (Kosson eq. 47; needs m ≠ 0)."""
    if is_literal_zero(momentum):
        raise ValueError("Kosson eq. 47 needs momentum ≠ 0 (m·b = T has no solution b at m = 0)")
    return 1 - (1 - momentum) * horizon / momentum, horizon / momentum


# -- which lemma bounds a rule, and how tightly -------------------------------------------------


@dataclass(frozen=True)
class BoundReport(Result):
    """The exact max lr of a rule next to the closed-form bound that applies to it.

    ``lemma`` is "1" (exact threshold: ``ratio`` = 1), "2" or "3" (upper bounds: ratio ≤ 1).
    """

    rule: str = output("the rule's registry name")
    lemma: str = output("the PipeMare lemma that applies: 1 (exact), 2 or 3 (upper bounds)")
    source: str = output("the lemma's statement and where it is proved")
    bound: float = output("the lemma's closed-form step size")
    max_lr: float = output("the exact max stable step size (boundary locus, mpmath-refined)")
    ratio: float = output("max_lr / bound: 1 for Lemma 1, ≤ 1 for Lemmas 2-3")
    crossing_angle: float | None = output(
        "argument θ of the root e^{iθ} on the unit circle at max_lr", "rad"
    )


LEMMA_SOURCES = {
    "1": "PipeMare Lemma 1 (App. B.1): 2/λ·sin(π/(4τ+2)), exact",
    "2": "PipeMare Lemma 2 (App. B.3): min(2/(Δ(τf−τb)), 2/λ·sin(π/(4τf+2))), upper bound",
    "3": "PipeMare Lemma 3 (App. B.2): 4/λ·sin(π/(4τ+2)), upper bound",
}


def applicable_lemma(name: str, values: dict[str, Any]) -> tuple[str, float]:
    """``(lemma, bound)`` for resolved parameters of ``sgd``, ``momentum`` or ``discrepancy``.

    sgd: Lemma 1.  momentum: Lemma 1 at m = 0 (it is delayed SGD), else Lemma 3 (0 < m ≤ 1).
    discrepancy: with Δ = 0 or τf = τb the gradient is λ·w_{t−τf} and the momentum rules
    apply at τ = τf; with Δ > 0, τf > τb and no momentum, Lemma 2.  Otherwise (Δ < 0, or
    Δ ≠ 0 with momentum) no lemma applies: `ValueError`.
    """
    lam = values["lam"]
    if name == "sgd":
        return "1", lemma1_threshold(values["tau"], lam)
    if name == "momentum":
        return _momentum_lemma(values["tau"], values["momentum"], lam)
    if name == "discrepancy":
        tf, tb, delta, m = (values[k] for k in ("tau_fwd", "tau_bkwd", "delta", "momentum"))
        if delta == 0 or tf == tb:
            return _momentum_lemma(tf, m, lam)
        if delta > 0 and m == 0:
            return "2", lemma2_bound(tf, tb, delta, lam)
        raise ValueError(
            ("delta" if delta < 0 else "momentum")
            + ": no closed-form bound for discrepancy with "
            + ("delta < 0" if delta < 0 else "momentum > 0")
            + " (PipeMare Lemma 2 needs delta > 0 and momentum 0)"
        )
    raise ValueError(
        f"bounds covers sgd, momentum and discrepancy (PipeMare Lemmas 1-3), got {name!r}"
    )


def _momentum_lemma(tau: int, momentum: float, lam: float) -> tuple[str, float]:
    if momentum == 0:
        return "1", lemma1_threshold(tau, lam)
    return "3", lemma3_bound(tau, lam)


def bound_report(name: str, **params: Any) -> BoundReport:
    """Exact max lr (`analysis.boundary.max_lr`, mpmath-refined) and the applicable lemma."""
    from stability.analysis.boundary import max_lr
    from stability.rules.registry import get_spec

    spec = get_spec(name)
    values = spec.resolve(**params)
    lemma, bound = applicable_lemma(name, values)
    rule, model = spec.build(**params)
    exact = max_lr(rule, model, precise=True)
    if exact.max_lr is None:
        raise ArithmeticError(f"{name} is stable for every lr, contradicting Lemma {lemma}")
    return BoundReport(
        rule=name,
        lemma=lemma,
        source=LEMMA_SOURCES[lemma],
        bound=bound,
        max_lr=exact.max_lr,
        ratio=exact.max_lr / bound,
        crossing_angle=exact.crossing_angle,
    )
