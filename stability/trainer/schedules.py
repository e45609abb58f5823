r"""Trainer rules from the registry: uniform or per-stage delays, T1, synchronous warm-up.

Everything here *builds rule objects* through the registry (`stability.rules.registry`) and
hands them to the engine; no update rule is written here.

* **Uniform delay** (`uniform_rule`): the registry rule with its delay parameter set to τ —
  ``tau`` for the single-delay rules (sgd, momentum, nesterov, sc, lwp, …), ``tau_fwd`` for the
  discrepancy family (whose ``tau_bkwd`` comes from the other parameters).  ``tau`` may be an
  integer array of shape (R, 1): one delay per run (a delay sweep in one computation).
* **Pipeline schedule** (`pipeline_rule`): the per-stage delays of `stability.pipeline` become
  per-parameter integer arrays (stage blocks of the problem).  Single-delay rules get
  τ = τ_fwd,i; where the schedule's backward weights differ (pipemare, pb: τ_bkwd = 0) the
  rule's ``tau_bkwd`` is set too, so the backward pass reads the current weights — the weight
  inconsistency of asynchronous pipelines (PipeMare Sec. 2, Kosson App. B), handled by the
  rule's own `passes`.  Discrepancy-family rules take both arrays directly.  Recompute delays
  depend on the segmenting (PipeMare App. A.3) and are not derived from schedules.
* **T1** (`T1`): step size of stage i at step k is lr·τ_i^{−p_k}, p_k = 1 − min(k/K, 1)
  (PipeMare eq. 4, `stability.pipeline.t1_factor`), a per-parameter factor of the step size.
* **PipeMareW** (`plan`): ``warmup_steps`` of synchronous training first (every delay 0: the
  same rule with τ = 0, or for the discrepancy family τ_fwd = τ_bkwd = τ_recomp = 0), then the
  asynchronous rule (PipeMare Sec. 4).  T1's K counts from the switch.  State variables that
  only the asynchronous rule has (T2's δ) start at 0 when it takes over.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.pipeline import Pipeline, per_parameter, t1_factor
from stability.rules.base import Rule
from stability.rules.registry import delay_parameter, get_spec
from stability.rules.staged import DELAY_NAMES, rule_values, staged_rule
from stability.trainer.engine import Phase


def uniform_rule(name: str, values: dict[str, Any], tau: Any) -> Rule:
    """Rule ``name`` with its main delay set to ``tau`` (an integer or an (R, 1) array)."""
    params = rule_values(name, values)
    params[delay_parameter(name)] = tau
    rule, _ = get_spec(name).build(**params)
    return rule


def pipeline_rule(name: str, values: dict[str, Any], pipe: Pipeline, stage_sizes) -> Rule:
    """Rule ``name`` with the per-stage delays of ``pipe`` over the parameter blocks."""
    tau_f = per_parameter(pipe.tau_fwd, stage_sizes)
    tau_b = None if pipe.consistent else per_parameter(pipe.backward_delays, stage_sizes)
    return staged_rule(name, values, tau_f, tau_b)


def stage_rule(name: str, values: dict[str, Any], pipe: Pipeline, stage: int) -> Rule:
    """The scalar-delay rule of stage ``stage`` (0-based) of ``pipe``, as `pipeline_rule`
    builds it there: the rule the scalar theory can analyse."""
    tau_f, tau_b = int(pipe.tau_fwd[stage]), int(pipe.backward_delays[stage])
    return staged_rule(name, values, tau_f, None if tau_f == tau_b else tau_b)


def synchronous_rule(name: str, values: dict[str, Any], rule: Rule) -> Rule:
    """The warm-up rule of PipeMareW: ``rule`` with every delay 0 (module doc)."""
    if delay_parameter(name) == "tau":
        return uniform_rule(name, values, 0)
    zero = {k: 0 for k in DELAY_NAMES[1:] if getattr(rule, k, None) is not None}
    return dataclasses.replace(rule, **zero)


@dataclass(frozen=True)
class T1:
    """T1 step-size factor per parameter, τ^{−p_k} (PipeMare eq. 4); ``tau`` (p,) or (R, p)."""

    tau: np.ndarray
    anneal_steps: int

    def __call__(self, k: int) -> np.ndarray:
        return t1_factor(self.tau, k, self.anneal_steps)


def plan(
    rule: Rule,
    *,
    t1_steps: int | None = None,
    warmup: Rule | None = None,
    warmup_steps: int = 0,
) -> list[Phase]:
    """Phases for the engine: optional synchronous warm-up, then ``rule`` with optional T1.

    T1 divides by the rule's forward delays (``rule.tau_fwd``, or ``rule.tau`` for the rules
    with one delay), per parameter; a rule without a fixed delay (random delays) refuses it.
    """
    scale = None
    if t1_steps is not None:
        tau = getattr(rule, "tau_fwd", getattr(rule, "tau", None))
        if tau is None:
            raise ValueError(
                f"t1: T1 divides the step size by the forward delay (PipeMare eq. 4), and "
                f"{type(rule).__name__} has no fixed delay"
            )
        tau = np.asarray(tau)
        scale = T1(tau if tau.ndim else np.array([tau]), t1_steps)
    phases = [Phase(rule, None, scale)]
    if warmup_steps:
        if warmup is None:
            raise ValueError("warmup_steps needs the synchronous warm-up rule")
        phases.insert(0, Phase(warmup, warmup_steps))
    return phases


__all__ = [
    "T1",
    "pipeline_rule",
    "plan",
    "stage_rule",
    "rule_values",
    "synchronous_rule",
    "uniform_rule",
]
