"""``stability rules``: the registered rules, their parameters, defaults and sources."""

from __future__ import annotations

from stability.cli.args import add_output_arguments


def register(sub) -> None:
    p = sub.add_parser("rules", help="list the rules with their parameters and sources")
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args) -> dict:
    from stability.rules.registry import RULES

    return {"rules": [spec.describe() for spec in RULES.values()]}


def report(result: dict) -> str:
    lines = []
    for r in result["rules"]:
        params = ", ".join(f"{p['name']}={p['default']}" for p in r["parameters"])
        lines.append(f"{r['name']:<10} {r['summary']}")
        lines.append(f"{'':<10} parameters: {params}")
        lines.append(f"{'':<10} sources: {'; '.join(r['sources'])}")
    return "\n".join(lines)
