"""``stability poly RULE --lr X``: the characteristic polynomial derived from the rule's step."""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "poly"
EXAMPLES = (
    "poly sgd --tau 3 --lr 0.1 --lam 2",
    "poly momentum --tau 2 --momentum 0.9 --lr 0.1 --symbolic --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "poly",
        usage="RULE --lr X [--symbolic] [rule flags] [--json]",
        help="characteristic polynomial (coefficients highest degree first)",
        description="Characteristic polynomial of RULE on the quadratic model, derived from the "
        "rule's step (zero roots divided out). --symbolic adds the sympy form in the rule's "
        "real parameters, lr and lam.",
        examples=EXAMPLES,
        report=report,
    )


def report(result) -> str:
    from stability.cli.report import aligned, number, rows

    pairs = rows(result, ["rule", "lr", "degree"])
    terms = ", ".join(number(c) for c in result.coefficients)
    pairs.append(("coefficients", f"{terms}  (highest degree first)"))
    if result.sympy is not None:
        pairs.append(("sympy", result.sympy))
    return "\n".join(aligned(pairs))
