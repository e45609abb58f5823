r"""The edge of stability under delay: the sharpness a run settles at, and the predicted edge.

Full-batch gradient descent on a network raises its sharpness λ₁ (the top Hessian eigenvalue)
until it reaches 2/η and then hovers there (Cohen et al., ICLR 2021; 2(1+m)/η with heavy-ball
momentum m).  With delays the natural prediction is the curvature at which the step size η is
exactly the rule's max stable lr (`stability.analysis.boundary`, PipeMare Lemma 1-3, Kosson
eq. 20-23): the max lr scales as 1/λ, so

    λ_edge = max_lr(rule, delays; λ = 1) / η                (τ = 0, sgd: 2/η).

With per-stage delays the threshold depends on how the top eigenvector v₁ is shared among the
stages: the **coupled edge** is max_lr / η of the coupled system of the stage rules on the
rank-1 curvature v₁v₁ᵀ (`stability.nets.lowrank`, `stability.coupled`), with v₁ the last one
measured; with equal delays it is the scalar edge whatever v₁.

`SharpnessTracker` records λ₁ every K steps of a simulator run (`top_eigenpair`: Lanczos on
Hessian-vector products at the run's weights, warm-started from the previous eigenvector) and
`edge_summary` reads the run:

* ``plateau``: the median of λ₁ over the samples in the last quarter of the steps — null if
  the run diverged or the edge was not reached;
* ``reached``: some sample of λ₁ came within 10 % of the edge (λ₁ ≥ 0.9·λ_edge);
* ``edge_ratio`` = plateau / λ_edge.

A run must be long enough after the edge is first reached for the last quarter to be the
plateau: just above the edge progressive sharpening can overshoot it before the first catapult
(by ≈ 1.6× with momentum 0.9 at τ = 1); steps ≥ 2.5 × the step at which it is first reached is
a rule of thumb (docs/nets.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from stability.nets.curvature import top_eigenpair
from stability.nets.problem import NetProblem
from stability.rules.base import Rule

REACHED = 0.9
"""A sample with λ₁ ≥ REACHED × λ_edge counts as having reached the edge."""

PLATEAU_FRACTION = 0.25
"""The plateau is the median of λ₁ over this last fraction of the steps."""


class SharpnessTracker:
    """``observe(step, w)`` for `stability.nets.simulator.simulate`: λ₁ of the first run
    every ``every`` steps (and at step 0 via `start`)."""

    def __init__(self, problem: NetProblem, every: int, tol: float = 1e-4):
        self.problem, self.every, self.tol = problem, int(every), tol
        self.samples: list[tuple[int, float]] = []
        self.vector: np.ndarray | None = None
        self.hvps = 0

    def _record(self, step: int, w: torch.Tensor) -> None:
        lam, self.vector, hvps = top_eigenpair(self.problem, w, self.vector, self.tol)
        self.hvps += hvps
        self.samples.append((step, lam))

    def start(self, w0: torch.Tensor) -> None:
        self._record(0, w0)

    def __call__(self, step: int, w: torch.Tensor) -> None:
        if step % self.every == 0 and torch.all(torch.isfinite(w[0])):
            self._record(step, w[0])


def coupled_edge(rules: tuple[Rule, ...], v1: np.ndarray, stage_sizes, lr: float) -> float | None:
    """λ_edge: the coupled max lr at unit curvature along ``v1`` divided by ``lr``."""
    from stability.nets.lowrank import reduced_system
    from stability.nets.prediction import coupled_analysis

    system = reduced_system(rules, np.ones(1), np.asarray(v1, float)[:, None], tuple(stage_sizes))
    top = coupled_analysis(system).max_lr
    return None if not top else float(top) / lr


@dataclass(frozen=True)
class EdgeSummary:
    """The edge-of-stability reading of one run (module doc)."""

    sharpness: list
    predicted_edge: float | None
    plateau: float | None
    reached: bool
    edge_ratio: float | None
    first_reached: int | None


def edge_summary(
    samples: list[tuple[int, float]],
    edge: float | None,
    steps: int,
    diverged: bool,
) -> EdgeSummary:
    """``plateau``, ``reached``, ``edge_ratio`` of λ₁ samples [(step, λ₁)] (module doc)."""
    lams = np.array([lam for _, lam in samples])
    at = np.array([s for s, _ in samples])
    hit = np.flatnonzero(lams >= REACHED * edge) if edge else np.zeros(0, int)
    reached = bool(hit.size)
    last = lams[at >= (1 - PLATEAU_FRACTION) * steps]
    plateau = None
    if reached and not diverged and last.size:
        plateau = float(np.median(last))
    return EdgeSummary(
        sharpness=[[int(s), float(v)] for s, v in samples],
        predicted_edge=edge,
        plateau=plateau,
        reached=reached,
        edge_ratio=None if plateau is None or not edge else plateau / edge,
        first_reached=int(at[hit[0]]) if reached else None,
    )


__all__ = [
    "PLATEAU_FRACTION",
    "REACHED",
    "EdgeSummary",
    "SharpnessTracker",
    "coupled_edge",
    "edge_summary",
]
