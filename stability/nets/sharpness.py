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

**Without weight stashing** (``backward="current"``: ``discrepancy``, ``t2``) the gradient also
moves with the backward weights, g ≈ H_f(u_fwd − w) + H_b(u_bkwd − w) (PipeMare eq. 5 as a
matrix model, `stability.nets.sensitivity`).  Near a minimum H_b is negligible (Δ₁ = −v₁ᵀH_bv₁
is 1e-10…3e-8 of λ₁, docs/nets_discrepancy.md); along a training run from a standard
initialisation it is not.  The **inconsistent edge** (`inconsistent_edge`) is the coupled edge
with H_b: the Galerkin system of `stability.nets.sensitivity.predict_inconsistent` on the rank-1
curvature λ₁v₁v₁ᵀ and the projected H_b, both at the last sample's weights; the max lr scales as
1/λ₁ there (H_f and H_b together), so λ_edge = λ₁·max_lr / η.  With one stage it is the scalar
edge max_lr(rule, τ_fwd, τ_bkwd; λ = 1, Δ = Δ₁/λ₁)/η (PipeMare Lemma 2 for ``discrepancy``).

`SharpnessTracker` records λ₁ every K steps of a simulator run (`warm_lanczos`: Lanczos on
Hessian-vector products at the run's weights, started from the previous eigenvector and stopped
as soon as the Ritz residual meets the tolerance) and `edge_summary` reads the run:

* ``plateau``: the median of λ₁ over the samples in the last quarter of the steps taken at or
  after the edge was first reached — null if the run diverged or the edge was not reached.
  The plateau is the level λ₁ hovers at *once it has reached* the edge (Cohen et al.), so
  samples of the approach (progressive sharpening, before the first reach) are not part of it
  by definition; the last quarter leaves out the transient that follows the first reach
  (overshoot, first catapults) when the run is long enough.  Where the edge is first reached
  before the last quarter — every row of the SGD figure, which runs ≥ 2.5× that step — this
  is the median of the last quarter;
* ``reached``: some sample of λ₁ came within 10 % of the edge (λ₁ ≥ 0.9·λ_edge);
* ``edge_ratio`` = plateau / λ_edge.

A run must be long enough after the edge is first reached for the last quarter to be the
plateau: just above the edge progressive sharpening can overshoot it before the first catapult
(by ≈ 1.6× with momentum 0.9 at τ = 1; under delay the unstable mode grows slowly, κ =
d ln ρ/d ln λ ≈ 0.05 with momentum 0.9 at τ = 2, so λ₁ can keep rising past the edge for
hundreds of steps before it oscillates); steps ≥ `SETTLE` × the step at which it is first
reached is a rule of thumb (docs/nets.md), and a shorter run's reading carries a ``warning``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from stability.nets.curvature import HessianOperator
from stability.nets.problem import NetProblem
from stability.rules.base import Rule

REACHED = 0.9
"""A sample with λ₁ ≥ REACHED × λ_edge counts as having reached the edge."""

PLATEAU_FRACTION = 0.25
"""The plateau is the median of λ₁ over this last fraction of the steps."""

SETTLE = 2.5
"""Runs of at least this many times the step of the first reach read a settled plateau."""

KRYLOV = 20
"""Largest Krylov basis of `warm_lanczos` before it restarts from its Ritz vector."""

MIN_PRODUCTS = 3
"""Products the tracker's `warm_lanczos` takes at least, so that a top eigenvalue that has
overtaken the previous one enters the Krylov basis before the residual test can stop it."""


def warm_lanczos(
    matvec, v0: np.ndarray, tol: float, min_products: int = 1, max_products: int = 2000
) -> tuple[float, np.ndarray, int]:
    r"""(θ, y, products): the largest algebraic eigenpair of the symmetric operator ``matvec``
    (float64 vectors) by Lanczos from ``v0``, stopped at the first step whose Ritz residual
    meets ARPACK's criterion ‖H y − θ y‖ = β_j·|s_j| ≤ ``tol``·|θ| (Golub & Van Loan, Matrix
    Computations, Alg. 10.1.1 and eq. 10.1.9; the criterion of ``scipy.sparse.linalg.eigsh``).

    Along a trajectory ``v0`` is the previous eigenvector, so a sample whose top eigenvector
    barely moved costs 1–3 products, where ARPACK builds its whole basis (``ncv`` ≥ 12
    products) before testing.  Full reorthogonalization (twice, Gram-Schmidt) keeps the basis
    orthonormal; after `KRYLOV` vectors it restarts from the Ritz vector.  A ``max_products``
    budget exhausted raises `ArithmeticError`.
    """
    q = np.asarray(v0, dtype=np.float64).reshape(-1)
    q = q / np.linalg.norm(q)
    products = 0
    while True:  # one Krylov basis per pass, restarted from its Ritz vector
        basis, alpha, beta = [q], [], []
        while True:
            z = np.asarray(matvec(basis[-1]), dtype=np.float64).reshape(-1)
            products += 1
            alpha.append(float(basis[-1] @ z))
            Q = np.array(basis)
            for _ in range(2):
                z = z - Q.T @ (Q @ z)
            b = float(np.linalg.norm(z))
            theta, S = np.linalg.eigh(np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1))
            top, s = float(theta[-1]), S[:, -1]
            converged = b * abs(s[-1]) <= tol * abs(top) and products >= min_products
            if converged or b == 0.0:
                y = s @ Q
                return top, y / np.linalg.norm(y), products
            if products >= max_products:
                raise ArithmeticError(
                    f"Lanczos did not reach relative residual {tol:g} in {max_products} products"
                )
            if len(basis) == KRYLOV:
                q = s @ Q
                q = q / np.linalg.norm(q)
                break
            beta.append(b)
            basis.append(z / b)


