"""Roots, spectral radius, dominant root and half-life of characteristic polynomials.

Two paths:

* **Grids** (`roots`, `spectral_radius`): dense coefficients, highest degree first, shape
  ``(d + 1, *grid)``; roots are the eigenvalues of the companion matrices, computed for the
  whole grid in one batched `numpy.linalg.eigvals` call (as `numpy.roots` does one at a time).
* **One point, high precision** (`dominant_root`): float64 roots first, then the dominant
  ones refined in mpmath (40 digits) on the exact float coefficients.

Numerics notes (when float64 roots are unreliable and what is done):

* Companion eigenvalues are backward stable: each root is exact for coefficients perturbed by
  ~eps·‖p‖.  A simple root moves by that over |p'(root)|, ~1e-15 here; a k-fold (or nearly
  k-fold) root moves by ~eps^{1/k}: ~1e-8 at the double root of PipeMare Lemma 1's fastest
  step, ~6e-6 at a triple root.  `dominant_root` therefore refines every root within 1e-4
  (relative) of the largest modulus, clusters included (Taylor expansion about the cluster
  centre, solved in mpmath, then Newton on the full polynomial), to 1e-30.
* Dense eigenvalues cost O(d³): above `DENSE_MAX_DEGREE` (delays of several hundred)
  `dominant_root` locates the largest modulus by the argument principle instead — the number
  of roots inside |ω| = r is the winding number of p(r·e^{iθ}), evaluated on the sparse
  polynomial in O(d·terms) — bisects r, and polishes the root found there by Newton.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.dynamics.linear import characteristic_polynomial
from stability.dynamics.monodromy import monodromy, period_of
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.base import Rule

DENSE_MAX_DEGREE = 400
"""Largest degree for which `dominant_root` uses dense companion eigenvalues."""

_BAND = 1e-4  # roots within this relative distance of the largest modulus are refined


def _monic_last_axis(coeffs: np.ndarray) -> np.ndarray:
    c = np.moveaxis(np.asarray(coeffs), 0, -1)
    if np.any(c[..., 0] == 0):
        raise ValueError("leading coefficient is zero (coefficients are highest degree first)")
    return c[..., 1:] / c[..., :1]


def companion(coeffs: np.ndarray) -> np.ndarray:
    """Companion matrices of polynomials given highest degree first, shape ``(d+1, *grid)``.

    Returns shape ``(*grid, d, d)``: first row −c[1:]/c[0], ones on the subdiagonal (the
    layout of PipeMare Sec. 3.1's companion matrix), whose eigenvalues are the roots.
    """
    c = _monic_last_axis(coeffs)
    d = c.shape[-1]
    out = np.zeros((*c.shape[:-1], d, d), dtype=np.result_type(c, float))
    out[..., 0, :] = -c
    idx = np.arange(1, d)
    out[..., idx, idx - 1] = 1.0
    return out


_THREADED_BATCH = 4096  # batches at least this large are split across the cores


def roots(coeffs: np.ndarray) -> np.ndarray:
    """All roots, shape ``(*grid, d)``, from batched companion eigenvalues.

    Large grids are split across the available cores (LAPACK releases the GIL, so threads
    run in parallel): 1.5× faster on two cores for a 256 × 256 heatmap.
    """
    c = np.asarray(coeffs)
    if c.shape[0] <= 1:
        return np.zeros((*c.shape[1:], 0), dtype=complex)
    mats = companion(c)
    workers = min(len(os.sched_getaffinity(0)), mats[..., 0, 0].size // _THREADED_BATCH)
    if workers < 2:
        return np.linalg.eigvals(mats)
    flat = mats.reshape(-1, *mats.shape[-2:])
    with ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(np.linalg.eigvals, np.array_split(flat, workers)))
    return np.concatenate(parts).reshape(*mats.shape[:-1])


def spectral_radius(coeffs: np.ndarray) -> np.ndarray:
    """max |root| for each polynomial of a grid (coefficients highest degree first)."""
    r = roots(coeffs)
    if r.shape[-1] == 0:
        return np.zeros(r.shape[:-1])
    return np.max(np.abs(r), axis=-1)


def half_life(radius: Any) -> Any:
    """−ln 2 / ln ρ steps (Kosson Sec. 3.4): how long the error takes to halve.

    Scalars: ``None`` when ρ ≥ 1 (the error never halves), 0 when ρ = 0.  Arrays: ``inf``
    where ρ ≥ 1.
    """
    rho = np.asarray(radius, dtype=float)
    with np.errstate(divide="ignore"):
        h = np.where(rho >= 1, np.inf, np.where(rho <= 0, 0.0, -math.log(2) / np.log(rho)))
    if h.ndim == 0:
        return None if math.isinf(h) else float(h)
    return h


# -- one point, high precision -------------------------------------------------------------


@dataclass(frozen=True)
class DominantRoot:
    """The root of largest modulus of one polynomial (upper half-plane member of a pair)."""

    root: complex
    radius: float
    method: str


def dominant_root(poly: SparsePoly, digits: int = 40) -> DominantRoot:
    """Largest-modulus root of a numeric `SparsePoly` (normalized), refined to ``digits``.

    See the module notes for the float64 failure modes this guards against.
    """
    import mpmath

    poly = poly.normalized()
    d = poly.degree
    if d == 0:
        return DominantRoot(0j, 0.0, "constant")
    exps, coeffs = poly.sparse_arrays()
    if coeffs.ndim != 1:
        raise ValueError("dominant_root takes one polynomial, not a grid")
    with mpmath.workdps(digits):
        if d <= DENSE_MAX_DEGREE:
            approx = roots(poly.dense())
            method = "companion eigenvalues + mpmath refinement"
        else:
            approx = np.array([_argument_principle_root(exps, coeffs)])
            method = "argument principle + mpmath refinement"
        refined = _refine_band(exps, coeffs, approx)
    best = max(refined, key=lambda z: (abs(z), z.imag))
    if best.imag < 0:
        best = best.conjugate()
    return DominantRoot(best, abs(best), method)


def _mp_eval(exps, coeffs, z, derivative: int = 0):
    import mpmath

    total = mpmath.mpc(0)
    for k, c in zip(exps, coeffs, strict=True):
        k = int(k)
        if k < derivative:
            continue
        factor = math.prod(range(k - derivative + 1, k + 1))
        total += mpmath.mpf(float(c)) * factor * z ** (k - derivative)
    return total


def _newton(exps, coeffs, z, iterations: int = 80):
    import mpmath

    tol = mpmath.mpf(10) ** (-mpmath.mp.dps + 5)
    for _ in range(iterations):
        p, dp = _mp_eval(exps, coeffs, z), _mp_eval(exps, coeffs, z, 1)
        if dp == 0:
            break
        step = p / dp
        z -= step
        if abs(step) <= tol * max(1, abs(z)):
            break
    return z


def _refine_band(exps, coeffs, approx: np.ndarray) -> list[complex]:
    """Refine the float roots within `_BAND` of the largest modulus, clusters together."""
    import mpmath

    rho = np.max(np.abs(approx))
    band = approx[np.abs(approx) >= rho * (1 - _BAND) - 1e-300]
    band = band[band.imag >= -1e-12 * max(rho, 1e-300)]  # one of each conjugate pair
    clusters: list[list[complex]] = []
    for z in sorted(band, key=lambda z: (z.real, z.imag)):
        for cl in clusters:
            if abs(z - cl[0]) <= 1e-5 * max(abs(z), 1e-300):
                cl.append(z)
                break
        else:
            clusters.append([z])
    # conjugates of upper-half cluster members may belong to a real cluster: add them back
    out: list[complex] = []
    for cl in clusters:
        center = complex(np.mean(cl))
        if abs(center.imag) <= 1e-5 * max(abs(center), 1e-300):
            size = int(np.sum(np.abs(approx - center) <= 1e-5 * max(abs(center), 1e-300)))
        else:
            size = len(cl)
        if size == 1:
            z = _newton(exps, coeffs, mpmath.mpc(cl[0]))
            out.append(complex(z))
            continue
        # Taylor expansion of p about the centre; its `size` smallest roots are the cluster
        c0 = mpmath.mpc(center)
        order = size + 2
        taylor = [_mp_eval(exps, coeffs, c0, j) / math.factorial(j) for j in range(order, -1, -1)]
        while taylor and taylor[0] == 0:
            taylor.pop(0)
        local = mpmath.polyroots(taylor, maxsteps=200, extraprec=4 * mpmath.mp.prec)
        local = sorted(local, key=abs)[:size]
        out.extend(complex(c0 + x) for x in local)
    return out


def _scaled_terms(exps, coeffs, r: float):
    """Coefficients times r^k, rescaled by their largest magnitude (no overflow at large k)."""
    with np.errstate(divide="ignore"):
        logs = np.log(np.abs(coeffs)) + exps * math.log(r)
    return np.sign(coeffs) * np.exp(logs - np.max(logs))


def on_circle(theta: np.ndarray, exps: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """Σ_k c_k·e^{ikθ} for real coefficients: shape (len(θ),) or (len(θ), M) for (K, M) c_k.

    Computed as cos(kθ)·c + i·sin(kθ)·c with real matrix products: complex ``exp`` and
    complex-by-real ``matmul`` are each several times slower (the latter by 100× here).
    """
    x = np.multiply.outer(theta, exps)
    return (np.cos(x) @ coeffs) + 1j * (np.sin(x) @ coeffs)


_MAX_TURN = 1.0  # rad: a sample interval over which the phase turns more is subdivided


def winding_turns(theta: np.ndarray, values: np.ndarray, evaluate) -> np.ndarray:
    """Phase change of f along θ, in units of π, for each column of samples (n, M).

    ``values[i, m]`` = f_m(θ_i); ``evaluate(t, cols)`` gives f_cols(t) at paired arrays.
    Every interval where the phase turns by more than 1 rad is split in 8, recursively and
    only there, so a zero of f close to the path costs a few samples near it instead of a
    finer grid everywhere.  Columns with a zero on the path (to machine precision) are NaN.
    """
    values = values.reshape(len(theta), -1)
    turn = np.angle(values[1:] * np.conj(values[:-1]))
    bad = np.abs(turn) > _MAX_TURN
    total = np.where(bad, 0.0, turn).sum(axis=0)
    failed = np.any(values == 0, axis=0)
    i, col = np.nonzero(bad)
    lo, hi, v_lo, v_hi = theta[i], theta[i + 1], values[i, col], values[i + 1, col]
    split = np.linspace(0.0, 1.0, 9)
    for _ in range(60):
        if lo.size == 0:
            break
        tiny = hi - lo <= 8 * np.finfo(float).eps * np.maximum(np.abs(hi), 1.0)
        failed[col[tiny]] = True
        keep = ~tiny & ~failed[col]
        lo, hi, v_lo, v_hi, col = lo[keep], hi[keep], v_lo[keep], v_hi[keep], col[keep]
        t = lo[:, None] + (hi - lo)[:, None] * split[None, :]
        inner = evaluate(t[:, 1:-1].ravel(), np.repeat(col, 7)).reshape(len(lo), 7)
        failed[col[np.any(inner == 0, axis=1)]] = True
        v = np.concatenate([v_lo[:, None], inner, v_hi[:, None]], axis=1)
        sub = np.angle(v[:, 1:] * np.conj(v[:, :-1]))
        bad = np.abs(sub) > _MAX_TURN
        np.add.at(total, col, np.where(bad, 0.0, sub).sum(axis=1))
        j, k = np.nonzero(bad)
        lo, hi, v_lo, v_hi, col = t[j, k], t[j, k + 1], v[j, k], v[j, k + 1], col[j]
    else:
        failed[col] = True
    return np.where(failed, np.nan, total / math.pi)


def roots_inside(exps, coeffs, r: float, *, points: int | None = None) -> int:
    """Number of roots with |ω| < r, by the argument principle on the sparse polynomial.

    The phase of p(r·e^{iθ}) is followed over θ ∈ [0, π] (the other half mirrors it for real
    coefficients) from 8 samples per unit of degree, refined by `winding_turns`.  A root on
    the circle (to machine precision) raises `ArithmeticError`.
    """
    exps = np.asarray(exps)
    d = int(np.max(exps))
    scaled = _scaled_terms(exps, np.asarray(coeffs, dtype=float), r)
    theta = np.linspace(0.0, math.pi, points or 8 * d + 64)
    turns = winding_turns(
        theta, on_circle(theta, exps, scaled), lambda t, _cols: on_circle(t, exps, scaled)
    )[0]
    if not np.isfinite(turns) or abs(turns - round(turns)) > 0.05:
        raise ArithmeticError(f"a root lies on |ω| = {r!r} to within machine precision")
    return int(round(turns))


def _argument_principle_root(exps, coeffs) -> complex:
    """A root of largest modulus for a large sparse polynomial (module notes)."""
    d = int(np.max(exps))
    lead = coeffs[np.argmax(exps)]
    hi = 1.0 + float(np.max(np.abs(coeffs / lead)))  # Cauchy bound: all roots inside
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        try:
            inside = roots_inside(exps, coeffs, mid)
        except ArithmeticError:  # a root on this very circle: look just outside it
            mid *= 1 + 1e-9
            inside = roots_inside(exps, coeffs, mid)
        if inside == d:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-9 * hi:
            break
    # polish from the point of the circle where |p| is smallest
    n = 16 * d + 64
    theta = np.linspace(0.0, math.pi, n)
    r = 0.5 * (lo + hi)
    values = on_circle(theta, exps, _scaled_terms(exps, coeffs, r))
    z = r * np.exp(1j * theta[np.argmin(np.abs(values))])
    for _ in range(100):
        # p/p' with every term scaled by the largest, so z^k cannot overflow at large k
        logs = np.log(coeffs.astype(complex)) + exps * np.log(z)
        terms = np.exp(logs - np.max(logs.real))
        step = z * np.sum(terms) / np.sum(exps * terms)
        z -= step
        if abs(step) <= 1e-15 * abs(z):
            break
    return complex(z)


# -- rules: the rate at one step size ---------------------------------------------------------


def dominant_root_at(rule: Rule, model: QuadraticModel, lr: Any) -> DominantRoot:
    """Largest-modulus root of the rule's dynamics at one step size (per-step multiplier).

    The single entry point for "how fast does this rule converge at this lr": the CLI's
    ``radius`` and the certified bisection use it.  Periodic rules (``period`` > 1) give the
    per-step root μ^{1/P} of their dominant Floquet multiplier.
    """
    if period_of(rule) > 1:
        return _floquet_dominant_root(rule, model, lr)
    return dominant_root(characteristic_polynomial(rule, model).at(lr))


def floquet_multipliers(rule: Rule, model: QuadraticModel, lr: Any) -> np.ndarray:
    """Floquet multipliers: the eigenvalues of the monodromy matrix."""
    return np.linalg.eigvals(monodromy(rule, model, lr))


def floquet_radius(rule: Rule, model: QuadraticModel, lr: Any) -> np.ndarray:
    """ρ(M)^{1/P}: the average contraction per step (batched over ``lr``)."""
    rho = np.max(np.abs(floquet_multipliers(rule, model, lr)), axis=-1)
    return rho ** (1.0 / period_of(rule))


def _dominant_multiplier(rule: Rule, model: QuadraticModel, lr: float) -> complex:
    """The Floquet multiplier μ of largest modulus (upper half-plane member of a pair)."""
    mu = floquet_multipliers(rule, model, float(lr))
    return complex(mu[np.lexsort((mu.imag, np.abs(mu)))[-1]])


def _floquet_dominant_root(rule: Rule, model: QuadraticModel, lr: float) -> DominantRoot:
    """The per-step dominant root μ^{1/P} (principal branch) of the largest multiplier μ."""
    best = _dominant_multiplier(rule, model, lr)
    period = period_of(rule)
    root = best ** (1.0 / period) if best != 0 else 0j
    return DominantRoot(
        root, abs(best) ** (1.0 / period), f"Floquet monodromy (period {period}), ρ(M)^(1/P)"
    )
