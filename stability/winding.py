r"""The argument principle: roots inside a circle, and the largest root modulus, in O(degree).

The number of zeros of an analytic f inside |z| = r is the winding number of f(r·e^{iθ}) over
θ ∈ [0, 2π) (for real coefficients: twice the phase change over [0, π], in units of 2π).  For a
polynomial of degree d the phase turns by at most π·d over [0, π], so 8 samples per unit of
degree leave ~π/8 per interval; every interval where the phase turns by more than 1 rad is
subdivided (`winding_turns`), so zeros close to the circle cost a few samples near them.
Evaluating a *sparse* polynomial Σ c_k z^k there costs O(terms) per sample, hence O(d·terms)
per circle, against the O(d³) of companion eigenvalues.

**Largest modulus** (`largest_root`): bisection on r between a lower and an upper bound of
the roots' moduli (geometric mean of the nonzero roots ≤ ρ ≤ Fujiwara's bound), for a whole
batch of polynomials at once, until the bracket [lo, hi) is 1e-7 wide (relative); then Newton
from the point of |z| = hi where |f| is smallest.  Newton's root z is the dominant one, and
ρ = |z| to machine precision, when it lies in the bracket and the bracket holds no other
root: the counts at lo and hi differ by exactly 1 (z real) or 2 (z and z̄).  Otherwise (a
cluster: several roots of nearly equal modulus, a double root) the bisection continues to
4·ε relative and ρ is its upper end; such columns are reported as not ``resolved``, since
near a k-fold root the count itself is only reliable to ~ε^{1/k}.  Their root is the
largest-modulus zero Newton reaches from the local minima of |f| on |z| = ρ (each zero of the
cluster leaves one; `_cluster_root`): from the one smallest minimum Newton could settle on a
neighbour of smaller modulus (`dc`, τ = 525: 0.9999984 where ρ = 1.0000006, the neighbour four
zeros along a cluster of zeros 0.012 rad apart near −1).

Functions are given as a `CircleFunction`: a batch of M columns (one function each) that
can be evaluated on circles.  `SparseColumns` is the one for sparse polynomials with real
coefficients; `stability.dynamics.round_robin` defines another.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

SAMPLES_PER_DEGREE = 8
"""Samples of the half circle per unit of degree (module doc)."""

_MAX_TURN = 1.0  # rad: a sample interval over which the phase turns more is subdivided
_TAN_MAX_TURN = math.tan(_MAX_TURN)
_STAGES = (1e-1, 1e-5)  # relative bracket widths at which Newton is tried, over the degree
_ANNULUS = 1e-9  # relative half-width of the annulus that must hold the dominant zero alone
_CELLS = 1_000_000  # samples × columns evaluated at once (bounded memory)
_CLUSTER_STARTS = 4096  # Newton starts per column in a cluster: the smallest local minima of |f|


def scaled_terms(exps: np.ndarray, coeffs: np.ndarray, r) -> np.ndarray:
    """c_k·r^k divided by the largest of them (per column): no overflow for large k.

    ``coeffs`` (K,) or (K, M); ``r`` a number or (M,).
    """
    with np.errstate(divide="ignore"):
        logs = np.log(np.abs(coeffs)) + np.multiply.outer(exps, np.log(r))
    return np.sign(coeffs) * np.exp(logs - np.max(logs, axis=0))


def on_circle(theta: np.ndarray, exps: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """Σ_k c_k·e^{ikθ} for real coefficients: shape (len(θ),) or (len(θ), M) for (K, M) c_k.

    Computed as cos(kθ)·c + i·sin(kθ)·c with real matrix products: complex ``exp`` and
    complex-by-real ``matmul`` are each several times slower (the latter by 100× here).
    """
    x = np.multiply.outer(theta, exps)
    return (np.cos(x) @ coeffs) + 1j * (np.sin(x) @ coeffs)


def winding_turns(theta: np.ndarray, values: np.ndarray, evaluate, rate=None) -> np.ndarray:
    """Phase change of f along θ, in units of π, for each column of samples (n, M).

    ``values[i, m]`` = f_m(θ_i); ``evaluate(t, cols)`` gives f_cols(t) at paired arrays.
    Every interval where the phase turns by more than 1 rad is split in 8, recursively and
    only there, so a zero of f close to the path costs a few samples near it instead of a
    finer grid everywhere.  Columns with a zero on the path (to machine precision) are NaN.

    ``rate`` (optional): ``rate(t, cols)`` = (f, |dφ/dθ|) at paired points (one evaluation
    gives both; a subdivision reads its inner values from it).  With it an interval
    is also split where the phase *may* turn by more than 1 rad, max(rate at its ends) ×
    length > 1: a cluster of k zeros at distance δ ≪ the sample spacing from the path turns
    the phase by ≈ k·π between two samples, which seen modulo 2π can look like a small step
    (k even) — the rate at the sample nearest the cluster (≈ k/δ) exposes it.

    The intervals that turn by less than 1 rad (nearly all) are summed without an arctangent
    each: their principal phase steps telescope to arg f(end) − arg f(start), corrected by 2π
    wherever the path crosses the negative real axis (where the principal argument jumps),
    minus the telescoped steps of the subdivided intervals.
    """
    # + 0j turns a signed zero −0.0 into +0.0: the comparisons below count −0.0 as ≥ 0, the
    # arctangents as < 0, and a real sample at θ = π (e.g. conj of an FFT) would then be
    # counted a whole turn off
    values = values.reshape(len(theta), -1) + 0j
    re, im = values.real, values.imag
    a_re, a_im, b_re, b_im = re[:-1], im[:-1], re[1:], im[1:]
    w_re = b_re * a_re + b_im * a_im  # b·conj(a): its argument is the phase step
    w_im = b_im * a_re - b_re * a_im
    bad = (w_re <= 0) | (np.abs(w_im) > _TAN_MAX_TURN * w_re)
    if rate is not None:
        cols_all = np.broadcast_to(np.arange(values.shape[1]), values.shape)
        _, speed = rate(np.broadcast_to(theta[:, None], values.shape), cols_all)
        fast = np.maximum(speed[:-1], speed[1:]) * np.diff(theta)[:, None] > _MAX_TURN
        bad |= fast
    negative = (a_re < 0) & ~bad  # a small step straddling the real axis on its negative side
    ccw = np.count_nonzero(negative & (a_im >= 0) & (b_im < 0), axis=0)  # arg jumps by −2π
    cw = np.count_nonzero(negative & (a_im < 0) & (b_im >= 0), axis=0)  # arg jumps by +2π
    total = np.arctan2(im[-1], re[-1]) - np.arctan2(im[0], re[0]) + 2 * math.pi * (ccw - cw)
    failed = np.any(values == 0, axis=0)
    i, col = np.nonzero(bad)
    lo, hi, v_lo, v_hi = theta[i], theta[i + 1], values[i, col], values[i + 1, col]
    np.subtract.at(total, col, np.angle(v_hi) - np.angle(v_lo))
    split = np.linspace(0.0, 1.0, 9)
    for _ in range(60):
        if lo.size == 0:
            break
        tiny = hi - lo <= 8 * np.finfo(float).eps * np.maximum(np.abs(hi), 1.0)
        failed[col[tiny]] = True
        keep = ~tiny & ~failed[col]
        lo, hi, v_lo, v_hi, col = lo[keep], hi[keep], v_lo[keep], v_hi[keep], col[keep]
        t = lo[:, None] + (hi - lo)[:, None] * split[None, :]
        if rate is not None:  # f and its rate at the 9 points, one evaluation
            both, speed = rate(t, np.repeat(col, 9).reshape(t.shape))
            inner = both[:, 1:-1]
        else:
            inner = evaluate(t[:, 1:-1].ravel(), np.repeat(col, 7)).reshape(len(lo), 7)
        failed[col[np.any(inner == 0, axis=1)]] = True
        v = np.concatenate([v_lo[:, None], inner, v_hi[:, None]], axis=1)
        sub = np.angle(v[:, 1:] * np.conj(v[:, :-1]))
        bad = np.abs(sub) > _MAX_TURN
        if rate is not None:
            bad |= np.maximum(speed[:, 1:], speed[:, :-1]) * np.diff(t, axis=1) > _MAX_TURN
        np.add.at(total, col, np.where(bad, 0.0, sub).sum(axis=1))
        j, k = np.nonzero(bad)
        lo, hi, v_lo, v_hi, col = t[j, k], t[j, k + 1], v[j, k], v[j, k + 1], col[j]
    else:
        failed[col] = True
    return np.where(failed, np.nan, total / math.pi)


def roots_inside(exps, coeffs, r: float, *, points: int | None = None) -> int:
    """Number of roots with |ω| < r of one sparse polynomial with real coefficients.

    The phase of p(r·e^{iθ}) is followed over θ ∈ [0, π] (the other half mirrors it) from 8
    samples per unit of degree, refined by `winding_turns`.  A root on the circle (to machine
    precision) raises `ArithmeticError`.
    """
    exps = np.asarray(exps)
    d = int(np.max(exps))
    scaled = scaled_terms(exps, np.asarray(coeffs, dtype=float), r)
    theta = np.linspace(0.0, math.pi, points or SAMPLES_PER_DEGREE * d + 64)
    turns = winding_turns(
        theta, on_circle(theta, exps, scaled), lambda t, _cols: on_circle(t, exps, scaled)
    )[0]
    if not np.isfinite(turns) or abs(turns - round(turns)) > 0.05:
        raise ArithmeticError(f"a root lies on |ω| = {r!r} to within machine precision")
    return int(round(turns))


# -- batches of functions on circles ---------------------------------------------------------


class CircleFunction(Protocol):
    """M functions with real coefficients, each with ``degree[m]`` zeros in the plane.

    ``samples(r)``: values at r_m·e^{iθ_j} on the half-circle grid ``theta`` (n,) for columns
    ``cols``, shape (n, len(cols)), each up to a positive factor (only phases count);
    ``log_modulus(r, cols)``: log|f| at the same points (comparable along a column: Newton
    starts where it is smallest); ``at(z, cols)``: values at paired points (no common scale
    needed: only phases and zeros matter); ``newton_step(z, cols)``: f/f' there;
    ``bounds()``: (lo, hi) with lo ≤ max |zero| < hi per column.  The functions must be
    polynomials (or evaluate like them: a zero near the circle is the only way their phase
    turns fast), so that 8 samples per unit of degree resolve the winding.
    """

    degree: np.ndarray
    theta: np.ndarray

    def samples(self, r: np.ndarray, cols: np.ndarray) -> np.ndarray: ...

    def log_modulus(self, r: np.ndarray, cols: np.ndarray) -> np.ndarray: ...

    def at(self, z: np.ndarray, cols: np.ndarray) -> np.ndarray: ...

    def newton_step(self, z: np.ndarray, cols: np.ndarray) -> np.ndarray: ...

    def bounds(self) -> tuple[np.ndarray, np.ndarray]: ...


@functools.lru_cache(maxsize=8)
def trig_table(period: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of 2πm/period, m = 0..period−1 (read-only; cached like an FFT plan)."""
    angle = 2 * np.pi * np.arange(period) / period
    tables = np.cos(angle), np.sin(angle)
    for t in tables:
        t.flags.writeable = False
    return tables


