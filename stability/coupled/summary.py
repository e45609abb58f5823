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
With T1 (`stability.coupled.system.t1_scales`) stage i steps with lr·c_i, so its bound on
the base lr is its scalar max lr divided by c_i.

`analyze` computes the exact coupled max lr (`stability.coupled.scan.scan_max_lr`; for
dynamics quadratic in lr, PipeOptim with AdamW, `stability.coupled.quadratic_lr`; or the
block-state-matrix search `stability.coupled.system.dense_max_lr`) and reports all of these with
the scalar bound's error — the ratio scalar/coupled — never leaving it out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from stability.analysis.boundary import check_searches
from stability.coupled.quadratic_lr import quadratic_max_lr
from stability.coupled.stage_bounds import per_stage_bounds, scalar_bound, stage_delay
from stability.coupled.system import CoupledSystem, dense_max_lr
from stability.result import Result, output


@dataclass(frozen=True)
class CoupledAnalysis(Result):
    """Everything `analyze` reports.

    ``max_lr``/``crossing_angle``/``critical_stage``/``stage_shares``: the exact coupled result
    (`stability.coupled.scan.CoupledMaxLr`; stages numbered 1 … P).  ``scalar_bound`` and
    ``scalar_ratio`` = scalar_bound / max_lr (the scalar theory's error: < 1 pessimistic,
    > 1 optimistic); ``per_stage_bounds`` and ``min_stage_ratio`` = min(per-stage)/max_lr.
    """

    max_lr: float | None = output("exact max stable lr of the coupled per-stage system")
    crossing_angle: float | None = output("argument θ of the critical multiplier e^{iθ}", "rad")
    critical_stage: int | None = output("stage (1 … P) whose share of the critical mode is largest")
    stage_shares: tuple[float, ...] = output("share of each stage in the critical mode")
    scalar_bound: float | None = output("scalar theory's max lr at (λ_max, τ_max)")
    scalar_ratio: float | None = output("scalar_bound / max_lr (< 1 pessimistic, > 1 optimistic)")
    per_stage_bounds: tuple[float | None, ...] = output(
        "each stage's scalar max lr on its own diagonal Hessian block"
    )
    min_stage_ratio: float | None = output("min(per_stage_bounds) / max_lr")
    method: str = output("frequency scan or block-state-matrix search")
    eigensolves: int = output("eigenvalue problems solved")
    certified: bool = output("the max lr was verified just below and above")
    seconds: float = output("time of the coupled computation", "s")
    stage_sizes: tuple[int, ...] = output("parameters per stage (contiguous blocks)")
    stage_taus: tuple[int, ...] = output("forward delay of each stage", "steps")
    hessian_norms: dict[str, float] = output("spectral norm of each pass's Hessian (H_f, H_b)")


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _refuted(system: CoupledSystem, r) -> bool:
    """The block state matrix, where the scan's `stability.coupled.scan` certificate reads
    it, does not confirm the scan's crossing: the scan missed an earlier one (heavy ball at
    momentum 0.995, τ = 2 on four stages: 1.03 against the exact 6.46e-4).  The block
    state matrix bisection is then the answer, where it is affordable."""
    from stability.coupled.scan import CERTIFY_MAX_STATES

    checked = system.stepped and system.state_size <= CERTIFY_MAX_STATES
    return checked and r.max_lr is not None and not r.certified and r.max_lr > 0


def analyze(system: CoupledSystem, *, method: str = "scan") -> CoupledAnalysis:
    """Exact coupled max lr (``method`` ``"scan"`` or ``"dense"``) next to the scalar bounds:
    for a rule not affine in lr P + 2 searches on dense eigenvalues (the scalar bound, P
    per-stage bounds, the scan's first guess), their work checked first
    (`stability.analysis.boundary.check_searches`)."""
    if method not in ("scan", "dense"):
        raise ValueError(f"method must be one of scan, dense, got {method!r}")
    deepest = system.rules[int(np.argmax([stage_delay(r) for r in system.rules]))]
    check_searches(deepest, len(system.rules) + 2, "P + 2: scalar, per-stage, first guess")
    start = time.perf_counter()
    r = quadratic_max_lr(system) if method == "scan" else dense_max_lr(system)
    if method == "scan" and system.is_affine and _refuted(system, r):
        r = dense_max_lr(system)
    seconds = time.perf_counter() - start
    scalar = scalar_bound(system)
    stages = per_stage_bounds(system)
    finite = [b for b in stages if b]
    return CoupledAnalysis(
        r.max_lr,
        r.crossing_angle,
        r.critical_stage,
        r.stage_shares,
        scalar_bound=scalar,
        scalar_ratio=_ratio(scalar, r.max_lr),
        per_stage_bounds=tuple(stages),
        min_stage_ratio=_ratio(min(finite) if finite else None, r.max_lr),
        method=r.method,
        eigensolves=r.eigensolves,
        certified=r.certified,
        seconds=seconds,
        stage_sizes=system.stage_sizes,
        stage_taus=tuple(stage_delay(rule) for rule in system.rules),
        hessian_norms=system.hessian_norms(),
    )


__all__ = ["CoupledAnalysis", "analyze"]
