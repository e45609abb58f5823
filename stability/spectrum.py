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
* Dense eigenvalues cost O(d³) time and O(d²) memory: above `DENSE_MAX_DEGREE` (delays of
  several hundred) `dominant_root`, and above `GRID_DENSE_MAX_DEGREE` the grid radii
  (`grid_radius`), locate the largest modulus by the argument principle instead
  (`stability.winding.largest_root`: the number of roots inside |ω| = r is the winding number
  of p(r·e^{iθ}), evaluated on the sparse polynomial in O(d·terms); bisection on r, then
  Newton): O(d·terms) time and memory per point.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.dynamics.linear import characteristic_polynomial
from stability.dynamics.monodromy import monodromy, period_of, state_layout
from stability.dynamics.round_robin import has_round_robin, round_robin_function
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.base import Rule
from stability.winding import (
    LargestRoot,
    SparseColumns,
    count_inside,
    dominant_column,
    largest_root,
    newton,
)

DENSE_MAX_DEGREE = 400
"""Largest degree for which `dominant_root` uses dense companion eigenvalues."""

GRID_DENSE_MAX_DEGREE = 64
"""Largest degree for which `grid_radius` uses batched companion eigenvalues (above it the
argument principle is faster for a batch: ~13 winding counts of 8·d samples per point)."""

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
    """All roots, shape ``(*grid, d)``, from batched companion eigenvalues, in the variable
    `root_scaled` chooses (the roots scaled back exactly).

    Large grids are split across the available cores (LAPACK releases the GIL, so threads
    run in parallel): 1.5× faster on two cores for a 256 × 256 heatmap.
    """
    c = np.asarray(coeffs)
    if c.shape[0] <= 1:
        return np.zeros((*c.shape[1:], 0), dtype=complex)
    c, scale = root_scaled(c)
    mats = companion(c)
    workers = min(len(os.sched_getaffinity(0)), mats[..., 0, 0].size // _THREADED_BATCH)
    if workers < 2:
        return np.linalg.eigvals(mats) * scale[..., None]
    flat = mats.reshape(-1, *mats.shape[-2:])
    with ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(np.linalg.eigvals, np.array_split(flat, workers)))
    return np.concatenate(parts).reshape(*mats.shape[:-1]) * scale[..., None]


def root_scaled(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ĉ, s): polynomials (highest degree first, shape ``(d + 1, *grid)``) in u = z/s, i.e.
    ĉ_j = c_j·s^(−j) for the coefficient of z^(d−j), with s = 2^e, e the rounded log2 of
    max_j |c_j/c_0|^(1/j) where that exceeds `_SCALE_FROM`, else s = 1 (no change).
    Fujiwara's bound (Fujiwara 1916, Tôhoku Math. J. 10; Marden, Geometry of Polynomials,
    §30) puts every root within 2·max_j |c_j/c_0|^(1/j), so the top roots have |u| ~ 1.

    Companion eigenvalues are exact for coefficients perturbed by ~ε·max|c| (relative to the
    leading one), which loses the top roots when the coefficients span many decades: `wp` at
    lr·λ ~ 1e148 and τ = 35 has coefficients 1 … 3e150 and roots up to 15172, and
    unscaled eigenvalues put its largest root at 0.948 (then refined in mpmath to the wrong
    root: `stability radius` said "stable").  In u the coefficients are O(1) and the roots
    agree with mpmath's to 1e-12.  Powers of two make the scaling exact."""
    d = c.shape[0] - 1
    exponent = np.zeros(c.shape[1:])
    if d >= 1:
        j = np.arange(1, d + 1).reshape(-1, *([1] * (c.ndim - 1)))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            bound = np.max((np.log2(np.abs(c[1:])) - np.log2(np.abs(c[:1]))) / j, axis=0)
        exponent = np.where(np.isfinite(bound) & (bound > _SCALE_FROM), np.round(bound), 0.0)
    powers = -np.arange(d + 1).reshape(-1, *([1] * (c.ndim - 1))) * exponent
    return c * np.exp2(powers), np.exp2(exponent)


_SCALE_FROM = 4.0  # log2 of the root bound above which `root_scaled` rescales (roots > 16)


