"""Exact maximal stable step size: the first lr > 0 at which a root reaches the unit circle.

**Boundary locus (D-decomposition)**, for polynomials affine in lr, p(ω) = A(ω) + lr·B(ω):
a root sits on the unit circle at ω = e^{iθ} exactly when lr = −A(e^{iθ})/B(e^{iθ}) is real,
i.e. when F(θ) = Im(A·conj B) = 0, and then lr(θ) = −Re(A·conj B)/|B|².  This is how PipeMare
proves Lemma 1 (App. B.1, with the substitution ω = (1 − iy)/(1 + iy)); here it is done
numerically for every rule:

1. sample θ ∈ [0, π] (the lower half mirrors it) at 8 points per unit of degree, evaluating
   the *sparse* A and B — O(d·terms), or O(d log d) by one FFT when they have many terms
   (`stability.winding.HalfCircleGrid`), so max-lr costs O(τ), not the O(τ³) of eigenvalues;
2. every sign change of F brackets a crossing; the endpoints θ = 0, π (real roots ±1) are
   candidates too; the first crossing is not always near ω = 1 (hence the whole half circle);
3. the brackets whose interpolated lr is within 5 % of the smallest positive one (and those
   where lr(θ) varies wildly, near zeros of B) are refined by safeguarded Newton to machine
   precision (relative error of lr ~1e-13), and, with ``precise=True``, the winner by Newton
   in mpmath at 40 digits;
4. the system must be stable on (0, lr₁).  The count of roots inside only changes at
   crossings and none was found below lr₁, so one check just below it, at lr₁·(1 − 1e-4),
   decides: by the argument principle on the samples already taken (the winding number of
   A + lr·B, refined near roots close to the circle; O(degree)).  If that fails, a check at
   lr₁/2 tells "no lr > 0 is stable" (result 0) from a crossing that fell between samples
   (the circle is resampled 4× and 16× finer), unless the root ω = 1 moves off the circle
   there by less than float64 resolves (`_below_rounding_at_one`): then it is refused.

If no crossing exists the rule is stable for every lr > 0 (``max_lr`` is None) or for none.

**Bisection** (any rule, including those whose polynomial is not affine in lr): the first
lr on a log grid (10 points a decade, evaluated upwards until it) whose spectral radius is
≥ 1, the bracket refined on the radius by Brent's method (bisection-safeguarded) and certified
by the high-precision radius (`stability.spectrum.dominant_root`) just below and above.  On
dense companion eigenvalues, so limited to degree `stability.limits.BISECTION_MAX_DEGREE`.

Both are checked against each other and against python-control and numpy-roots bisection in
the tests and benchmarks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from stability.dynamics.linear import (
    CharacteristicPolynomial,
    characteristic_polynomial,
    linearize,
)
from stability.limits import LOCUS_MAX_SAMPLES
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.result import Result, output
from stability.rules.base import Rule
from stability.spectrum import (
    dominant_multiplier,
    dominant_root,
    floquet_stable,
    follow_multiplier,
    spectral_radius,
)
from stability.winding import HalfCircleGrid, on_circle, winding_turns

_EPS = np.finfo(float).eps
_MARGINAL = 1e-12  # radius ≥ 1 − this counts as not stable when checking (0, lr₁)
_BELOW = 1e-4  # stability is verified at lr₁·(1 − _BELOW)
_RESOLVED = 1e3 * _EPS  # what float64 resolves of a sum relative to Σ|terms| (crossings with
# lr·Σ|b_k| ≤ this·Σ|a_k| are A's own roots; a B(1) ≤ this·Σ|b_k| is lost to cancellation)
_UNRESOLVED = (
    "max lr: a crossing could not be resolved on the circle (roots crowd the unit circle "
    "closer than the samples resolve)"
)

_ROUNDED_AT_ONE = (
    "max lr: below the first crossing the root ω = 1 moves off the unit circle by less than "
    "float64 resolves"
)


class UnresolvedCrossing(ArithmeticError):
    """A max lr that float64 cannot certify.  ``by_delay``: the boundary locus's samples
    would exceed `stability.limits.LOCUS_MAX_SAMPLES` (a long delay: it resolves at smaller
    τ).  Otherwise the roots' (or Floquet multipliers') margins from the circle are at
    float64's rounding level, for extreme parameter values, and ``cause`` says where: 128
    samples per unit of degree did not separate them (a momentum within 10⁻³ of 1 beside
    PipeOptim's horizon 10¹²: |ω| − 1 ~ 10⁻¹² either side), the root ω = 1 barely moves
    below the crossing (`_below_rounding_at_one`), or a bisection could not certify its
    bracket (EA-Pipe at an elastic force near 0)."""

    def __init__(self, by_delay: bool, cause: str = _UNRESOLVED):
        super().__init__(cause)
        self.by_delay = by_delay

    def refusal(self, where: str, degree: int | None = None) -> ValueError:
        """The one-line refusal of a valid input the locus cannot answer; ``where`` names the
        parameter values it was asked at."""
        at = "" if degree is None else f" at degree {degree}"
        if self.by_delay:
            return ValueError(f"tau: {self}{at}; it resolves at smaller delays (docs/limits.md)")
        return ValueError(
            f"{where}: {self}{at}: the roots lie within float64's rounding of "
            "|ω| = 1, so no step size is certified stable or unstable; moderate the extreme "
            "values (a momentum near 1, an elastic force near 0, a huge horizon or scale)"
        )


def _parameters(rule: Rule) -> str:
    """``name=value, …``: the fields of ``rule`` (the values a refusal names; a grid axis as
    its range)."""
    fields = dataclasses.fields(rule) if dataclasses.is_dataclass(rule) else ()
    return ", ".join(_shown(f.name, getattr(rule, f.name)) for f in fields) or type(rule).__name__


def _shown(name: str, value: Any) -> str:
    if isinstance(value, np.ndarray) and np.min(value) != np.max(value):
        return f"{name}={np.min(value):g}…{np.max(value):g}"
    if isinstance(value, (float, np.floating, np.ndarray)):
        return f"{name}={float(np.max(value)):g}"
    return f"{name}={value}"


_DENSE_CHECK_DEGREE = 24  # up to this degree the check uses companion eigenvalues


@dataclass(frozen=True)
class MaxLr(Result):
    """Result of `max_lr` (and of ``st.max_lr`` / ``stability max-lr``, which add ``rule``).

    ``max_lr``: the first lr > 0 at which a root reaches the unit circle (every lr below it is
    stable; the stable set may continue above it after a gap, which is not searched); ``None``
    if the rule is stable for every lr > 0; ``0.0`` if it is stable for no lr > 0.
    ``crossing_angle``: the argument θ ∈ [0, π] of the root ω = e^{iθ} on the unit circle
    there (``None`` without a crossing).  ``method``: how it was computed.
    """

    max_lr: float | None = output(
        "max stable step size: the first lr > 0 at which a root reaches the unit circle (every "
        "lr below is stable); null: stable for every lr > 0"
    )
    crossing_angle: float | None = output(
        "argument θ ∈ [0, π] of the root e^{iθ} on the unit circle there; null: no crossing",
        "rad",
    )
    method: str = output("how it was computed (boundary locus, bisection, Floquet bisection)")
    rule: str | None = output("the rule's registry name (null: a hand-built rule)", default=None)


def max_lr(
    rule: Rule,
    model: QuadraticModel,
    *,
    method: str = "auto",
    precise: bool = False,
    where: str | None = None,
) -> MaxLr:
    """Exact maximal stable step size of ``rule`` on ``model`` (one parameter point).

    ``method``: ``"auto"`` (boundary locus when the polynomial is affine in lr, else
    bisection), ``"locus"`` or ``"bisection"``.  Periodic rules (``period`` > 1) are bisected
    on their Floquet monodromy (`stability.dynamics.monodromy.max_lr`) whatever the method.
    ``where``: the parameter values a refusal names (default: the rule's fields).
    """
    where = where or _parameters(rule)
    if getattr(rule, "period", 1) > 1:
        return _floquet_max_lr(rule, model, where)
    cp = characteristic_polynomial(rule, model)
    check_finite(cp.parts, model, rule)
    if method == "auto":
        method = "locus" if cp.is_affine else "bisection"
    if method == "locus":
        if not cp.is_affine:
            raise ValueError("the boundary locus needs a polynomial affine in lr; use bisection")
        lr, theta = _refusing_unresolved(
            where, cp, lambda: _locus(rule, model, cp, precise=precise)
        )
        return _result(float(lr[0]), float(theta[0]), "boundary locus")
    if method == "bisection":
        return _refusing_unresolved(where, cp, lambda: _bisection(cp))
    raise ValueError(f"method must be one of auto, locus, bisection, got {method!r}")


def max_lr_grid(rule: Rule, model: QuadraticModel) -> tuple[np.ndarray, np.ndarray]:
    """Batched `max_lr` over a parameter grid (array-valued rule or model parameters).

    Returns ``(max_lr, crossing_angle)`` arrays of the grid's shape: ``inf`` where stable for
    every lr, 0 where stable for none; angles NaN where there is no crossing.  Float64
    refinement only (relative error ~1e-13; use `max_lr` for mpmath-refined points).
    """
    cp = characteristic_polynomial(rule, model)
    if not cp.is_affine:
        raise ValueError("max_lr_grid needs a polynomial affine in lr (use max_lr per point)")
    lr, theta = _refusing_unresolved(
        _parameters(rule), cp, lambda: _locus(rule, model, cp, precise=False)
    )
    grid = np.broadcast_shapes(*(np.shape(c) for p in cp.parts[:2] for c in p.terms.values()))
    return lr.reshape(grid), theta.reshape(grid)


def min_max_lr_grid(rule: Rule, model: QuadraticModel) -> float:
    """min over a parameter grid of `max_lr_grid` (``inf``: every point is stable for every lr).

    The same boundary locus, but a grid point only has to be verified stable below the
    smallest crossing found so far (the running minimum, every point's first crossing being
    an upper bound of its max lr), not below its own: points far above the minimum cost
    one sampling of the circle and no resampling (module doc, step 4).  The points are
    visited largest lr-coefficient first, where the minimum usually is.
    """
    cp = characteristic_polynomial(rule, model)
    check_finite(cp.parts, model, rule)
    if not cp.is_affine:
        raise ValueError("min_max_lr_grid needs a polynomial affine in lr (use max_lr per point)")
    lr, _ = _refusing_unresolved(
        _parameters(rule), cp, lambda: _locus(rule, model, cp, precise=False, minimum=True)
    )
    return float(np.min(lr))


def _refusing_unresolved(where: str, cp: CharacteristicPolynomial, solve):
    """``solve()``, an `UnresolvedCrossing` refused as a `ValueError` naming the parameter
    values ``where`` (a valid input: say why there is no answer)."""
    try:
        return solve()
    except UnresolvedCrossing as err:
        raise err.refusal(where, cp.degree) from None


def _result(lr: float, theta: float, method: str) -> MaxLr:
    if math.isinf(lr):
        return MaxLr(None, None, method)
    if lr == 0.0:
        return MaxLr(0.0, None, method + " (not stable for small lr > 0)")
    return MaxLr(lr, theta, method)


def _affine_parts(cp: CharacteristicPolynomial) -> tuple[SparsePoly, SparsePoly]:
    A = cp.parts[0]
    B = cp.parts[1] if len(cp.parts) > 1 else SparsePoly({}, {})
    return A, B


def _stack(poly: SparsePoly, grid: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Exponents (k,) and coefficients (k, M) with the grid flattened to M columns."""
    if not poly.terms:
        return np.zeros(1, dtype=int), np.zeros((1, math.prod(grid)))
    ks = np.array(poly.exponents)
    cs = np.stack(
        [np.broadcast_to(np.asarray(poly.terms[k], dtype=float), grid).ravel() for k in ks]
    )
    return ks, cs


def _locus(
    rule: Rule,
    model: QuadraticModel,
    cp: CharacteristicPolynomial,
    *,
    precise: bool,
    minimum: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """First positive crossing lr and its angle for each grid point (flattened).

    Columns are processed in chunks (bounded memory).  Each result is verified on the samples
    already taken: stable just below lr₁ (module doc, step 4); where it is not, stable at
    lr₁/2 decides between "no lr > 0 is stable" (0) and a crossing missed between samples
    (those columns are resampled 4× and 16× finer).  With ``minimum`` only the least lr is
    wanted: lr₁ is replaced in those checks by min(lr₁, the least crossing found so far), and
    the columns are visited largest max|B| first; the other entries are then upper bounds.
    A "not stable at lr₁/2" within float64's rounding of |ω| = 1 is refused, not answered 0
    (`_below_rounding_at_one`); columns whose B(1) is lost to cancellation are decided first,
    in exact arithmetic (`_lost_at_one`).
    """
    A, B = _affine_parts(cp)
    grid = np.broadcast_shapes(*(np.shape(c) for p in (A, B) for c in p.terms.values()))
    exact_slope = _exact_slope_at_one(rule, model, grid)
    ka, ca = _stack(A, grid)
    kb, cb = _stack(B, grid)
    # lr·B is solved as (lr·scale)·(B/scale), scale the largest power of 2 ≤ max|B|: the
    # crossing angles do not change, nothing is rounded (the results are bit for bit those
    # without it), and |B|² cannot underflow when B's coefficients are tiny (Gradient
    # Shrinking: s^τ ~ 1e-192 made every lr look unstable); ≤, not nearest, so that it cannot
    # overflow when max|B| ~ 1e308 (LWP's horizon scale 1e308)
    top = np.max(np.abs(cb), axis=0)
    scale = np.where((top > 0) & np.isfinite(top), np.ldexp(0.5, np.frexp(top)[1]), 1.0)
    cb = cb / scale
    degree = int(max(ka.max(), kb.max()))
    best_lr = np.full(ca.shape[1], np.inf)
    best_theta = np.full(ca.shape[1], np.nan)
    chunk = max(1, 2_000_000 // (8 * degree + 80))
    stuck, unknown = _lost_at_one(ka, ca, cb, exact_slope)
    best_lr[stuck] = 0.0  # ω = 1 stays on the circle or moves out: stable for no lr
    todo = np.flatnonzero(~stuck)
    if minimum:
        todo = todo[np.argsort(-scale[todo], kind="stable")]
    least = np.inf  # the least crossing found so far (minimum: the checks stop there)
    for start in range(0, todo.size, chunk):
        cols = todo[start : start + chunk]
        for density in (8, 32, 128):
            if density > 8 and density * (degree + 2) > LOCUS_MAX_SAMPLES:
                raise UnresolvedCrossing(by_delay=True)
            circle = _Circle(ka, ca[:, cols], kb, cb[:, cols], density * (degree + 2))
            lr, theta = circle.first_crossings()
            if precise:
                for m in np.flatnonzero(np.isfinite(lr) & (theta > 0) & (theta < math.pi)):
                    lr[m], theta[m] = _mp_refine(ka, circle.ca[:, m], kb, circle.cb[:, m], theta[m])
            # stable just below lr₁ ⇒ stable on (0, lr₁): no crossing was found below lr₁.
            # If not, either a crossing fell between samples (resample finer) or nothing is
            # stable for small lr (then lr₁/2 is not stable either: the result is 0).
            if minimum:  # in units of the true lr (each column's lr is scaled by its own B)
                least = min(least, float(np.min(lr / scale[cols])))
            check = np.minimum(lr, least * scale[cols])
            finite = np.isfinite(check)
            below = circle.stable(np.where(finite, check * (1 - _BELOW), 1.0), degree)
            best_lr[cols], best_theta[cols] = lr, theta
            failed = ~below
            if not failed.any():
                break
            half = circle.stable(np.where(finite, 0.5 * check, 1.0), degree)
            never = failed & ~half
            doubtful = _below_rounding_at_one(
                ka, ca[:, cols], cb[:, cols], 0.5 * check, unknown[cols]
            )
            if (doubtful & never).any():
                raise UnresolvedCrossing(by_delay=False, cause=_ROUNDED_AT_ONE)
            best_lr[cols[never]], best_theta[cols[never]] = 0.0, np.nan
            retry = failed & half & finite
            if not retry.any():
                break
            if density == 128:  # unresolved after 16× resampling: report it, do not guess
                raise UnresolvedCrossing(by_delay=False)
            cols = cols[retry]
    # a crossing beyond float64's range (λ ~ 1e-323) overflows here, with numpy's warning,
    # which the result carries; it is reported as the largest float, not as "no crossing"
    true = best_lr / scale
    return np.where(np.isinf(true) & np.isfinite(best_lr), np.finfo(float).max, true), best_theta


def _lost_at_one(ka, ca, cb, exact_slope) -> tuple[np.ndarray, np.ndarray]:
    """(stuck, unknown) columns where B(1) is lost to cancellation in B's coefficients
    (|B(1)| within 10³·eps of Σ|b_k|, e.g. Spike Compensation with a/(1 − m) + b = 0, or
    LWP's horizon scale 10²⁰, whose B(1) = λ is the difference of coefficients ~10²⁰·λ), so
    the motion ω ≈ 1 − lr·B(1)/A'(1) of the root ω = 1 (A(1) = 0 for every rule: nothing moves
    without a gradient) is below what the winding count resolves.  Decided in exact arithmetic
    (`_exact_slope_at_one`): B(1) = 0 keeps ω = 1 a root at every lr and B(1)·A'(1) < 0 moves
    it outward — *stuck*, no lr > 0 is stable (a structural zero, as LWP^v without Spike
    Compensation has); B(1) inward is refused, neither verdict being resolved (the float
    polynomial need not even have A(1) = 0: 1 + m rounds).  A column that cannot be rebuilt
    is stuck where B(1) = 0 in float64, else *unknown* (`_below_rounding_at_one`)."""
    b1 = np.sum(cb, axis=0)
    size = np.sum(np.abs(cb), axis=0)
    slope_a = np.sum(ka[:, None] * ca, axis=0)  # A'(1)
    stuck = np.zeros(ca.shape[1], dtype=bool)
    unknown = np.zeros(ca.shape[1], dtype=bool)
    for m in np.flatnonzero((size > 0) & (np.abs(b1) <= _RESOLVED * size)):
        exact = exact_slope(m)
        if exact is None:
            stuck[m], unknown[m] = b1[m] == 0, b1[m] != 0
        elif exact == 0 or exact * slope_a[m] < 0:
            stuck[m] = True
        else:
            raise UnresolvedCrossing(by_delay=False, cause=_ROUNDED_AT_ONE)
    return stuck, unknown


def _below_rounding_at_one(ka, ca, cb, lr: np.ndarray, unknown: np.ndarray) -> np.ndarray:
    """Columns whose "not stable at ``lr``" cannot be told from float64 rounding at ω = 1.

    Every rule has the root ω = 1 at lr = 0 (A(1) = 0: nothing moves without a gradient);
    where it is simple it moves to first order as ω ≈ 1 − lr·B(1)/A'(1) (inward when
    B(1)/A'(1) > 0).  A failed check says nothing, stable and not stable being both within
    rounding of |ω| = 1, if the root moves inward by less than 10⁻⁶ (the radius check's margin
    is 10⁻¹²; the first-order motion overestimates it ~4× for LWP), or if B(1) is lost to
    cancellation and exact arithmetic could not decide it (``unknown``, `_lost_at_one`).
    """
    a1 = np.sum(ka[:, None] * ca, axis=0)  # A'(1)
    b1 = np.sum(cb, axis=0)  # B(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        inward = np.where(a1 != 0, lr * b1 / a1, -np.inf)
    return (a1 != 0) & (((inward > 0) & (inward < 1e-6)) | unknown)


def _exact_slope_at_one(rule: Rule, model: QuadraticModel, grid: tuple[int, ...]):
    """``column ↦ B(1)`` in exact arithmetic at that grid column: the rule and model rebuilt
    with their float parameters as the exact rationals they are (`fractions.Fraction`; the
    rule code is type-generic, as `stability.analysis.certify` uses it), then
    `LinearDynamics.lr_slope_at_one`.  ``None`` for a column that cannot be rebuilt (not a
    dataclass of parameters): it counts as lost."""

    def exact(obj: Any, column: int) -> Any:
        fixes = {}
        for field in dataclasses.fields(obj):
            value = getattr(obj, field.name)
            if isinstance(value, np.ndarray):
                value = np.broadcast_to(value, grid).ravel()[column]
            if isinstance(value, (float, np.floating)):
                fixes[field.name] = Fraction(float(value))
        return dataclasses.replace(obj, **fixes)

    def slope(column: int) -> Any:
        if not (dataclasses.is_dataclass(rule) and dataclasses.is_dataclass(model)):
            return None
        try:
            return linearize(exact(rule, column), exact(model, column)).lr_slope_at_one()
        except (TypeError, ValueError):  # a rule whose code is not type-generic
            return None

    return slope


class _Circle:
    """A and B sampled on the upper unit half circle, for a block of columns."""

    def __init__(self, ka, ca, kb, cb, n):
        self.ka, self.ca, self.kb, self.cb = ka, ca, kb, cb
        self.pair = _Pair(ka, ca, kb, cb)
        self.theta, self.a, self.b = _sample(n, ka, ca, kb, cb)

    def first_crossings(self) -> tuple[np.ndarray, np.ndarray]:
        """Smallest positive crossing (lr, θ) per column (module doc, steps 1-3)."""
        ka, ca, kb, cb, theta = self.ka, self.ca, self.kb, self.cb, self.theta
        best_lr = np.full(ca.shape[1], np.inf)
        best_theta = np.full(ca.shape[1], np.nan)
        # a crossing where lr·B is within rounding of A's coefficients is a root of A itself
        # on the circle (a multiple root ω = 1 at lr = 0: momentum 1), found at lr ~ eps by
        # Newton on F's trivial zero at θ → 0; the first resolvable crossing is wanted
        with np.errstate(divide="ignore", invalid="ignore"):  # B ≡ 0: no crossing at all
            floor = _RESOLVED * np.sum(np.abs(ca), axis=0) / np.sum(np.abs(cb), axis=0)

        # θ = 0 and θ = π: real roots ω = ±1 (skip exact structural zeros A(±1) = 0)
        for theta0, sign in ((0.0, 1.0), (math.pi, -1.0)):
            wa, wb = sign**ka, sign**kb
            a_val, b_val = wa @ ca, wb @ cb
            a_scale = np.abs(wa) @ np.abs(ca)
            with np.errstate(divide="ignore", invalid="ignore"):
                lr0 = np.where(
                    (np.abs(a_val) > 64 * _EPS * a_scale) & (b_val != 0), -a_val / b_val, np.inf
                )
            take = (lr0 > floor) & (lr0 < best_lr)
            best_lr[take], best_theta[take] = lr0[take], theta0

        prod = self.a * np.conj(self.b)
        f = prod.imag
        with np.errstate(divide="ignore", invalid="ignore"):
            lr_s = -prod.real / np.abs(self.b) ** 2
        s = np.sign(f[1:-1])  # θ = 0 and π are F's trivial zeros
        j, m = np.nonzero((s[:-1] * s[1:] < 0) | (s[:-1] == 0))
        j = j + 1
        lr_lo, lr_hi = lr_s[j, m], lr_s[j + 1, m]
        # lr(θ) is continuous across a crossing's bracket; at a zero of B (F vanishes there
        # too) it passes through ±∞ and changes sign, so brackets need lr > 0 at both ends.
        # Within a smooth bracket lr(θ) is nearly linear, and lr at the interpolated zero of F
        # ranks the crossings; near a near-zero of |B| it peaks and the ends say little, so
        # such "wild" brackets (lr varying by > 25 % across them) are always refined.  The
        # candidates are refined by safeguarded Newton to machine precision.
        keep = (lr_lo > 0) & (lr_hi > 0) & np.isfinite(lr_lo) & np.isfinite(lr_hi)
        if np.any(keep):
            j, m = j[keep], m[keep]
            lo, hi, f_lo, f_hi = theta[j], theta[j + 1], f[j, m], f[j + 1, m]
            lr_lo, lr_hi = lr_lo[keep], lr_hi[keep]
            with np.errstate(divide="ignore", invalid="ignore"):
                frac = np.where(f_hi != f_lo, f_lo / (f_lo - f_hi), 0.0)
            guess = lo + frac * (hi - lo)
            lr_guess = lr_lo + frac * (lr_hi - lr_lo)  # lr(θ) is smooth in non-wild brackets
            wild = np.abs(lr_hi - lr_lo) > 0.25 * np.minimum(lr_lo, lr_hi)
            ranked = np.where(~wild & (lr_guess > floor[m]), lr_guess, np.inf)
            row_min = best_lr.copy()
            np.minimum.at(row_min, m, ranked)
            close = wild | (ranked <= row_min[m] * 1.05)
            m = m[close]
            bracket = (lo[close], hi[close], f_lo[close], f_hi[close])
            root = _safe_newton(lambda t, c=m: self.pair.f_df(t, c), *bracket, guess[close])
            lr_root = self.pair.lr(root, m)
            for lr_v, th, col in zip(lr_root, root, m, strict=True):
                if floor[col] < lr_v < best_lr[col]:
                    best_lr[col], best_theta[col] = lr_v, th
        return best_lr, best_theta

    def stable(self, lr: np.ndarray, degree: int) -> np.ndarray:
        """All roots of A + lr·B strictly inside the unit circle, per column.

        The argument principle on the samples already taken (p = A + lr·B along θ ∈ [0, π],
        refined where the phase turns fast): O(degree) per column; companion eigenvalues
        up to degree 24, where they are cheaper.
        """
        lr = np.broadcast_to(lr, (self.ca.shape[1],))
        if degree <= _DENSE_CHECK_DEGREE:  # companion eigenvalues: cheaper at small degree
            dense = np.zeros((degree + 1, self.ca.shape[1]))
            dense[degree - self.ka] += self.ca
            np.add.at(dense, degree - self.kb, self.cb * lr)
            return spectral_radius(dense) < 1 - _MARGINAL
        values = self.a + lr * self.b

        def evaluate(t, cols):
            a, b = self.pair.at(t, cols)
            return a + lr[cols] * b

        # every other sample suffices to start: the phase turns ~π/4 per kept interval, and
        # winding_turns refines wherever it turns faster
        # (sorted and distinct by construction: np.unique would hash up to 2e6 indices, 1.2 s a
        # call at degree 1e5, for nothing)
        last = len(self.theta) - 1
        keep = np.r_[0:last:2, last]  # both ends
        turns = winding_turns(self.theta[keep], values[keep], evaluate)
        return np.isfinite(turns) & (np.abs(turns - degree) < 0.05)


def _sample(n: int, ka, ca, kb, cb):
    """A and B at ``n`` equispaced angles on [0, π], plus 30 geometric ones into each end
    interval; returns (θ, A, B).

    F(θ) = Im(A·conj B) vanishes trivially at θ = 0 and π, so a crossing inside the first or
    last equispaced interval would show no sign change between samples.  Such crossings exist
    near ω = 1 when the lr-coefficient B dwarfs A there (large Δ; PipeMare Lemma 4: crossings
    approach ω = 1), e.g. PipeMare eq. 5 with τf = 1, τb = 0, Δ = 100 crosses at θ ≈ 0.0995 <
    π/31.  Geometric samples h·2^{-k} (k = 1..30) from each end resolve them down to ~1e-9·h.

    The equispaced samples are `HalfCircleGrid`'s (exact arguments; an FFT for many terms).
    """
    h = math.pi / (n - 1)
    near = h * 2.0 ** -np.arange(30, 0, -1)
    ends = np.concatenate((near, math.pi - near[::-1]))

    def merged(ks, cs):
        grid, tails = HalfCircleGrid(n, ks)(cs), on_circle(ends, ks, cs)
        return np.concatenate((grid[:1], tails[:30], grid[1:-1], tails[30:], grid[-1:]))

    theta = np.concatenate(([0.0], near, np.arange(1, n - 1) * h, math.pi - near[::-1], [math.pi]))
    return theta, merged(ka, ca), merged(kb, cb)


def _safe_newton(f_df, lo, hi, f_lo, f_hi, x, iterations: int = 60):
    """Vectorised safeguarded Newton for roots of f in brackets [lo, hi] (sign change).

    Newton steps from ``x`` (quadratic convergence: 2-4 steps from an interpolated start);
    a step leaving the bracket is replaced by bisection, and the bracket shrinks around the
    sign change every step, so it always converges.  Stops at machine precision.
    """
    for _ in range(iterations):
        fx, dfx = f_df(x)
        left = np.sign(fx) == np.sign(f_lo)  # root in [x, hi]
        lo, f_lo = np.where(left, x, lo), np.where(left, fx, f_lo)
        hi = np.where(left, hi, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_new = x - fx / dfx
        x_new = np.where(
            (x_new <= lo) | (x_new >= hi) | ~np.isfinite(x_new), 0.5 * (lo + hi), x_new
        )
        done = (fx == 0) | (np.abs(x_new - x) <= 2 * _EPS * np.abs(x)) | (hi - lo <= 4 * _EPS * hi)
        x = np.where(fx == 0, x, x_new)
        if np.all(done):
            break
    return x


class _Pair:
    """A(e^{iθ}) and B(e^{iθ}) evaluated together (one cos/sin pass) at paired (θ, column)."""

    def __init__(self, ka, ca, kb, cb):
        self.k = np.concatenate([ka, kb])
        self.c = np.concatenate([ca, cb])
        self.split = len(ka)

    def _terms(self, theta, cols):
        """cos and sin parts of every term c_k·e^{ikθ} (rows: θ; columns: terms of A, then B)."""
        x = np.multiply.outer(theta, self.k)
        c = self.c[:, cols].T
        return np.cos(x) * c, np.sin(x) * c

    def _sums(self, re, im):
        n = self.split
        a = re[:, :n].sum(axis=1) + 1j * im[:, :n].sum(axis=1)
        b = re[:, n:].sum(axis=1) + 1j * im[:, n:].sum(axis=1)
        return a, b

    def at(self, theta, cols):
        """(A(e^{iθ}), B(e^{iθ}))."""
        return self._sums(*self._terms(theta, cols))

    def f_df(self, theta, cols):
        """F(θ) = Im(A·conj B), zero where lr(θ) is real, and dF/dθ."""
        re, im = self._terms(theta, cols)
        a, b = self._sums(re, im)
        da, db = self._sums(-im * self.k, re * self.k)  # d/dθ c·e^{ikθ} = i·k·c·e^{ikθ}
        return np.imag(a * np.conj(b)), np.imag(da * np.conj(b) + a * np.conj(db))

    def lr(self, theta, cols):
        """lr(θ) = −Re(A·conj B)/|B|² (exact where F(θ) = 0); inf where B = 0."""
        a, b = self.at(theta, cols)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = -np.real(a * np.conj(b)) / np.abs(b) ** 2
        return np.where(np.isfinite(lr), lr, np.inf)


def _mp_refine(ka, ca, kb, cb, theta: float, digits: int = 40) -> tuple[float, float]:
    """Newton (secant) on F(θ) = Im(A·conj B) in mpmath, then lr(θ); falls back on failure."""
    import mpmath

    def parts(t):
        w = mpmath.expj(t)
        a = mpmath.fsum(mpmath.mpf(float(c)) * w ** int(k) for k, c in zip(ka, ca, strict=True))
        b = mpmath.fsum(mpmath.mpf(float(c)) * w ** int(k) for k, c in zip(kb, cb, strict=True))
        return a * mpmath.conj(b), abs(b) ** 2

    with mpmath.workdps(digits):
        try:
            t = mpmath.findroot(lambda t: mpmath.im(parts(t)[0]), mpmath.mpf(theta), tol=1e-30)
        except (ValueError, ZeroDivisionError):
            t = mpmath.mpf(theta)
        if abs(t - theta) > 1e-9 * max(1.0, theta):  # wandered to another crossing
            t = mpmath.mpf(theta)
        ab, bb = parts(t)
        return float(-mpmath.re(ab) / bb), float(t)


# -- bisection on the spectral radius ------------------------------------------------------


def _radius(cp: CharacteristicPolynomial, lr: Any) -> np.ndarray:
    return spectral_radius(cp.at(lr).normalized().dense())


def check_searches(rule: Rule, searches: int, what: str) -> None:
    """Refuse, naming tau, ``searches`` max lrs (``what`` they are, e.g. ``"one per mode"``) of
    a rule not affine in lr — each a search on dense eigenvalues (`_bisection`) — beyond
    `stability.limits.NONAFFINE_SEARCH_MAX_WORK` searches × degree³."""
    from stability.limits import NONAFFINE_SEARCH_MAX_WORK

    cp = characteristic_polynomial(rule, QuadraticModel(1.0))
    work = searches * float(cp.degree) ** 3
    if not cp.is_affine and work > NONAFFINE_SEARCH_MAX_WORK:
        raise ValueError(
            f"tau: a rule not affine in lr takes {searches} max-lr searches on dense eigenvalues "
            f"({what}), searches × degree³ = {searches} × {cp.degree}³ = {work:.2e}, at most "
            f"{NONAFFINE_SEARCH_MAX_WORK:.1e} (docs/limits.md): a shorter delay"
        )


def _bisection(cp: CharacteristicPolynomial) -> MaxLr:
    """First lr with spectral radius ≥ 1 on a log grid (evaluated upwards until that point),
    refined by Brent's method and certified (module doc)."""
    from scipy.optimize import brentq

    from stability.limits import BISECTION_MAX_DEGREE

    if cp.degree > BISECTION_MAX_DEGREE:
        raise ValueError(
            f"tau: the max lr of a rule not affine in lr is searched on dense eigenvalues, of "
            f"degree at most {BISECTION_MAX_DEGREE} (docs/limits.md); this delay makes degree "
            f"{cp.degree}"
        )
    if len(cp.parts) == 1:  # lr does not enter the dynamics
        stable = _radius(cp, 1.0) < 1
        return MaxLr(None if stable else 0.0, None, "bisection (lr-independent)")
    # lr is scanned over 18 decades around its natural scale 1/max|C_j| (lr·|C_j| ~ 1)
    scale = 1.0 / max(float(np.max(np.abs(c))) for p in cp.parts[1:] for c in p.terms.values())
    grid = scale * np.logspace(-9, 9, 181)
    i = _first_unstable(grid, lambda lrs: _radius(cp, lrs) < 1)
    if i is None:
        return MaxLr(None, None, "bisection")
    if i == 0:
        return MaxLr(0.0, None, "bisection (not stable for small lr > 0)")
    # Brent's method on ρ(lr) − 1 (continuous in lr; bisection steps safeguard it) to 4 eps
    found = brentq(
        lambda lr: float(_radius(cp, lr)) - 1.0, grid[i - 1], grid[i], xtol=1e-300, rtol=4 * _EPS
    )
    for margin in _CERTIFY_MARGINS:
        below = dominant_root(cp.at(found * (1 - margin)))
        above = dominant_root(cp.at(found * (1 + margin)))
        if below.radius < 1 <= above.radius:
            how = "certified" if margin == _CERTIFY_MARGINS[0] else f"certified to {margin:.0e}"
            angle = abs(math.atan2(above.root.imag, above.root.real))
            return MaxLr(found, angle, f"bisection ({how})")
    if _radius(cp, grid[0]) >= 1 - _MARGINAL:  # a root on |ω| = 1 at every small lr (momentum 1)
        return MaxLr(0.0, None, "bisection (marginal: a root stays on |ω| = 1 for small lr > 0)")
    raise UnresolvedCrossing(False, "max lr: bisection could not certify the threshold")


_MARGINAL = 1e-12
"""ρ within this of 1 at the smallest lr of the grid: a root on the unit circle (module doc)."""


# -- periodic rules (Floquet) ------------------------------------------------------------------

_FLOQUET_GRID = np.logspace(-8, 8, 161)
_SCAN_CHUNK = 16  # grid points evaluated together, in increasing order


def _first_unstable(grid: np.ndarray, stable) -> int | None:
    """Index of the first point of ``grid`` where the batched predicate ``stable`` is false,
    evaluated upwards in chunks of `_SCAN_CHUNK` and stopping there (the points above the
    first instability are never computed); None if it holds everywhere."""
    for start in range(0, grid.size, _SCAN_CHUNK):
        ok = np.asarray(stable(grid[start : start + _SCAN_CHUNK]))
        if not ok.all():
            return start + int(np.argmin(ok))
    return None


_TRACK_FROM = 1e-6  # relative bracket width below which the crossing multiplier is tracked


def check_finite(parts: Sequence[SparsePoly], model: QuadraticModel, rule: Rule) -> None:
    """Refuse (`ValueError`, naming lam and the rule's parameters) a polynomial whose float
    coefficients (in ``parts``) overflowed: e.g. LWP-v's lr² coefficient ~λ²·T is NaN at
    λ = 1e150, T = 1e12, and LWP's λ·T·s is inf at a horizon scale s = 1e308: no lr can be
    judged."""
    for part in parts:
        for c in part.terms.values():
            try:
                finite = np.all(np.isfinite(np.asarray(c, dtype=float)))
            except TypeError:  # exact or symbolic coefficients cannot overflow
                continue
            if not finite:
                raise ValueError(
                    f"lam: the characteristic polynomial overflows float64 at lam = "
                    f"{np.max(np.abs(model.lam)):.6g} with {_parameters(rule)} (a coefficient "
                    "is inf or NaN); use a smaller lam (max lr scales as 1/lam when the rule "
                    "depends on lr·lam only) or smaller scale parameters"
                )


def _floquet_max_lr(rule: Rule, model: QuadraticModel, where: str) -> MaxLr:
    """First lr > 0 at which a Floquet multiplier of a periodic rule reaches |μ| = 1.

    The grid is lr·s from 1e-8 to 1e8, s the largest coefficient of the model's gradient oracle
    (λ + Δ, Δ − Φ, Φ: PipeMare App. D.1), since the dynamics depend on lr only through lr·s (an
    absolute grid answered 0 for λ = 1e-20 and 1e20).  None: stable on the whole grid; 0.0: not
    stable even at lr·s = 1e-8.  The log grid is scanned upwards (batches of `_SCAN_CHUNK`
    points) up to its first unstable point, which is bisected to 1e-6, then the multiplier that
    crosses is followed (Newton from its value at the upper end) and |μ(lr)| = 1 is solved by
    the Illinois method to ~4 ulp; the bracket is certified by evaluating just below (stable)
    and just above (ρ(M) ≥ 1).  Stability comes from `stability.spectrum.floquet_stable`: for
    round-robin rules (EA-Pipe) the number of zeros of their characteristic function inside the
    unit circle (`stability.dynamics.round_robin`, O(τ) per lr, no eigensolver); otherwise from
    float64 eigenvalues of the dense monodromy, whose products over long periods can lose
    relative accuracy ~P·eps·cond(eigenvectors) near a defective multiplier, which the
    certificate reports by raising instead of returning a wrong bracket.

    ``crossing_angle`` is the argument of the per-period multiplier μ = e^{iθ} that reaches
    the unit circle (π: a period-doubling flip, 0: a real multiplier at 1).  ``where``: the
    parameter values a refusal names.
    """
    if getattr(rule, "marginal", False):  # a multiplier exactly 1 at every lr (EA-Pipe, α = 0)
        return MaxLr(0.0, None, "Floquet (a multiplier at 1 for every lr: not stable for lr > 0)")
    coefficients = (model.lam + model.delta, model.delta - model.phi, model.phi)
    grid = _FLOQUET_GRID / max(abs(float(c)) for c in coefficients)
    i = _first_unstable(grid, lambda lrs: floquet_stable(rule, model, lrs))
    if i is None:
        return MaxLr(None, None, "Floquet bisection")
    if i == 0:  # not stable for small lr, unless that is rounding (stable further up)
        near = abs(dominant_multiplier(rule, model, grid[0])) < 1.0 + _NEAR_DOUBLE
        if near and floquet_stable(rule, model, grid[1:]).any():
            raise UnresolvedCrossing(False, _FLOQUET_UNRESOLVED).refusal(where)
        return MaxLr(0.0, None, "Floquet bisection (not stable for small lr > 0)")
    lo, hi = float(grid[i - 1]), float(grid[i])
    while hi - lo > _TRACK_FROM * hi:
        mid = 0.5 * (lo + hi)
        if floquet_stable(rule, model, mid)[0]:
            lo = mid
        else:
            hi = mid
    lo, hi = _track_crossing(rule, model, lo, hi)
    for margin in _CERTIFY_MARGINS:
        below = floquet_stable(rule, model, lo * (1 - margin))[0]
        above = dominant_multiplier(rule, model, hi * (1 + margin))
        if below and abs(above) >= 1.0 + _RESOLVED_MULTIPLIER:
            how = "certified" if margin == _CERTIFY_MARGINS[0] else f"certified to {margin:.0e}"
            angle = abs(math.atan2(above.imag, above.real))
            return MaxLr(hi, angle, f"Floquet bisection ({how})")
    raise UnresolvedCrossing(False, _FLOQUET_UNRESOLVED).refusal(where)


def floquet_stable_below(rule: Rule, model: QuadraticModel, bound: float) -> bool:
    """True when the max lr of a periodic rule on ``model`` (`_floquet_max_lr`) is ≥ ``bound``
    to 1e-9 relative: stable at every point of its scan grid below ``bound`` and at
    ``bound``·(1 − 1e-9), so its first unstable grid point lies above ``bound`` and the
    crossing bisected below that point is not below ``bound``·(1 − 1e-9) (the scan's own
    assumption: stability does not change between two stable points of a bracket)."""
    if getattr(rule, "marginal", False) or not bound > 0:
        return False
    coefficients = (model.lam + model.delta, model.delta - model.phi, model.phi)
    grid = _FLOQUET_GRID / max(abs(float(c)) for c in coefficients)
    points = np.append(grid[grid < bound], bound * (1 - _CERTIFY_MARGINS[0]))
    return bool(np.all(floquet_stable(rule, model, points)))


_FLOQUET_UNRESOLVED = "max lr: the Floquet scan could not certify where stability is lost"
_RESOLVED_MULTIPLIER = 1e-13
"""A certified crossing needs |μ| ≥ 1 + this just above it: at an EA-Pipe elastic force
α = 1e-9 a multiplier within float64's rounding of 1 gave a "certified" crossing at lr
2.5e-9, where the max lr is ~2/λ."""
_NEAR_DOUBLE = 1e-7
"""The scan's "not stable for small lr" stands unless the largest multiplier there is within
this (~7√ε: a near-double multiplier's float64 accuracy) of the circle and some larger lr is
stable: EA-Pipe at α = 3e-9, lr·λ = 1e-8 has two multipliers ~4e-9 apart near 1 − 1e-8,
one computed at 1 + 1.8e-8 (answered 0; the max lr is ~2/λ)."""
_CERTIFY_MARGINS = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5)
"""Relative offsets at which stability below and instability above the bracket are checked.
A nearly double multiplier on the circle (two multipliers ~1e-6 apart at −1: EA-Pipe with a
small elastic force near lr·λ = 2) is resolved by float64 only to ~√ε in |μ|, so 1e-9 cannot
be certified there; the first offset that can is reported in ``method``."""


def _bisect_stable(rule, model, lo: float, hi: float) -> tuple[float, float]:
    """Plain bisection on `floquet_stable` to ~4 ulp (stable at lo, not at hi)."""
    while hi - lo > 4 * _EPS * hi:
        mid = 0.5 * (lo + hi)
        if floquet_stable(rule, model, mid)[0]:
            lo = mid
        else:
            hi = mid
    return lo, hi


def _track_crossing(rule, model, lo: float, hi: float) -> tuple[float, float]:
    """Shrink [lo, hi] (stable at lo, not at hi) to ~4 ulp around |μ(lr)| = 1, μ(lr) the
    dominant multiplier at hi followed by Newton (Illinois method on log|μ|)."""
    mu = dominant_multiplier(rule, model, hi)

    def g(lr):
        nonlocal mu
        mu = follow_multiplier(rule, model, lr, mu)
        return math.log(abs(mu)) if mu != 0 else -math.inf

    g_hi = g(hi)
    g_lo = g(lo)
    if not (g_lo < 0 <= g_hi):  # the followed multiplier does not cross here
        return _bisect_stable(rule, model, lo, hi)
    for _ in range(100):
        if hi - lo <= 4 * _EPS * hi:
            break
        guard = 1e-3 * (hi - lo)  # keep the secant point inside the bracket
        mid = min(max(hi - g_hi * (hi - lo) / (g_hi - g_lo), lo + guard), hi - guard)
        g_mid = g(mid)
        if g_mid < 0 and not floquet_stable(rule, model, mid)[0]:
            # the followed multiplier is not the one crossing (two met at a branch point and
            # Newton followed the inner one): fall back to the stability count
            return _bisect_stable(rule, model, lo, hi)
        if g_mid >= 0:
            hi, g_hi, g_lo = mid, g_mid, 0.5 * g_lo
        else:
            lo, g_lo, g_hi = mid, g_mid, 0.5 * g_hi
    return lo, hi
