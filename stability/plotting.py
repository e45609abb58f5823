"""Matplotlib figures for heatmaps and the paper reproductions (no computation of their own).

Conventions: the unstable region (ρ ≥ 1) is black, as in Kosson Fig. 6; axes carry the
symbols of the papers (η, λ, m, τ, Δ, D, T) with units and scale; colour bars are labelled.
Figures are written atomically (`stability.files.atomic_write`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap, LogNorm, Normalize
from matplotlib.patches import Patch
from matplotlib.patheffects import withStroke
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from stability.files import atomic_write

LABELS = {
    "lr": "step size η (lr)",
    "lam*lr": "normalized rate ηλ (λ = 1)",
    "lam": "curvature λ",
    "momentum": "momentum m",
    "tau": "delay τ = D (steps)",
    "tau_fwd": "forward delay τ_fwd (steps)",
    "tau_bkwd": "backward delay τ_bkwd (steps)",
    "tau_recomp": "recompute delay τ_recomp (steps)",
    "delta": "discrepancy sensitivity Δ",
    "phi": "recompute sensitivity Φ",
    "decay": "T2 decay D (PipeMare)",
    "gamma": "T2 accumulator decay γ",
    "horizon": "LWP horizon T (steps)",
    "horizon_scale": "prediction scale α (T = αD)",
    "sc_a": "Spike Compensation a",
    "sc_b": "Spike Compensation b",
    "sc_scale": "SC scale (SC_{αD})",
    "kappa": "condition number κ",
}

METRIC_LABELS = {
    "radius": "spectral radius ρ = max |ω|",
    "half-life": "half-life −ln2 / ln ρ (steps, log scale)",
    "stable": "stable (ρ < 1)",
}

UNSTABLE = "black"


def axis_label(name: str, log: bool = False) -> str:
    """The axis label of a parameter, with ', log scale' for geometric axes."""
    return LABELS.get(name, name) + (", log scale" if log else "")


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_of_ten(value: float, _pos=None) -> str:
    """'10³'-style labels in plain Unicode (no mathtext: rendering stays fast)."""
    if value <= 0:
        return ""
    exponent = round(np.log10(value))
    if not np.isclose(value, 10.0**exponent, rtol=1e-9):
        return ""
    return "10" + str(exponent).translate(_SUPERSCRIPT)


def log_axis(axis) -> None:
    """Decade ticks labelled 10ⁿ on a log-scaled ``ax.xaxis`` / ``ax.yaxis``."""
    axis.set_major_locator(LogLocator(base=10.0))
    axis.set_major_formatter(FuncFormatter(_power_of_ten))
    axis.set_minor_formatter(NullFormatter())


def _edges(values: np.ndarray, log: bool) -> np.ndarray:
    """Cell edges around grid values (geometric midpoints on log axes)."""
    v = np.log(values) if log else np.asarray(values, dtype=float)
    if v.size == 1:
        edges = np.array([v[0] - 0.5, v[0] + 0.5])
    else:
        mid = 0.5 * (v[1:] + v[:-1])
        edges = np.concatenate(([2 * v[0] - mid[0]], mid, [2 * v[-1] - mid[-1]]))
    return np.exp(edges) if log else edges


def heatmap_axes(
    ax,
    x_values: np.ndarray,
    y_values: np.ndarray,
    values: np.ndarray,
    stable: np.ndarray,
    *,
    metric: str = "radius",
    x_log: bool = False,
    y_log: bool = False,
    norm: Any = None,
):
    """Draw one heatmap on ``ax``: the metric where stable, black where ρ ≥ 1.

    ``values`` and ``stable`` have shape (len(y_values), len(x_values)).  Returns the mesh
    (for a colour bar).
    """
    if metric == "stable":
        cmap = ListedColormap([UNSTABLE, "#7fb8e0"])
        data = np.asarray(stable, dtype=float)
        norm = norm or Normalize(0.0, 1.0)
    else:
        cmap = plt.get_cmap("viridis").with_extremes(bad=UNSTABLE)
        data = np.ma.masked_where(~np.asarray(stable, bool), values)
        if norm is None and metric == "half-life":
            finite = np.asarray(values)[np.asarray(stable, bool) & (np.asarray(values) > 0)]
            lo, hi = (finite.min(), finite.max()) if finite.size else (1.0, 10.0)
            norm = LogNorm(lo, max(hi, lo * 10))
        norm = norm or Normalize(0.0, 1.0)
    mesh = ax.pcolormesh(
        _edges(x_values, x_log),
        _edges(y_values, y_log),
        data,
        cmap=cmap,
        norm=norm,
        shading="flat",
        rasterized=True,
    )
    mesh.set_in_layout(False)  # inside the axes anyway; measuring 65k cells costs seconds
    ax.set_xscale("log" if x_log else "linear")
    ax.set_yscale("log" if y_log else "linear")
    for axis, log in ((ax.xaxis, x_log), (ax.yaxis, y_log)):
        if log:
            log_axis(axis)
    ax.set_facecolor(UNSTABLE)
    return mesh


def colorbar(fig, mesh, ax, metric: str):
    bar = fig.colorbar(mesh, ax=ax, fraction=0.05, pad=0.02)
    bar.set_label(METRIC_LABELS[metric])
    if metric == "stable":
        bar.set_ticks([0.25, 0.75], labels=["unstable", "stable"])
    return bar


def heatmap_figure(hm, metric: str = "radius", *, curves=(), title: str | None = None):
    """The figure of ``stability heatmap``: one heatmap, colour bar, overlays, legend.

    ``hm`` is a `stability.analysis.radius_grid.Heatmap`; ``curves`` are
    `stability.analysis.radius_grid.Curve`s of the step-size bound over the other axis (drawn as
    lines on the step axis).
    """
    fig, ax = plt.subplots(figsize=(7.0, 5.2))
    fig.subplots_adjust(left=0.1, right=0.87, bottom=0.11, top=0.86)  # no layout engine: fast
    mesh = heatmap_axes(
        ax,
        hm.x.values,
        hm.y.values,
        hm.metric(metric),
        hm.stable,
        metric=metric,
        x_log=hm.x.log,
        y_log=hm.y.log,
    )
    colorbar(fig, mesh, ax, metric)
    step_on_x = hm.x.name in ("lr", "lam*lr")
    handles = [Patch(color=UNSTABLE, label="unstable (ρ ≥ 1)")]
    styles = [("white", "-"), ("#ff4040", "--"), ("orange", ":")]
    for curve, (color, style) in zip(curves, styles, strict=False):
        xs, ys = (curve.step, curve.other) if step_on_x else (curve.other, curve.step)
        (line,) = ax.plot(
            xs,
            ys,
            color=color,
            linestyle=style,
            linewidth=1.8,
            label=curve.label,
            path_effects=[withStroke(linewidth=3.2, foreground="black")],
        )
        handles.append(line)
    ax.set_xlim(_edges(hm.x.values, hm.x.log)[[0, -1]])
    ax.set_ylim(_edges(hm.y.values, hm.y.log)[[0, -1]])
    ax.set_xlabel(axis_label(hm.x.name, hm.x.log))
    ax.set_ylabel(axis_label(hm.y.name, hm.y.log))
    ax.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=len(handles),
        fontsize=7.5,
        facecolor="0.8",
        edgecolor="none",
    )
    fig.suptitle(title or _title(hm), fontsize=10)
    return fig


SYMBOLS = {
    "lr": "η",
    "lam": "λ",
    "momentum": "m",
    "tau": "τ",
    "tau_fwd": "τ_fwd",
    "tau_bkwd": "τ_bkwd",
    "tau_recomp": "τ_recomp",
    "delta": "Δ",
    "phi": "Φ",
    "decay": "D",
    "gamma": "γ",
    "horizon": "T",
    "horizon_scale": "α",
    "kappa": "κ",
}


def _title(hm) -> str:
    fixed = ", ".join(f"{SYMBOLS.get(k, k)}={_short(v)}" for k, v in hm.fixed.items())
    return f"{hm.rule}" + (f" ({fixed})" if fixed else "")


def _short(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def save_figure(fig, path: str | Path, *, dpi: int = 150) -> Path:
    """Write ``fig`` as PNG atomically and close it."""
    try:
        return atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=dpi), binary=True)
    finally:
        plt.close(fig)
