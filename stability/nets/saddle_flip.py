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
found into one of positive curvature μ_j,

    q(u) = ½·Σ_j c_j·(a_jᵀ(u − w*))²,   ∇q(u) = Σ_j c_j·a_j·a_jᵀ(u − w*),   c_j = μ_j − λ_j > 0,

with (λ_j, x_j) the eigenpairs of H̃ = s·∇²f(w*)·s below −`NEGATIVE_TOL`·λ₁ (s = P^{1/2} for
a frozen preconditioner, 1 otherwise), a_j = x_j/s and μ_j = min(|λ_j|, `FLIP_CAP`·λ₁): then
s·∇²(f + q)·s = H̃ + Σ c_j x_jx_jᵀ, the same eigenvectors with λ_j ↦ μ_j and every other
eigenpair unchanged — the top curvature, which the prediction uses, included; the cap keeps a
flipped direction from becoming the sharpest one (a saddle can be steeper than λ₁).  The runs
stay the network's own nonlinear runs (all of its curvature, its stages, delays and backward
passes) but for this fixed quadratic along the saddle directions.

The eigenpairs: on a model of at most `FLIP_DENSE` parameters, all of them, from the dense
(whitened) Hessian (p products and ``numpy.linalg.eigh``: fewer products than Lanczos needs for
a hundred eigenpairs at the dense bottom of a network's spectrum — 4,600-9,000 on 300-parameter
MLPs).  On a larger one, rounds of Lanczos at the bottom of the spectrum (ARPACK ``which="SA"``,
`FLIP_ROUND` pairs a round, each round on the spectrum flipped so far) until a round finds
nothing below the cut, `FLIP_MAX` pairs are flipped or `FLIP_HVPS` products are spent.  The
smallest unflipped eigenvalue (dense), or the smallest Ritz value of the last search — an upper
bound of the flipped H̃'s smallest eigenvalue — says whether every direction below the cut was
found: `SaddleFlip.complete`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator

from stability.nets.curvature import (
    HessianOperator,
    default_tol,
    dense_operator,
    krylov_basis,
    lanczos,
)
from stability.nets.minimum import NEGATIVE_TOL
from stability.nets.preconditioned import PreconditionedOperator
from stability.nets.problem import NetProblem

FLIP_CAP = 0.5
"""A flipped direction's curvature is |λ_j|, at most this × λ₁ (module doc)."""

FLIP_DENSE = 4000
"""Models of at most this many parameters: the whole (whitened) Hessian from p products, and
every negative eigenpair below the cut (module doc)."""

FLIP_MAX = 256
"""Larger models: at most this many negative eigenpairs are flipped ..."""

FLIP_ROUND = 32
"""... sought this many at a time, each round on the spectrum flipped so far ..."""

FLIP_HVPS = 2000
"""... within this many Hessian-vector products in all: about a tenth of what the measurement
itself costs (its default bracket runs 8 step sizes × 2,000 steps × 3 rounds of gradients, a
product costing about three)."""


@dataclass(frozen=True, eq=False)
class SaddleFlip:
    """The quadratic of the module doc: directions a_j (p, m) and coefficients c_j = μ_j − λ_j,
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
            "quadratic": "½·Σ_j (μ_j − λ_j)·(a_jᵀ(u − w*))² along the negative eigenvectors, "
            "μ_j = min(|λ_j|, λ₁/2) (docs/nets.md)",
            "flipped": int(self.eigenvalues.size),
            "most_negative": float(self.eigenvalues[0]),
            "least_negative": float(self.eigenvalues[-1]),
            "cut": self.cut,
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
    (``scale`` = s; None: s = 1; ``lam_max`` = λ₁ of the same matrix), or None when there are
    none (module doc)."""
    op = HessianOperator(problem) if scale is None else PreconditionedOperator(problem, scale)
    cut = -NEGATIVE_TOL * max(float(lam_max), 0.0)

    def coefficients(values: np.ndarray) -> np.ndarray:
        """c_j = μ_j − λ_j with μ_j = min(|λ_j|, `FLIP_CAP`·λ₁)."""
        return np.minimum(-values, FLIP_CAP * float(lam_max)) - values

    if problem.dim <= FLIP_DENSE:
        lam, vectors = np.linalg.eigh(dense_operator(op))
        below = lam < cut
        values, x = lam[below], vectors[:, below]
        left = float(lam[~below][0]) if np.any(~below) else None
    else:
        values, x, left = _bottom_in_rounds(op, cut, default_tol(problem), coefficients)
    if not values.size:
        return None
    s = np.ones(problem.dim) if scale is None else op.s  # the operator's P^1/2, float64
    return SaddleFlip(
        directions=problem.vector(x / s[:, None]),
        coefficients=problem.vector(coefficients(values)),
        eigenvalues=values,
        left=left,
        cut=cut,
    )


def _bottom_in_rounds(
    op, cut: float, tol: float, coefficients
) -> tuple[np.ndarray, np.ndarray, float | None]:
    """(eigenvalues below ``cut``, ascending; their eigenvectors; the last search's smallest
    Ritz value) by rounds of `FLIP_ROUND` on the spectrum flipped so far (by
    ``coefficients(values)``), within `FLIP_HVPS` products in all and `FLIP_MAX` pairs (module
    doc)."""
    n = op.shape[0]
    values, x = np.zeros(0), np.zeros((n, 0))
    left, start = None, op.hvps
    while values.size < FLIP_MAX:
        k = min(FLIP_ROUND, FLIP_MAX - values.size)
        ncv = krylov_basis(n, k)
        budget = FLIP_HVPS - (op.hvps - start) - ncv
        if budget < ncv - k:
            break
        low = lanczos(_Flipped(op, x, coefficients(values)), k, which="SA", seed=1 + values.size,
                      tol=max(1e-8, tol), maxiter=budget // (ncv - k))  # fmt: skip
        left = float(low.values.min()) if low.values.size else None
        new = low.values < cut
        if not np.any(new):
            break
        values = np.concatenate([values, low.values[new]])
        x = np.concatenate([x, low.vectors[:, new]], axis=1)
    order = np.argsort(values)
    return values[order], x[:, order], left


__all__ = [
    "FLIP_CAP",
    "FLIP_DENSE",
    "FLIP_HVPS",
    "FLIP_MAX",
    "FLIP_ROUND",
    "SaddleFlip",
    "saddle_flip",
]
