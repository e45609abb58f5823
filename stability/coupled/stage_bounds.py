"""Scalar bounds of a coupled system: each stage's rule on the quadratic model along one
eigen-direction (PipeMare Lemma 1-3 and Kosson Sec. 3.4 used on a pipeline).

* the **scalar bound** at (λ_max, τ_max): the max stable lr of the stage with the largest
  forward delay on the quadratic model with the Hessian's largest eigenvalue λ_max (PipeMare
  Fig. 5(b) draws Lemma 1 this way for cpusmall);
* the **per-stage bounds**: for each stage i, the max stable lr of its rule with the largest
  eigenvalue λ_i of its own diagonal Hessian block (stage i alone, the others frozen).

The discrepancy sensitivities of the scalar model are read off the Hessians along the same
eigenvector v: λ + Δ = vᵀH_f v, Φ − Δ = vᵀH_b v, −Φ = vᵀH_r v (PipeMare eq. 5, App. D.1).
With T1 (`stability.coupled.system.t1_scales`) stage i steps with lr·c_i, so its bound on the
base lr is its scalar max lr divided by c_i.
"""

from __future__ import annotations

import numpy as np

from stability.analysis.boundary import max_lr
from stability.coupled.system import CoupledSystem
from stability.quadratic import QuadraticModel
from stability.rules.base import taps_read


def _model(system: CoupledSystem, rows: slice, v: np.ndarray, lam: float) -> QuadraticModel:
    """Scalar model along ``v`` (a unit vector on the parameters ``rows``) with curvature λ."""

    def along(name: str) -> float:
        H = system.hessians.get(name)
        return 0.0 if H is None else float(v @ H[rows, rows] @ v)

    phi = -along("recompute")
    delta = -along("backward") + phi
    return QuadraticModel(lam, delta, phi)


def _stage_bound(system: CoupledSystem, stage: int, model: QuadraticModel) -> float | None:
    r = max_lr(system.rules[stage], model, precise=False)
    return None if r.max_lr is None else r.max_lr / system.lr_scales[stage]


def _top(H: np.ndarray) -> tuple[float, np.ndarray]:
    lam, vecs = np.linalg.eigh(H)
    return float(lam[-1]), vecs[:, -1]


def stage_delay(rule) -> int:
    """A stage's forward delay: ``tau_fwd`` of the rule, else the deepest weight tap it reads."""
    tau = getattr(rule, "tau_fwd", None)
    if tau is not None:
        return int(tau)
    return max(lag for var, lag in taps_read(rule) if var == "w")


def stage_bound_at(system: CoupledSystem, stage: int, lam: float) -> float | None:
    """Max stable lr of stage ``stage``'s rule on the scalar model with curvature ``lam``
    (Δ, Φ along the Hessian's top eigenvector)."""
    if lam <= 0:
        return None
    _, v = _top(system.hessian)
    return _stage_bound(system, stage, _model(system, slice(None), v, lam))


def scalar_bound(system: CoupledSystem) -> float | None:
    """Max stable lr of the scalar theory at (λ_max, τ_max) (module doc); None: never unstable."""
    delays = [stage_delay(r) for r in system.rules]
    return stage_bound_at(system, int(np.argmax(delays)), _top(system.hessian)[0])


def per_stage_bounds(system: CoupledSystem) -> list[float | None]:
    """Per stage i: max stable lr of its rule at λ_i = λ_max of its diagonal Hessian block."""
    out = []
    for i, block in enumerate(system.blocks):
        lam, v = _top(system.hessian[block, block])
        out.append(None if lam <= 0 else _stage_bound(system, i, _model(system, block, v, lam)))
    return out


__all__ = ["per_stage_bounds", "scalar_bound", "stage_bound_at", "stage_delay"]
