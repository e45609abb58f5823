"""``stability rules [RULE ...]``: the registered rules, their parameters and sources."""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "rules"
EXAMPLES = ("rules", "rules t2 --json")


def register(sub) -> None:
    register_declared(
        sub,
        "rules",
        usage="[RULE ...] [--json]",
        help="the rules, their parameters (flags, defaults, ranges) and sources",
        description="Without RULE: one line per registered rule.  With RULE names: each rule's "
        "parameters with their flags, defaults and the ranges enforced, its sources and the "
        "papers' closed forms checked against it.",
        examples=EXAMPLES,
        report=report,
    )


def report(result) -> str:
    from stability.rules.registry import RULES

    if len(result.rules) == len(RULES) > 1:  # no names: the listing
        width = max(len(r.name) for r in result.rules) + 2
        lines = [f"{r.name:<{width}}{r.summary}" for r in result.rules]
        return "\n".join([*lines, "", "stability rules RULE: its flags, defaults and sources"])
    return "\n\n".join(_describe(rule) for rule in result.rules)


def _describe(rule) -> str:
    """One named rule: summary, sources, closed forms, flags with their ranges and defaults."""
    from stability.cli.report import value

    lines = [f"{rule.name}: {rule.summary}", f"sources: {'; '.join(rule.sources)}"]
    if rule.closed_forms:
        lines.append(f"checked against: {'; '.join(rule.closed_forms)}")
    width = max(len(p.flag) for p in rule.parameters) + 2
    lines.append("flags:")
    for p in rule.parameters:
        default = "derived" if p.default is None else value(p.default)
        lines.append(f"  {p.flag:<{width}}{p.doc}; {p.allowed}; default {default}")
    return "\n".join(lines)
