r"""The simulator's measured max stable step size and rate of a network (`NetProtocol`).

**Start.**  Every run starts at w₀ = w* + ε·v₁, v₁ the top Hessian eigenvector (unit) and
ε = ``perturbation``·√p (a root-mean-square move of ``perturbation`` per parameter), with a
constant history (every past version equal to w₀), and runs the tilted gradient
∇f(u) − ∇f(w*) (`stability.nets.simulator`): w* is then an exact stationary point with the
network's Hessian, so the small gradient left by an inexact minimum cannot drift the runs; at
a saddle the runs also turn the directions of negative curvature into minima by a fixed
quadratic (`stability.nets.saddle_flip`: the prediction describes the positive curvature,
and along a negative one the runs would grow at every lr).  Where the gradient along ±v₁ is
not linear over the runs' window (a ReLU network whose units cross zero within it),
`linear_start` gives the smaller ε that ``net max-lr --measure`` starts from.
Rules that read other backward or recompute weights than the forward ones run with
``backward="current"`` (backpropagation with inconsistent weights), the others stashed.

**Verdict** (the linear threshold, not the escape from a catapult).  A run of ``steps`` steps is
unstable if ‖w_t − w*‖ exceeds ``growth`` × ‖w₀ − w*‖ (10³·ε by default) or becomes
non-finite, or — for runs so close to the threshold that the growth is too slow to show within
``steps`` — if the measured log-rate of the increments ‖w_t − w_{t−1}‖ is > 0
(`stability.trainer.measure.log_rate`, the criterion of the reference trainer), measured over
the steps *before* ‖w_t − w*‖ first exceeds ``linear`` × ε: beyond that a network's curvature
along v₁ changes with the amplitude, and an unstable oscillation can saturate (the catapult)
and look stable to a rate taken later.  Increments see the critical mode undamped and the slow
modes of small curvature damped by lr·λ.

**Bracket.**  `stability.trainer.measure.bisect_max_lr`: ``per_round`` step sizes at a time
(one batched simulation), log-spaced over [guess/span, span·guess] around the prediction, then
linearly inside the bracket until its relative width is ≤ ``rel_tol``.

**Rate.**  At a step size below the threshold, the measured ln ρ̂ is the slope of the upper
envelope of log ‖w_t − w_{t−1}‖ from the same start over the second half of the first
`RATE_DECADES` decades of its decay (`stability.nets.rates.envelope_log_rate`: a fit to the
increments themselves is biased by the oscillation of a complex dominant root): the decay of
the modes the start excites, which `stability.nets.rates.predict_rate` predicts with the same
estimator.  Later the directions of small curvature λ take over at their own rate ≈ −lr·λ.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from stability.nets.problem import NetProblem
from stability.nets.rates import RATE_DECADES, envelope_log_rate
from stability.nets.saddle_flip import SaddleFlip
from stability.nets.simulator import consistent, simulate
from stability.rules.base import Rule
from stability.trainer.measure import MaxLrMeasurement, bisect_max_lr, log_rate, verdict_rounds


@dataclass(frozen=True)
class NetProtocol:
    """The measurement protocol (module doc); reported as ``protocol``."""

    steps: int = 2000
    perturbation: float = 1e-6
    growth: float = 1e3
    linear: float = 30.0
    per_round: int = 8
    span: float = 1.25
    rel_tol: float = 0.008
    check_every: int = 10
    rate_steps: int = 1500

    def __post_init__(self):
        if self.steps < 100 or self.rate_steps < 100:
            raise ValueError("steps must be ≥ 100")
        if not 0 < self.rel_tol <= 0.01:
            raise ValueError(f"rel_tol must be in (0, 0.01], got {self.rel_tol}")

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["start"] = "w* + perturbation·√p·v1 (v1: unit top Hessian eigenvector), constant history"
        d["rate"] = (
            f"slope of the upper envelope of log ‖w_t − w_(t−1)‖ over the second half of its "
            f"first {RATE_DECADES:g} decades"
        )
        d["gradient"] = "full batch, tilted: ∇f(u) − ∇f(w*) (w* an exact stationary point)"
        d["stability_test"] = (
            "unstable if ‖w − w*‖ > growth × ‖w0 − w*‖ (or non-finite) within steps, or the "
            "log-rate of ‖w_t − w_(t−1)‖ (last half of the steps before ‖w − w*‖ first exceeds "
            "linear × ‖w0 − w*‖) is > 0"
        )
        return d

    def expected_steps(self) -> int:
        """Simulator steps of a bracket whose first grid holds the crossing
        (`stability.trainer.measure.verdict_rounds` rounds of ``steps``)."""
        rounds = verdict_rounds(self.rel_tol, per_round=self.per_round, span=self.span)
        return rounds * self.steps


def start_point(problem: NetProblem, v1: np.ndarray, perturbation: float) -> torch.Tensor:
    """w* + ε·v₁ with ε = ``perturbation``·√p (module doc)."""
    v = problem.vector(np.asarray(v1, dtype=float))  # the problem's dtype, on its device
    eps = perturbation * problem.dim**0.5
    return problem.w_star.detach() + eps * v / torch.linalg.vector_norm(v)


LINEAR_TOL = 0.01
"""The runs start where the gradient along v₁ is linear (`linear_start`): within the linear
window (``linear`` × ε) it departs from the Hessian's by at most this fraction."""

LINEAR_SHRINK = 10.0
LINEAR_SHRINKS = 4
"""`linear_start` shrinks the perturbation by `LINEAR_SHRINK` at most this many times (10⁻⁶ to
10⁻¹⁰ by default: float64 rounding of the tilted gradient stays far below such a start)."""


