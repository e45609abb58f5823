r"""Stability heatmaps: the spectral radius of a rule over a grid of two parameters.

An axis is written ``P:lo:hi:n[:log]``: parameter P from lo to hi in n points, geometric with
``log``.  P is ``lr``, ``lam*lr`` (Kosson's normalized rate ηλ: λ = 1 and lr = the value;
``lam·lr`` is the same name) or any parameter of the rule (``momentum``, ``tau``, ``delta``,
``decay``, ``horizon``, ...).  Delay axes are rounded to integers (repeats dropped).

Every grid point gets ρ, the largest root modulus of the rule's characteristic polynomial
(`stability.dynamics.linear.characteristic_polynomial`), computed in one batch:

* real parameters become arrays, so the polynomial p(ω) = C0(ω) + lr·C1(ω) of the whole grid
  is built at once and its roots come from one batched companion-eigenvalue call
  (`stability.spectrum.spectral_radius`);
* delays change the degree and cannot be arrays: the grid is split into groups of equal
  delays, one batch per group (no padding to a common degree: that would only make the
  O(d³) eigen-solves of the smaller groups larger);
* degrees above `stability.spectrum.GRID_DENSE_MAX_DEGREE` (delays above ~60) use the
  argument principle instead of eigenvalues (`stability.winding.largest_root`): O(d·terms)
  time and memory per point instead of O(d³) and O(d²), so a grid costs O(points·τ);
* **accuracy**: a float64 companion root is off by about ε·(Σ|z|^k)·max|c|/|p'(z)|.  That is
  ~1e-15 for a simple root but ~1e-8 at a (near) double root, e.g. along the critical-damping
  curve of heavy ball.  Points where this estimate (×100 for safety) exceeds `REFINE_ABOVE`
  × max(1, ρ) for a root near the top modulus are recomputed with
  `stability.spectrum.dominant_root` (mpmath, the same path as ``stability radius``), so
  every value agrees with ``stability radius`` to 1e-10 (relative where ρ > 1).  Polynomials
  whose roots reach beyond 16 are solved in a rescaled variable (`stability.spectrum.root_scaled`).

Also here: the exact max-lr curve over the other axis (`stability.analysis.boundary.max_lr_grid`)
and the closed-form bounds of PipeMare Lemma 1 and 3, for the figure's overlays.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.analysis.boundary import check_finite, max_lr_grid
from stability.dynamics.linear import characteristic_polynomial
from stability.limits import HEATMAP_MAX_POINTS_PER_AXIS, HEATMAP_MAX_WORK
from stability.polynomial import SparsePoly
from stability.result import Result, output
from stability.rules.registry import get_spec
from stability.rules.spec import RuleSpec
from stability.spectrum import (
    ERROR_SAFETY,
    GRID_DENSE_MAX_DEGREE,
    companion_root_error,
    dominant_root,
    root_scaled,
    roots,
)
from stability.winding import SparseColumns, largest_root

STEP_AXES = ("lr", "lam*lr")
"""Axis names for the step size: lr itself, or the normalized rate ηλ (λ = 1)."""

REFINE_ABOVE = 1e-10
"""Estimated float64 error of a top root (×100), relative to max(1, ρ), above which a point is
refined in mpmath."""

_BAND = 1e-3  # roots within this relative distance of the top modulus are checked
_CHUNK = 16384  # grid points per eigenvalue batch (progress granularity, memory)
_SPARSE_CHUNK = 2**18  # grid points × degree per argument-principle batch (progress, memory)


@dataclass(frozen=True)
class Axis(Result):
    """One heatmap axis: ``name`` from ``lo`` to ``hi`` in ``n`` points (geometric if ``log``)."""

    name: str = output("the parameter along the axis (lr, lam*lr or a rule parameter)")
    lo: float = output("first value")
    hi: float = output("last value")
    n: int = output("number of points (after rounding a delay axis to distinct integers)")
    log: bool = output("geometric spacing", default=False)
    values: np.ndarray = output(
        "the points", kind="array of number", default=None, compare=False, repr=False
    )

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.lo:g}:{self.hi:g}:{self.n}" + (":log" if self.log else "")

    @staticmethod
    def of(name: str, values: Any, log: bool = False) -> Axis:
        """An axis through given values, e.g. points of special interest."""
        values = np.asarray(values)
        return Axis(name, float(values.min()), float(values.max()), values.size, log, values)


def parse_axis(text: str, flag: str = "axis") -> Axis:
    """Parse ``P:lo:hi:n[:log]`` (`ValueError` with one line naming ``flag`` if malformed)."""
    usage = f"{flag} must be P:lo:hi:n[:log] (e.g. lr:1e-3:10:256:log)"
    if not isinstance(text, str):
        raise ValueError(f"{usage}, got {text!r}")
    parts = text.split(":")
    if len(parts) not in (4, 5) or not parts[0]:
        raise ValueError(f"{usage}, got {text!r}")
    name = parts[0].replace("·", "*")
    try:
        lo, hi = float(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"{usage}; lo and hi must be numbers, got {text!r}") from None
    try:
        n = int(parts[3])
    except ValueError:
        raise ValueError(f"{usage}; n must be an integer, got {parts[3]!r}") from None
    if len(parts) == 5 and parts[4] != "log":
        raise ValueError(f"{usage}; the optional fifth field must be 'log', got {parts[4]!r}")
    log = len(parts) == 5
    if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
        raise ValueError(f"{flag}: lo < hi must be finite numbers, got lo={lo:g}, hi={hi:g}")
    if not 2 <= n <= HEATMAP_MAX_POINTS_PER_AXIS:
        raise ValueError(
            f"{flag}: n must be an integer in [2, {HEATMAP_MAX_POINTS_PER_AXIS}], got {n}"
        )
    if log and lo <= 0:
        raise ValueError(f"{flag}: a log axis needs lo > 0, got lo={lo:g}")
    values = np.geomspace(lo, hi, n) if log else np.linspace(lo, hi, n)
    return Axis(name, lo, hi, n, log, values)


def _resolve_axis(spec: RuleSpec, axis: Axis, which: str) -> Axis:
    """Check the axis ``which`` (x or y) names a parameter of the rule; round delay axes to
    integers."""
    names = {p.name: p for p in spec.params}
    if axis.name in STEP_AXES:
        return axis
    if axis.name not in names:
        allowed = ", ".join((*STEP_AXES, *names))
        raise ValueError(
            f"{which}: axis parameter {axis.name!r} is not a parameter of rule {spec.name!r} "
            f"(axes: {allowed})"
        )
    param = names[axis.name]
    if param.kind not in ("real", "delay"):
        raise ValueError(f"{which}: {axis.name} is not a number and cannot be an axis")
    if param.kind == "delay":
        values = np.unique(np.round(axis.values).astype(np.int64))
        return Axis(axis.name, axis.lo, axis.hi, values.size, axis.log, values)
    return axis


# -- the grid ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heatmap(Result):
    """ρ over a grid: ``radius[i, j]`` at ``y.values[i]``, ``x.values[j]``.

    ``refined`` marks the points recomputed in mpmath (clustered top roots); ``fixed`` holds
    the other parameters (and ``lr`` if neither axis is the step size).  The summary fields
    (``points`` … ``refined_points``) are derived from the grid; ``png`` and ``csv`` name the
    files ``st.heatmap`` wrote (null: none).
    """

    rule: str = output("the rule's registry name")
    x: Axis = output("horizontal axis (columns of the grid)")
    y: Axis = output("vertical axis (rows of the grid)")
    radius: np.ndarray = output(
        "spectral radius ρ: one row per y value, one column per x value",
        kind="array of rows of number",
        repr=False,
    )
    refined: np.ndarray = output(
        "points whose ρ was recomputed in mpmath", kind="array of rows of boolean", repr=False
    )
    fixed: dict[str, Any] = output("the other parameters (lr when no axis is the step size)")
    seconds: float = output("time of the grid computation", "s", default=0.0)
    png: str | None = output("figure written (null: none)", default=None)
    csv: str | None = output("table written, one row per point (null: none)", default=None)
    points: int = output("grid points", init=False)
    stable_fraction: float = output("fraction of points with ρ < 1", init=False)
    radius_min: float | None = output("smallest finite ρ", init=False)
    radius_max: float | None = output("largest finite ρ", init=False)
    refined_points: int = output("points refined in mpmath", init=False)
    half_life: np.ndarray = output(
        "half-life −ln 2/ln ρ (Kosson Sec. 3.4) per point, as radius; null where ρ ≥ 1",
        "steps",
        kind="array of rows of (number or null)",
        repr=False,
        init=False,
    )
    best: dict[str, float] | None = output(
        "the fastest point, smallest ρ: {x name: value, y name: value, radius, half_life} "
        "(null: no stable point)",
        init=False,
    )

    def __post_init__(self) -> None:
        finite = self.radius[np.isfinite(self.radius)]
        rho = self.radius
        with np.errstate(divide="ignore"):
            h = -math.log(2.0) / np.log(np.where(rho < 1, rho, 0.5))
        half_life = np.where(rho >= 1, np.inf, np.where(rho <= 0, 0.0, h))
        summary = {
            "points": int(self.radius.size),
            "stable_fraction": float(np.mean(self.radius < 1.0)),
            "radius_min": float(finite.min()) if finite.size else None,
            "radius_max": float(finite.max()) if finite.size else None,
            "refined_points": int(np.count_nonzero(self.refined)),
            "half_life": half_life,
            "best": None,
        }
        if np.any(rho < 1):
            i, j = np.unravel_index(np.argmin(np.where(rho < 1, rho, np.inf)), rho.shape)
            summary["best"] = {
                self.x.name: float(self.x.values[j]),
                self.y.name: float(self.y.values[i]),
                "radius": float(rho[i, j]),
                "half_life": float(half_life[i, j]),
            }
        for key, value in summary.items():
            object.__setattr__(self, key, value)

    @property
    def stable(self) -> np.ndarray:
        return self.radius < 1.0

    def metric(self, name: str) -> np.ndarray:
        """``radius``, ``half-life`` or ``stable`` (1.0 / 0.0)."""
        if name == "radius":
            return self.radius
        if name == "half-life":
            return self.half_life
        if name == "stable":
            return self.stable.astype(float)
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {name!r}")


METRICS = ("radius", "half-life", "stable")


def heatmap(
    name: str,
    x: Axis,
    y: Axis,
    *,
    progress: Callable[[int, int], None] | None = None,
    **params: Any,
) -> Heatmap:
    """Spectral radius of rule ``name`` over the grid ``y × x`` (module doc).

    ``params`` fixes the other parameters (``lr`` among them when no axis is the step size).
    ``progress(done, total)`` is called as grid points are finished.
    """
    start = time.perf_counter()
    spec = get_spec(name)
    x, y = _resolve_axis(spec, x, "x"), _resolve_axis(spec, y, "y")
    if x.name == y.name or {x.name, y.name} == set(STEP_AXES):
        raise ValueError(f"y: the two axes must be different parameters, got {x.name} and {y.name}")
    for axis in (x, y):
        if axis.name in params:
            raise ValueError(f"{axis.name} is an axis; do not also fix it")
    step_axis = next((a.name for a in (x, y) if a.name in STEP_AXES), None)
    if step_axis == "lam*lr" and "lam" in params:
        raise ValueError("a lam*lr axis sets lam = 1; do not also give lam")
    if step_axis is None and params.get("lr") is None:
        raise ValueError("lr must be given when neither axis is lr or lam*lr")
    fixed = dict(params)
    if step_axis == "lam*lr":
        fixed["lam"] = 1.0

    delay_axes = [a for a in (x, y) if _is_delay(spec, a.name)]
    shape = (y.values.size, x.values.size)
    radius = np.empty(shape)
    refined = np.zeros(shape, dtype=bool)
    total, done = radius.size, 0
    check_work(total * point_cost(0), total, 0)  # before building anything: the grid's size
    polys = [
        (block, _block_polynomial(spec, fixed, x, y, block)) for block in _blocks(x, y, delay_axes)
    ]
    check_work(
        sum(math.prod(block.shape) * point_cost(poly.degree) for block, poly in polys),
        total,
        max(poly.degree for _, poly in polys),
    )
    for block, poly in polys:
        radii = _radii if poly.degree <= GRID_DENSE_MAX_DEGREE else _sparse_radii
        rho, ref = radii(poly, block.shape, progress=progress, done=done, total=total)
        radius[block.index] = rho.reshape(block.shape)
        refined[block.index] = ref.reshape(block.shape)
        done += rho.size
    seconds = time.perf_counter() - start
    return Heatmap(spec.name, x, y, radius, refined, fixed, seconds)


def _block_polynomial(spec: RuleSpec, fixed: dict, x: Axis, y: Axis, block) -> SparsePoly:
    """The normalized characteristic polynomial of a block, its coefficients over the block."""
    values = dict(fixed)
    for axis, vals in ((x, block.x_values), (y, block.y_values)):
        key = "lr" if axis.name in STEP_AXES else axis.name
        values[key] = vals
    lr = values.pop("lr")
    rule, model = spec.build(**values)
    poly = characteristic_polynomial(rule, model).at(np.asarray(lr, dtype=float))
    check_finite([poly], model, rule)
    return poly.normalized()


def point_cost(degree: int) -> float:
    """Work per grid point in units of ~10 ns (measured, one core): d³ + 4000 for companion
    eigenvalues (d ≤ `GRID_DENSE_MAX_DEGREE`), 1400·d for the argument principle above."""
    return degree**3 + 4000.0 if degree <= GRID_DENSE_MAX_DEGREE else 1400.0 * degree


def check_work(work: float, points: int, degree: int) -> None:
    """Refuse, up front and in one line, a grid whose work Σ points·`point_cost`(degree)
    exceeds `HEATMAP_MAX_WORK` (~10 s on one core)."""
    if work > HEATMAP_MAX_WORK:
        raise ValueError(
            "--x/--y: the grid's work (points × cost per point) must be ≤ "
            f"{HEATMAP_MAX_WORK:.0e}, got {work:.1e} ({points} points up to degree {degree}); "
            "use fewer points or a smaller tau (docs/limits.md)"
        )


def _is_delay(spec: RuleSpec, name: str) -> bool:
    return any(p.name == name and p.kind == "delay" for p in spec.params)


@dataclass(frozen=True)
class _Block:
    """A sub-grid with equal delays: where it goes, and its parameter values (broadcastable)."""

    index: tuple[slice, slice]
    x_values: np.ndarray | int
    y_values: np.ndarray | int
    shape: tuple[int, int]


def _blocks(x: Axis, y: Axis, delay_axes: list[Axis]):
    nx, ny = x.values.size, y.values.size
    xv, yv = x.values.astype(float)[None, :], y.values.astype(float)[:, None]
    if not delay_axes:
        yield _Block((slice(None), slice(None)), xv, yv, (ny, nx))
    elif len(delay_axes) == 2:
        for i, yi in enumerate(y.values):
            for j, xj in enumerate(x.values):
                yield _Block((slice(i, i + 1), slice(j, j + 1)), int(xj), int(yi), (1, 1))
    elif delay_axes[0] is x:
        for j, xj in enumerate(x.values):
            yield _Block((slice(None), slice(j, j + 1)), int(xj), yv, (ny, 1))
    else:
        for i, yi in enumerate(y.values):
            yield _Block((slice(i, i + 1), slice(None)), xv, int(yi), (1, nx))


def _dense_grid(poly: SparsePoly, shape: tuple[int, int]) -> np.ndarray:
    """Dense coefficients (d + 1, points), highest degree first, broadcast to the block."""
    d = poly.degree
    out = np.zeros((d + 1, *shape))
    for k, c in poly.terms.items():
        out[d - k] = np.broadcast_to(np.asarray(c, dtype=float), shape)
    return out.reshape(d + 1, -1)


def _radii(poly: SparsePoly, shape, *, progress, done: int, total: int):
    """ρ per grid point by companion eigenvalues, refined in mpmath where float64 is not
    accurate to 1e-10."""
    coeffs = _dense_grid(poly, shape)
    n = coeffs.shape[1]
    rho = np.empty(n)
    refined = np.zeros(n, dtype=bool)
    for start in range(0, n, _CHUNK):
        cols = slice(start, min(start + _CHUNK, n))
        c = coeffs[:, cols]
        scaled, scale = root_scaled(c)
        u = roots(scaled)  # already O(1): `roots` leaves it unscaled
        mods = np.abs(u)
        top = mods.max(axis=-1) if u.shape[-1] else np.zeros(c.shape[1])
        rho[cols] = top * scale
        error = _root_error_estimate(scaled, u, mods, top) * scale
        suspect = error > REFINE_ABOVE * np.maximum(1.0, rho[cols])
        for k in np.flatnonzero(suspect):
            column = c[:, k]
            rho[start + k] = dominant_root(SparsePoly.from_dense(column)).radius
            refined[start + k] = True
        if progress is not None:
            progress(done + min(start + _CHUNK, n), total)
    return rho, refined


def _sparse_radii(poly: SparsePoly, shape, *, progress, done: int, total: int):
    """ρ per grid point by the argument principle (`stability.winding.largest_root`), O(d·K)
    per point; points whose dominant root is clustered or ill-conditioned (float64 error
    estimate above `REFINE_ABOVE`) are recomputed in mpmath."""
    exps, coeffs = poly.sparse_arrays()
    coeffs = np.broadcast_to(coeffs.reshape(exps.size, *coeffs.shape[1:]), (exps.size, *shape))
    coeffs = coeffs.reshape(exps.size, -1)
    n = coeffs.shape[1]
    rho = np.empty(n)
    refined = np.zeros(n, dtype=bool)
    chunk = max(1, _SPARSE_CHUNK // poly.degree)
    for start in range(0, n, chunk):
        cols = slice(start, min(start + chunk, n))
        found = largest_root(SparseColumns(exps, coeffs[:, cols]))
        rho[cols] = found.radius
        error = _sparse_error_estimate(exps, coeffs[:, cols], found.root)
        suspect = error > REFINE_ABOVE * np.maximum(1.0, found.radius)
        for k in np.flatnonzero(~found.resolved | suspect):
            column = SparsePoly(dict(zip(exps.tolist(), coeffs[:, start + k], strict=True)))
            rho[start + k] = dominant_root(column).radius
            refined[start + k] = True
        if progress is not None:
            progress(done + min(start + chunk, n), total)
    return rho, refined


def _sparse_error_estimate(exps, coeffs, z) -> np.ndarray:
    """`_root_error_estimate` for one root per column of a sparse polynomial (log-scaled)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(np.abs(coeffs)) + np.multiply.outer(exps, np.log(np.abs(z)))
        top = np.max(logs, axis=0)
        scale = np.exp(logs - top)  # |c_k|·|z|^k / max
        phase = np.exp(1j * np.multiply.outer(exps, np.angle(z)))
        dp = np.sum(exps[:, None] * np.sign(coeffs) * scale * phase, axis=0)  # z·p'(z) / max
        err = ERROR_SAFETY * np.finfo(float).eps * np.sum(scale, axis=0) * np.abs(z) / np.abs(dp)
    return np.where(np.isfinite(err), err, np.inf)


