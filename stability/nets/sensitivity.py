r"""The discrepancy sensitivity a network presents: its Δ, and the max lr predicted from it.

PipeMare's quadratic model (eq. 5, App. D.1) gives the gradient computed with forward weights
u_fwd and backward weights u_bkwd as (λ + Δ)·u_fwd − Δ·u_bkwd: Δ is how much the gradient moves
when only the backward weights move.  On a network the same first-order model is a matrix one
(`stability.coupled.system`)::

    g(u_fwd, u_bkwd) ≈ H_f·(u_fwd − w) + H_b·(u_bkwd − w),     H_f + H_b = ∇²f(w),
    H_b = ∂g/∂u_bkwd — the Jacobian of backpropagation (`stability.nets.inconsistent`) with
          respect to the backward weights alone,

and along a unit direction v the scalar model's parameters are λ_v = vᵀ∇²f v and the
**effective Δ** Δ_v = −vᵀH_b v (`effective_delta`, on the top eigenvectors).  H_b is applied to
vectors by central differences of the inconsistent gradient in u_bkwd (`discrepancy_jacobian`),
never formed; a float32 problem's on its float64 copy (`NetProblem.in_float64`): in float32 the
differences' rounding, ε₃₂·|g|/`FD_STEP`, swamps Δ near a minimum (on four float32 models of
111–627 parameters Δ₁ came out 0.02–0.36 in size instead of 10⁻⁷–10⁻³, with the wrong sign
on one, and moved the coupled max lr up to 1 %, out of the measured bracket).

Two predictions of the max stable lr follow:

* **scalar** (`scalar_discrepancy_max_lr`): the rule's threshold on the quadratic model at
  (λ₁, Δ₁) (`stability.analysis.boundary.max_lr`; Lemma 2 for ``discrepancy``);
* **coupled** (`predict_inconsistent`): the exact per-stage analysis (`stability.coupled`) on
  the network's top-k curvature with H_b: the basis Q = diag(Q_1, …, Q_P), Q_i an orthonormal
  basis of stage i's rows of V Λ^{1/2} (the basis of `stability.nets.lowrank`, in which the
  reduced Hessian is QᵀH_kQ), carries H_b as QᵀH_bQ and H_f = QᵀH_kQ − QᵀH_bQ. S(ω) is constant
  on each stage, so this Galerkin projection keeps the stage structure; it is exact when span Q
  is invariant under H_b, and otherwise leaves out how H_b couples the top directions to the
  rest.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from stability.nets.curvature import Curvature
from stability.nets.inconsistent import check_rebuild, inconsistent_gradient
from stability.nets.prediction import NetPrediction
from stability.nets.problem import NetProblem, dtype_name

FD_STEP = 1e-5
"""Step of the central differences (unit directions): error ~ε²·|∇³f| + 1e-16/ε ≈ 1e-10."""


def discrepancy_jacobian(
    problem: NetProblem, w: torch.Tensor, vectors: np.ndarray, role: str = "backward"
) -> np.ndarray:
    """H_b·v for the unit-scaled columns v of ``vectors`` (p × m), H_b = ∂g(w, u_bkwd)/∂u_bkwd
    at w; ``role="recompute"``: H_r·v, H_r = ∂g(w, w, u_recomp)/∂u_recomp.

    By central differences of `inconsistent_gradient`: its no-gradient parts (``detach``) are
    meant for the one reverse pass that computes g, and an outer derivative through them would
    drop terms of ∂g/∂u_recomp; the differences need none of that.
    """
    check_rebuild(problem)
    wide, failed = problem.in_float64_or_self()
    if failed is not None:
        warnings.warn(
            f"H_b (the backward weights' Jacobian, Δ) is evaluated in {dtype_name(problem.dtype)}"
            f": in float64 {failed}; the rounding of its central differences can swamp Δ near a "
            "minimum (docs/nets.md)",
            stacklevel=2,
        )
    w = w.detach().to(wide.dtype)

    def g(u):
        if role == "recompute":
            return inconsistent_gradient(wide, w, w, u)
        return inconsistent_gradient(wide, w, u)

    cols = []
    for v in np.asarray(vectors, dtype=float).T:
        scale = float(np.linalg.norm(v)) or 1.0
        step = wide.vector(v / scale) * FD_STEP
        diff = (g(w + step) - g(w - step)).detach().to(device="cpu", dtype=torch.float64)
        cols.append(diff.numpy() * (scale / (2 * FD_STEP)))
    return np.stack(cols, axis=1)


def effective_delta(
    problem: NetProblem, curv: Curvature, count: int = 1, scale: np.ndarray | None = None
) -> np.ndarray:
    """Δ_v = −vᵀH_b v along the top ``count`` eigenvectors of ∇²f (module doc); ``scale`` s:
    of the whitened s·H_b·s along those of s∇²f s (`stability.nets.preconditioned`)."""
    V = _scaled(curv.eigenvectors[:, :count], scale)
    return -np.einsum("pi,pi->i", V, discrepancy_jacobian(problem, problem.w_star, V))


def _scaled(vectors: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    """s ⊙ columns: Qᵀ(s H_b s)Q = (sQ)ᵀH_b(sQ), s = P^{1/2} diagonal (None: s = 1)."""
    return vectors if scale is None else np.asarray(scale, float)[:, None] * vectors


def stage_basis(curv: Curvature, rank: int | None = None) -> tuple[np.ndarray, tuple[int, ...]]:
    """Q = diag(Q_1 … Q_P) (p × Σr_i) and r_i: orthonormal bases of the stages' rows of
    V Λ^{1/2} over the positive eigenpairs (the basis of `stability.nets.lowrank`)."""
    k = len(curv.eigenvalues) if rank is None else int(rank)
    lam, V = curv.eigenvalues[:k], curv.eigenvectors[:, :k]
    keep = lam > 0
    B = V[:, keep] * np.sqrt(lam[keep])
    ends = np.cumsum((0, *curv.stage_sizes))
    Q = np.zeros((B.shape[0], 0))
    sizes = []
    for a, b in zip(ends[:-1], ends[1:], strict=True):
        q = np.linalg.qr(B[a:b], mode="reduced")[0]
        block = np.zeros((B.shape[0], q.shape[1]))
        block[a:b] = q
        Q = np.hstack([Q, block])
        sizes.append(q.shape[1])
    return Q, tuple(sizes)


def projected_hessians(
    problem: NetProblem,
    curv: Curvature,
    rank: int | None = None,
    recompute: bool = False,
    scale: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
    """{"forward": QᵀH_kQ − QᵀH_bQ, "backward": QᵀH_bQ} and the stage sizes r_i (module doc);
    with ``recompute`` also "recompute": QᵀH_rQ (subtracted from the forward one too).
    ``scale`` s = P^{1/2}: ``curv`` is that of s∇²f s and H_b, H_r are whitened as s·H_b·s."""
    from stability.nets.lowrank import stage_factors

    k = len(curv.eigenvalues) if rank is None else int(rank)
    H, sizes = stage_factors(curv.eigenvalues[:k], curv.eigenvectors[:, :k], curv.stage_sizes)
    Q, q_sizes = stage_basis(curv, k)
    if q_sizes != sizes:
        raise ArithmeticError(f"stage bases of sizes {q_sizes} and {sizes} disagree")
    roles = ("backward", "recompute") if recompute else ("backward",)
    out = {}
    for role in roles:
        SQ = _scaled(Q, scale)
        out[role] = SQ.T @ discrepancy_jacobian(problem, problem.w_star, SQ, role)
    return {"forward": H - sum(out.values()), **out}, sizes


def predict_inconsistent(
    problem: NetProblem, curv: Curvature, rules, scale: np.ndarray | None = None
) -> NetPrediction:
    """The coupled analysis of stage ``rules`` with inconsistent weights on the network's
    top-k curvature and its projected H_b (and H_r where a rule recomputes; module doc);
    ``scale``: whitened by a diagonal preconditioner (`projected_hessians`)."""
    from stability.coupled.system import CoupledSystem
    from stability.nets.prediction import coupled_analysis
    from stability.nets.simulator import consistent

    recompute = not all(consistent(r, "recompute") for r in rules)
    hessians, sizes = projected_hessians(problem, curv, recompute=recompute, scale=scale)
    system = CoupledSystem(tuple(rules), sizes, hessians)
    return NetPrediction(coupled_analysis(system), system, len(curv.eigenvalues), None)


def scalar_discrepancy_max_lr(
    rule: str, params: dict, lam: float, delta: float, tau_fwd: int, tau_bkwd: int
) -> float | None:
    """The registry rule's max lr on PipeMare's scalar quadratic model at (λ, Δ) with delays
    (τ_fwd, τ_bkwd) (Lemma 2 for ``discrepancy``, App. B.4 for ``t2``); rules with a single
    delay ``tau`` (weight stashing) at τ = ``tau_fwd``, where Δ does not enter."""
    from stability.analysis.boundary import max_lr
    from stability.rules.registry import get_spec

    spec = get_spec(rule)
    values = {k: v for k, v in params.items() if k in spec.param_names}
    values["lam"] = lam
    if "tau_fwd" in spec.param_names:
        values.update(tau_fwd=tau_fwd, tau_bkwd=tau_bkwd, delta=delta)
    else:
        values["tau"] = tau_fwd
    return max_lr(*spec.build(**values)).max_lr


__all__ = [
    "FD_STEP",
    "discrepancy_jacobian",
    "effective_delta",
    "predict_inconsistent",
    "projected_hessians",
    "scalar_discrepancy_max_lr",
    "stage_basis",
]