FFT_MIN_TERMS = 16
"""`HalfCircleGrid` sums more terms than this by one real FFT per column, fewer by tables."""


class HalfCircleGrid:
    """Σ_k c_{k,m}·e^{ikθ_j} at θ_j = πj/(n−1), j = 0 … n−1, for fixed exponents ``exps`` (K,)
    and any real coefficients (K, M): shape (n, M).

    With P = 2(n−1), k·θ_j = 2π·(kj mod P)/P exactly, so no large argument is ever rounded:

    * few terms (K ≤ `FFT_MIN_TERMS`): e^{ikθ_j} read from one table by integer indexing,
      gathered once, and each call is one (n, K) × (K, M) real product;
    * many terms: the coefficients folded modulo P, c̃_r = Σ_{k ≡ r} c_k, and
      Σ_r c̃_r·e^{2πi·rj/P} = conj(rfft(c̃))_j (c̃ real; rfft's n = P/2 + 1 outputs are
      exactly j = 0 … n−1): O(P log P) per column instead of O(n·K) — a random-delay kernel
      at τ = 10⁵ has K ≈ 750 terms and n = 8·10⁵ samples.
    """

    def __init__(self, n: int, exps: np.ndarray):
        self.theta = np.pi * np.arange(n) / (n - 1)
        self.period = 2 * (n - 1)
        self.residues = np.asarray(exps, dtype=np.int64) % self.period
        self._tables = None
        if self.residues.size <= FFT_MIN_TERMS:
            cos_table, sin_table = trig_table(self.period)
            index = np.multiply.outer(np.arange(n), self.residues) % self.period
            self._tables = cos_table[index], sin_table[index]

    def __call__(self, coeffs: np.ndarray) -> np.ndarray:
        coeffs = np.asarray(coeffs, dtype=float)
        if self._tables is not None:
            cos, sin = self._tables
            out = np.empty((self.theta.size, coeffs.shape[1]), dtype=complex)
            out.real, out.imag = cos @ coeffs, sin @ coeffs
            return out
        folded = np.zeros((self.period, coeffs.shape[1]))
        np.add.at(folded, self.residues, coeffs)
        return np.conj(np.fft.rfft(folded, axis=0))