def _root_error_estimate(c, z, mods, top) -> np.ndarray:
    """Largest estimated float64 error (`stability.spectrum.companion_root_error`) among the
    roots within `_BAND` of the top modulus, per column."""
    if z.shape[-1] == 0:
        return np.zeros(c.shape[1])
    col, idx = np.nonzero(mods >= (top * (1 - _BAND))[:, None])
    err = companion_root_error(c[:, col], z[col, idx])
    out = np.zeros(c.shape[1])
    np.maximum.at(out, col, err)
    return out


# -- overlays ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Curve:
    """A curve for the figure: the step-size bound as a function of the other axis."""

    label: str
    other: np.ndarray  # values of the non-step axis
    step: np.ndarray  # lr (or ηλ) on the curve; NaN where there is none


def max_lr_curve(hm: Heatmap) -> Curve | None:
    """Exact maximal stable step over the non-step axis (boundary locus), if one axis is lr."""
    step_axis, other = _step_and_other(hm)
    if step_axis is None:
        return None
    spec = get_spec(hm.rule)
    base = {k: v for k, v in hm.fixed.items() if k != "lr"}
    if _is_delay(spec, other.name):
        step = np.array([_max_lr(spec, {**base, other.name: int(v)}) for v in other.values])
    else:
        try:
            step = _max_lr(spec, {**base, other.name: other.values.astype(float)})
        except ValueError:  # the locus refuses a point: draw the others, point by point
            step = np.array([_max_lr_or_nan(spec, base, other.name, v) for v in other.values])
        step = np.broadcast_to(step, other.values.shape)  # constant if the axis is inert
    step = np.where(np.isfinite(step) & (step > 0), step, np.nan)
    return Curve("exact max stable step (boundary locus)", other.values, step)


