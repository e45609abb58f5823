r"""Rates over a spectrum of curvatures (condition number κ) and the optimal half-life.

Kosson Sec. 3.4: on the quadratic L(φ) = φᵀΛφ (Kosson eq. 19) every eigen-direction with
curvature λ evolves independently with the rule's characteristic polynomial; with one step
size η (and momentum m) for all of them and a dense spectrum λ ∈ [λ_min, κ·λ_min], the
error decays like r*^t with the **rate**

    r*(η) = max_{λ ∈ [λ_min, κλ_min]} ρ(η, λ),          half-life h = −ln 2 / ln r*

(Kosson's "largest value in a horizontal line segment between ηλ_N and ηλ_1 on the root
heatmaps"), and the **optimal half-life** minimises h over η (Kosson Figs. 7-9, 17), and on
request over the momentum m or the LWP horizon T.

How it is computed (vectorised over a batch of parameter points):

* **Normalized rate.**  With Δ = Φ = 0 the characteristic polynomials of these rules depend on
  η and λ only through x = ηλ (Kosson's normalized rate): p(ω; x) = C0(ω) + x·C1(ω).  This is
  checked for every rule instance (C0 independent of λ, C1 ∝ λ); rules with discrepancy
  (Δ, Φ ≠ 0) are refused with a `ValueError`.  Then r*(η) is the maximum of one curve ρ(x)
  over the window [ηλ_min, κηλ_min] — of constant length log κ on a log axis.
* **Exact window maximum.**  The maximum of ρ over a window is attained at an end point or at
  an interior local maximum of ρ(x).  ρ is sampled on a log grid of x (≥ 32 points per
  decade, spaced so the window spans an integer number of cells); local maxima are located
  on the grid and refined by successive grid zooms, so r*(η) = max(ρ(ηλ_min), ρ(κηλ_min),
  refined local maxima inside) exactly, not the maximum of samples.  (For every registered
  rule and setting we tried, ρ(x) is quasi-convex below 1 and only the end points matter; the
  code does not assume it, and the tests check it against 10⁵-point dense sampling.)
* **Optimal step.**  Sliding-window maxima over the grid (sparse-table range maxima) give
  r*(η) for every grid η at once; the best grid point brackets the optimum, refined by
  successive grid zooms in log η to 1e-8 relative (r* is a max of radii, nonsmooth at the
  optimum, so derivative methods do not apply).  The search covers η from the largest stable
  step x_max/(κλ_min) (`stability.analysis.boundary.max_lr_grid`) down by `EXTRA_DECADES`.
* **Optimal momentum / horizon.**  A grid over the parameter brackets the optimum, then
  successive grid zooms (each evaluation is a full optimal-step solve, batched over the
  outer points), to 1e-7 in −ln(1 − m) for the momentum (relative precision
  near m = 1) and in T for the horizon.
* ``precise=True`` re-evaluates the radii at the optimum's critical points (window ends and
  interior maxima) with `stability.spectrum.dominant_root` (mpmath): float64 companion roots
  are ~1e-8 off at (near) double roots, which the optimum often has (critical damping).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.analysis.boundary import max_lr_grid
from stability.checks import check_real
from stability.dynamics.linear import characteristic_polynomial, depends_on_lr_lam_only
from stability.limits import (
    HALFLIFE_MAX_DEGREE,
    HALFLIFE_MAX_KAPPA,
    HALFLIFE_OPTIMIZE_MAX_DEGREE,
)
from stability.quadratic import QuadraticModel
from stability.rules.registry import get_spec
from stability.rules.spec import RuleSpec
from stability.spectrum import GRID_DENSE_MAX_DEGREE, dominant_root, spectral_radius
from stability.winding import SparseColumns, largest_root

SAMPLES_PER_DECADE = 32
"""Minimum density of the log grid of normalized rates x = ηλ."""

EXTRA_DECADES = 2.0
"""How far below the largest stable step x_max/κ the step-size search starts; doubled (up to
`MAX_EXTRA_DECADES`) while the best grid step is the lowest one."""

MAX_EXTRA_DECADES = 16.0

X_CAP = 1e6
"""Top of the grid for rules stable at every step size (no finite x_max)."""

OPTIMIZABLE = ("momentum", "horizon")
"""Parameters `optimal_half_life` can optimise besides the step size."""

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_FEW_SEARCHES = 2  # up to this many simultaneous searches use grid zooms, else golden section
_ZOOM_POINTS = 9
_PEAK_DROP = 1e-12  # a grid local maximum must stand this far above a neighbour (not noise)


# -- the normalized-rate curve ρ(x) of a batch of rule instances --------------------------


@dataclass(frozen=True)
class RateCurve:
    """ρ(x) for x = ηλ and P rule instances: p(ω; x) = C0(ω) + x·C1(ω) (Kosson eq. 20-23).

    ``exps``: the exponents of the terms (K,), highest first; ``c0``, ``c1``: their
    coefficients in C0 and C1, shape ``(K, P)``; ``x_max``: the largest stable x of each
    instance (inf: stable for every x, 0: for none).  ρ comes from batched companion
    eigenvalues up to degree `stability.spectrum.GRID_DENSE_MAX_DEGREE` and from the argument
    principle above (O(d·K) per point, `stability.winding.largest_root`), so the cost of a
    half-life grows like τ, not τ³.
    """

    exps: np.ndarray
    c0: np.ndarray
    c1: np.ndarray
    x_max: np.ndarray

    @staticmethod
    def of(rule: Any, delta: Any = 0.0, phi: Any = 0.0) -> RateCurve:
        """The curve of ``rule`` (parameters scalars or 1-D arrays of one length).

        Raises `ValueError` unless p depends on (η, λ) only through ηλ.
        """
        cp = characteristic_polynomial(rule, QuadraticModel(1.0, delta, phi))
        if not cp.is_affine:
            raise ValueError("the half-life analysis needs a polynomial affine in lr")
        if not depends_on_lr_lam_only(rule, delta, phi):
            given = [f"{k} = {v:g}" for k, v in (("delta", delta), ("phi", phi)) if np.any(v)]
            lead = (
                f"{given[0].split()[0]}: delta and phi must be 0 here: with {', '.join(given)} t"
                if given
                else "rule: t"
            )
            raise ValueError(
                f"{lead}he dynamics depend on lr and λ not only through lr·λ, which the "
                "half-life over a spectrum [λ, κλ] needs (Kosson Sec. 3.4); ask `radius` / "
                "`max-lr` at one curvature"
            )
        exps = np.array(sorted({k for p in cp.parts for k in p.terms})[::-1])
        c0, c1 = _sparse_parts(cp.parts, exps)
        x_max, _ = max_lr_grid(rule, QuadraticModel(1.0, delta, phi))
        size = c0.shape[1]
        return RateCurve(exps, c0, c1, np.broadcast_to(np.asarray(x_max, float), (size,)).copy())

    @property
    def size(self) -> int:
        return self.c0.shape[1]

    @property
    def degree(self) -> int:
        return int(self.exps[0])

    def radius(self, x: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        """ρ at normalized rates ``x``; ``cols`` (same shape) picks the instance of each x.

        Without ``cols``, ``x`` has shape ``(P, ...)``: row p belongs to instance p.
        """
        x = np.asarray(x, dtype=float)
        if cols is None:
            cols = np.broadcast_to(
                np.arange(self.size).reshape((-1,) + (1,) * (x.ndim - 1)), x.shape
            )
        flat_x, flat_c = x.ravel(), np.asarray(cols).ravel()
        coeffs = self.c0[:, flat_c] + self.c1[:, flat_c] * flat_x
        if self.degree > GRID_DENSE_MAX_DEGREE:
            return largest_root(SparseColumns(self.exps, coeffs)).radius.reshape(x.shape)
        dense = np.zeros((self.degree + 1, flat_x.size))
        dense[self.degree - self.exps] = coeffs
        return spectral_radius(dense).reshape(x.shape)

    def select(self, cols: np.ndarray) -> RateCurve:
        return RateCurve(self.exps, self.c0[:, cols], self.c1[:, cols], self.x_max[cols])


def _sparse_parts(parts, exps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of C0 and C1 at ``exps``, shape (K, P) each (the grid flattened)."""
    grid = np.broadcast_shapes(*(np.shape(c) for p in parts for c in p.terms.values()))
    size = math.prod(grid)
    out = np.zeros((2, exps.size, size))
    for j, part in enumerate(parts[:2]):
        for i, k in enumerate(exps):
            if k in part.terms:
                out[j, i] = np.broadcast_to(np.asarray(part.terms[k], float), grid).ravel()
    return out[0], out[1]


