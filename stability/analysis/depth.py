r"""The maximal stable step size against pipeline depth: a table no paper gives.

For P ∈ `DEPTHS` stages and three delay profiles (`PROFILES`, in PipeMare's count of delays,
where the update step itself counts: τ = 1 is one step stale),

* ``pipemare``: τ_i = 2(P − i) + 1 (PipeMare Table 1, N = 1; the backward pass reads the
  current weights), critical delay 2P − 1;
* ``pipedream-2bw``: one step for every stage, τ_i = 1 (PipeDream-2BW's double-buffered
  weights, Narayanan et al. 2021), whatever P;
* ``uniform``: τ_i = P for every stage (the single-delay model with the delay equal to the
  depth),

the pipeline's max stable lr at λ = 1 (`stability.analysis.stages.stage_max_lrs`: every
stage's rule on the same curvature, one common lr, the critical stage's max lr) for sgd, heavy
ball and Nesterov with m = 0.9, Kosson's LWP + SC with m = 0.9, and Adam with β1 = 0.9 and its
preconditioner frozen at P = 1 (`stability.rules.adam`: the analysis linearises Adam with a
fixed preconditioner; here the identity).

Each row's **slope** is the least-squares slope of ln max_lr against ln P over P ≥ `FIT_FROM`, and
``slope_in_tau`` the same against the critical delay.  Giladi et al. (2020, "At Stability's
Edge") find that the stable step size of asynchronous SGD falls like 1/τ at large delay: a
row ``follows_1_over_tau`` when its slope in τ is within `TOLERANCE` of −1.  (For sgd this is
PipeMare Lemma 1: 2 sin(π/(4τ + 2)) ≈ π/(2τ).)  A profile whose delay does not grow with P
(pipedream-2bw) has slope 0 and no verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stability.analysis.stages import stage_max_lrs
from stability.pipeline import Pipeline

DEPTHS = (1, 2, 4, 8, 16, 32, 64)
"""Pipeline depths P of the table."""

PROFILES: dict[str, Callable[[int], Pipeline]] = {
    "pipemare": lambda P: Pipeline.from_options("pipemare", stages=P),
    "pipedream-2bw": lambda P: Pipeline.from_options(stage_delays=[1] * P),
    "uniform": lambda P: Pipeline.from_options("uniform", tau=P, stages=P),
}
"""Delay profiles by name (module doc)."""

RULES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("sgd", "sgd", {}),
    ("momentum 0.9", "momentum", {"momentum": 0.9}),
    ("nesterov 0.9", "nesterov", {"momentum": 0.9}),
    ("lwp+sc 0.9", "lwp+sc", {"momentum": 0.9}),
    ("adam β1=0.9, P=1 frozen", "adam", {"beta1": 0.9, "precond": 1.0}),
)
"""(label, registry name, parameters) of the table's rules."""

FIT_FROM = 16
"""The slopes are fitted over P ≥ this (the large-delay regime)."""

TOLERANCE = 0.05
"""|slope in τ + 1| below this: the row follows 1/τ."""


def _slope(x: list[float], y: list[float]) -> float | None:
    if len(set(x)) < 2:
        return None
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def depth_row(label: str, name: str, params: dict[str, Any], profile: str) -> dict[str, Any]:
    """One row: max lr and critical stage per depth, the slopes and the 1/τ verdict."""
    make = PROFILES[profile]
    max_lrs, critical, taus = [], [], []
    for P in DEPTHS:
        pipe = make(P)
        found, k = stage_max_lrs(name, params, pipe)
        max_lrs.append(found[k].max_lr)
        critical.append(k + 1)
        taus.append(int(pipe.tau_fwd[k]))
    fit = [i for i, P in enumerate(DEPTHS) if P >= FIT_FROM and max_lrs[i]]
    slope = _slope([DEPTHS[i] for i in fit], [max_lrs[i] for i in fit])
    slope_tau = _slope([taus[i] for i in fit], [max_lrs[i] for i in fit])
    follows = None if slope_tau is None else abs(slope_tau + 1) < TOLERANCE
    return {
        "rule": label,
        "name": name,
        "params": params,
        "profile": profile,
        "depths": list(DEPTHS),
        "critical_tau": taus,
        "critical_stage": critical,
        "max_lr": max_lrs,
        "slope_in_P": slope,
        "slope_in_tau": slope_tau,
        "follows_1_over_tau": follows,
    }


def depth_table() -> dict[str, Any]:
    """Every rule × profile row (module doc), JSON-ready."""
    rows = [depth_row(*rule, profile) for rule in RULES for profile in PROFILES]
    return {
        "lam": 1.0,
        "depths": list(DEPTHS),
        "fit_from_depth": FIT_FROM,
        "tolerance": TOLERANCE,
        "rows": rows,
    }


def format_table(table: dict[str, Any]) -> list[str]:
    """The table as text lines (the main job prints them)."""
    head = "".join(f"{'P=' + str(P):>10}" for P in table["depths"])
    out = [f"{'rule':<25}{'profile':<15}{head}{'slope P':>9}{'slope τ':>9}  follows 1/τ"]
    for row in table["rows"]:
        cells = "".join(f"{'∞' if v is None else format(v, '.4g'):>10}" for v in row["max_lr"])
        slope = "—" if row["slope_in_P"] is None else f"{row['slope_in_P']:+.3f}"
        slope_tau = "—" if row["slope_in_tau"] is None else f"{row['slope_in_tau']:+.3f}"
        verdict = {True: "yes", False: "no", None: "— (τ constant)"}[row["follows_1_over_tau"]]
        out.append(
            f"{row['rule']:<25}{row['profile']:<15}{cells}{slope:>9}{slope_tau:>9}  {verdict}"
        )
    return out


__all__ = [
    "DEPTHS",
    "FIT_FROM",
    "PROFILES",
    "RULES",
    "TOLERANCE",
    "depth_row",
    "depth_table",
    "format_table",
]
