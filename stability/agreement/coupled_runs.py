"""The coupled analysis on the reference trainer's problems, and the trainer's measurement.

This module brings the two sides together (as `stability.agreement.comparison` does for the
scalar theory): the Hessians of a trainer problem become a `stability.coupled.system.CoupledSystem`,
and the trainer measures the max stable lr of the very same per-stage rule.

* **Linear regression** (`stability.trainer.linreg`): H_f = H = XᵀX/n, H_b = H_r = 0 — the
  gradient reads the forward weights only.
* **Tiny MLP** (`stability.trainer.mlp`): H_f, H_b = the Jacobians of backpropagation with
  respect to the forward and the backward weights at the fitted minimizer w* (central
  differences, `MLP.pass_jacobians`), H_f + H_b = ∇²f.  ‖H_b‖/‖H_f‖ is the network's
  discrepancy sensitivity Δ (PipeMare eq. 5) in matrix form.
* **Stages** are the problem's contiguous parameter blocks (`problem.stage_sizes(P)`: even
  blocks of the weight vector, or groups of consecutive layers), with the preprocessing of
  ``stability validate`` (`stability.trainer.problems`).
* **Measurement**: the trainer's `measure_max_lr` (full batch, deterministic: unstable if
  the loss diverges or the measured rate of the weight increments exceeds 1) on the rule
  built by `stability.trainer.schedules.pipeline_rule` — one rule object with per-parameter
  integer delay arrays — with T1's per-stage factors as a constant step-size scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.coupled.system import CoupledSystem, t1_scales
from stability.pipeline import Pipeline


def problem_hessians(setup) -> dict[str, np.ndarray]:
    """H_f, H_b (and H_r) of a trainer problem's `stability.trainer.linearize.Linearization`:
    the Jacobians at w*."""
    problem = setup.problem
    if getattr(problem, "uses_backward", False):
        H_f, H_b, _ = problem.pass_jacobians(setup.w_star, recompute=False)
        return {"forward": H_f, "backward": H_b}
    return {"forward": problem.hessian}


@dataclass(frozen=True)
class ProblemSystem:
    """A trainer problem's coupled system, with what built it."""

    system: CoupledSystem
    pipe: Pipeline
    rule: str
    values: dict[str, Any]
    t1_power: float


def problem_system(
    setup, pipe: Pipeline, rule: str, values: dict[str, Any], t1_power: float = 0.0
) -> ProblemSystem:
    """The coupled system of ``setup``'s problem under ``pipe`` and registry rule ``rule``."""
    from stability.coupled.system import stage_rules

    sizes = setup.problem.stage_sizes(pipe.stages)
    for key in ("tau", "tau_fwd", "tau_bkwd"):
        if values.get(key) is not None:
            raise ValueError(
                f"{key}: the pipeline schedule sets the stages' delays; do not also give it"
            )
    rules = stage_rules(rule, pipe.tau_fwd, pipe.tau_bkwd, **values)
    system = CoupledSystem(
        rules,
        tuple(int(n) for n in sizes),
        problem_hessians(setup),
        t1_scales(pipe.tau_fwd, t1_power),
    )
    return ProblemSystem(system, pipe, rule, dict(values), float(t1_power))


def measure(built: ProblemSystem, setup, guess: float, protocol):
    """The trainer's empirical max stable lr of the same per-stage rule (module doc)."""
    from stability.agreement.comparison import measure_max_lr
    from stability.pipeline import per_parameter
    from stability.trainer.engine import Phase
    from stability.trainer.schedules import pipeline_rule

    sizes = built.system.stage_sizes
    rule = pipeline_rule(built.rule, built.values, built.pipe, sizes)
    plan = rule
    if built.t1_power:
        scale = per_parameter(np.array(built.system.lr_scales), sizes)
        plan = [Phase(rule, None, lambda k: scale)]
    return measure_max_lr(setup, plan, guess, protocol, None)


__all__ = [
    "ProblemSystem",
    "measure",
    "problem_hessians",
    "problem_system",
]
