"""The coupled analysis side by side with the scalar theory it replaces.

PipeMare's Lemma 1-3 and Kosson's Sec. 3.4 analyse one eigen-direction with one delay.  Used
on a pipeline they give, with each stage's own rule (its delays and mitigation):

* the **scalar bound** at (λ_max, τ_max): the max stable lr of the stage with the largest
  forward delay on the quadratic model with the Hessian's largest eigenvalue λ_max (PipeMare
  Fig. 5(b) draws Lemma 1 this way for cpusmall);
* the **per-stage bounds**: for each stage i, the max stable lr of its rule with the largest
  eigenvalue λ_i of its own diagonal Hessian block (stage i alone, the others frozen).

The discrepancy sensitivities of the scalar model are read off the Hessians along the same
eigenvector v: λ + Δ = vᵀH_f v, Φ − Δ = vᵀH_b v, −Φ = vᵀH_r v (PipeMare eq. 5, App. D.1).
With T1 (`stability.coupled.t1_scales`) stage i steps with lr·c_i, so its bound on the base lr
is its scalar max lr divided by c_i.

`analyze` computes the exact coupled max lr (`stability.coupled_scan.scan_max_lr`, or the
block-state-matrix bisection `stability.coupled.dense_max_lr`) and reports all of these with
the scalar bound's error — the ratio scalar/coupled — never leaving it out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from stability.boundary import max_lr
from stability.coupled import CoupledSystem, dense_max_lr
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


@dataclass(frozen=True)
class CoupledAnalysis:
    """Everything `analyze` reports (JSON-ready through `as_dict`).

    ``max_lr``/``crossing_angle``/``critical_stage``/``stage_shares``: the exact coupled result
    (`stability.coupled_scan.CoupledMaxLr`; stages numbered 1 … P).  ``scalar_bound`` and
    ``scalar_ratio`` = scalar_bound / max_lr (the scalar theory's error: < 1 pessimistic,
    > 1 optimistic); ``per_stage_bounds`` and ``min_stage_ratio`` = min(per-stage)/max_lr.
    """

    max_lr: float | None
    crossing_angle: float | None
    critical_stage: int | None
    stage_shares: tuple[float, ...]
    scalar_bound: float | None
    scalar_ratio: float | None
    per_stage_bounds: tuple[float | None, ...]
    min_stage_ratio: float | None
    method: str
    eigensolves: int
    certified: bool
    seconds: float
    stage_sizes: tuple[int, ...]
    stage_taus: tuple[int, ...]
    hessian_norms: dict[str, float]

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["stage_shares"] = list(self.stage_shares)
        out["per_stage_bounds"] = list(self.per_stage_bounds)
        out["stage_sizes"] = list(self.stage_sizes)
        out["stage_taus"] = list(self.stage_taus)
        return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def analyze(system: CoupledSystem, *, method: str = "scan") -> CoupledAnalysis:
    """Exact coupled max lr (``method`` ``"scan"`` or ``"dense"``) next to the scalar bounds."""
    from stability.coupled_scan import scan_max_lr

    if method not in ("scan", "dense"):
        raise ValueError(f"method must be one of scan, dense, got {method!r}")
    start = time.perf_counter()
    if method == "scan":
        r = scan_max_lr(system)
        exact = (r.max_lr, r.crossing_angle, r.critical_stage, r.stage_shares)
        how, solves, certified = r.method, r.eigensolves, r.certified
    else:
        d = dense_max_lr(system)
        exact = (d.max_lr, None, None, ())
        how, solves, certified = "block state matrix bisection", d.evaluations, True
    seconds = time.perf_counter() - start
    scalar = scalar_bound(system)
    stages = per_stage_bounds(system)
    finite = [b for b in stages if b]
    return CoupledAnalysis(
        *exact,
        scalar_bound=scalar,
        scalar_ratio=_ratio(scalar, exact[0]),
        per_stage_bounds=tuple(stages),
        min_stage_ratio=_ratio(min(finite) if finite else None, exact[0]),
        method=how,
        eigensolves=solves,
        certified=certified,
        seconds=seconds,
        stage_sizes=system.stage_sizes,
        stage_taus=tuple(stage_delay(r) for r in system.rules),
        hessian_norms=system.hessian_norms(),
    )


__all__ = [
    "CoupledAnalysis",
    "analyze",
    "per_stage_bounds",
    "scalar_bound",
    "stage_bound_at",
    "stage_delay",
]
