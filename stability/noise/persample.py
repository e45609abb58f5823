r"""Minibatch moments from per-sample curvatures and gradients (a network near its minimum).

Near a minimum w* the minibatch gradient of any twice-differentiable loss f = (1/n) Σ_i ℓ_i is,
to first order, g_B(w) = H_B·(w − w*) + ξ_B with

    H_B = (1/B) Σ_{i∈B} H_i,      H_i = ∇²ℓ_i(w*),
    ξ_B = (1/B) Σ_{i∈B} g̃_i,      g̃_i = ∇ℓ_i(w*) − ∇f(w*),

the structure `stability.noise.moments` gives for least squares (H_i = x_i x_iᵀ,
g̃_i = r_i x_i).  The gradients are centred: ∇f(w*) = 0 at an exact minimum, and a network's
simulated runs are tilted by it (`stability.nets.minibatch_runs`).  With B distinct indices per
step and p = (n − B)/(B(n − 1)) the finite-population moments are, as there,

    E[H_B ⊗ H_B]    = H ⊗ H + p·(E_i[H_i ⊗ H_i] − H ⊗ H),
    E[H_B P H_B]    = (1 − p)·H P H + p·F(P),        F(P) = (1/n) Σ_i H_i P H_i,
    E[ξ_B ξ_Bᵀ]     = p·Σ_ξ,                         Σ_ξ = (1/n) Σ_i g̃_i g̃_iᵀ,
    E[H_B u ξ_Bᵀ]   = p·J(u),                        J(u) = (1/n) Σ_i H_i u g̃_iᵀ,

except that J(u) is not symmetric for general H_i: the second-moment recursion adds
J(u) + J(u)ᵀ (`stability.noise.second_moment`, which adds 2·`cross`), so `cross` returns the
symmetric part ½(J + Jᵀ) — for least squares J is already symmetric.

`PerSampleMoments` is a `stability.noise.moments.Moments` as `SampleMoments` is (``hessian``,
``p``, ``offset_covariance``, ``fourth``, ``cross``, ``noise_matrix``, ``batch_apply``), so
the solvers of `stability.noise` (recursion, Gramians, thresholds, Lyapunov exponents) take
either.  The curvatures here are d × d (a network's are Galerkin projections onto a k-dimensional
subspace, `stability.nets.minibatch_moments`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stability.noise.moments import Moments, sampling_factor

DENSE_FOURTH_MAX = 20_000_000
"""E_i[H_i ⊗ H_i] is formed as a (d², d²) matrix up to this many entries (d ≤ 66); above,
F(P) runs over the samples."""


@dataclass(frozen=True, eq=False)
class PerSampleMoments(Moments):
    """The moments of module doc for per-sample ``hessians`` (n, d, d), ``gradients`` (n, d)
    and batch size ``batch``."""

    hessians: np.ndarray
    gradients: np.ndarray
    batch: int

    def __post_init__(self):
        n, d = self.gradients.shape
        if self.hessians.shape != (n, d, d):
            raise ValueError(
                f"hessians must have shape (n, d, d) = ({n}, {d}, {d}), got {self.hessians.shape}"
            )
        sampling_factor(n, self.batch)  # validates batch

    @property
    def per_sample(self) -> np.ndarray:
        return self.gradients

    @cached_property
    def hessian(self) -> np.ndarray:
        """H = (1/n) Σ H_i (symmetrised)."""
        H = self.hessians.mean(axis=0)
        return 0.5 * (H + H.T)

    @cached_property
    def mean_gradient(self) -> np.ndarray:
        """∇f(w*) in these coordinates (removed from the offsets)."""
        return self.gradients.mean(axis=0)

    @cached_property
    def centred(self) -> np.ndarray:
        """g̃_i = g_i − ḡ, shape (n, d)."""
        return self.gradients - self.mean_gradient

    @cached_property
    def offset_covariance(self) -> np.ndarray:
        """Σ_ξ = (1/n) Σ g̃_i g̃_iᵀ (so E ξ_B ξ_Bᵀ = p·Σ_ξ)."""
        return self.centred.T @ self.centred / self.samples

    @cached_property
    def _fourth(self) -> np.ndarray | None:
        """E_i[H_i ⊗ H_i] as a (d², d²) matrix on row-major vec P, when small enough."""
        n, d = self.samples, self.dim
        if d**4 > DENSE_FOURTH_MAX:
            return None
        A = self.hessians.reshape(n, d * d)
        gram = (A.T @ A / n).reshape(d, d, d, d)  # Σ H_i[a, c] H_i[b, e] at [a, c, b, e]
        return gram.transpose(0, 2, 1, 3).reshape(d * d, d * d)

    def fourth(self, P: np.ndarray) -> np.ndarray:
        """F(P) = (1/n) Σ_i H_i P H_i for symmetric P (..., d, d)."""
        d = self.dim
        if self._fourth is not None:
            flat = P.reshape(*P.shape[:-2], d * d)
            return (flat @ self._fourth.T).reshape(P.shape)
        return np.einsum("iab,...bc,icd->...ad", self.hessians, P, self.hessians) / self.samples

    def cross(self, u: np.ndarray) -> np.ndarray:
        """½(J(u) + J(u)ᵀ), J(u) = (1/n) Σ_i H_i u g̃_iᵀ (module doc)."""
        J = (self.hessians @ u).T @ self.centred / self.samples  # 2nd² flops, not nd³
        return 0.5 * (J + J.T)

    def batch_apply(self, index: np.ndarray, U: np.ndarray) -> np.ndarray:
        """H_B·u per run: ``index`` (runs, B) the batches, ``U`` (..., runs, d)."""
        HB = self.hessians[index].mean(axis=1)  # (runs, d, d)
        return np.einsum("rab,...rb->...ra", HB, U)


__all__ = ["DENSE_FOURTH_MAX", "PerSampleMoments"]
