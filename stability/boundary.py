"""Exact maximal stable step size: the first lr > 0 at which a root reaches the unit circle.

**Boundary locus (D-decomposition)**, for polynomials affine in lr, p(ω) = A(ω) + lr·B(ω):
a root sits on the unit circle at ω = e^{iθ} exactly when lr = −A(e^{iθ})/B(e^{iθ}) is real,
i.e. when F(θ) = Im(A·conj B) = 0, and then lr(θ) = −Re(A·conj B)/|B|².  This is how PipeMare
proves Lemma 1 (App. B.1, with the substitution ω = (1 − iy)/(1 + iy)); here it is done
numerically for every rule:

1. sample θ ∈ [0, π] (the lower half mirrors it) at 8 points per unit of degree, evaluating
   the *sparse* A and B — O(d·terms), so max-lr costs O(τ), not the O(τ³) of eigenvalues;
2. every sign change of F brackets a crossing; the endpoints θ = 0, π (real roots ±1) are
   candidates too; the first crossing is not always near ω = 1 (hence the whole half circle);
3. the brackets whose interpolated lr is within 5 % of the smallest positive one are refined
   by bisection to machine precision, and (``precise=True``) the winner by Newton in mpmath;
4. the system must be stable on (0, lr₁): checked at lr₁/2 (the count of roots inside only
   changes at crossings), by companion eigenvalues or, at large degree, the argument
   principle.  If it is not, no lr > 0 is stable and the result is 0.

If no crossing exists the rule is stable for every lr > 0 (``max_lr`` is None) or for none.

**Bisection** (any rule, including those whose polynomial is not affine in lr): the first
lr on a log grid whose spectral radius is ≥ 1, bisected on the radius and certified by the
high-precision radius (`stability.spectrum.dominant_root`) just below and above.

Both are checked against each other and against python-control and numpy-roots bisection in
the tests and benchmarks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.linear import CharacteristicPolynomial, characteristic_polynomial
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.base import Rule
from stability.spectrum import DENSE_MAX_DEGREE, dominant_root, roots_inside, spectral_radius

_EPS = np.finfo(float).eps
_MARGINAL = 1e-12  # radius ≥ 1 − this counts as not stable when checking (0, lr₁)


@dataclass(frozen=True)
class MaxLr:
    """Result of `max_lr`.

    ``max_lr``: the first lr > 0 at which a root reaches the unit circle; ``None`` if the
    rule is stable for every lr > 0; ``0.0`` if it is stable for no lr > 0.
    ``crossing_angle``: the argument θ ∈ [0, π] of the root ω = e^{iθ} on the unit circle
    there (``None`` without a crossing).  ``method``: how it was computed.
    """

    max_lr: float | None
    crossing_angle: float | None
    method: str


def max_lr(
    rule: Rule, model: QuadraticModel, *, method: str = "auto", precise: bool = True
) -> MaxLr:
    """Exact maximal stable step size of ``rule`` on ``model`` (one parameter point).

    ``method``: ``"auto"`` (boundary locus when the polynomial is affine in lr, else
    bisection), ``"locus"`` or ``"bisection"``.
    """
    cp = characteristic_polynomial(rule, model)
    if method == "auto":
        method = "locus" if cp.is_affine else "bisection"
    if method == "locus":
        if not cp.is_affine:
            raise ValueError("the boundary locus needs a polynomial affine in lr; use bisection")
        lr, theta = _locus(*_affine_parts(cp), precise=precise)
        return _result(float(lr[0]), float(theta[0]), "boundary locus")
    if method == "bisection":
        return _bisection(cp)
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
    A, B = _affine_parts(cp)
    grid = np.broadcast_shapes(*(np.shape(c) for p in (A, B) for c in p.terms.values()))
    lr, theta = _locus(A, B, precise=False)
    return lr.reshape(grid), theta.reshape(grid)


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


def _evaluate(ks: np.ndarray, cs: np.ndarray, theta: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Σ_k c_k[col] e^{ikθ} for paired (θ, col) arrays."""
    return np.einsum("nk,kn->n", np.exp(1j * np.outer(theta, ks)), cs[:, cols])