def _max_lr(spec: RuleSpec, values: dict) -> np.ndarray:
    rule, model = spec.build(**values)
    return np.asarray(max_lr_grid(rule, model)[0], dtype=float)


def _max_lr_or_nan(spec: RuleSpec, base: dict, name: str, value: float) -> float:
    """One point of the curve; NaN (not drawn) with a warning where the locus refuses it (a
    valid point: the radius map is still drawn, e.g. an LWP horizon scale of 10²⁰)."""
    try:
        return float(_max_lr(spec, {**base, name: float(value)}))
    except ValueError as refusal:
        warnings.warn(f"max-lr curve not drawn at {name} = {value:g}: {refusal}", stacklevel=2)
        return math.nan


def lemma_bound(rule: str, tau: Any, lam: Any) -> tuple[str, Any] | None:
    """The closed-form step bound drawn for a rule (`stability.analysis.closed_forms`) or ``None``.

    sgd: stable iff α < 2/λ·sin(π/(4τ+2)) (PipeMare Lemma 1); momentum: some α ≤
    4/λ·sin(π/(4τ+2)) is unstable for every β (PipeMare Lemma 3).
    """
    from stability.analysis.closed_forms import lemma1_threshold, lemma3_bound

    tau, lam = np.asarray(tau, dtype=float), np.asarray(lam, dtype=float)
    if rule == "sgd":
        return "PipeMare Lemma 1: 2/λ·sin(π/(4τ+2))", lemma1_threshold(tau, lam)
    if rule == "momentum":
        return "PipeMare Lemma 3: 4/λ·sin(π/(4τ+2))", lemma3_bound(tau, lam)
    return None


