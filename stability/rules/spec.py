"""Registry records: a rule's user-facing parameters, its builder and the papers' closed forms.

A `RuleSpec` turns named parameters (CLI flags or keywords, the names of docs/conventions.md)
into a rule value and the quadratic model it is analysed on, validating every parameter with a
one-line `ValueError` that names it and its allowed range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stability.checks import MAX_DELAY, check_choice, check_delay, check_real
from stability.limits import LAM_RANGE
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.base import Rule

MODEL_PARAMS = ("lam", "delta", "phi")


@dataclass(frozen=True)
class Param:
    """One parameter of a rule: name, meaning, default and allowed values.

    ``kind`` is ``"delay"`` (integer in [low, MAX_DELAY], low 0 unless given), ``"real"``
    (finite, in [low, high] with open ends as flagged), ``"bool"`` or ``"choice"`` (one of
    ``choices``).
    ``default=None`` marks an optional parameter whose absence the builder resolves (e.g. SC_D
    coefficients).
    """

    name: str
    doc: str
    default: Any
    kind: str = "real"
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> Any:
        if value is None:
            if self.default is None:
                return None
            raise ValueError(f"{self.name} must be given")
        if self.kind == "delay":
            return check_delay(self.name, value, int(self.low or 0))
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            raise ValueError(f"{self.name} must be true or false, got {value!r}")
        if self.kind == "choice":
            return check_choice(self.name, value, self.choices)
        return check_real(
            self.name,
            value,
            low=self.low,
            high=self.high,
            low_open=self.low_open,
            high_open=self.high_open,
        )

    @property
    def allowed(self) -> str:
        """The allowed values in words (for `stability rules` and --help)."""
        if self.kind == "delay":
            return f"integer in [{int(self.low or 0)}, {MAX_DELAY}]"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        return f"real in {left}{lo}, {hi}{right}"


@dataclass(frozen=True)
class ClosedForm:
    """A characteristic polynomial printed in (or derived from) a paper.

    ``polynomial(rule, model, lr)`` returns it as a Laurent `SparsePoly` in ω; it is an
    independent check of the polynomial derived from the rule's step, equal to it up to a
    factor ω^k wherever ``applies(rule)``.
    """

    source: str
    polynomial: Callable[[Any, QuadraticModel, Any], SparsePoly]
    applies: Callable[[Any], bool] = lambda rule: True


@dataclass(frozen=True)
class RuleSpec:
    """A registry entry: how to build a rule from named parameters, and what the papers say."""

    name: str
    summary: str
    sources: tuple[str, ...]
    params: tuple[Param, ...]
    builder: Callable[..., Rule]
    closed_forms: tuple[ClosedForm, ...] = field(default=())

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def delay_parameter(self) -> str | None:
        """The parameter carrying the rule's main delay: ``tau``, ``tau_fwd`` or None."""
        return next((p for p in ("tau", "tau_fwd") if p in self.param_names), None)

    def check_names(self, names: Any) -> None:
        """Refuse (`ValueError`, one line) a parameter name the rule does not take: the one
        wording every command uses for it."""
        known = self.param_names
        for name in names:
            if name not in known:
                raise ValueError(
                    f"rule {self.name!r} has no parameter {name!r} "
                    f"(its parameters: {', '.join(known)})"
                )

    def resolve(self, **values: Any) -> dict[str, Any]:
        """Validated parameters with defaults filled in; unknown names raise `ValueError`."""
        self.check_names(values)
        return {
            p.name: p.check(values[p.name] if values.get(p.name) is not None else p.default)
            for p in self.params
        }

    def build(self, **values: Any) -> tuple[Rule, QuadraticModel]:
        """The rule and the quadratic model (λ, Δ, Φ) for these parameters."""
        resolved = self.resolve(**values)
        model = QuadraticModel(**{k: resolved[k] for k in MODEL_PARAMS if k in resolved})
        rule = self.builder(**{k: v for k, v in resolved.items() if k not in MODEL_PARAMS})
        return rule, model


# Parameters shared by many rules (one definition each).
LAM = Param(
    "lam", "curvature λ of the quadratic f(w) = λw²/2", 1.0, low=LAM_RANGE[0], high=LAM_RANGE[1]
)
TAU = Param("tau", "delay τ (Kosson's D): the gradient at step t uses w_{t−τ}", 1, kind="delay")
TAU_FWD = Param("tau_fwd", "forward delay τ_fwd", 1, kind="delay")
TAU_BKWD = Param("tau_bkwd", "backward delay τ_bkwd ≤ τ_fwd", 0, kind="delay")
DELTA = Param("delta", "sensitivity Δ of the gradient to the forward/backward discrepancy", 0.0)


def momentum_param(default: float) -> Param:
    return Param("momentum", "heavy-ball momentum m (PipeMare's β)", default, low=0.0, high=1.0)