# -- windows over the spectrum ---------------------------------------------------------------


@dataclass(frozen=True)
class _Peaks:
    """Refined interior local maxima of ρ(x): positions and values, shape (P, K), NaN-padded."""

    x: np.ndarray
    value: np.ndarray

    def max_inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Largest peak value strictly inside (lo, hi) per row (−inf if none); lo, hi (P, ...)."""
        if self.x.shape[1] == 0:
            return np.full(np.shape(lo), -np.inf)
        extra = (slice(None),) + (None,) * (np.ndim(lo) - 1) + (slice(None),)
        px, pv = self.x[extra], self.value[extra]
        inside = (px > lo[..., None]) & (px < hi[..., None])
        return np.max(np.where(inside, pv, -np.inf), axis=-1)


def _search(f, lo: np.ndarray, hi: np.ndarray, tol: float, *, maximize: bool = False):
    """Minimise (or maximise) f on [lo, hi], one derivative-free search per element.

    ``f`` maps a (P, K) array to (P, K) values.  The objectives here are maxima of radii,
    nonsmooth at the optimum, so no derivatives: for many searches golden-section search (one
    new point per search and call); for few, successive grid zooms (`_ZOOM_POINTS` points per
    search and call, the bracket shrinking by (K − 1)/2), which needs far fewer calls when a
    call's fixed cost dominates.  Both find the optimum of a unimodal f; returns
    ``(x, f(x))`` of the best point evaluated.
    """
    sign = -1.0 if maximize else 1.0
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    if lo.size == 0:
        return lo, lo.copy()
    if lo.size > _FEW_SEARCHES:
        return _golden(lambda x: sign * f(x[:, None])[:, 0], lo, hi, tol, sign)
    t = np.linspace(0.0, 1.0, _ZOOM_POINTS)
    rows = np.arange(lo.size)
    best_x, best_f = lo.copy(), np.full(lo.size, np.inf)
    while True:
        xs = lo[:, None] + (hi - lo)[:, None] * t[None, :]
        fx = sign * f(xs)
        j = np.argmin(fx, axis=1)
        better = fx[rows, j] < best_f
        best_x = np.where(better, xs[rows, j], best_x)
        best_f = np.where(better, fx[rows, j], best_f)
        if np.max(hi - lo) <= tol:
            return best_x, sign * best_f
        lo, hi = xs[rows, np.maximum(j - 1, 0)], xs[rows, np.minimum(j + 1, t.size - 1)]


def _golden(g, a: np.ndarray, b: np.ndarray, tol: float, sign: float):
    """Golden-section minimisation of g (vectorised, (P,) → (P,)) on [a, b]; see `_search`."""
    iterations = math.ceil(math.log(max(float(np.max(b - a)), tol) / tol) / math.log(1 / _GOLDEN))
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    gc, gd = g(c), g(d)
    for _ in range(iterations):
        left = gc <= gd  # the minimum is in [a, d]
        a, b = np.where(left, a, c), np.where(left, d, b)
        new = np.where(left, b - _GOLDEN * (b - a), a + _GOLDEN * (b - a))
        g_new = g(new)
        c, d, gc, gd = (
            np.where(left, new, d),
            np.where(left, c, new),
            np.where(left, g_new, gd),
            np.where(left, gc, g_new),
        )
    take_c = gc <= gd
    return np.where(take_c, c, d), sign * np.where(take_c, gc, gd)


def _crossing(d, lo: np.ndarray, hi: np.ndarray, d_lo: np.ndarray, d_hi: np.ndarray):
    """Root of d (vectorised) in brackets with d(lo) > 0 > d(hi), by the Illinois method."""
    for _ in range(60):
        mid = np.where(d_hi != d_lo, hi - d_hi * (hi - lo) / (d_hi - d_lo), 0.5 * (lo + hi))
        mid = np.clip(mid, np.minimum(lo, hi), np.maximum(lo, hi))
        d_mid = d(mid)
        same = np.sign(d_mid) == np.sign(d_hi)
        d_lo = np.where(same, 0.5 * d_lo, d_hi)  # Illinois: halve the retained end's value
        lo = np.where(same, lo, hi)
        hi, d_hi = mid, d_mid
        if np.all((np.abs(hi - lo) <= 1e-13 * np.maximum(1.0, np.abs(hi))) | (d_mid == 0)):
            break
    return hi


def _peaks(curve: RateCurve, logx: np.ndarray, rho: np.ndarray) -> _Peaks:
    """Interior local maxima of ρ on the grid, refined by grid zooms (in log x)."""
    mid = rho[:, 1:-1]
    is_peak = (
        (mid >= rho[:, :-2])
        & (mid >= rho[:, 2:])
        & (mid - np.minimum(rho[:, :-2], rho[:, 2:]) > _PEAK_DROP)
    )
    rows, j = np.nonzero(is_peak)
    j = j + 1
    counts = np.bincount(rows, minlength=curve.size)
    k = int(counts.max()) if counts.size else 0
    px = np.full((curve.size, k), np.nan)
    pv = np.full((curve.size, k), np.nan)
    if rows.size:
        best_logx, best = _search(
            lambda lx: curve.radius(np.exp(lx), np.broadcast_to(rows[:, None], lx.shape)),
            logx[rows, j - 1],
            logx[rows, j + 1],
            1e-10,
            maximize=True,
        )
        best = np.maximum(best, rho[rows, j])
        slot = np.arange(rows.size) - np.concatenate(([0], np.cumsum(counts)))[rows]
        px[rows, slot], pv[rows, slot] = np.exp(best_logx), best
    return _Peaks(px, pv)


def _window_maxima(rho: np.ndarray, width: np.ndarray) -> np.ndarray:
    """max(rho[p, j : j + width[p] + 1]) for every p, j (−inf past the end): sparse table."""
    levels = [rho]
    span = 1
    while 2 * span <= int(width.max()) + 1:
        prev = levels[-1]
        nxt = np.full_like(prev, -np.inf)
        nxt[:, : prev.shape[1] - span] = np.maximum(prev[:, :-span], prev[:, span:])
        levels.append(nxt)
        span *= 2
    table = np.stack(levels)
    level = np.floor(np.log2(width + 1)).astype(int)  # (P,)
    n = rho.shape[1]
    j = np.arange(n)[None, :]
    second = j + (width + 1 - 2**level)[:, None]
    rows = np.arange(rho.shape[0])[:, None]
    out = np.maximum(
        table[level[:, None], rows, j], table[level[:, None], rows, np.minimum(second, n - 1)]
    )
    return np.where(j + width[:, None] <= n - 1, out, -np.inf)


def _refine_step(ends, rate, lo, hi, peaks: _Peaks, kappa):
    """The optimal log-step in each bracket [lo, hi] and its rate.

    Where no interior peak exists, r* = max(a, b) with a = ρ at the low window end and b = ρ
    at the high end.  Without interior peaks ρ is quasi-convex there, so where a > b the low
    end lies left of ρ's minimum (a falls) and where a < b the high end lies right of it (b
    rises): the optimum is the crossing a = b, found by the Illinois method to machine
    precision.  Elsewhere (peaks inside, κ = 1, or
    no sign change) a derivative-free search on r* itself (`_search`, to 1e-8).
    """
    rows = np.arange(lo.size)
    a_lo, b_lo = ends(lo, rows)
    a_hi, b_hi = ends(hi, rows)
    cross = (
        (peaks.x.shape[1] == 0 or np.all(np.isnan(peaks.x), axis=1))
        & (kappa > 1)
        & (a_lo > b_lo)
        & (a_hi < b_hi)
    )
    lx = np.empty(lo.size)
    r = np.empty(lo.size)
    c = np.flatnonzero(cross)
    if c.size:

        def gap(v):
            a, b = ends(v, c)
            return a - b

        lx[c] = _crossing(gap, lo[c], hi[c], (a_lo - b_lo)[c], (a_hi - b_hi)[c])
        r[c] = np.max(ends(lx[c], c), axis=0)
    o = np.flatnonzero(~cross)
    if o.size:
        lx[o], r[o] = _search(lambda v: rate(v, o), lo[o], hi[o], 1e-8)
    return lx, r


@dataclass(frozen=True)
class StepOptimum:
    """Result of `optimal_step`, one entry per instance of the curve.

    ``rate``: r* at the optimal step (inf if no step is stable); ``x``: the optimal
    normalized step η·λ_min (NaN if no step converges); ``peaks``: the refined interior
    maxima of ρ(x) that were taken into account.
    """

    rate: np.ndarray
    x: np.ndarray
    peaks: _Peaks


def optimal_step(curve: RateCurve, kappa: np.ndarray, extra: float = EXTRA_DECADES) -> StepOptimum:
    """Minimise r*(x) = max ρ over [x, κx] over x for each instance (module doc).

    ``kappa`` has one entry per instance; ``extra``: decades searched below x_max/κ.
    """
    decades = np.log10(kappa)
    cells = np.ceil(decades * SAMPLES_PER_DECADE).astype(int)  # window width in grid cells
    step = np.where(cells > 0, decades / np.maximum(cells, 1), 1.0 / SAMPLES_PER_DECADE)
    below = np.ceil(extra / step).astype(int)
    n = int(np.max(cells + below)) + 1
    top = np.where(np.isinf(curve.x_max), X_CAP, curve.x_max)
    stable = top > 0
    safe_top = np.where(stable, top, 1.0)
    logx = (
        np.log(safe_top)[:, None]
        - (n - 1 - np.arange(n))[None, :] * (step * math.log(10.0))[:, None]
    )
    rho = curve.radius(np.exp(logx))
    peaks = _peaks(curve, logx, rho)

    span = decades * math.log(10.0)
    rows = np.arange(curve.size)

    def ends(lx: np.ndarray, which: np.ndarray) -> np.ndarray:
        """ρ at both window ends, (2, *lx.shape), for log-steps lx of instances ``which``."""
        cols = np.broadcast_to(which.reshape(which.shape + (1,) * (lx.ndim - 1)), lx.shape)
        hi_lx = lx + span[which].reshape(cols.shape[:1] + (1,) * (lx.ndim - 1))
        return curve.radius(np.exp(np.stack((lx, hi_lx))), np.stack((cols, cols)))

    def rate(lx: np.ndarray, which: np.ndarray = rows) -> np.ndarray:
        """r* at log-steps lx (rows: instances ``which``): window ends and interior peaks."""
        hi_lx = lx + span[which][:, None]
        sub = _Peaks(peaks.x[which], peaks.value[which])
        return np.maximum(ends(lx, which).max(axis=0), sub.max_inside(np.exp(lx), np.exp(hi_lx)))

    grid_rate = _window_maxima(rho, cells)
    inside = peaks.max_inside(np.exp(logx), np.exp(logx + span[:, None]))
    grid_rate = np.where(np.isfinite(grid_rate), np.maximum(grid_rate, inside), np.inf)
    best = np.argmin(grid_rate, axis=1)
    if np.any(stable & (best == 0) & (grid_rate[:, 0] < 1)) and extra < MAX_EXTRA_DECADES:
        return optimal_step(curve, kappa, 2 * extra)  # the optimum may lie lower
    lo = logx[rows, np.maximum(best - 1, 0)]
    hi = logx[rows, np.minimum(best + 1, n - 1 - cells)]
    lx, r = _refine_step(ends, rate, lo, hi, peaks, kappa)
    grid_best = grid_rate[rows, best]
    better = grid_best < r
    lx = np.where(better, logx[rows, best], lx)
    r = np.where(better, grid_best, r)
    r = np.where(stable, r, np.inf)
    x = np.where(stable & (r < 1), np.exp(lx), np.nan)
    return StepOptimum(r, x, peaks)


# -- public API ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OptimalHalfLife:
    """Result of `optimal_half_life` (arrays of the broadcast shape of κ and the parameters).

    ``half_life``: −ln 2/ln r* in steps (inf where no step size converges); ``rate``: r*, the
    worst spectral radius over the spectrum at the optimum; ``lr``: the optimal step size for
    λ_min = ``lam`` (NaN where none); ``values``: the optimised parameters (momentum,
    horizon) at the optimum.
    """

    half_life: np.ndarray
    rate: np.ndarray
    lr: np.ndarray
    values: dict[str, np.ndarray]


def _batch(spec: RuleSpec, params: dict[str, Any], **arrays: Any):
    """Broadcast ``arrays`` (κ, lr) and array-valued parameters to one flat batch.

    Returns ``(shape, flat arrays, parameter values)``; delays must be scalars.
    """
    for p in spec.params:
        if p.kind == "delay" and np.ndim(params.get(p.name, 0)) != 0:
            raise ValueError(f"{p.name} must be a single integer here (delays set the degree)")
    varying = {k: np.asarray(v, float) for k, v in params.items() if np.ndim(v) > 0}
    given = {k: np.asarray(v, float) for k, v in arrays.items()}
    shape = np.broadcast_shapes(*(a.shape for a in (*given.values(), *varying.values())))
    flat = {k: np.broadcast_to(a, shape).ravel() for k, a in given.items()}
    values = {**params, **{k: np.broadcast_to(a, shape).ravel() for k, a in varying.items()}}
    return shape, flat, values


def _build(spec: RuleSpec, values: dict[str, Any]) -> tuple[RateCurve, float]:
    resolved = spec.resolve(**values)
    lam = resolved.get("lam", 1.0)
    if np.ndim(lam) != 0:
        raise ValueError("lam (λ_min) must be a single number")
    rule, model = spec.build(**values)
    return RateCurve.of(rule, model.delta, model.phi), float(lam)


def window_rate(curve: RateCurve, x: np.ndarray, kappa: np.ndarray) -> np.ndarray:
    """max of ρ over [x, κx] for each instance (x, κ: one entry each), exactly.

    The window ends plus the interior local maxima of ρ, located on a grid of ≥ 32 points per
    decade and refined (module doc).
    """
    size = curve.size
    span = np.log(kappa)
    cells = np.maximum(np.ceil(np.log10(kappa) * SAMPLES_PER_DECADE).astype(int), 1)
    n = int(cells.max()) + 1
    fraction = np.minimum(np.arange(n)[None, :] / cells[:, None], 1.0)
    logx = np.log(x)[:, None] + fraction * span[:, None]
    rho = curve.radius(np.exp(logx))
    ends = np.maximum(rho[:, 0], curve.radius(x * kappa, np.arange(size)))
    return np.maximum(ends, _peaks(curve, logx, rho).max_inside(x, x * kappa))


def spectrum_rate(name: str, kappa: Any, lr: Any, **params: Any) -> np.ndarray:
    """r*(η) = max over λ ∈ [λ_min, κλ_min] of the spectral radius (Kosson Sec. 3.4).

    λ_min is the rule's ``lam`` (default 1).  ``kappa``, ``lr`` and real parameters may be
    arrays (broadcast together); the window maximum is exact (`window_rate`).
    """
    spec = get_spec(name)
    check_real("kappa", np.asarray(kappa, dtype=float), low=1.0)
    check_real("lr", np.asarray(lr, dtype=float), low=0.0, low_open=True)
    shape, flat, values = _batch(spec, params, kappa=kappa, lr=lr)
    curve, lam = _build(spec, values)
    size = flat["kappa"].size
    curve = curve.select(np.broadcast_to(np.arange(curve.size), (size,)).copy())
    return window_rate(curve, flat["lr"] * lam, flat["kappa"]).reshape(shape)


def optimal_half_life(
    name: str,
    kappa: Any,
    *,
    optimize: str | None = None,
    grid: Any = None,
    precise: bool = False,
    **params: Any,
) -> OptimalHalfLife:
    """The fastest convergence over step sizes for condition number κ (Kosson Sec. 3.4).

    ``h* = min_η −ln 2 / ln max_{λ ∈ [λ_min, κλ_min]} ρ(η, λ)``, also minimised over
    ``optimize`` ∈ {"momentum", "horizon"} when given, scanning ``grid`` (default
    `parameter_grid`) before the refinement by grid zooms.  ``kappa`` and real parameters
    may be arrays (one optimisation per element, all batched).  ``precise`` re-evaluates the
    radii at the optimum in mpmath (for single points; module doc).
    """
    spec = get_spec(name)
    if optimize is not None:
        if optimize not in OPTIMIZABLE:
            raise ValueError(f"optimize must be one of {', '.join(OPTIMIZABLE)}, got {optimize!r}")
        spec.check_names([optimize])
        if optimize in params:
            raise ValueError(f"{optimize} is optimised; do not also give it")
    check_real("kappa", np.asarray(kappa, dtype=float), low=1.0, high=HALFLIFE_MAX_KAPPA)
    shape, flat, values = _batch(spec, params, kappa=kappa)
    _check_degree(spec, values, optimize)
    kappa_flat = flat["kappa"]
    size = kappa_flat.size
    found: dict[str, np.ndarray] = {}
    if optimize is not None:
        if grid is None:
            grid = parameter_grid(optimize, values.get("tau", spec.resolve().get("tau", 1)))
        grid = np.unique(np.asarray(grid, dtype=float))
        found[optimize] = _optimal_parameter(spec, optimize, grid, kappa_flat, values)
        values = {**values, optimize: found[optimize]}
    curve, lam = _build(spec, values)
    cols = np.broadcast_to(np.arange(curve.size), (size,)).copy()
    optimum = optimal_step(curve.select(cols), kappa_flat)
    rate = optimum.rate
    if precise:
        rate = _precise_rate(spec, values, kappa_flat, optimum, size)
    with np.errstate(divide="ignore"):
        h = np.where(rate < 1, -math.log(2.0) / np.log(np.where(rate < 1, rate, 0.5)), np.inf)
    h = np.where(rate <= 0, 0.0, h)
    return OptimalHalfLife(
        half_life=h.reshape(shape),
        rate=rate.reshape(shape),
        lr=(optimum.x / lam).reshape(shape),
        values={k: v.reshape(shape) for k, v in found.items()},
    )


def _check_degree(spec: RuleSpec, values: dict[str, Any], optimize: str | None) -> None:
    """Refuse up front (one line naming the delay) a polynomial above `HALFLIFE_MAX_DEGREE`, or
    `HALFLIFE_OPTIMIZE_MAX_DEGREE` when a second parameter is optimised."""
    rule, model = spec.build(**values)
    degree = characteristic_polynomial(rule, model).degree
    limit = HALFLIFE_MAX_DEGREE if optimize is None else HALFLIFE_OPTIMIZE_MAX_DEGREE
    if degree > limit:
        delays = [p.name for p in spec.params if p.kind == "delay"]
        how = "the half-life" if optimize is None else f"the half-life optimised over {optimize}"
        raise ValueError(
            f"{'/'.join(delays) or 'tau'} too large for {how}: the characteristic polynomial's "
            f"degree must be ≤ {limit} (docs/limits.md), got {degree}"
        )


def parameter_grid(name: str, tau: int) -> np.ndarray:
    """The grid an optimised parameter is first scanned on (then refined by grid zooms).

    momentum: 0 … 0.9 in steps of 0.02, then 1 − 10^{−u} up to 0.9999 (the no-delay optimum
    ((√κ − 1)/(√κ + 1))² approaches 1 as κ grows); horizon T: 0 … 8·max(D, 1) in D/8 steps
    (Kosson Fig. 9 and 17 find the optimum near T = 2D).
    """
    if name == "momentum":
        return np.concatenate((np.linspace(0.0, 0.9, 46), 1.0 - np.logspace(-1, -4, 61)[1:]))
    scale = max(int(tau), 1)
    return np.linspace(0.0, 8.0 * scale, 65)


_COORDINATES = {  # search coordinate of an optimised parameter: (to, from)
    "momentum": (lambda m: -np.log1p(-np.minimum(m, 1 - 1e-15)), lambda u: -np.expm1(-u)),
    "horizon": (lambda t: t, lambda t: t),
}


def _optimal_parameter(
    spec: RuleSpec, name: str, grid: np.ndarray, kappa: np.ndarray, values: dict[str, Any]
) -> np.ndarray:
    """Scan ``grid``, then zoom in on the optimal half-life over parameter ``name``."""
    size, g = kappa.size, grid.size

    def rates(candidates: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Optimal-step rates at parameter values ``candidates`` of outer points ``rows``."""
        rows = np.broadcast_to(rows, candidates.shape).ravel()
        vals = {k: (v[rows] if np.ndim(v) > 0 else v) for k, v in values.items() if k != name}
        curve, _ = _build(spec, {**vals, name: candidates.ravel()})
        cols = np.broadcast_to(np.arange(curve.size), (rows.size,)).copy()
        return optimal_step(curve.select(cols), kappa[rows]).rate.reshape(candidates.shape)

    rows = np.repeat(np.arange(size), g)
    table = rates(np.tile(grid, size), rows).reshape(size, g)
    best = np.argmin(table, axis=1)
    # zoom in u = −ln(1 − m) for the momentum: relative precision near m = 1
    to_u, from_u = _COORDINATES[name]
    lo = to_u(grid[np.maximum(best - 1, 0)])
    hi = to_u(grid[np.minimum(best + 1, g - 1)])
    every = np.arange(size)
    u, r = _search(lambda v: rates(from_u(v), every[:, None]), lo, hi, 1e-7)
    value = from_u(u)
    grid_best = table[every, best]
    return np.where(grid_best < r, grid[best], value)


def _precise_rate(spec, values, kappa, optimum: StepOptimum, size: int) -> np.ndarray:
    """The optimum's rate from mpmath-refined radii at its critical normalized rates."""
    out = np.array(optimum.rate, dtype=float)
    for i in range(size):
        x = optimum.x[i]
        if not np.isfinite(x):
            continue
        point = {k: (float(v[i]) if np.ndim(v) > 0 else v) for k, v in values.items()}
        rule, model = spec.build(**{**point, "lam": 1.0})
        cp = characteristic_polynomial(rule, model)
        px = optimum.peaks.x[i]
        xs = [x, kappa[i] * x, *px[(px > x) & (px < kappa[i] * x)]]
        out[i] = max(dominant_root(cp.at(float(v))).radius for v in xs)
    return out


__all__ = [
    "EXTRA_DECADES",
    "OPTIMIZABLE",
    "SAMPLES_PER_DECADE",
    "OptimalHalfLife",
    "RateCurve",
    "StepOptimum",
    "optimal_half_life",
    "optimal_step",
    "parameter_grid",
    "spectrum_rate",
    "window_rate",
]
