"""The rule registry: every rule by name, with its parameters, sources and closed forms.

``RULES[name]`` is a `RuleSpec`; ``build_rule(name, **params)`` returns the rule value and
the quadratic model it is analysed on.  Every registered rule passes the same test battery
(tests/test_rule_battery.py).
"""

from __future__ import annotations

from typing import Any

from stability.quadratic import QuadraticModel
from stability.rules.adam import SPECS as ADAM_SPECS
from stability.rules.base import Rule
from stability.rules.baselines import SPECS as BASELINES_SPECS
from stability.rules.discrepancy import SPECS as DISCREPANCY_SPECS
from stability.rules.eapipe import SPECS as EAPIPE_SPECS
from stability.rules.lwp_sc import SPECS as LWP_SC_SPECS
from stability.rules.pipeoptim import SPECS as PIPEOPTIM_SPECS
from stability.rules.random_delay import SPECS as RANDOM_DELAY_SPECS
from stability.rules.sapipe import SPECS as SAPIPE_SPECS
from stability.rules.spec import RuleSpec

RULES: dict[str, RuleSpec] = {
    spec.name: spec
    for spec in (
        *DISCREPANCY_SPECS,
        *LWP_SC_SPECS,
        *PIPEOPTIM_SPECS,
        *ADAM_SPECS,
        *SAPIPE_SPECS,
        *EAPIPE_SPECS,
        *BASELINES_SPECS,
        *RANDOM_DELAY_SPECS,
    )
}


SPELLED_OTHERWISE = {"adamw": "AdamW is adam with --weight-decay: decoupled, c = 1 − lr·wd"}
"""Names a user may try for a rule registered under another name → what to write instead."""


def get_spec(name: str) -> RuleSpec:
    """The registry entry for ``name``; unknown names raise `ValueError` listing the known ones
    (and, for a name in `SPELLED_OTHERWISE`, what to write)."""
    try:
        return RULES[name]
    except (KeyError, TypeError):  # TypeError: not a name (a list, a dict)
        hint = SPELLED_OTHERWISE.get(name.lower(), "") if isinstance(name, str) else ""
        raise ValueError(
            f"unknown rule {name!r}{f' ({hint})' if hint else ''}; known rules: {', '.join(RULES)}"
        ) from None


def build_rule(name: str, **params: Any) -> tuple[Rule, QuadraticModel]:
    """``(rule, model)`` for a registered rule and its named parameters (defaults filled in)."""
    return get_spec(name).build(**params)


MODEL_PARAMETERS = ("lam", "delta", "phi")
"""The scalar model's parameters (`stability.quadratic.QuadraticModel`: PipeMare eq. 5)."""


def refuse_model_parameters(params: dict[str, Any], where: str) -> None:
    """One `ValueError` if ``params`` gives a scalar-model parameter to a command whose
    curvature comes from elsewhere (data, Hessians, a network): ``where`` says from where."""
    for key in MODEL_PARAMETERS:
        if params.get(key) is not None:
            raise ValueError(f"{key} belongs to the scalar model; {where}")


def delay_parameter(name: str) -> str:
    """The parameter carrying rule ``name``'s main delay: ``tau`` or ``tau_fwd``.

    A rule without one (``gpipe``, synchronous) raises `ValueError`.
    """
    key = get_spec(name).delay_parameter
    if key is None:
        raise ValueError(f"rule {name!r} has no delay parameter (tau or tau_fwd)")
    return key
