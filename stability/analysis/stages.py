r"""The scalar analysis of a pipeline: every stage's rule on the same curvature, at one step size.

A `stability.pipeline.Pipeline` gives stage i = 1 … P its delays (τ_fwd,i, τ_bkwd,i) — PipeMare
Table 1, or an explicit profile.  Here every stage runs its own instance of the rule
(`stability.rules.staged.pipeline_stage_rules`, as the trainer and the coupled analysis build
them) on the same scalar quadratic model (λ, Δ, Φ of PipeMare eq. 5), and the stages are *not*
coupled: this is the per-stage reading of the scalar theory that a user makes by hand from the
delay formula (the coupled analysis on a full Hessian is `stability.coupled`).  With one step
size lr for the whole pipeline:

* the pipeline's max stable lr is the smallest stage max lr, min_i max_lr(rule_i)
  (`stage_max_lrs`); the stage that attains it is the *critical* stage;
* its spectral radius at lr is the largest stage radius, max_i ρ_i(lr) (`stage_radii`), and
  the half-life −ln 2/ln max_i ρ_i;
* its optimal half-life over a spectrum [λ, κλ] (Kosson Sec. 3.4) minimises, over the common
  lr, the worst rate max_i max_{λ'} ρ_i(lr, λ') (`stage_half_life`).  It is never shorter than
  the worst stage's own optimum (each stage's rate is at least that stage's optimal rate at
  every lr).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.analysis.boundary import MaxLr, max_lr
from stability.checks import check_real, finite_or_none
from stability.limits import HALFLIFE_MAX_KAPPA
from stability.pipeline import Pipeline
from stability.quadratic import QuadraticModel
from stability.rules.base import Rule
from stability.rules.registry import get_spec
from stability.rules.staged import pipeline_stage_rules, stage_values


def stage_model(name: str, values: dict[str, Any]) -> QuadraticModel:
    """The scalar model (λ, Δ, Φ) of rule ``name``'s parameters ``values``."""
    spec = get_spec(name)
    model = {k: v for k, v in spec.resolve(**values).items() if k in ("lam", "delta", "phi")}
    return QuadraticModel(**model)


