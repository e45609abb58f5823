r"""Least-squares linear regression: loss, gradient oracle, exact Hessian, minimizer.

    f(w) = ‖Xw − y‖² / (2n),   ∇f(w) = H·w − b,   H = XᵀX/n,   b = Xᵀy/n,   w* = H⁻¹b.

The Hessian is constant, so the delayed dynamics of any rule with scalar hyperparameters split
into independent modes along H's eigenvectors, one per eigenvalue λ_k, each the scalar model of
PipeMare Sec. 3.1 / Kosson eq. 19: the predictions of `stability.analysis.modes` are exact here.

Minibatch gradients shared by all runs (one batch stream) use the batch moments
H_B = X_Bᵀ X_B / B and b_B = X_Bᵀ y_B / B, computed for a chunk of steps at once:
∇f_B(w) = H_B·w − b_B is X_Bᵀ(X_B w − y_B)/B regrouped, a (p × p) product per run instead of
(B × p).  With a batch per run (independent streams, `run_batch_oracle`) there is nothing to
share, and the gradient is computed as X_Bᵀ(X_B w − y_B)/B directly.

The model has one layer, so the gradient reads only the forward weights: the backward and
recompute weights of a rule's passes do not enter (Δ = Φ = 0 in PipeMare's eq. 5 model).

Loss values are computed as f* + ½(w − w*)ᵀH(w − w*) with f* from the residual: equal to the
definition, without the cancellation of ½wᵀHw − bᵀw + c near the minimum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from stability.pipeline import split_evenly
from stability.rules.base import Oracle
from stability.trainer.data import Dataset


@dataclass(frozen=True, eq=False)
class LinearRegression:
    """f(w) = ‖Xw − y‖²/(2n) on features ``X`` (n, p) and targets ``y`` (n,).

    Weights may be batched: every method takes ``w`` of shape (..., p), e.g. (R, p) for R runs.
    """

    X: np.ndarray
    y: np.ndarray
    name: str = field(default="linreg")

    def __post_init__(self):
        X, y = np.asarray(self.X, dtype=float), np.asarray(self.y, dtype=float)
        if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] == 0:
            raise ValueError(f"X must be (n, p) and y (n,), got {X.shape} and {y.shape}")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)

    @classmethod
    def from_dataset(cls, data: Dataset) -> LinearRegression:
        return cls(data.X, data.y)

    @property
    def dim(self) -> int:
        """Number of parameters p."""
        return self.X.shape[1]

    @property
    def samples(self) -> int:
        return self.X.shape[0]

    uses_backward = False
    """The gradient depends on the forward weights only (one layer)."""

    @cached_property
    def hessian(self) -> np.ndarray:
        """H = XᵀX/n (exact, constant)."""
        return self.X.T @ self.X / self.samples

    @cached_property
    def linear_term(self) -> np.ndarray:
        """b = Xᵀy/n."""
        return self.X.T @ self.y / self.samples

    @cached_property
    def minimizer(self) -> np.ndarray:
        """w* = argmin f (least squares; minimum-norm if H is singular)."""
        return np.linalg.lstsq(self.X, self.y, rcond=None)[0]

    @cached_property
    def min_loss(self) -> float:
        r = self.X @ self.minimizer - self.y
        return float(r @ r) / (2 * self.samples)

    def hessian_eigenvalues(self) -> np.ndarray:
        """Eigenvalues of H, ascending."""
        return np.linalg.eigvalsh(self.hessian)

    def initial_weights(self, seed: int = 0) -> np.ndarray:
        """w₀ = 0 (the seed does not enter: the problem is convex, the start is fixed)."""
        return np.zeros(self.dim)

    def loss(self, w: np.ndarray) -> np.ndarray:
        """f(w) for w of shape (..., p)."""
        e = np.asarray(w) - self.minimizer
        return self.min_loss + 0.5 * np.einsum("...i,ij,...j->...", e, self.hessian, e)

    def gradient(self, w: np.ndarray) -> np.ndarray:
        """∇f(w) = H·w − b, for w of shape (..., p)."""
        return np.asarray(w) @ self.hessian - self.linear_term

    def oracle(self, u_fwd, u_bkwd=None, u_recomp=None):
        """The full-batch gradient at the forward weights (the backward ones do not enter)."""
        return self.gradient(u_fwd)

    def error_problem(self) -> LinearRegression:
        """The error recursion as a problem: targets 0, so ∇f(e) = H·e exactly and e* = 0.

        Training it from w₀ − w* gives e_t = w_t − w*: in exact arithmetic the same sequence
        as training on (X, y) from w₀ (∇f(w) = H(w − w*) since Xᵀ(Xw* − y) = 0).  In float64
        it has no rounding floor (the original stops near eps·κ·‖w*‖), so asymptotic rates
        can be followed over hundreds of decades (`stability.trainer.measure`).  Full batch
        only: a minibatch's X_Bᵀ(X_B w* − y_B) is not 0.
        """
        return LinearRegression(self.X, np.zeros_like(self.y), name=self.name + " (error)")

    def batch_moments(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(H_B, b_B) for each row of ``indices`` (C, B): shapes (C, p, p) and (C, p)."""
        Xb, yb = self.X[indices], self.y[indices]
        B = indices.shape[-1]
        XbT = Xb.transpose(0, 2, 1)
        return np.matmul(XbT, Xb) / B, np.matmul(XbT, yb[..., None])[..., 0] / B

    def batch_oracles(self, indices: np.ndarray) -> list[Oracle]:
        """One gradient oracle per row of ``indices`` (C, B): ∇f_B(u) = H_B·u − b_B."""
        H, b = self.batch_moments(indices)
        return [_MomentOracle(H[c], b[c]) for c in range(indices.shape[0])]

    def run_batch_oracle(self, indices: np.ndarray) -> Oracle:
        """The gradient oracle of one step with a minibatch per run: ``indices`` (R, B), run r
        gets ∇f_{B_r}(u_r) = X_{B_r}ᵀ(X_{B_r} u_r − y_{B_r})/B (independent batch streams)."""
        flat = indices.ravel()
        X = self.X.take(flat, axis=0).reshape(*indices.shape, self.dim)
        return _RunBatchOracle(X, self.y.take(flat).reshape(indices.shape))

    def stage_sizes(self, stages: int) -> np.ndarray:
        """Parameter blocks of P pipeline stages: contiguous, as even as possible."""
        return split_evenly(self.dim, stages)

    def describe(self) -> dict:
        return {"problem": self.name, "samples": self.samples, "parameters": self.dim}


@dataclass(frozen=True, eq=False)
class _MomentOracle:
    """∇f_B(u) = H_B·u − b_B for one minibatch."""

    H: np.ndarray
    b: np.ndarray

    def __call__(self, u_fwd, u_bkwd=None, u_recomp=None):
        return u_fwd @ self.H - self.b


@dataclass(frozen=True, eq=False)
class _RunBatchOracle:
    """∇f_{B_r}(u_r) = X_rᵀ(X_r u_r − y_r)/B for each run r: X (R, B, p), y (R, B)."""

    X: np.ndarray
    y: np.ndarray

    def __call__(self, u_fwd, u_bkwd=None, u_recomp=None):
        residual = (self.X @ u_fwd[:, :, None])[:, :, 0] - self.y
        return (residual[:, None, :] @ self.X)[:, 0] / self.y.shape[-1]


__all__ = ["LinearRegression"]
