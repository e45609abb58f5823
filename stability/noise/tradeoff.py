r"""``st.tradeoff``: speed against noise floor for each mitigation (``stability tradeoff``).

For a delay τ and batch B on a least-squares problem, every rule is scanned over its step
size (fractions of its own ``ms_max_lr``), its momentum and, where it has one, its LWP horizon.
Each point gets

* ``half_life`` — steps for E f − f* − floor to halve, ln 2 / −ln(rate) with the exact
  mean-square rate max(ρ(𝒯), ρ(Ā)) (`stability.noise.gramian`): it includes the noise, unlike
  the deterministic half-life of Kosson Sec. 3.4;
* ``floor`` — lim E f − f* (`stability.noise.gramian.stationary`).

A point is on a rule's Pareto front if no other point of that rule is both faster and lower.
With ``target`` (an excess loss), each rule's fastest front point with floor < target gives
``steps_to_target`` ≈ half_life·log₂((E f₀ − f* − floor)/(target − floor)) (the asymptotic
rate from the start: an estimate; 0 where the start is already within the target), and
``fastest`` names the rule that gets there first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.api.commands import command
from stability.options import check_given
from stability.result import Result, output

FRACTIONS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9)
MOMENTA = (0.0, 0.5, 0.9, 0.99)
TIE = 1e-9
"""``fastest``: rules whose steps to the target agree to this relative tolerance are tied (rules
whose scanned dynamics coincide agree only to rounding: lwp and lwp-v at τ = 5 differed by
2e-13); the tie goes to the rule listed first in ``rules``."""


@dataclass(frozen=True)
class Tradeoff(Result):
    """Pareto fronts of (half-life, floor) per rule: each rule scanned over its step size,
    momentum and LWP horizon, a point on the front if no other point of the rule is both faster
    and lower; with a target excess loss, the steps each rule needs and the fastest rule."""

    batch: int = output("minibatch size B")
    tau: int = output("delay τ", "steps")
    rules: list[str] = output("the rules compared")
    fronts: dict[str, list[list[float | None]]] = output(
        "rule → [[half_life, floor, lr, momentum, horizon], ...] (front; null: no such parameter)"
    )
    points: dict[str, list[list[float | None]]] = output("rule → every scanned point, same layout")
    target: float | None = output("the target excess loss (null: none)", "loss")
    steps_to_target: dict[str, float | None] | None = output(
        "rule → est. steps to target (0: start within)", "steps"
    )
    fastest: str | None = output("rule reaching target first (null: none; a tie: first listed)")
    figure: str | None = output("path of the figure written (null: none)")


def pareto(points: list[list]) -> list[list]:
    """Points not dominated in (half_life, floor), by increasing half-life."""
    front, best = [], np.inf
    for p in sorted(points, key=lambda q: (q[0], q[1])):
        if p[1] < best:
            front.append(p)
            best = p[1]
    return front


def _grids(name, tau, momenta) -> tuple[tuple, tuple]:
    """The momenta and LWP horizons a rule is scanned over."""
    from stability.rules.registry import get_spec

    names = get_spec(name).param_names
    grid_m = momenta if "momentum" in names else (None,)
    grid_h = (None,) if "horizon" not in names or tau == 0 else (0.5 * tau, tau, 2.0 * tau)
    return tuple(grid_m), grid_h


PAIR_OVERHEAD = 2_000
"""Work units (s³ of one mode pair's Gramian) that a pair costs whatever its state size: the
loop's eigenproblem on the d(d+1)/2 symmetric coordinates and numpy's per-call overhead
(measured, one core: 0.0028 s a pair per scanned point, a unit ~1.4 µs)."""
POINT_OVERHEAD = 80_000
"""Work units a scanned (rule, momentum, horizon) point costs even at d = 1 (measured, one
core: 0.11 s, ~120 Gramian evaluations)."""


def check_work(rules, tau, problem, momenta) -> None:
    """Refuse, naming tau, a scan beyond `stability.limits.TRADEOFF_MAX_WORK`: Σ over the
    rules' (momentum, horizon) points of d(d+1)/2 × (s³ + `PAIR_OVERHEAD`) + `POINT_OVERHEAD`
    (s the rule's state per parameter; each point takes ~120 modal Gramians, a unit ~1.4 µs of
    one core)."""
    from stability.limits import TRADEOFF_MAX_WORK
    from stability.noise.minibatch import check_problem, check_state, setup

    d = problem.dim
    check_problem(problem)
    work = 0.0
    for name in rules:
        grid_m, grid_h = _grids(name, tau, momenta)
        params = {"tau": tau} | ({} if grid_m == (None,) else {"momentum": grid_m[0]})
        params |= {} if grid_h == (None,) else {"horizon": grid_h[0]}
        size = setup(name, problem, None, params).builder(1.0).size
        check_state(d, size)
        pairs = d * (d + 1) / 2
        point = pairs * (float(size) ** 3 + PAIR_OVERHEAD) + POINT_OVERHEAD
        work += len(grid_m) * len(grid_h) * point
    if work > TRADEOFF_MAX_WORK:
        raise ValueError(
            f"tau: the tradeoff scan costs Σ points × (d(d+1)/2 × ((state size)³ + "
            f"{PAIR_OVERHEAD:,}) + {POINT_OVERHEAD:,}) = {work:.2e}, at most "
            f"{TRADEOFF_MAX_WORK:.1e} (docs/limits.md): a smaller tau, fewer rules or fewer "
            "parameters"
        )


def _scan(name, tau, problem, moments, noise_map, fractions, momenta):
    from stability.noise.gramian import mean_radius, ms_radius, stationary
    from stability.noise.minibatch import setup
    from stability.noise.threshold import ms_max_lr

    grid_m, grid_h = _grids(name, tau, momenta)
    out = []
    for m in grid_m:
        for h in grid_h:
            params = {"tau": tau} | ({} if m is None else {"momentum": m})
            params |= {} if h is None else {"horizon": h}
            ctx = setup(name, problem, None, params)
            if ctx.full_batch is None:
                continue
            ms = ms_max_lr(ctx.builder, moments, ctx.full_batch)
            for f in fractions:
                lr = f * ms
                state = ctx.builder(lr)
                fixed = stationary(state, moments, noise_map)
                rho = max(ms_radius(state, moments, noise_map), mean_radius(state, moments.hessian))
                if fixed is None or not 0 < rho < 1:
                    continue
                out.append([float(np.log(2) / -np.log(rho)), fixed.floor, lr, m, h])
    return out


def tradeoff(
    *,
    batch: int,
    tau: int,
    rules: Any = ("sgd", "momentum", "lwp+sc"),
    data: Any = None,
    fractions: Any = FRACTIONS,
    momenta: Any = MOMENTA,
    target: float | None = None,
    out: Any = None,
    **keywords: Any,
) -> Tradeoff:
    """Speed-versus-floor fronts (`Tradeoff`; docs/noise.md).  Exact mean-square rate and floor of
    `stability.noise.second_moment` (E[H_B ⊗ H_B] = H ⊗ H + p(E[xxᵀ ⊗ xxᵀ] − H ⊗ H))."""
    from stability.checks import check_delay, check_integer, check_real, one_or_many
    from stability.noise.gramian import NoiseMap
    from stability.noise.minibatch import _problem
    from stability.noise.moments import SampleMoments

    tau = int(check_delay("tau", tau))
    problem = _problem(data, keywords)
    if keywords:
        raise ValueError(
            f"unknown keyword {next(iter(keywords))!r} (the problem's: standardize, bias, samples)"
        )
    batch = check_integer("batch", batch, low=1, high=problem.samples)
    rules = list(dict.fromkeys(check_given(command("tradeoff").options, rules=rules)["rules"]))
    fractions, momenta = one_or_many(fractions), one_or_many(momenta)
    for f in fractions:
        check_real("fractions", f, low=0.0, high=1.0, low_open=True, high_open=True)
    target = check_given(command("tradeoff").options, target=target, out=out)["target"]
    check_work(rules, tau, problem, momenta)
    moments = SampleMoments.of(problem, batch)
    noise_map = NoiseMap.of(moments)
    points = {r: _scan(r, tau, problem, moments, noise_map, fractions, momenta) for r in rules}
    fronts = {r: pareto(p) for r, p in points.items()}
    steps, fastest = None, None
    if target is not None:
        start = float(problem.loss(problem.initial_weights()) - problem.min_loss)
        steps = {}
        for r, front in fronts.items():
            ok = [  # a start already within the target needs no steps (the log is < 0)
                max(0.0, p[0] * np.log2(max(start - p[1], 1e-300) / (target - p[1])))
                for p in front
                if p[1] < target
            ]
            steps[r] = float(min(ok)) if ok else None
        reach = {r: s for r, s in steps.items() if s is not None}
        if reach:  # a tie to rounding (two rules with the same dynamics) goes to the first
            best = min(reach.values())
            fastest = next(r for r, s in reach.items() if s <= best + TIE * abs(best))
    figure = None
    if out is not None:
        figure = str(_figure(fronts, points, batch, tau, target, out))
    return Tradeoff(batch, tau, rules, fronts, points, target, steps, fastest, figure)


def _figure(fronts, points, batch, tau, target, out):
    import matplotlib.pyplot as plt

    from stability.plotting import save_figure

    fig, ax = plt.subplots(figsize=(7, 4.8), layout="constrained")
    for (rule, front), color in zip(fronts.items(), plt.cm.tab10.colors, strict=False):
        pts = np.array([p[:2] for p in points[rule]]) if points[rule] else np.zeros((0, 2))
        ax.scatter(pts[:, 0], pts[:, 1], s=8, color=color, alpha=0.35)
        f = np.array([p[:2] for p in front]) if front else np.zeros((0, 2))
        ax.plot(f[:, 0], f[:, 1], "o-", color=color, ms=4, label=f"{rule} (Pareto front)")
    if target is not None:
        ax.axhline(target, color="black", ls="--", lw=0.8, label="target")
    floors = [p[1] for pts in points.values() for p in pts] + ([target] if target else [])
    ax.set_xscale("log")
    ax.set_yscale("log" if min(floors, default=1.0) > 0 else "symlog")  # a floor can be 0
    ax.set_xlabel("half-life of E f − f* (steps, log scale)")
    ax.set_ylabel("noise floor lim E f − f* (log scale)")
    ax.set_title(f"speed vs floor: τ = {tau}, B = {batch} (exact mean-square theory)", fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(fig, out)


__all__ = [
    "FRACTIONS",
    "MOMENTA",
    "PAIR_OVERHEAD",
    "POINT_OVERHEAD",
    "TIE",
    "Tradeoff",
    "pareto",
    "tradeoff",
]