def companion_root_error(c: np.ndarray, z: np.ndarray) -> np.ndarray:
    """100× the first-order float64 error of each companion root ``z[i]`` of the polynomial
    ``c[:, i]`` (highest degree first; solve in `root_scaled`'s variable for a meaningful
    estimate).

    Companion eigenvalues are backward stable in the matrix norm, i.e. exact for coefficients
    perturbed by ~ε·max|c| (monic; Edelman & Murakami 1995, "Polynomial roots from companion
    matrix eigenvalues", Math. Comp. 64); a root z then moves by
    ~ε·max|c|·Σ|z|^k/|p'(z)| (first order).  The
    actual error was at most 4.1× this on the momentum acceptance grid (docs/how-it-works.md),
    hence the factor 100.  Where it overflows float64 the estimate is inf, as an unknown
    error should be.
    """
    cc = c / c[0]
    dp = np.zeros(z.shape, dtype=complex)
    p = np.zeros(z.shape, dtype=complex)
    powers = np.zeros(z.shape)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for k in range(cc.shape[0]):  # Horner for p and p'
            dp = dp * z + p
            p = p * z + cc[k]
            powers = powers * np.abs(z) + 1.0
        err = ERROR_SAFETY * np.finfo(float).eps * np.max(np.abs(cc), axis=0) * powers / np.abs(dp)
    return np.where(np.isfinite(err), err, np.inf)


ERROR_SAFETY = 100.0
"""The factor of the float64 root-error estimates (`companion_root_error`, the heatmap's)."""


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


def grid_radius(poly: SparsePoly) -> np.ndarray:
    """ρ at every point of a grid-valued numeric `SparsePoly` (shape: the grid's).

    Batched companion eigenvalues up to `GRID_DENSE_MAX_DEGREE`, the argument principle above
    (module notes); both accurate to ~1e-13 relative for simple dominant roots, ~1e-8 at
    (near) double ones (use `dominant_root` to refine a point).
    """
    poly = poly.normalized()
    exps, coeffs = poly.sparse_arrays()
    grid = coeffs.shape[1:]
    if poly.degree <= GRID_DENSE_MAX_DEGREE:
        return spectral_radius(poly.dense())
    return largest_root(SparseColumns(exps, coeffs.reshape(exps.size, -1))).radius.reshape(grid)


def dominant_point(poly: SparsePoly) -> int:
    """Flat index of the grid point of a numeric `SparsePoly` with the largest ρ.

    Dense radii up to `GRID_DENSE_MAX_DEGREE`; above, `stability.winding.dominant_column`
    (bisection on the maximum, dropping the points below it: ~O(d·terms) per point once).
    """
    poly = poly.normalized()
    if poly.degree <= GRID_DENSE_MAX_DEGREE:
        return int(np.argmax(spectral_radius(poly.dense())))
    exps, coeffs = poly.sparse_arrays()
    return dominant_column(SparseColumns(exps, coeffs.reshape(exps.size, -1)))


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
            scaled, scale = root_scaled(poly.dense()[:, None])  # solved once, in u = z/s
            u = roots(scaled)[0]
            errors = companion_root_error(np.broadcast_to(scaled, (d + 1, d)), u) * scale[0]
            approx = u * scale[0]
            method = "companion eigenvalues + mpmath refinement"
        else:
            approx = largest_root(SparseColumns(exps, coeffs[:, None])).root
            errors = np.full(approx.shape, np.inf)
            method = "argument principle + mpmath refinement"
        refined = _refine_band(exps, coeffs, approx, errors)
    best = max(refined, key=lambda z: (abs(z), z.imag))
    if best.imag < 0:
        best = best.conjugate()
    return DominantRoot(best, abs(best), method)


def _mp_eval(exps, coeffs, z, derivative: int = 0):
    """The ``derivative``-th derivative of Σ c_k z^k at z in mpmath, by Horner's scheme over
    the sparse exponents (highest first, z^gap between neighbours): one multiplication per
    unit of degree on a dense polynomial, O(log gap) on a sparse one."""
    import mpmath

    terms = sorted(
        (int(k) - derivative, math.prod(range(int(k) - derivative + 1, int(k) + 1)), float(c))
        for k, c in zip(exps, coeffs, strict=True)
        if int(k) >= derivative
    )
    total, power = mpmath.mpc(0), None
    for e, factor, c in reversed(terms):
        if power is not None:
            total *= z ** (power - e)
        total += mpmath.mpf(c) * factor
        power = e
    return total * z**power if power else total  # the lowest exponent (None: no terms)


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


