r"""The measured runs' saddle flip: the directions of negative curvature turned into minima.

The predicted max lr (`stability.nets.lowrank`) describes the positive curvature: the delay
destabilises a mode of curvature λ > 0 as lr grows past its threshold.  Along a direction of
negative curvature λ < 0 the linearisation grows at *every* lr (a real root ω ≈ 1 + lr·|λ|,
per step); a network that is not at a minimum — a checkpoint after a few hundred Adam steps
has λ_min/λ₁ ≈ −1e-3 … −2e-2 (`stability.nets.minimum`) — has such directions, and the
measured runs of `stability.nets.bracket` grow along them from the small share of the start
they receive (per-stage delays couple the start's direction to every mode).  Their verdict then
reads that growth, not the delay threshold: on a 301-parameter GELU MLP after 300 Adam steps
(λ_min/λ₁ = −8.4e-3) the bracket lay 11× below the prediction.

The measured runs therefore add to the loss the quadratic that turns each negative direction
found into one of the same curvature magnitude,

    q(u) = −Σ_j λ_j·(a_jᵀ(u − w*))²,   ∇q(u) = Σ_j c_j·a_j·a_jᵀ(u − w*),   c_j = −2λ_j > 0,

with (λ_j, x_j) the eigenpairs of H̃ = s·∇²f(w*)·s below −`NEGATIVE_TOL`·λ₁ (s = P^{1/2} for
a frozen preconditioner, 1 otherwise) and a_j = x_j/s: then s·∇²(f + q)·s = H̃ − 2Σλ_j x_jx_jᵀ,
the same eigenvectors with λ_j ↦ |λ_j| and every other eigenpair unchanged — the top
curvature, which the prediction uses, included.  The runs stay the network's own nonlinear
runs (all of its curvature, its stages, delays and backward passes) but for this fixed
quadratic along the saddle directions.

The eigenpairs come from the bottom of the spectrum in rounds (ARPACK ``which="SA"``, `FLIP_ROUND`
pairs and at most `FLIP_MAXITER` restarts a round, dense below
`stability.nets.curvature.DENSE_BLOCK` parameters), each round on the spectrum flipped so far,
until a round finds nothing below the cut or `FLIP_MAX` pairs are flipped.  The smallest Ritz
value of the last search — an upper bound of the flipped H̃'s smallest eigenvalue — says
whether every direction below the cut was found: `SaddleFlip.complete`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator

from stability.nets.curvature import HessianOperator, default_tol, lanczos
from stability.nets.minimum import NEGATIVE_TOL
from stability.nets.preconditioned import PreconditionedOperator
from stability.nets.problem import NetProblem

FLIP_MAX = 256
"""At most this many negative eigenpairs are flipped."""

FLIP_ROUND = 32
"""Eigenpairs sought at a time: each round searches the bottom of the spectrum flipped so far."""

FLIP_MAXITER = 60
"""ARPACK restarts of each search at the bottom of the spectrum (module doc)."""


@dataclass(frozen=True, eq=False)
class SaddleFlip:
    """The quadratic of the module doc: directions a_j (p, m) and coefficients c_j = −2λ_j,
    in the problem's dtype and on its device; the flipped ``eigenvalues`` λ_j (ascending) and
    ``left``, the smallest eigenvalue of the flipped H̃ (None: that search did not converge)."""

    directions: torch.Tensor
    coefficients: torch.Tensor
    eigenvalues: np.ndarray
    left: float | None
    cut: float

    @property
    def complete(self) -> bool:
        """No eigenvalue of the flipped H̃ is below the cut (as far as the search saw)."""
        return self.left is not None and self.left >= self.cut

    def gradient(self, u: torch.Tensor, w_star: torch.Tensor) -> torch.Tensor:
        """∇q at the (R, p) weights ``u``: Σ_j c_j·a_j·a_jᵀ(u − w*)."""
        return ((u - w_star) @ self.directions * self.coefficients) @ self.directions.T

    def describe(self) -> dict:
        """The protocol's entry: what the measured runs add, and what was found."""
        return {
            "quadratic": "−Σ_j λ_j·(a_jᵀ(u − w*))² along the negative eigenvectors (docs/nets.md)",
            "flipped": [float(x) for x in self.eigenvalues],
            "smallest_left": self.left,
            "complete": self.complete,
        }


class _Flipped(LinearOperator):
    """H̃ + Σ_j c_j x_j x_jᵀ: the whitened curvature of the flipped loss."""

    def __init__(self, op: LinearOperator, x: np.ndarray, c: np.ndarray):
        self.op, self.x, self.c = op, x, c
        self.problem = op.problem
        super().__init__(dtype=np.float64, shape=op.shape)

    @property
    def hvps(self) -> int:
        return self.op.hvps

    def _matvec(self, v):
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        return self.op.matvec(v).reshape(-1) + self.x @ (self.c * (self.x.T @ v))

    def _rmatvec(self, v):  # symmetric
        return self._matvec(v)


def saddle_flip(
    problem: NetProblem, lam_max: float, scale: torch.Tensor | None = None
) -> SaddleFlip | None:
    """The flip of the negative eigenpairs of s·∇²f(w*)·s below −`NEGATIVE_TOL`·``lam_max``
    (``scale`` = s; None: s = 1), or None when there are none (module doc)."""
    op = HessianOperator(problem) if scale is None else PreconditionedOperator(problem, scale)
    cut = -NEGATIVE_TOL * max(float(lam_max), 0.0)
    tol = max(1e-8, default_tol(problem))
    values, x = np.zeros(0), np.zeros((problem.dim, 0))
    left = None
    while True:  # rounds of FLIP_ROUND on the spectrum flipped so far
        k = min(FLIP_ROUND, FLIP_MAX - values.size)
        low = lanczos(_Flipped(op, x, -2.0 * values), k, which="SA", seed=1 + values.size,
                      tol=tol, maxiter=FLIP_MAXITER)  # fmt: skip
        new = low.values < cut
        left = float(low.values.min()) if low.values.size else None
        if not np.any(new):
            break
        values = np.concatenate([values, low.values[new]])
        x = np.concatenate([x, low.vectors[:, new]], axis=1)
        if values.size >= FLIP_MAX:
            rest = lanczos(_Flipped(op, x, -2.0 * values), 1, which="SA", seed=0, tol=tol,
                           maxiter=FLIP_MAXITER)  # fmt: skip
            left = float(rest.values[0]) if rest.values.size else None
            break
    if not values.size:
        return None
    order = np.argsort(values)
    values, x = values[order], x[:, order]
    c = -2.0 * values
    s = np.ones(problem.dim) if scale is None else torch.as_tensor(scale).double().cpu().numpy()
    a = x / s[:, None]
    return SaddleFlip(
        directions=problem.vector(a),
        coefficients=problem.vector(c),
        eigenvalues=values,
        left=left,
        cut=cut,
    )


__all__ = ["FLIP_MAX", "FLIP_MAXITER", "FLIP_ROUND", "SaddleFlip", "saddle_flip"]
