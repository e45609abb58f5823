r"""A registry rule under per-stage delays: the one place that sets a pipeline's delays on a rule.

Both the reference trainer (`stability.trainer.schedules.pipeline_rule`: one rule whose delays
are per-parameter integer arrays, the stage blocks in order) and the coupled analysis
(`stability.coupled.system.stage_rules`: one rule per stage with scalar delays) build their
rules here, so the dynamics measured and the dynamics analysed cannot drift apart.

How the delays enter (PipeMare Sec. 2, Table 1; Kosson App. B):

* rules with a single delay ``tau`` (sgd, momentum, nesterov, Kosson's sc/lwp/lwp+sc, …) get
  τ = τ_fwd; where the pipeline's backward weights are inconsistent (``tau_bkwd`` given) their
  backward pass reads w_{t−τ_bkwd} (`stability.rules.base.with_backward_delay`) — the weight
  inconsistency of asynchronous pipelines;
* rules of the discrepancy family (``tau_fwd``/``tau_bkwd``: discrepancy, t2, recompute) get
  both (``tau_bkwd`` None: τ_bkwd = τ_fwd, the forward weights);
* delay-dependent defaults are resolved by the rule's own builder at these delays: SC_D and
  LWP_D use D = τ (Kosson eq. 7, 12), T2 uses γ = D^{1/(τ_fwd − τ_bkwd)} (PipeMare Sec. 3.2).
  T2 on a stage without discrepancy (τ_fwd = τ_bkwd, e.g. PipeDream's weight stashing) has
  nothing to correct and no γ: it is refused ("T2 needs tau_fwd > tau_bkwd"), never
  replaced silently by another rule;
* recompute delays depend on how the stages are segmented (PipeMare App. A.3), not on the
  schedule: a rule with a recompute pass needs them given explicitly (``tau_recomp``);
* a rule that takes one delay for all its parameters (its builder refuses delay arrays: wp,
  ea, random-delay) or that is periodic cannot run under per-stage delays: refused, by the
  trainer and the coupled analysis alike (`stage_rules` builds the per-stage arrays once).

>>> r = staged_rule("lwp", {"momentum": 0.9}, 3, 0)
>>> (r.tau_fwd, r.tau_bkwd, r.horizon)
(3, 0, 3.0)
"""

from __future__ import annotations

from typing import Any

from stability.pipeline import Pipeline
from stability.rules.base import Rule, with_backward_delay
from stability.rules.registry import delay_parameter, get_spec

DELAY_NAMES = ("tau", "tau_fwd", "tau_bkwd", "tau_recomp")
"""Every rule parameter that is a delay (set per stage by a pipeline)."""


def rule_values(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``values`` that rule ``name`` takes (CLI flags apply where they fit)."""
    names = get_spec(name).param_names
    return {k: v for k, v in values.items() if k in names and v is not None}


def stage_values(
    name: str,
    values: dict[str, Any],
    tau_fwd: Any,
    tau_bkwd: Any = None,
    tau_recomp: Any = None,
) -> dict[str, Any]:
    """The registry parameters of rule ``name`` under these delays (`staged_rule` builds them;
    a single-delay rule's backward delay is not a registry parameter: `staged_rule` adds it)."""
    spec = get_spec(name)
    key = delay_parameter(name)
    params = rule_values(name, values)
    for k in DELAY_NAMES:
        params.pop(k, None)
    if "tau_recomp" in spec.param_names:
        if tau_recomp is None:
            raise ValueError(
                f"rule {name!r} needs its recompute delays (tau_recomp) given: recompute delays "
                "are not derived from pipeline schedules (they depend on the segmenting, "
                "PipeMare App. A.3)"
            )
        params["tau_recomp"] = tau_recomp
    params[key] = tau_fwd
    if key == "tau_fwd":
        params["tau_bkwd"] = tau_fwd if tau_bkwd is None else tau_bkwd
    return params


def staged_rule(name: str, values: dict[str, Any], *delays: Any) -> Rule:
    """Registry rule ``name`` with the rule parameters ``values`` under the ``delays``
    ``tau_fwd[, tau_bkwd[, tau_recomp]]`` (``tau_bkwd`` None: the forward weights) — integers,
    or integer arrays (one entry per parameter) — as the module doc says."""
    key = delay_parameter(name)
    params = stage_values(name, values, *delays)
    tau_bkwd = delays[1] if len(delays) > 1 else None
    rule, _ = get_spec(name).build(**params)
    if getattr(rule, "period", 1) != 1:
        raise ValueError(f"rule {name!r} is periodic: per-stage delays need time-invariant rules")
    if key == "tau" and tau_bkwd is not None:
        rule = with_backward_delay(rule, name, tau_bkwd)
    return rule


def pipeline_stage_rules(name: str, values: dict[str, Any], pipe: Pipeline) -> tuple[Rule, ...]:
    """One rule per stage of ``pipe`` with that stage's scalar delays: the backward delays
    wherever the pipeline's weights are inconsistent (`Pipeline.consistent`), as the coupled
    analysis builds them (`stability.coupled.system.stage_rules`)."""
    backward = None if pipe.consistent else pipe.backward_delays
    return tuple(
        staged_rule(name, values, int(t), None if backward is None else int(backward[i]))
        for i, t in enumerate(pipe.tau_fwd)
    )


__all__ = ["DELAY_NAMES", "pipeline_stage_rules", "rule_values", "stage_values", "staged_rule"]