def _refine_band(exps, coeffs, approx: np.ndarray, errors: np.ndarray) -> list[complex]:
    """Refine the float roots within `_BAND` of the largest modulus that can be the largest
    given their estimated ``errors`` (|z| + err ≥ max(|w| − err_w): the 18 upper roots of
    `wp` at lr·λ ~ 1e148, equal in modulus to 1e-4 but each known to 1e-9, are not all
    refined), clusters together."""
    import mpmath

    mods = np.abs(approx)
    rho = np.max(mods)
    floor = np.max(mods - errors)
    band = approx[(mods >= rho * (1 - _BAND) - 1e-300) & (mods + errors >= floor)]
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
    """Floquet multipliers: the eigenvalues of the dense monodromy matrix (O(S³) for S state
    entries; refused above `DENSE_MAX_DEGREE` — the structured paths below need no matrix)."""
    size = len(state_layout(rule))
    if size > DENSE_MAX_DEGREE:
        raise ValueError(
            f"the dense Floquet analysis of {type(rule).__name__} needs a state of at most "
            f"{DENSE_MAX_DEGREE} entries, got {size}"
        )
    return np.linalg.eigvals(monodromy(rule, model, lr))


def _largest_multiplier(rule: Rule, model: QuadraticModel, lr: Any) -> LargestRoot:
    """The Floquet multiplier of largest modulus for each lr (1-D), structured when possible:
    round-robin rules by the argument principle on their characteristic function
    (`stability.dynamics.round_robin`, O(τ) per lr), others by dense eigenvalues."""
    lrs = np.atleast_1d(np.asarray(lr, dtype=float))
    if has_round_robin(rule):
        f = round_robin_function(rule, model, lrs)
        found = largest_root(f)
        return LargestRoot(
            np.where(f.overflow, np.inf, found.radius),
            np.where(f.overflow, np.inf, found.root),
            found.resolved & ~f.overflow,
        )
    mu = floquet_multipliers(rule, model, lrs)
    best = mu[np.arange(lrs.size), np.lexsort((mu.imag, np.abs(mu)))[:, -1]]
    best = np.where(best.imag < 0, np.conj(best), best)
    return LargestRoot(np.abs(best), best, np.ones(lrs.size, dtype=bool))


def floquet_stable(rule: Rule, model: QuadraticModel, lr: Any) -> np.ndarray:
    """Every Floquet multiplier strictly inside the unit circle, for each lr (1-D): a count of
    the multipliers inside |μ| = 1 for round-robin rules (O(τ)), else ρ(M) < 1 (dense)."""
    lrs = np.atleast_1d(np.asarray(lr, dtype=float))
    if has_round_robin(rule):
        f = round_robin_function(rule, model, lrs)
        inside = count_inside(f, np.ones(lrs.size), np.arange(lrs.size))
        return (inside == f.degree) & ~f.overflow
    return _largest_multiplier(rule, model, lrs).radius < 1.0


def floquet_radius(rule: Rule, model: QuadraticModel, lr: Any) -> np.ndarray:
    """ρ(M)^{1/P}: the average contraction per step (batched over ``lr``)."""
    rho = _largest_multiplier(rule, model, lr).radius.reshape(np.shape(lr))
    return rho ** (1.0 / period_of(rule))


def dominant_multiplier(rule: Rule, model: QuadraticModel, lr: float) -> complex:
    """The Floquet multiplier μ of largest modulus (upper half-plane member of a pair)."""
    return complex(_largest_multiplier(rule, model, float(lr)).root[0])


def follow_multiplier(rule: Rule, model: QuadraticModel, lr: float, near: complex) -> complex:
    """The Floquet multiplier at ``lr`` that Newton reaches from ``near`` (round-robin rules;
    others: the eigenvalue of the dense monodromy closest to ``near``)."""
    if has_round_robin(rule):
        f = round_robin_function(rule, model, float(lr))
        return complex(newton(f, np.array([complex(near)]), np.zeros(1, dtype=int))[0])
    mu = floquet_multipliers(rule, model, float(lr))
    return complex(mu[np.argmin(np.abs(mu - near))])


def _floquet_dominant_root(rule: Rule, model: QuadraticModel, lr: float) -> DominantRoot:
    """The per-step dominant root μ^{1/P} (principal branch) of the largest multiplier μ."""
    best = dominant_multiplier(rule, model, lr)
    if not np.isfinite(best):
        raise ValueError(f"lr = {lr:g} is far beyond stability: the period map overflows float64")
    period = period_of(rule)
    root = best ** (1.0 / period) if best != 0 else 0j
    how = "round-robin characteristic function" if has_round_robin(rule) else "monodromy"
    return DominantRoot(
        root, abs(best) ** (1.0 / period), f"Floquet {how} (period {period}), ρ(M)^(1/P)"
    )
