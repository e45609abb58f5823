r"""The data's moments that minibatch sampling brings into the dynamics.

Least squares f(w) = ‖Xw − y‖²/(2n) with rows x_i and residuals r = Xw* − y (Xᵀr = 0 at the
minimizer).  A minibatch B of B distinct indices (uniform over the B-subsets) gives

    H_B = (1/B) Σ_{i∈B} x_i x_iᵀ,      ξ_B = ∇f_B(w*) = (1/B) Σ_{i∈B} r_i x_i,

sample means drawn without replacement.  For such means of population values a_i, b_i
(population means ā, b̄), E[â b̂ᵀ] = ā b̄ᵀ + p·(1/n) Σ_i (a_i − ā)(b_i − b̄)ᵀ with

    p = (n − B) / (B (n − 1))                       (the finite-population correction),

which gives every moment the second-moment recursion needs (E ξ_B = 0 since Xᵀr = 0):

    E[H_B ⊗ H_B]      = H ⊗ H + p·(E_i[x xᵀ ⊗ x xᵀ] − H ⊗ H)     (Mulayoff & Michaeli 2023's
                                                                     mixture form),
    E[H_B P H_B]      = (1 − p)·H P H + p·F(P),     F(P) = (1/n) Σ_i x_i (x_iᵀ P x_i) x_iᵀ,
    E[ξ_B ξ_Bᵀ]       = p·Σ_ξ,                      Σ_ξ = (1/n) Σ_i r_i² x_i x_iᵀ,
    E[H_B u ξ_Bᵀ]     = p·J(u),                     J(u) = (1/n) Σ_i r_i (x_iᵀ u) x_i x_iᵀ.

B = n gives p = 0 (the full batch: no noise); B = 1 gives p = 1 (single samples).  F is applied
matrix-free, through E[x⊗x⊗x⊗x] (d⁴ numbers) when d² < n and through the rows otherwise.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

import numpy as np


def sampling_factor(samples: int, batch: int) -> float:
    """p = (n − B)/(B(n − 1)): Var of a mean of B of n values drawn without replacement,
    relative to the population variance (1 at B = 1, 0 at B = n)."""
    if not 1 <= batch <= samples:
        raise ValueError(f"batch must be an integer in [1, {samples}], got {batch}")
    if samples == 1:
        return 0.0
    return (samples - batch) / (batch * (samples - 1))


class Moments(ABC):
    """What the solvers of `stability.noise` read from the data (module doc): n, d, batch B,
    p, H, F(P) (``fourth``), Σ_ξ, J(u) (``cross``), H_B·u (``batch_apply``) and the noise
    matrix N built from them.  `SampleMoments` (least squares) and
    `stability.noise.persample.PerSampleMoments` (per-sample curvatures) are the two kinds."""

    batch: int

    @property
    @abstractmethod
    def per_sample(self) -> np.ndarray:
        """(n, d): one row per sample (x_i for least squares, the gradients g_i otherwise)."""

    @property
    @abstractmethod
    def hessian(self) -> np.ndarray:
        """H = (1/n) Σ H_i."""

    @property
    @abstractmethod
    def _fourth(self) -> np.ndarray | None:
        """E_i[H_i ⊗ H_i] as a (d², d²) matrix on row-major vec P, or None where ``fourth``
        runs over the samples instead."""

    @abstractmethod
    def fourth(self, P: np.ndarray) -> np.ndarray:
        """F(P) = (1/n) Σ_i H_i P H_i for symmetric P (..., d, d)."""

    @property
    def samples(self) -> int:
        return self.per_sample.shape[0]

    @property
    def dim(self) -> int:
        return self.per_sample.shape[1]

    @cached_property
    def p(self) -> float:
        return sampling_factor(self.samples, self.batch)

    def noise_matrix(self) -> np.ndarray:
        """N = p·(E_i[H_i ⊗ H_i] − H ⊗ H) as a (d², d²) matrix on row-major vec P:
        N·vec P = vec(E[H_B P H_B] − H P H)."""
        d = self.dim
        fourth = self._fourth
        if fourth is None:
            fourth = self.fourth(np.eye(d * d).reshape(d * d, d, d)).reshape(d * d, d * d).T
        return self.p * (fourth - np.kron(self.hessian, self.hessian))


@dataclass(frozen=True, eq=False)
class SampleMoments(Moments):
    """The moments of module doc for rows ``X`` (n, d), residuals ``r`` (n,) and batch B
    (H_i = x_i x_iᵀ)."""

    X: np.ndarray
    r: np.ndarray
    batch: int

    @classmethod
    def of(cls, problem, batch: int) -> SampleMoments:
        """From a `stability.trainer.linreg.LinearRegression` (r = X w* − y)."""
        X = np.asarray(problem.X, dtype=float)
        return cls(X, X @ problem.minimizer - problem.y, int(batch))

    @property
    def per_sample(self) -> np.ndarray:
        return self.X

    @cached_property
    def hessian(self) -> np.ndarray:
        """H = XᵀX/n."""
        return self.X.T @ self.X / self.samples

    @cached_property
    def offset_covariance(self) -> np.ndarray:
        """Σ_ξ = (1/n) Σ r_i² x_i x_iᵀ (so E ξ_B ξ_Bᵀ = p·Σ_ξ)."""
        return (self.X * self.r[:, None] ** 2).T @ self.X / self.samples

    @cached_property
    def _fourth(self) -> np.ndarray | None:
        """E[x_a x_b x_c x_e] as a (d², d²) matrix when that is cheaper than the rows."""
        n, d = self.X.shape
        if d * d >= n:
            return None
        outer = np.einsum("ia,ib->iab", self.X, self.X).reshape(n, d * d)
        return outer.T @ outer / n

    def fourth(self, P: np.ndarray) -> np.ndarray:
        """F(P) = (1/n) Σ_i x_i (x_iᵀ P x_i) x_iᵀ for symmetric P (..., d, d)."""
        d = self.dim
        if self._fourth is not None:
            flat = P.reshape(*P.shape[:-2], d * d)
            return (flat @ self._fourth).reshape(P.shape)
        q = np.einsum("ia,...ab,ib->...i", self.X, P, self.X)
        return np.einsum("ia,...i,ib->...ab", self.X, q, self.X) / self.samples

    @cached_property
    def _third(self) -> np.ndarray:
        """(1/n) Σ_i r_i x_i ⊗ x_i ⊗ x_i, shape (d, d, d)."""
        return np.einsum("i,ia,ib,ic->abc", self.r / self.samples, self.X, self.X, self.X)

    def cross(self, u: np.ndarray) -> np.ndarray:
        """J(u) = (1/n) Σ_i r_i (x_iᵀ u) x_i x_iᵀ (so E[H_B u ξ_Bᵀ] = p·J(u))."""
        return self._third @ u

    def batch_apply(self, index: np.ndarray, U: np.ndarray) -> np.ndarray:
        """H_B·u = X_Bᵀ(X_B u)/B per run: ``index`` (runs, B) the batches, ``U`` (..., runs, d)."""
        runs, batch = index.shape
        Xb = self.X.take(index.ravel(), axis=0).reshape(runs, batch, self.dim)
        Xu = (Xb @ U[..., None])[..., 0]  # X_B u: (..., runs, B)
        return (Xb.transpose(0, 2, 1) @ Xu[..., None])[..., 0] / batch


__all__ = ["Moments", "SampleMoments", "sampling_factor"]