class SparseColumns:
    """M real sparse polynomials Σ_k c_{k,m}·z^k sharing the exponents ``exps`` (K,).

    ``coeffs`` (K, M).  Each column's degree is its highest exponent with a nonzero
    coefficient.  On the sample grid θ_j = πj/(n−1), k·θ_j = π·(kj mod 2(n−1))/(n−1) exactly,
    so a circle is summed without rounding a large argument (`HalfCircleGrid`).
    """

    def __init__(self, exps, coeffs):
        exps = np.asarray(exps, dtype=np.int64)
        coeffs = np.asarray(coeffs, dtype=float).reshape(exps.size, -1)
        if np.any(exps < 0):
            raise ValueError("exponents must be ≥ 0")
        nonzero = coeffs != 0
        if not np.all(nonzero.any(axis=0)):
            raise ValueError("a polynomial of the batch is identically zero")
        self.exps, self.coeffs = exps, coeffs
        self.degree = np.max(np.where(nonzero, exps[:, None], -1), axis=0)
        self.low = np.min(np.where(nonzero, exps[:, None], np.iinfo(np.int64).max), axis=0)
        self._grid = HalfCircleGrid(SAMPLES_PER_DEGREE * int(self.degree.max()) + 64, exps)
        self.theta = self._grid.theta

    def _scaled(self, r, cols):
        return scaled_terms(self.exps, self.coeffs[:, cols], r)

    def samples(self, r, cols):
        return self._grid(self._scaled(r, cols))

    def log_modulus(self, r, cols):
        """log|p| up to a constant per column (the samples share the scale of their circle)."""
        with np.errstate(divide="ignore"):
            return np.log(np.abs(self.samples(r, cols)))

    def at(self, z, cols):
        """p(z) for paired z and columns, every term scaled by the column's largest at |z|."""
        s = self._scaled(np.abs(z), cols)  # (K, L)
        x = np.multiply.outer(np.angle(z), self.exps)  # (L, K)
        return np.sum(np.cos(x) * s.T, axis=1) + 1j * np.sum(np.sin(x) * s.T, axis=1)

    def newton_step(self, z, cols):
        """p/p' at paired z, with the terms scaled by the largest (no overflow of z^k)."""
        c = self.coeffs[:, cols].astype(complex)  # (K, L)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(c) + np.multiply.outer(self.exps, np.log(z))
            terms = np.exp(logs - np.max(logs.real, axis=0))
            terms = np.where(c == 0, 0, terms)
            return z * np.sum(terms, axis=0) / np.sum(self.exps[:, None] * terms, axis=0)

    def bounds(self):
        """Lower: the geometric mean of the nonzero roots' moduli, |c_low/c_d|^{1/(d−low)} ≤ ρ.
        Upper: Cauchy's bound, the positive root R of |c_d|·r^d = Σ_{k<d} |c_k|·r^k (every
        root has |z| ≤ R), found by Newton in u = ln r from the lower bound: the equation is
        increasing and concave in u, so Newton climbs to R monotonically."""
        cols = np.arange(self.coeffs.shape[1])
        lead = np.abs(self.coeffs[np.argmax(self.exps[:, None] == self.degree, axis=0), cols])
        const = np.abs(self.coeffs[np.argmax(self.exps[:, None] == self.low, axis=0), cols])
        span = np.maximum(self.degree - self.low, 1)
        lo = (const / lead) ** (1.0 / span)
        below = (self.exps[:, None] < self.degree) & (self.coeffs != 0)  # (K, M)
        with np.errstate(divide="ignore"):
            log_c = np.where(below, np.log(np.abs(self.coeffs)), -np.inf)
        k = self.exps[:, None].astype(float)
        u = np.log(lo)
        for _ in range(100):
            terms = log_c + k * u
            top = np.max(terms, axis=0)
            weights = np.exp(terms - top)
            total = np.sum(weights, axis=0)
            h = np.log(lead) + self.degree * u - top - np.log(total)  # ≤ 0 left of ln R
            slope = self.degree - np.sum(k * weights, axis=0) / total  # > 0
            step = -h / slope
            u = u + np.maximum(step, 0.0)
            if np.all(step <= 1e-15 * np.maximum(1.0, np.abs(u))):
                break
        hi = np.exp(u) * (1 + 1e-9)
        return lo, np.maximum(hi, lo * (1 + 1e-9))


