r"""Preconditioned curvature P^{1/2} ∇²f P^{1/2} from Hessian-vector products, per stage too.

The frozen-preconditioner linearisation of Adam/AdamW (`stability.rules.adam`) with a
*diagonal* P (`stability.nets.preconditioner`) near w*, g = H(u − w*), is

    m_{t+1} = β1·m_t + (1 − β1)·g_t,      w_{t+1} = w_t − lr·(P·m_{t+1} + wd·w_t).

In the whitened coordinates x = P^{-1/2}(w − w*), m̃ = P^{1/2}m it reads

    m̃_{t+1} = β1·m̃_t + (1 − β1)·H̃·x_u,   x_{t+1} = x_t − lr·(m̃_{t+1} + wd·x_t),
    H̃ = P^{1/2} H P^{1/2},

the same rule with P = 1 on the curvature H̃ (derived here).  **How P and the weight decay
combine:** AdamW's decay is decoupled — not multiplied by P — and P is diagonal, so the decay
is the same c = 1 − lr·wd on every whitened coordinate: each eigenvalue λ̃ of H̃ gives the
polynomial of `stability.rules.adam.frozen_adam_polynomial` at P = 1, λ = λ̃ (the constant
force wd·w* only moves the fixed point).  Adam with an L2 penalty (``torch.optim.Adam``'s
coupled ``weight_decay``) is instead the loss f + wd/2·‖w‖², whose Hessian H + wd·I enters H̃
as P^{1/2}(H + wd·I)P^{1/2}.  H̃ has the spectrum of P·H, its eigenvectors x give the
directions P^{1/2}x in weight space, and P being diagonal, stage i of w is stage i of x: the
per-stage coupled analysis (`stability.nets.prediction`) applies to H̃ unchanged.

`PreconditionedOperator` wraps the network's Hessian-vector product
(`stability.nets.curvature.HessianOperator`): v ↦ s ⊙ H(s ⊙ v), s = P^{1/2} — never a dense
matrix; `preconditioned_curvature` runs the same Lanczos on it as `stability.nets.curvature`.

**float32 models.**  P multiplies the products' rounding: where Adam saw almost no gradient
P ≈ 1/ε, and a float32 product of H̃ carried 3·10⁻⁴ relative error on a float32 MLP whose P
spans 2.9·10³ … 2.9·10⁶ (1,011 parameters, AdamW 2,000 steps), which left its top three
eigenvalues 10⁻⁴ … 7·10⁻⁴ from float64's.  `preconditioned_curvature` therefore evaluates H̃
of a float32 problem on its float64 copy (`NetProblem.in_float64`, the model's device): the
same Lanczos, as many products (21 there, as in float32), each in float64: nothing
measurable on that MLP, 1.6× the wall time on a 1.07·10⁶-parameter transformer (docs/adam.md),
more on a GPU with slow float64.  The plain curvature stays in the model's
dtype (`stability.nets.curvature`: 3·10⁻⁷ on float32 models, no P to amplify it).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator

from stability.nets.curvature import (
    Curvature,
    HessianOperator,
    lanczos,
    operator_top_eigenpair,
)
from stability.nets.problem import NetProblem, dtype_name


class PreconditionedOperator(LinearOperator):
    """v ↦ s ⊙ ∇²f(w)(s ⊙ v), s = P^{1/2} (flat, problem order), on float64 arrays.

    ``block``: a stage's slice (the diagonal block s_i H_ii s_i); ``w``: the point (default
    w*).  Counts HVPs as ``hvps``.
    """

    def __init__(
        self,
        problem: NetProblem,
        scale: torch.Tensor | np.ndarray,
        block: slice | None = None,
        w: torch.Tensor | None = None,
    ):
        self.inner = HessianOperator(problem, block, w)
        s = torch.as_tensor(scale).detach().to("cpu", torch.float64).numpy()
        if s.shape != (problem.dim,):
            raise ValueError(f"scale must have {problem.dim} entries, got shape {s.shape}")
        self.s = s if block is None else s[block]
        super().__init__(dtype=np.float64, shape=self.inner.shape)

    @property
    def hvps(self) -> int:
        return self.inner.hvps

    @property
    def problem(self) -> NetProblem:
        return self.inner.problem

    def _matvec(self, v):
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        return self.s * self.inner.matvec(self.s * v).reshape(-1)

    def _rmatvec(self, v):  # symmetric
        return self._matvec(v)


def preconditioned_curvature(
    problem: NetProblem,
    scale: torch.Tensor,
    k: int = 10,
    *,
    stage_k: int | None = None,
    stage_blocks: bool = True,
) -> Curvature:
    """Top-``k`` eigenpairs of H̃ = s∇²f(w*)s and the top ``stage_k`` (default k) of each
    stage's block s_i H_ii s_i (``stage_blocks``; else ``stage_eigenvalues`` is empty), as a
    `Curvature` (eigenvectors in the whitened coordinates); the negative end is not searched.
    A float32 problem is evaluated on its float64 copy (`evaluation_problem`, module doc)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer ≥ 1, got {k!r}")
    start = time.perf_counter()
    problem, how, warning = evaluation_problem(problem)
    top = lanczos(PreconditionedOperator(problem, scale), k)
    hvps, stage_vals = top.hvps, []
    for block in problem.blocks if stage_blocks else ():
        pairs = lanczos(PreconditionedOperator(problem, scale, block), stage_k or k)
        hvps += pairs.hvps
        stage_vals.append(pairs.values)
    return Curvature(
        eigenvalues=top.values,
        eigenvectors=top.vectors,
        stage_eigenvalues=tuple(stage_vals),
        negative_eigenvalues=np.zeros(0),
        stage_sizes=problem.stage_sizes,
        hvps=hvps,
        seconds=time.perf_counter() - start,
        method=f"{top.method} on P^1/2 H P^1/2 ({problem.hvp_mode} HVPs{how})",
        warning=warning,
    )


