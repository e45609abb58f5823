"""``st.rules`` and ``st.describe``: the registered rules, their parameters and sources
(``stability rules [RULE ...]``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stability.result import Result, output
from stability.rules.registry import RULES, get_spec
from stability.rules.spec import Param, RuleSpec


@dataclass(frozen=True)
class ParamInfo(Result):
    """One parameter of a rule, as a keyword (``name``) and as a command-line flag."""

    name: str = output("keyword of the public functions")
    flag: str = output("command-line flag")
    kind: str = output("real, delay (integer), bool or choice")
    default: Any = output("value when not given (null: derived from the others)", kind="any")
    allowed: str = output("the values accepted, as enforced")
    doc: str = output("meaning")

    @staticmethod
    def of(p: Param) -> ParamInfo:
        return ParamInfo(
            p.name, "--" + p.name.replace("_", "-"), p.kind, p.default, p.allowed, p.doc
        )


@dataclass(frozen=True)
class RuleInfo(Result):
    """A registered rule: what it is, its parameters, and the papers' equations behind it."""

    name: str = output("registry name (the RULE of the commands)")
    summary: str = output("one-line description")
    sources: tuple[str, ...] = output("papers and equations the rule implements")
    parameters: tuple[ParamInfo, ...] = output("its parameters")
    closed_forms: tuple[str, ...] = output("papers' characteristic polynomials checked against it")

    @staticmethod
    def of(spec: RuleSpec) -> RuleInfo:
        return RuleInfo(
            spec.name,
            spec.summary,
            tuple(spec.sources),
            tuple(ParamInfo.of(p) for p in spec.params),
            tuple(c.source for c in spec.closed_forms),
        )


@dataclass(frozen=True)
class Rules(Result):
    """The rules asked for (all by default), in registry order."""

    rules: tuple[RuleInfo, ...] = output("one entry per rule")


def rules(*names: str) -> Rules:
    """The registered rules ``names`` (default: all), with parameters and sources.

    The registry (`stability.rules.registry`) cites each rule's equations; this lists them.

    >>> import stability as st
    >>> sgd = st.rules("sgd").rules[0]
    >>> tuple(p.name for p in sgd.parameters)
    ('tau', 'lam')
    """
    specs = [get_spec(n) for n in names] if names else list(RULES.values())
    return Rules(tuple(RuleInfo.of(s) for s in specs))


def describe(rule: str) -> RuleInfo:
    """One registered rule: summary, parameters (with the enforced ranges), sources."""
    return RuleInfo.of(get_spec(rule))


__all__ = ["ParamInfo", "RuleInfo", "Rules", "describe", "rules"]