class SharpnessTracker:
    """``observe(step, w)`` for `stability.nets.simulator.simulate`: λ₁ of the first run
    every ``every`` steps (and at step 0 via `start`)."""

    def __init__(self, problem: NetProblem, every: int, tol: float = 1e-4):
        self.problem, self.every, self.tol = problem, int(every), tol
        self.samples: list[tuple[int, float]] = []
        self.vector: np.ndarray | None = None
        self.point: torch.Tensor | None = None
        self.hvps = 0
        self.probe = None  # an `stability.nets.oscillation.OscillationProbe`, fed every step

    def scale(self) -> torch.Tensor | None:
        """P_t^{1/2} of the curvature read (None: the plain Hessian)."""
        return None

    def _record(self, step: int, w: torch.Tensor) -> None:
        op = HessianOperator(self.problem, w=w)
        start = self.vector
        if start is None:
            start = np.random.default_rng(0).standard_normal(op.shape[0])
        lam, self.vector, hvps = warm_lanczos(op.matvec, start, self.tol, MIN_PRODUCTS)
        self.hvps += hvps
        self.samples.append((step, lam))
        self.point = w.detach().clone()

    def start(self, w0: torch.Tensor) -> None:
        self._record(0, w0)

    def __call__(self, step: int, w: torch.Tensor) -> None:
        if self.probe is not None and torch.all(torch.isfinite(w[0])):
            self.probe.observe(step, w[0], self.scale())
        if step % self.every == 0 and torch.all(torch.isfinite(w[0])):
            self._record(step, w[0])


def coupled_edge(rules: tuple[Rule, ...], v1: np.ndarray, stage_sizes, lr: float) -> float | None:
    """λ_edge: the coupled max lr at unit curvature along ``v1`` divided by ``lr``."""
    from stability.nets.lowrank import reduced_system
    from stability.nets.prediction import coupled_analysis

    system = reduced_system(rules, np.ones(1), np.asarray(v1, float)[:, None], tuple(stage_sizes))
    top = coupled_analysis(system).max_lr
    return None if not top else float(top) / lr


def inconsistent_edge(
    problem: NetProblem, rules: tuple[Rule, ...], w: torch.Tensor, lam1: float, v1, lr: float
) -> tuple[float | None, float]:
    """(λ_edge, Δ₁/λ₁): the coupled edge with the backward-weight Jacobian H_b at ``w`` along
    the top eigenpair (``lam1``, ``v1``) of ∇²f(w), and the effective Δ₁ = −v₁ᵀH_bv₁ over λ₁
    (module doc; `stability.nets.sensitivity`)."""
    import dataclasses

    from stability.nets.curvature import Curvature
    from stability.nets.sensitivity import effective_delta, predict_inconsistent

    if not lam1 > 0:
        raise ValueError(f"the inconsistent edge needs λ₁ > 0, got {lam1}")
    at = dataclasses.replace(problem, w_star=w.detach().clone())
    v1 = np.asarray(v1, dtype=float).reshape(-1, 1)
    curv = Curvature(
        np.array([float(lam1)]), v1, (), np.zeros(0), problem.stage_sizes, 0, 0.0, "tracker"
    )
    top = predict_inconsistent(at, curv, rules).analysis.max_lr
    delta = float(effective_delta(at, curv)[0])
    return (None if not top else float(top) * lam1 / lr), delta / lam1


@dataclass(frozen=True)
class EdgeSummary:
    """The edge-of-stability reading of one run (module doc)."""

    sharpness: list
    predicted_edge: float | None
    plateau: float | None
    reached: bool
    edge_ratio: float | None
    first_reached: int | None
    warning: str | None = None


def edge_summary(
    samples: list[tuple[int, float]],
    edge: float | None,
    steps: int,
    diverged: bool,
) -> EdgeSummary:
    """``plateau``, ``reached``, ``edge_ratio`` of λ₁ samples [(step, λ₁)], and a ``warning``
    where the run stops before `SETTLE` × its first reach (module doc)."""
    lams = np.array([lam for _, lam in samples])
    at = np.array([s for s, _ in samples])
    hit = np.flatnonzero(lams >= REACHED * edge) if edge else np.zeros(0, int)
    reached = bool(hit.size)
    first = at[hit[0]] if reached else np.inf
    last = lams[(at >= (1 - PLATEAU_FRACTION) * steps) & (at >= first)]
    plateau, warning = None, None
    if reached and not diverged and last.size:
        plateau = float(np.median(last))
        if steps < SETTLE * first:
            start = max(int(first), math.ceil((1 - PLATEAU_FRACTION) * steps))
            warning = (
                f"the edge was first reached at step {int(first)} and the run stops at step "
                f"{steps}, before {SETTLE:g} × that: the plateau (median of λ₁ over steps ≥ "
                f"{start}) may still be the overshoot of the approach, not the level λ₁ "
                f"settles at (docs/nets.md); steps ≥ {math.ceil(SETTLE * first)} read the "
                "settled level"
            )
    return EdgeSummary(
        sharpness=[[int(s), float(v)] for s, v in samples],
        predicted_edge=edge,
        plateau=plateau,
        reached=reached,
        edge_ratio=None if plateau is None or not edge else plateau / edge,
        first_reached=int(first) if reached else None,
        warning=warning,
    )


__all__ = [
    "KRYLOV",
    "MIN_PRODUCTS",
    "PLATEAU_FRACTION",
    "REACHED",
    "SETTLE",
    "EdgeSummary",
    "SharpnessTracker",
    "coupled_edge",
    "warm_lanczos",
    "edge_summary",
    "inconsistent_edge",
]