def evaluation_problem(problem: NetProblem) -> tuple[NetProblem, str, str | None]:
    """(the problem H̃ is evaluated on, how — for the method, a warning or None): a float32
    problem's float64 copy (module doc), a float64 problem itself; where the copy cannot be
    made, the problem in its own dtype, with a warning that says so."""
    name = dtype_name(problem.dtype)
    wide, failed = problem.in_float64_or_self()
    if failed is not None:
        return (
            problem,
            f", {name}",
            (
                f"preconditioned_eigenvalues are evaluated in {name}: in float64 {failed}; P "
                f"multiplies {name} rounding (up to 7e-4 relative on an MLP, docs/adam.md)"
            ),
        )
    return wide, "" if wide is problem else f", float64 (the model is {name})", None


def top_preconditioned_eigenpair(
    problem: NetProblem,
    w: torch.Tensor,
    scale: torch.Tensor,
    v0: np.ndarray | None = None,
    tol: float = 1e-4,
) -> tuple[float, np.ndarray, int]:
    """(λ₁, x₁, HVPs): the largest eigenvalue of s∇²f(w)s (= λ₁(P·∇²f(w))) by Lanczos,
    warm-started from ``v0``, to relative residual ``tol`` (`stability.nets.curvature.top_eigenpair`
    on the preconditioned operator)."""
    return operator_top_eigenpair(PreconditionedOperator(problem, scale, w=w), v0, tol)


def weight_direction(scale: torch.Tensor, x: np.ndarray) -> np.ndarray:
    """The unit weight-space direction P^{1/2}x of a whitened eigenvector x (a right
    eigenvector of P·H: P·H·P^{1/2}x = P^{1/2}H̃x = λ̃·P^{1/2}x)."""
    d = np.asarray(scale, dtype=float) * np.asarray(x, dtype=float)
    return d / np.linalg.norm(d)


__all__ = [
    "PreconditionedOperator",
    "evaluation_problem",
    "preconditioned_curvature",
    "top_preconditioned_eigenpair",
    "weight_direction",
]
