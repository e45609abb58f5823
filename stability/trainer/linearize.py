r"""A trainer problem linearised at its minimizer: what the theory is compared against.

The scalar theory and the coupled analysis see a problem through its gradient's Jacobians at
a minimizer w*: ∇f(u_f, u_b, u_r) ≈ H_f(u_f − w*) + H_b(u_b − w*) + H_r(u_r − w*) (PipeMare
eq. 5, App. D.1 in matrix form).  A `Linearization` carries them with where the trainer's runs
start and how their errors are measured:

* linear regression (`linreg_linearization`): exact, H_f = H = XᵀX/n, H_b = H_r = 0; rates
  are measured on the error recursion (`LinearRegression.error_problem`, no rounding floor);
* a small MLP (`mlp_linearization`): fitted to w* (L-BFGS + Newton), H_f, H_b, H_r the
  Jacobians of backpropagation (central differences), runs started a small kick away.

The comparison of predictions with measurements is `stability.agreement`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.trainer.engine import TrainResult, train
from stability.trainer.linreg import LinearRegression
from stability.trainer.mlp import MLP


@dataclass(frozen=True)
class Linearization:
    """A trainer problem linearised at its minimizer: the trainable problem, the Jacobians
    (H_f, H_b, H_r) of its gradient oracle at w* for a rule, where runs start and how their
    errors and excess losses are measured (module doc)."""

    problem: Any
    w0: np.ndarray
    w_star: np.ndarray
    loss_offset: float
    hessian_eigenvalues: np.ndarray
    jacobians_for: Callable[[Any], tuple[np.ndarray, np.ndarray, np.ndarray]]
    rate_problem: Any
    rate_w0: np.ndarray
    rate_w_star: np.ndarray
    rate_decades: float | None
    assumptions: tuple[str, ...]
    exact: bool = False
    """The linear model is the problem itself (least squares): rates are measured on its
    error recursion, and nothing is assumed."""

    def start(self, where: str) -> tuple[np.ndarray | None, float]:
        """``(w0, loss_offset)`` of a training run from ``"init"`` (the problem's initial
        weights) or ``"minimum"`` (next to w*, above float64's floor; an exact problem has
        no floor to avoid and starts from its initial weights)."""
        if where == "minimum" and not self.exact:
            return self.rate_w0, self.loss_offset
        return None, 0.0

    def run(self, plan, lrs, *, start: str | None = None, **options: Any) -> TrainResult:
        """`stability.trainer.engine.train` of ``plan`` at step sizes ``lrs`` on the problem,
        errors measured from w*: from ``w0`` with divergence judged on f − ``loss_offset``
        (``start=None``, the stability verdicts' start), or from `start` (``start``)."""
        w0, offset = (self.w0, self.loss_offset) if start is None else self.start(start)
        return train(
            self.problem, plan, lrs, w0=w0, w_star=self.w_star, loss_offset=offset, **options
        )

    def rate_run(self, plan, lrs, **options: Any) -> TrainResult:
        """The runs rates are measured on: ``rate_problem`` (an exact problem's error recursion,
        no rounding floor) from ``rate_w0``, tracking its error from ``rate_w_star``."""
        offset = self.loss_offset if self.rate_problem is self.problem else 0.0
        return train(
            self.rate_problem, plan, lrs, w0=self.rate_w0, w_star=self.rate_w_star,
            loss_offset=offset, track=("error",), **options,
        )  # fmt: skip


def linreg_linearization(problem: LinearRegression) -> Linearization:
    """Least squares: exact (constant Hessian, the gradient reads the forward weights only)."""
    zero = np.zeros_like(problem.hessian)
    w0 = problem.initial_weights()
    return Linearization(
        problem=problem,
        w0=w0,
        w_star=problem.minimizer,
        loss_offset=0.0,
        hessian_eigenvalues=problem.hessian_eigenvalues(),
        jacobians_for=lambda rule: (problem.hessian, zero, zero),
        rate_problem=problem.error_problem(),
        rate_w0=w0 - problem.minimizer,
        rate_w_star=np.zeros(problem.dim),
        rate_decades=None,
        assumptions=(
            "exact: least squares has a constant Hessian H = XᵀX/n and the gradient reads the "
            "forward weights only, so a rule with scalar delays acts on each eigenvector of H "
            "as on the scalar model with λ = its eigenvalue (Δ = Φ = 0)",
        ),
        exact=True,
    )


MLP_RATE_DECADES = 6.0
"""Decades of ‖w − w*‖ an MLP rate run may use: from a 1e-4·‖w*‖ start the float64 floor
(≈ eps·κ·‖w*‖, a fixed point slightly off the fitted w*) lies about 8 decades down."""


def mlp_linearization(
    mlp: MLP, *, seed: int = 0, perturbation: float = 1e-7, rate_perturbation: float = 1e-4
) -> Linearization:
    """Fit the MLP to a minimizer w*, linearize there, start runs at w* + a small kick.

    Stability verdicts start ``perturbation``·‖w*‖ away, so an unstable mode can grow by ~6
    decades (and trip the divergence test) while the dynamics are still linear; rate runs
    start ``rate_perturbation``·‖w*‖ away, above float64's floor, and use `MLP_RATE_DECADES`.
    """
    w_star = mlp.fit(mlp.initial_weights(seed))
    H = mlp.hessian(w_star)
    lam = np.linalg.eigvalsh(H)
    rng = np.random.default_rng(seed + 1)
    kick = rng.standard_normal(mlp.dim)
    kick *= np.linalg.norm(w_star) / np.linalg.norm(kick)
    w0 = w_star + perturbation * kick
    cache: dict[bool, tuple] = {}

    def jacobians_for(rule):
        recompute = getattr(rule, "tau_recomp", None) is not None
        if recompute not in cache:
            cache[recompute] = mlp.pass_jacobians(w_star, recompute=recompute)
        return cache[recompute]

    grad = float(np.linalg.norm(mlp.gradient(w_star)))
    return Linearization(
        problem=mlp,
        w0=w0,
        w_star=w_star,
        loss_offset=float(mlp.loss(w_star)),
        hessian_eigenvalues=lam,
        jacobians_for=jacobians_for,
        rate_problem=mlp,
        rate_w0=w_star + rate_perturbation * kick,
        rate_w_star=w_star,
        rate_decades=MLP_RATE_DECADES,
        assumptions=(
            f"linearization at the fitted minimizer w* (‖∇f(w*)‖ = {grad:.2e}): "
            "∇f(u_f, u_b, u_r) ≈ H_f(u_f − w*) + H_b(u_b − w*) + H_r(u_r − w*), H_f, H_b, H_r "
            "the Jacobians of backpropagation with respect to the forward, backward and "
            "recompute weights (central differences); stability runs start at w* + "
            f"{perturbation:g}·‖w*‖·(random unit vector) and diverge when the excess loss over "
            "f(w*) grows by the divergence factor, i.e. while the dynamics are still linear; "
            f"rate runs start {rate_perturbation:g}·‖w*‖ away",
            "the modes decouple: H_f, H_b, H_r are taken diagonal in the eigenbasis of the "
            "Hessian H = H_f + H_b + H_r, mode k being the scalar model with λ_k = v_kᵀHv_k, "
            "Δ_k = v_kᵀH_f v_k − λ_k, Φ_k = −v_kᵀH_r v_k (PipeMare eq. 5, App. D.1); the "
            "off-diagonal share dropped is reported per row as offdiagonal",
            "modes with λ ≤ 1e-9·λ_max (flat or negative curvature) are left out and counted "
            "as dropped_modes",
            "full-batch, deterministic gradients; the minimizer is the one L-BFGS + Newton "
            "reach from the seeded initialization",
        ),
    )


__all__ = ["MLP_RATE_DECADES", "Linearization", "linreg_linearization", "mlp_linearization"]