def count_inside(f: CircleFunction, r: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Zeros of column ``cols[i]`` inside |z| = r[i] (float; NaN where one is on the circle)."""
    out = np.empty(cols.size)
    chunk = max(1, _CELLS // f.theta.size)
    for start in range(0, cols.size, chunk):
        part = slice(start, start + chunk)
        c, radius = cols[part], r[part]
        values = f.samples(radius, c)

        def evaluate(t, k, c=c, radius=radius):
            return f.at(radius[k] * np.exp(1j * t), c[k])

        rate = None
        if hasattr(f, "at_and_phase_rate"):  # clustered zeros near the circle (winding_turns)

            def rate(t, k, c=c, radius=radius):
                return f.at_and_phase_rate(radius[k] * np.exp(1j * t), c[k])

        turns = winding_turns(f.theta, values, evaluate, rate)
        out[part] = np.where(np.abs(turns - np.round(turns)) <= 0.05, np.round(turns), np.nan)
    return out


@dataclass(frozen=True)
class LargestRoot:
    """`largest_root` per column: ``radius`` ρ, the ``root`` of that modulus (upper half
    plane) and ``resolved`` — False where ρ is the bisection's upper end (a cluster)."""

    radius: np.ndarray
    root: np.ndarray
    resolved: np.ndarray


def largest_root(f: CircleFunction) -> LargestRoot:
    """The zero of largest modulus of every column, by bisection and Newton (module doc)."""
    size = f.degree.size
    lo, hi = (np.asarray(b, dtype=float).copy() for b in f.bounds())
    constant = f.degree == getattr(f, "low", 0)  # c·z^k: every zero at 0
    radius = np.where(constant, 0.0, np.nan)
    root = np.zeros(size, dtype=complex)
    resolved = constant.copy()
    todo = np.flatnonzero(~constant)
    for stage in _STAGES:
        _bisect(f, lo, hi, todo, min(1e-3, stage / max(int(f.degree.max()), 1)))
        z = newton(f, _start(f, hi[todo], todo), todo)
        ok = _only_root_above(f, z, lo[todo], hi[todo], todo)
        done = todo[ok]
        radius[done], root[done], resolved[done] = np.abs(z[ok]), z[ok], True
        todo, z = todo[~ok], z[~ok]
    _bisect(f, lo, hi, todo, 4 * np.finfo(float).eps)
    radius[todo] = hi[todo]
    start = _start(f, hi[todo], todo)
    z = np.array([_cluster_root(f, hi[c], c) for c in todo], dtype=complex)
    near = np.abs(np.abs(z) - hi[todo]) <= 1e-6 * hi[todo]  # else Newton left for another zero
    root[todo] = np.where(near, z, start)
    root = np.where(root.imag < 0, np.conj(root), root)
    return LargestRoot(radius, root, resolved)


def dominant_column(f: CircleFunction) -> int:
    """The column whose largest zero has the largest modulus, by bisection on that maximum.

    A circle that holds every zero of some columns but not of others drops the former: after
    a few counts of all columns only the contenders are counted.
    """
    lo, hi = f.bounds()
    top_lo, top_hi = float(np.max(lo)), float(np.max(hi))
    cols = np.flatnonzero(hi > top_lo)
    while cols.size > 1:
        mid = math.exp(0.5 * (math.log(top_lo) + math.log(top_hi)))
        if not top_lo < mid < top_hi:
            break
        inside = count_inside(f, np.full(cols.size, mid), cols) == f.degree[cols]
        if inside.all():
            top_hi = mid
        else:
            top_lo, cols = mid, cols[~inside]
    return int(cols[0])


def _only_root_above(f, z, lo, hi, cols) -> np.ndarray:
    """True where z (a zero of column ``cols[i]``) has the largest modulus of its column.

    z must lie in the bracket [lo, hi) of ρ, and the annulus |z|·(1 ± 1e-9) must hold z (and
    z̄) and nothing else while every zero lies inside its outer circle: counts d − 1 (or
    d − 2) and d.
    """
    modulus = np.abs(z)
    ok = np.isfinite(modulus) & (modulus >= lo * (1 - 1e-12)) & (modulus <= hi * (1 + 1e-12))
    check = np.flatnonzero(ok)
    if check.size:
        c = cols[check]
        single = np.where(np.abs(z[check].imag) <= 1e-12 * modulus[check], 1, 2)
        outer = count_inside(f, modulus[check] * (1 + _ANNULUS), c)
        inner = count_inside(f, modulus[check] * (1 - _ANNULUS), c)
        ok[check] = (outer == f.degree[c]) & (inner == f.degree[c] - single)
    return ok


def _bisect(f, lo, hi, cols, rtol) -> None:
    """Shrink [lo, hi) in place (geometric midpoints) until hi/lo − 1 ≤ rtol (or no float
    lies between them)."""
    while cols.size:
        mid = np.exp(0.5 * (np.log(lo[cols]) + np.log(hi[cols])))
        open_ = (hi[cols] > lo[cols] * (1 + rtol)) & (mid > lo[cols]) & (mid < hi[cols])
        cols, mid = cols[open_], mid[open_]
        if not cols.size:
            break
        below = count_inside(f, mid, cols) == f.degree[cols]  # every zero inside: ρ < mid
        hi[cols[below]] = mid[below]
        lo[cols[~below]] = mid[~below]


def _start(f, r, cols) -> np.ndarray:
    """The sample point of |z| = r where |f| is smallest, per column (Newton's start)."""
    out = np.empty(cols.size, dtype=complex)
    chunk = max(1, _CELLS // f.theta.size)
    for start in range(0, cols.size, chunk):
        part = slice(start, start + chunk)
        j = np.argmin(f.log_modulus(r[part], cols[part]), axis=0)
        out[part] = r[part] * np.exp(1j * f.theta[j])
    return out


def _cluster_root(f: CircleFunction, r: float, col: int) -> complex:
    """Column ``col``'s zero of largest modulus that Newton reaches from the (at most
    `_CLUSTER_STARTS` smallest) local minima of |f| on the half circle |z| = r (module doc);
    NaN where no start converges."""
    cols = np.array([col])
    log_f = f.log_modulus(np.array([r]), cols)[:, 0]
    left, right = np.r_[np.inf, log_f[:-1]], np.r_[log_f[1:], np.inf]
    minima = np.flatnonzero((log_f <= left) & (log_f <= right))
    minima = minima[np.argsort(log_f[minima])[:_CLUSTER_STARTS]]
    pairs = np.full(minima.size, col)
    z = newton(f, r * np.exp(1j * f.theta[minima]), pairs)
    with np.errstate(invalid="ignore", divide="ignore"):
        step = np.abs(f.newton_step(z, pairs))
    converged = np.isfinite(z) & (step <= 1e-12 * np.abs(z)) & (np.abs(z) <= r * (1 + 1e-6))
    if not converged.any():
        return complex(np.nan, np.nan)
    return complex(z[converged][np.argmax(np.abs(z[converged]))])


def newton(f: CircleFunction, z, cols, iterations: int = 100) -> np.ndarray:
    """Newton's method on paired (z, column), to machine precision."""
    z = z.copy()
    todo = np.arange(z.size)
    for _ in range(iterations):
        if todo.size == 0:
            break
        step = f.newton_step(z[todo], cols[todo])
        step = np.where(np.isfinite(step), step, 0)
        z[todo] -= step
        todo = todo[np.abs(step) > 1e-15 * np.abs(z[todo])]
    return z


__all__ = [
    "SAMPLES_PER_DEGREE",
    "CircleFunction",
    "HalfCircleGrid",
    "LargestRoot",
    "SparseColumns",
    "count_inside",
    "dominant_column",
    "largest_root",
    "newton",
    "on_circle",
    "roots_inside",
    "scaled_terms",
    "winding_turns",
]