@dataclass(frozen=True)
class LinearStart:
    """The perturbation of the runs' start (`linear_start`) and the gradient's departure from
    linear at ``linear`` × ε for it and for the protocol's own."""

    perturbation: float
    departure: float
    protocol_departure: float

    def describe(self, protocol: NetProtocol) -> str | None:
        """One line for the protocol when the start was moved in, else None."""
        if self.perturbation == protocol.perturbation:
            return None
        return (
            f"perturbation {self.perturbation:g}, not {protocol.perturbation:g}: at "
            f"{protocol.linear:g}ε the gradient along v1 departed from the Hessian's by "
            f"{self.protocol_departure:.2g} (> {LINEAR_TOL:g}); {self.departure:.2g} at this one"
        )


def linear_start(
    problem: NetProblem, v1: np.ndarray, protocol: NetProtocol, scale: torch.Tensor | None = None
) -> LinearStart:
    """The largest perturbation p ≤ ``protocol.perturbation`` (on a ladder of ÷`LINEAR_SHRINK`,
    `LINEAR_SHRINKS` rungs; the last one if none is linear) at which the gradient along the
    unit v₁ is linear over the runs' linear window: with r = ``linear``·p·√p_dim,

        max over ±r of ‖s·(∇f(w* ± r·v₁) − ∇f(w*) ∓ r·∇²f(w*)v₁)‖ / ‖s·r·∇²f(w*)v₁‖ ≤ `LINEAR_TOL`

    (s = ``scale``, the preconditioner's P^{1/2} whose P multiplies the gradient; 1 for SGD).
    A ReLU network's gradient jumps where units cross zero: along a direction that moves many
    pre-activations together (a convolution's bias, whose Adam P can be 1/ε) that happens
    within 10⁻⁴, and runs started beyond it test the piecewise-linear dynamics, not the
    linearisation (docs/nets.md)."""
    v = problem.vector(np.asarray(v1, dtype=float))
    v = v / torch.linalg.vector_norm(v)
    s = torch.ones_like(v) if scale is None else scale.to(dtype=v.dtype, device=v.device)
    w = problem.w_star.detach()
    g0, hv = problem.gradient(w), problem.hvp(w, v)
    scale_norm = float(torch.linalg.vector_norm(s * hv))

    def departure(p: float) -> float:
        r = protocol.linear * p * problem.dim**0.5
        worst = 0.0
        for sign in (1.0, -1.0):
            g = problem.gradient(w + sign * r * v)
            rest = torch.linalg.vector_norm(s * (g - g0 - sign * r * hv))
            worst = max(worst, float(rest) / (r * scale_norm) if scale_norm > 0 else 0.0)
        return worst

    p = protocol.perturbation
    found = initial = departure(p)
    for _ in range(LINEAR_SHRINKS):
        if found <= LINEAR_TOL:
            break
        p /= LINEAR_SHRINK
        found = departure(p)
    return LinearStart(p, found, initial)


def _runs(problem, rules, lrs, protocol, v1, steps, lr_scales, observe=None, flip=None):
    return simulate(
        problem,
        rules,
        lrs,
        steps=steps,
        w0=start_point(problem, v1, protocol.perturbation),
        lr_scales=lr_scales,
        tilt=True,
        flip=flip,
        criterion="distance",
        divergence=protocol.growth,
        check_every=protocol.check_every,
        track=("increment", "error"),
        backward="stashed" if all(consistent(r) for r in rules) else "current",
        observe=observe,
    )


def measure_max_lr(
    problem: NetProblem,
    rules: tuple[Rule, ...],
    v1: np.ndarray,
    guess: float,
    protocol: NetProtocol,
    lr_scales: tuple[float, ...] = (),
    observe=None,
    flip: SaddleFlip | None = None,
) -> MaxLrMeasurement:
    """The simulator's max stable lr of the stage ``rules`` (module doc); ``observe``: the
    simulator's per-step hook (`stability.nets.step_counter`); ``flip``: the saddle
    directions turned into minima (`stability.nets.saddle_flip`)."""

    eps2 = float(torch.sum((start_point(problem, v1, protocol.perturbation) - problem.w_star) ** 2))

    def verdict(lrs: np.ndarray) -> np.ndarray:
        res = _runs(problem, rules, lrs, protocol, v1, protocol.steps, lr_scales, observe, flip)
        increments = res.energies["increment"].copy()
        beyond = res.energies["error"] > protocol.linear**2 * eps2
        increments[np.maximum.accumulate(beyond, axis=1)] = np.nan
        return res.diverged | (log_rate(increments, 1) > 0)

    return bisect_max_lr(
        verdict, guess, per_round=protocol.per_round, rel_tol=protocol.rel_tol, span=protocol.span
    )


def measure_log_rate(
    problem: NetProblem,
    rules: tuple[Rule, ...],
    v1: np.ndarray,
    lrs,
    protocol: NetProtocol,
    lr_scales: tuple[float, ...] = (),
    observe=None,
    flip: SaddleFlip | None = None,
) -> np.ndarray:
    """Measured ln ρ̂ of the increments at each step size (module doc); NaN if diverged."""
    res = _runs(problem, rules, lrs, protocol, v1, protocol.rate_steps, lr_scales, observe, flip)
    rate = envelope_log_rate(res.energies["increment"], RATE_DECADES)
    return np.where(res.diverged, np.nan, rate)


__all__ = [
    "LINEAR_TOL",
    "LinearStart",
    "NetProtocol",
    "linear_start",
    "measure_log_rate",
    "measure_max_lr",
    "start_point",
]