def lemma_curve(hm: Heatmap) -> Curve | None:
    """`lemma_bound` over the non-step axis (τ or λ vary along it; else a constant)."""
    step_axis, other = _step_and_other(hm)
    if step_axis is None:
        return None
    spec = get_spec(hm.rule)
    values = spec.resolve(**{k: v for k, v in hm.fixed.items() if k != "lr"})
    tau = other.values if other.name == "tau" else values.get("tau")
    lam = other.values if other.name == "lam" else values.get("lam")
    bound = lemma_bound(hm.rule, tau, lam)
    if bound is None or tau is None:
        return None
    label, step = bound
    return Curve(label, other.values, np.broadcast_to(step, other.values.shape))


def _step_and_other(hm: Heatmap) -> tuple[str | None, Axis]:
    if hm.x.name in STEP_AXES:
        return hm.x.name, hm.y
    if hm.y.name in STEP_AXES:
        return hm.y.name, hm.x
    return None, hm.x


# -- output ---------------------------------------------------------------------------------


def write_csv(hm: Heatmap, path) -> None:
    """One row per grid point: x, y, spectral_radius, half_life, stable, refined.

    Numbers are written as Python's shortest round-trip repr, so passing the parameter values
    back to ``stability radius`` reproduces the same polynomial bit for bit.
    """
    from stability.files import atomic_write

    yy, xx = np.meshgrid(hm.y.values, hm.x.values, indexing="ij")
    columns = [
        [repr(float(v)) for v in a.ravel().tolist()] for a in (xx, yy, hm.radius, hm.half_life)
    ]
    columns += [[str(int(v)) for v in a.ravel().tolist()] for a in (hm.stable, hm.refined)]
    header = f"{hm.x.name},{hm.y.name},spectral_radius,half_life,stable,refined\n"

    def write(fh):
        fh.write(header)
        fh.write("\n".join(map(",".join, zip(*columns, strict=True))))
        fh.write("\n")

    atomic_write(path, write)
