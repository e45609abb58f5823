"""The rule argument of every public function: a registered name or a rule value.

``resolve("momentum", tau=10, momentum=0.9)`` validates the parameters against the registry
(one-line `ValueError` naming the parameter and its range; a parameter the rule does not take,
or an array where one value is meant, is refused the same way by every function) and returns
the rule value, the quadratic model it is analysed on and the resolved parameters.  A rule
value built by hand (e.g. ``DelayedMomentum(tau=3)``) is taken as it is; then only the model's
parameters ``lam``, ``delta``, ``phi`` may be given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.quadratic import QuadraticModel
from stability.rules.base import Rule
from stability.rules.registry import get_spec
from stability.rules.spec import MODEL_PARAMS, RuleSpec


@dataclass(frozen=True)
class Resolved:
    """A rule ready to analyse: its registry entry (None for a hand-built rule value), the
    rule value, the quadratic model, and every parameter with defaults filled in."""

    spec: RuleSpec | None
    rule: Rule
    model: QuadraticModel
    params: dict[str, Any]

    @property
    def name(self) -> str:
        return self.spec.name if self.spec is not None else type(self.rule).__name__

    @property
    def described(self) -> str:
        """``rule at name=value, …``: the point a refusal names, in the registry's names."""
        return f"{self.name} at {given(self.params)}"


def given(params: dict[str, Any]) -> str:
    """``name=value, …`` of the parameters given (None left out; reals to 12 digits): the
    point a refusal names."""
    return ", ".join(
        f"{k}={v:.12g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in params.items()
        if v is not None
    )


def resolve(rule: str | RuleSpec | Rule, **params: Any) -> Resolved:
    """The rule (by name, registry entry or value) and its model from keyword parameters."""
    if isinstance(rule, str):
        rule = get_spec(rule)
    if isinstance(rule, RuleSpec):
        values = rule.resolve(**params)
        for key, value in values.items():  # one polynomial: no grids (heatmap / sweep are)
            if np.ndim(value) != 0:
                raise ValueError(
                    f"{key} must be one value here (per-parameter delays are for the trainer, "
                    "grids for heatmap and sweep), got an array"
                )
        built, model = rule.build(**values)
        return Resolved(rule, built, model, values)
    if not hasattr(rule, "passes") or not hasattr(rule, "update"):
        raise ValueError(f"rule must be a rule name or a rule value, got {rule!r}")
    unknown = sorted(set(params) - set(MODEL_PARAMS))
    if unknown:
        raise ValueError(
            f"a rule value takes only the model parameters {', '.join(MODEL_PARAMS)} as "
            f"keywords, got {unknown[0]!r}"
        )
    values = {"lam": 1.0, "delta": 0, "phi": 0} | {k: v for k, v in params.items() if v is not None}
    return Resolved(None, rule, QuadraticModel(**values), values)


def rule_name(rule: str | RuleSpec) -> str:
    """The registry name of a rule given by name or registry entry (commands that build the
    rule per delay or per stage take it by name)."""
    if isinstance(rule, RuleSpec):
        return rule.name
    if not isinstance(rule, str):
        raise ValueError(f"rule must be a registered rule name here, got {rule!r}")
    return get_spec(rule).name


def check_params(rules: Iterable[str], params: dict[str, Any], *, set_by: dict[str, str]) -> None:
    """Every parameter in ``params`` is taken by every rule in ``rules`` and none is one that
    the command sets itself (``set_by``: parameter → what sets it); else one `ValueError`."""
    for name in rules:
        spec = get_spec(name)
        spec.resolve(**{k: v for k, v in params.items() if k not in set_by})
        for key, setter in set_by.items():
            if params.get(key) is not None and key in spec.param_names:
                raise ValueError(f"{key} is set by {setter}: leave it out")


def staged(rule: Any, pipeline: Any, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(name, parameters)`` of a rule run under ``pipeline`` (a
    `stability.pipeline.Pipeline`): the rule by name, its delays set per stage by the pipeline
    (giving them too is refused), the other parameters validated."""
    from stability.pipeline import Pipeline
    from stability.rules.staged import DELAY_NAMES

    if not isinstance(pipeline, Pipeline):
        raise ValueError(
            f"pipeline must be a Pipeline (Pipeline.from_options(...)), got {pipeline!r}"
        )
    name = rule_name(rule)
    values = {k: v for k, v in params.items() if v is not None}
    source = "stage_delays" if pipeline.schedule == "custom" else pipeline.schedule
    setter = f"the pipeline ({source}): each stage's delays"
    check_params([name], values, set_by=dict.fromkeys(DELAY_NAMES, setter))
    return name, values