def stage_table(pipe: Pipeline, answers: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """One JSON-ready row per stage: its number (1 = first), delays and ``answers``."""
    back = pipe.backward_delays
    return tuple(
        {"stage": i + 1, "tau_fwd": int(pipe.tau_fwd[i]), "tau_bkwd": int(back[i]), **a}
        for i, a in enumerate(answers)
    )


def stage_max_lrs(
    name: str, values: dict[str, Any], pipe: Pipeline, *, method: str = "auto"
) -> tuple[list[MaxLr], int]:
    """Every stage's exact max lr (`stability.analysis.boundary.max_lr`) and the critical
    stage (0-based: the smallest max lr; the first of equals)."""
    model = stage_model(name, values)
    found: dict[tuple[int, int], MaxLr] = {}
    out = []
    rules = pipeline_stage_rules(name, values, pipe)
    for rule, key in zip(rules, _stage_keys(pipe), strict=True):
        if key not in found:  # stages with equal delays have equal rules
            found[key] = max_lr(rule, model, method=method)
        out.append(found[key])
    bound = [math.inf if r.max_lr is None else r.max_lr for r in out]
    return out, int(np.argmin(bound))


def _stage_keys(pipe: Pipeline) -> list[tuple[int, int]]:
    return [(int(f), int(b)) for f, b in zip(pipe.tau_fwd, pipe.backward_delays, strict=True)]


def stage_radii(name: str, values: dict[str, Any], pipe: Pipeline, lr: float) -> list[Any]:
    """Every stage's dominant root at ``lr`` (`stability.spectrum.dominant_root_at`)."""
    from stability.spectrum import dominant_root_at

    model = stage_model(name, values)
    return [dominant_root_at(rule, model, lr) for rule in pipeline_stage_rules(name, values, pipe)]


@dataclass(frozen=True)
class StageHalfLife:
    """`stage_half_life`: the common lr, the pipeline's rate there, each stage's rate there and
    each stage's own optimum (half-life, lr) for comparison."""

    lr: float | None
    rate: float
    half_life: float | None
    stage_rates: tuple[float, ...]
    stage_optima: tuple[tuple[float | None, float | None], ...]


def _precise_rate(rule: Rule, curve: Any, kappa: float, x: float) -> float:
    """max of ρ over the window [x, κx] of normalized rates: its ends in mpmath, an interior
    maximum (never seen so far, `stability.analysis.conditioning`) in float64."""
    from stability.analysis.conditioning import window_rate
    from stability.dynamics.linear import characteristic_polynomial
    from stability.spectrum import dominant_root

    cp = characteristic_polynomial(rule, QuadraticModel(1.0, 0.0, 0.0))
    ends = max(dominant_root(cp.at(v)).radius for v in (x, kappa * x))
    return float(max(ends, window_rate(curve, np.array([x]), np.array([kappa]))[0]))


def stage_half_life(
    name: str, values: dict[str, Any], pipe: Pipeline, kappa: float
) -> StageHalfLife:
    """min over the common lr of −ln 2/ln max_i r*_i(lr), r*_i the worst radius of stage i over
    the spectrum [λ, κλ] (module doc; Kosson Sec. 3.4 per stage).

    The window maxima of all stages at one lr are the window maximum of max_i ρ_i(x) (x = lr·λ,
    the same window for every stage): sampled at 128 points per decade, the best grid lr is
    refined by golden section on the window's ends (where ρ's maximum sits, module doc of
    `stability.analysis.conditioning`), and the answer is the best of that lr and every stage's
    own optimal lr, evaluated in mpmath — so it is never shorter than the worst stage's own
    optimum.
    """
    from stability.analysis.conditioning import RateCurve, optimal_half_life

    check_real("kappa", kappa, low=1.0, high=HALFLIFE_MAX_KAPPA)
    rules = pipeline_stage_rules(name, values, pipe)
    lam = float(stage_model(name, values).lam)
    back = None if pipe.consistent else pipe.backward_delays
    keys = list(dict.fromkeys(id(r) for r in rules))
    index = [keys.index(id(r)) for r in rules]
    first = [index.index(k) for k in range(len(keys))]
    distinct = [rules[i] for i in first]
    curves = [RateCurve.of(r) for r in distinct]
    own = []
    for i in first:
        b = None if back is None else int(back[i])
        params = stage_values(name, values, int(pipe.tau_fwd[i]), b)
        own.append(optimal_half_life(name, kappa, precise=True, **params))
    optima = tuple((_half(float(own[k].rate)), finite_or_none(own[k].lr)) for k in index)
    xs = [float(o.lr) * lam for o in own if np.isfinite(o.lr)]
    if not xs:
        return StageHalfLife(None, 1.0, None, tuple(1.0 for _ in rules), optima)
    cells = max(1, math.ceil(math.log10(kappa) * 128))
    step = math.log(kappa) / cells if kappa > 1 else math.log(10) / 128
    lo, hi = math.log(min(xs) / 30), math.log(max(xs) * 30 * kappa)
    logx = lo + step * np.arange(int((hi - lo) / step) + 1)
    rho = np.max([c.radius(np.exp(logx)[None, :])[0] for c in curves], axis=0)
    windows = np.lib.stride_tricks.sliding_window_view(rho, cells + 1).max(axis=1)
    j = int(np.argmin(windows))

    def ends(logx0: float) -> float:
        x = np.exp([logx0, logx0 + math.log(kappa)])[None, :]
        return max(float(c.radius(x).max()) for c in curves)

    a, b = logx[max(j - 1, 0)], logx[min(j + 1, windows.size - 1)]
    for _ in range(50):  # golden section in log x around the best grid point
        c, d = b - 0.618 * (b - a), a + 0.618 * (b - a)
        if ends(c) <= ends(d):
            b = d
        else:
            a = c

    def stage_rates(x: float) -> list[float]:
        # a stage at its own optimal lr: its own (mpmath-refined) optimal rate
        return [
            float(o.rate) if float(o.lr) * lam == x else _precise_rate(rule, curve, kappa, x)
            for rule, curve, o in zip(distinct, curves, own, strict=True)
        ]

    candidates = {x: max(stage_rates(x)) for x in (float(np.exp(0.5 * (a + b))), *xs)}
    best_x = min(candidates, key=candidates.get)
    best = candidates[best_x]
    at_best = stage_rates(best_x)
    rates = tuple(at_best[k] for k in index)
    lr = best_x / lam if best < 1 else None
    return StageHalfLife(lr, best, _half(best), rates, optima)


def _half(rate: float) -> float | None:
    if rate >= 1:
        return None
    return 0.0 if rate <= 0 else -math.log(2.0) / math.log(rate)


__all__ = [
    "StageHalfLife",
    "stage_half_life",
    "stage_max_lrs",
    "stage_model",
    "stage_radii",
    "stage_table",
]
