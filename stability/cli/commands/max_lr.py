"""``stability max-lr RULE``: the exact maximal stable step size and its crossing angle."""

from __future__ import annotations

from stability.cli.args import add_output_arguments, add_rule_arguments, build_from_args


def register(sub) -> None:
    p = sub.add_parser(
        "max-lr",
        help="exact maximal stable step size (boundary locus or certified bisection)",
        description="First lr > 0 at which a root of RULE's characteristic polynomial reaches "
        "the unit circle (null: stable for every lr), with the angle θ of that root e^{iθ}.",
    )
    add_rule_arguments(p)
    p.add_argument(
        "--method",
        choices=("auto", "locus", "bisection"),
        default="auto",
        help="boundary locus (polynomials affine in lr) or bisection on the spectral radius",
    )
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.analysis.boundary import max_lr

    spec, rule, model = build_from_args(args)
    r = max_lr(rule, model, method=args.method)
    return {
        "rule": spec.name,
        "max_lr": r.max_lr,
        "crossing_angle": r.crossing_angle,
        "method": r.method,
    }
