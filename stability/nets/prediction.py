r"""Predicted max stable step size and rate of a network under per-stage delays.

The stages' delays come from a pipeline schedule (`stability.pipeline`: PipeMare Table 1,
τ_fwd,i = ⌈(2(P−i)+1)/N⌉ for ``pipemare``) or a uniform τ; the simulator runs weight stashing,
so every stage's backward delay equals its forward delay (``backward="stashed"`` of
`stability.pipeline.Pipeline.from_options`, ``DEFAULT_SCHEDULE`` where none is given). Each
stage gets its own instance of the registry rule (`stability.coupled.system.stage_rules`: SC_D
and LWP_D with D = τ_i, Kosson eq. 7, 12), and the coupled system is built on the network's
rank-k curvature (`stability.nets.lowrank`). `predict` returns the exact coupled max lr of that
system (frequency scan, `stability.coupled.scan`, certified on the block state matrix where it
is small; the block-state-matrix search where the scan fails, `coupled_analysis`) beside the
scalar bound at (λ_max, τ_max) (`stability.coupled.stage_bounds`), and the change of the max lr
when the rank is halved (``truncation_change``, a measure of what the truncation leaves out).

`predicted_log_rate` is ln ρ of the top eigen-direction under the stages' delays: the largest
|ω| over the closed-loop roots of the rank-1 system λ₁v₁v₁ᵀ (its stage shares ‖v₁,ᵢ‖² decide
how the stages' delays mix), leaving out the roots ω = 1 of its flat directions.  It is the
rate at which the simulator's runs started along v₁ decay (`stability.nets.bracket`); the
directions of small curvature decay later at ≈ −lr·λ, the slowest of all, and no delay limits
them — their rate is not a property of the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.coupled.summary import CoupledAnalysis, analyze
from stability.coupled.system import DENSE_MAX_STATES, CoupledSystem, state_matrix
from stability.nets.curvature import Curvature
from stability.nets.lowrank import reduced_system
from stability.nets.simulator import check_stashed
from stability.pipeline import Pipeline
from stability.rules.base import Rule
from stability.rules.discrepancy import t2_refusal
from stability.rules.staged import DELAY_NAMES

DEFAULT_SCHEDULE = "pipemare"
_FLAT = 1e-9  # |ω − 1| below this: a flat direction of the rank-k model


STASHED_T2 = "a network stashes weights (τ_bkwd = τ_fwd) unless --backward current"
"""What `net_rules` adds to the T2 refusal: the way out a network offers."""


def net_rules(
    rule: str, values: dict[str, Any], pipe: Pipeline, *, tau_recomp: int | None = None
) -> tuple[Rule, ...]:
    """One instance of registry rule ``rule`` per stage, with that stage's delays.

    With weight stashing (``pipe.tau_bkwd`` None) rules that read other backward weights are
    refused (`check_stashed`; T2, which has no discrepancy to correct there, in the words of
    `stability.rules.discrepancy.t2_refusal`, as the trainer and the coupled analysis do);
    otherwise every stage reads its backward weights at
    τ_bkwd,i (`stability.coupled.system.stage_rules`), and rules with a recompute pass at
    τ_recomp,i = ``tau_recomp`` clipped to [τ_bkwd,i, τ_fwd,i].
    """
    from stability.coupled.system import stage_rules
    from stability.rules.registry import get_spec

    spec = get_spec(rule)
    params = {k: v for k, v in values.items() if k in spec.param_names and k not in DELAY_NAMES}
    if pipe.tau_bkwd is None:
        if rule == "t2":  # T2 under stashing: refused as by train, coupled and noise
            t2_refusal(pipe.tau_fwd, pipe.tau_fwd, STASHED_T2)
        check_stashed(None, rule)
        rules = stage_rules(rule, pipe.tau_fwd.tolist(), **params)
        for r in rules:
            check_stashed(r, rule)
        return rules
    recomp = None
    if "tau_recomp" in spec.param_names:
        if tau_recomp is None:
            raise ValueError(f"rule {rule!r} needs tau_recomp (the recompute delay)")
        recomp = np.clip(int(tau_recomp), pipe.tau_bkwd, pipe.tau_fwd).tolist()
    elif tau_recomp is not None:
        raise ValueError(f"tau_recomp applies to rule 'recompute' only, not {rule!r}")
    return stage_rules(rule, pipe.tau_fwd.tolist(), pipe.tau_bkwd.tolist(), recomp, **params)


@dataclass(frozen=True)
class NetPrediction:
    """The coupled analysis of a network (`predict`): the analysis itself, the reduced system,
    the rank used and the relative change of the max lr from rank k/2 to k (None if k < 4)."""

    analysis: CoupledAnalysis
    system: CoupledSystem
    rank: int
    truncation_change: float | None


def predict(
    curv: Curvature,
    rules: tuple[Rule, ...],
    *,
    rank: int | None = None,
) -> NetPrediction:
    """Coupled max lr of the stage ``rules`` on the top-``rank`` curvature (default all
    eigenpairs of ``curv``), with the change from rank/2 (module doc)."""
    k = len(curv.eigenvalues) if rank is None else min(int(rank), len(curv.eigenvalues))

    def system(n: int) -> CoupledSystem:
        return reduced_system(
            rules, curv.eigenvalues[:n], curv.eigenvectors[:, :n], curv.stage_sizes
        )

    full = system(k)
    result = coupled_analysis(full)
    change = None
    if k >= 4 and result.max_lr:
        half = coupled_analysis(system(k // 2)).max_lr
        change = None if not half else (half - result.max_lr) / result.max_lr
    return NetPrediction(result, full, k, change)


def coupled_analysis(system: CoupledSystem) -> CoupledAnalysis:
    """`analyze` by the frequency scan; where the scan cannot locate a crossing it counted
    (rank-deficient reduced Hessians can defeat its branch following), the block state matrix
    bisection, which is exact and affordable at the reduced system's size."""
    try:
        return analyze(system)
    except ArithmeticError:
        if system.state_size > DENSE_MAX_STATES:
            raise
        return analyze(system, method="dense")


def predicted_log_rate(curv: Curvature, rules: tuple[Rule, ...], lr: float) -> float:
    """ln ρ of the top eigen-direction under the stage ``rules`` at ``lr`` (module doc)."""
    system = reduced_system(rules, curv.eigenvalues[:1], curv.eigenvectors[:, :1], curv.stage_sizes)
    omega = np.linalg.eigvals(state_matrix(system, lr))
    moving = omega[np.abs(omega - 1) > _FLAT]
    return float(np.log(np.max(np.abs(moving))))


__all__ = [
    "DEFAULT_SCHEDULE",
    "NetPrediction",
    "net_rules",
    "predict",
    "predicted_log_rate",
]
