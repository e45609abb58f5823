"""``st.heatmap``: spectral radius over a grid of two parameters, optionally drawn and
tabulated (``stability heatmap``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from stability.analysis.radius_grid import STEP_AXES, Axis, Heatmap, parse_axis
from stability.api.commands import command
from stability.api.resolve import rule_name
from stability.api.tables import HEATMAP_METRICS
from stability.checks import check_delay, check_real
from stability.options import check_given
from stability.rules.registry import get_spec

METRICS = HEATMAP_METRICS


def heatmap(
    rule: Any,
    *,
    x: str | Axis,
    y: str | Axis,
    out: Any = None,
    csv: Any = None,
    metric: str = "radius",
    bounds: bool = False,
    max_lr_curve: bool = True,
    lr: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    **params: Any,
) -> Heatmap:
    """ρ of ``rule`` on the grid ``y × x`` (each ``"P:lo:hi:n[:log]"`` or an `Axis`).

    P is ``lr``, ``lam*lr`` (Kosson's ηλ) or a parameter of the rule; ``params`` fixes the
    others (``lr`` too when no axis is a step size).  Every point is the largest root modulus
    of the rule's characteristic polynomial, batched, with near-double roots refined in mpmath
    (`stability.analysis.radius_grid`).  ``out`` writes the figure (unstable region black; the
    exact max-lr curve of PipeMare App. B.1's boundary locus overlaid unless ``max_lr_curve``
    is false; PipeMare Lemma 1/3 with ``bounds``), ``csv`` one row per point.
    ``progress(done, total)`` is called as points finish.

    >>> import stability as st
    >>> st.heatmap("sgd", x="lr:0.1:1:4", y="tau:0:3:4").stable_fraction  # Lemma 1: 11 of 16
    0.6875
    """
    from stability.analysis.radius_grid import heatmap as grid

    spec = get_spec(rule_name(rule))
    o = check_given(command("heatmap").options, metric=metric, lr=lr, out=out, csv=csv)
    metric, lr = o["metric"], o["lr"]
    x, y = (a if isinstance(a, Axis) else parse_axis(a, flag) for a, flag in ((x, "x"), (y, "y")))
    for label, axis in (("x", x), ("y", y)):
        _check_axis(spec, axis, label)
    values = {k: v for k, v in {**params, "lr": lr}.items() if v is not None}
    hm = grid(spec.name, x, y, progress=progress, **values)
    files = {}
    if csv is not None:
        from stability.analysis.radius_grid import write_csv

        write_csv(hm, csv)
        files["csv"] = str(csv)
    if out is not None:
        from stability.analysis.radius_grid import lemma_curve
        from stability.analysis.radius_grid import max_lr_curve as exact_curve
        from stability.plotting import heatmap_figure, save_figure

        curves = [exact_curve(hm)] if max_lr_curve else []
        if bounds:
            curves.append(lemma_curve(hm))
        fig = heatmap_figure(hm, metric, curves=[c for c in curves if c is not None])
        save_figure(fig, out)
        files["png"] = str(out)
    return dataclasses.replace(hm, **files) if files else hm


def _check_axis(spec, axis: Axis, label: str) -> None:
    """Both ends of the axis in the parameter's range, as typed (lr > 0 on a step axis)."""
    params = {p.name: p for p in spec.params}
    for end, value in (("lo", axis.lo), ("hi", axis.hi)):
        try:
            if axis.name in STEP_AXES:
                check_real(axis.name, value, low=0.0, low_open=True)
            elif axis.name in params and params[axis.name].kind == "delay":
                check_delay(axis.name, int(np.round(value)), int(params[axis.name].low or 0))
            elif axis.name in params and params[axis.name].kind == "real":
                params[axis.name].check(float(value))
        except ValueError as err:
            raise ValueError(f"{label} axis {axis.spec}: {err} (its {end})") from None


__all__ = ["Axis", "Heatmap", "heatmap"]
