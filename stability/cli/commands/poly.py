"""``stability poly RULE --lr X``: the characteristic polynomial derived from the rule's step."""

from __future__ import annotations

from stability.cli.args import add_output_arguments, add_rule_arguments, build_from_args, float_arg


def register(sub) -> None:
    p = sub.add_parser(
        "poly",
        help="characteristic polynomial (coefficients highest degree first)",
        description="Characteristic polynomial of RULE on the quadratic model, derived from the "
        "rule's step (zero roots divided out). --symbolic adds the sympy form in the rule's "
        "real parameters, lr and lam.",
    )
    add_rule_arguments(p)
    p.add_argument("--lr", type=float_arg("lr"), required=True, help="step size lr > 0")
    p.add_argument("--symbolic", action="store_true", help="add the sympy polynomial")
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.checks import check_real
    from stability.dynamics.linear import characteristic_polynomial

    spec, rule, model = build_from_args(args)
    lr = check_real("lr", args.lr, low=0.0, low_open=True)
    poly = characteristic_polynomial(rule, model).at(lr).normalized()
    out = {"rule": spec.name, "coefficients": poly.dense().tolist(), "degree": poly.degree}
    if args.symbolic:
        from stability.dynamics.symbolic import symbolic_polynomial

        out["sympy"] = str(symbolic_polynomial(spec, **_given(args)))
    return out


def _given(args) -> dict:
    from stability.cli.args import rule_values

    return rule_values(args)
