"""The rule registry: every rule by name, with its parameters, sources and closed forms.

``RULES[name]`` is a `RuleSpec`; ``build_rule(name, **params)`` returns the rule value and
the quadratic model it is analysed on.  Every registered rule passes the same test battery
(tests/test_rule_battery.py).
"""

from __future__ import annotations

from typing import Any

from stability.quadratic import QuadraticModel
from stability.rules import (
    adam,
    baselines,
    eapipe,
    kosson,
    pipemare,
    pipeoptim,
    random_delay,
    sapipe,
)
from stability.rules.base import Rule
from stability.rules.spec import RuleSpec

RULES: dict[str, RuleSpec] = {
    spec.name: spec
    for spec in (
        *pipemare.SPECS,
        *kosson.SPECS,
        *pipeoptim.SPECS,
        *adam.SPECS,
        *sapipe.SPECS,
        *eapipe.SPECS,
        *baselines.SPECS,
        *random_delay.SPECS,
    )
}


def get_spec(name: str) -> RuleSpec:
    """The registry entry for ``name``; unknown names raise `ValueError` listing the known ones."""
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"unknown rule {name!r}; known rules: {', '.join(RULES)}") from None


def build_rule(name: str, **params: Any) -> tuple[Rule, QuadraticModel]:
    """``(rule, model)`` for a registered rule and its named parameters (defaults filled in)."""
    return get_spec(name).build(**params)