def _locus(A: SparsePoly, B: SparsePoly, *, precise: bool) -> tuple[np.ndarray, np.ndarray]:
    """First positive crossing lr and its angle for each grid point (flattened)."""
    grid = np.broadcast_shapes(*(np.shape(c) for p in (A, B) for c in p.terms.values()))
    ka, ca = _stack(A, grid)
    kb, cb = _stack(B, grid)
    m_total = ca.shape[1]
    degree = int(max(ka.max(), kb.max()))
    n = 8 * (degree + 2)

    best_lr = np.full(m_total, np.inf)
    best_theta = np.full(m_total, np.nan)

    # endpoints θ = 0 and θ = π: real roots ω = ±1 (skip exact structural zeros A(±1) = 0)
    for theta0, sign in ((0.0, 1.0), (math.pi, -1.0)):
        wa, wb = sign**ka, sign**kb
        a_val, b_val = wa @ ca, wb @ cb
        a_scale = np.abs(wa) @ np.abs(ca)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr0 = np.where(
                (np.abs(a_val) > 64 * _EPS * a_scale) & (b_val != 0), -a_val / b_val, np.inf
            )
        take = (lr0 > 0) & (lr0 < best_lr)
        best_lr[take], best_theta[take] = lr0[take], theta0

    # interior crossings, in chunks of columns to bound memory
    theta = np.linspace(0.0, math.pi, n)
    ea, eb = np.exp(1j * np.outer(theta, ka)), np.exp(1j * np.outer(theta, kb))
    chunk = max(1, 4_000_000 // n)
    brackets_j, brackets_m = [], []
    for start in range(0, m_total, chunk):
        cols = slice(start, min(start + chunk, m_total))
        f = np.imag((ea @ ca[:, cols]) * np.conj(eb @ cb[:, cols]))
        s = np.sign(f[1:-1])  # θ = 0 and π are F's trivial zeros
        j, m = np.nonzero((s[:-1] * s[1:] < 0) | (s[:-1] == 0))
        brackets_j.append(j + 1)
        brackets_m.append(m + start)
    bj, bm = np.concatenate(brackets_j), np.concatenate(brackets_m)
    if bj.size:
        lo, hi = theta[bj], theta[bj + 1]
        f_lo = _f(ka, ca, kb, cb, lo, bm)
        f_hi = _f(ka, ca, kb, cb, hi, bm)
        with np.errstate(divide="ignore", invalid="ignore"):
            guess = np.where(f_hi != f_lo, lo - f_lo * (hi - lo) / (f_hi - f_lo), lo)
        lr_guess = _lr_at(ka, ca, kb, cb, guess, bm)
        positive = np.where(lr_guess > 0, lr_guess, np.inf)
        row_min = np.full(m_total, np.inf)
        np.minimum.at(row_min, bm, positive)
        row_min = np.minimum(row_min, best_lr)
        keep = positive <= row_min[bm] * 1.05
        lo, hi, f_lo, bm_k = lo[keep], hi[keep], f_lo[keep], bm[keep]
        for _ in range(60):  # bisection on F to machine precision
            mid = 0.5 * (lo + hi)
            f_mid = _f(ka, ca, kb, cb, mid, bm_k)
            left = np.sign(f_mid) == np.sign(f_lo)
            lo = np.where(left, mid, lo)
            f_lo = np.where(left, f_mid, f_lo)
            hi = np.where(left, hi, mid)
        root = 0.5 * (lo + hi)
        lr_root = _lr_at(ka, ca, kb, cb, root, bm_k)
        for lr_v, th, m in zip(lr_root, root, bm_k, strict=True):
            if 0 < lr_v < best_lr[m]:
                best_lr[m], best_theta[m] = lr_v, th

    if precise:
        for m in np.flatnonzero(np.isfinite(best_lr) & (best_theta > 0) & (best_theta < math.pi)):
            best_lr[m], best_theta[m] = _mp_refine(ka, ca[:, m], kb, cb[:, m], best_theta[m])

    # stability on (0, lr₁): one check at lr₁/2 (or at lr = 1 when there is no crossing)
    test_lr = np.where(np.isfinite(best_lr), 0.5 * best_lr, 1.0)
    stable = _stable_at(ka, ca, kb, cb, test_lr, degree)
    best_lr = np.where(stable, best_lr, 0.0)
    best_theta = np.where(stable, best_theta, np.nan)
    return best_lr, best_theta


def _f(ka, ca, kb, cb, theta, cols):
    a, b = _evaluate(ka, ca, theta, cols), _evaluate(kb, cb, theta, cols)
    return np.imag(a * np.conj(b))


def _lr_at(ka, ca, kb, cb, theta, cols):
    """lr(θ) = −Re(A·conj B)/|B|² (exact where F(θ) = 0)."""
    a, b = _evaluate(ka, ca, theta, cols), _evaluate(kb, cb, theta, cols)
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


def _stable_at(ka, ca, kb, cb, lr, degree) -> np.ndarray:
    """All roots strictly inside the unit circle for p = A + lr·B, per column."""
    n_cols = ca.shape[1]
    dense = np.zeros((degree + 1, n_cols))
    dense[degree - ka] += ca
    np.add.at(dense, degree - kb, cb * lr)
    if degree <= DENSE_MAX_DEGREE:
        return spectral_radius(dense) < 1 - _MARGINAL
    out = np.empty(n_cols, dtype=bool)
    for m in range(n_cols):
        nz = np.flatnonzero(dense[:, m])
        out[m] = roots_inside(degree - nz, dense[nz, m], 1.0) == degree
    return out


# -- bisection on the spectral radius ------------------------------------------------------


def _radius(cp: CharacteristicPolynomial, lr: Any) -> np.ndarray:
    return spectral_radius(cp.at(lr).normalized().dense())


def _bisection(cp: CharacteristicPolynomial) -> MaxLr:
    """First lr with spectral radius ≥ 1 on a log grid, bisected and certified (module doc)."""
    if cp.degree > DENSE_MAX_DEGREE:
        raise ValueError(
            f"bisection needs dense eigenvalues; degree {cp.degree} > {DENSE_MAX_DEGREE}"
        )
    grid = np.logspace(-12, 12, 241)
    rho = _radius(cp, grid)
    unstable = np.flatnonzero(rho >= 1 - _MARGINAL)
    if unstable.size == 0:
        return MaxLr(None, None, "bisection")
    i = unstable[0]
    if i == 0:
        return MaxLr(0.0, None, "bisection (not stable for small lr > 0)")
    lo, hi = grid[i - 1], grid[i]
    while hi - lo > 4 * _EPS * hi:
        mid = 0.5 * (lo + hi)
        if _radius(cp, mid) >= 1:
            hi = mid
        else:
            lo = mid
    below = dominant_root(cp.at(lo * (1 - 1e-9)))
    above = dominant_root(cp.at(hi * (1 + 1e-9)))
    if not (below.radius < 1 <= above.radius):
        raise ArithmeticError("bisection could not certify the stability threshold")
    return MaxLr(hi, abs(math.atan2(above.root.imag, above.root.real)), "bisection (certified)")
