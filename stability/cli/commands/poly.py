"""``stability poly RULE --lr X``: the characteristic polynomial derived from the rule's step."""

from __future__ import annotations

from stability.cli.args import add_command, add_output_arguments, add_rule_arguments, float_arg

API = "poly"
EXAMPLES = (
    "poly sgd --tau 3 --lr 0.1 --lam 2",
    "poly momentum --tau 2 --momentum 0.9 --lr 0.1 --symbolic --json",
)


def register(sub) -> None:
    p = add_command(
        sub,
        "poly",
        usage="RULE --lr X [--symbolic] [rule flags] [--json]",
        help="characteristic polynomial (coefficients highest degree first)",
        description="Characteristic polynomial of RULE on the quadratic model, derived from the "
        "rule's step (zero roots divided out). --symbolic adds the sympy form in the rule's "
        "real parameters, lr and lam.",
        examples=EXAMPLES,
    )
    add_rule_arguments(p)
    p.add_argument("--lr", type=float_arg("--lr"), required=True, help="step size lr > 0")
    p.add_argument("--symbolic", action="store_true", help="add the sympy polynomial")
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args):
    from stability.api.poly import poly
    from stability.cli.args import rule_values

    return poly(args.rule, lr=args.lr, symbolic=args.symbolic, **rule_values(args))


def report(result) -> str:
    from stability.cli.report import aligned, number, rows

    pairs = rows(result, ["rule", "lr", "degree"])
    terms = ", ".join(number(c) for c in result.coefficients)
    pairs.append(("coefficients", f"{terms}  (highest degree first)"))
    if result.sympy is not None:
        pairs.append(("sympy", result.sympy))
    return "\n".join(aligned(pairs))
