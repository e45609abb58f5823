"""``stability max-lr RULE``: the exact maximal stable step size and its crossing angle."""

from __future__ import annotations

from stability.cli.args import add_command, add_output_arguments, add_rule_arguments

API = "max_lr"
EXAMPLES = ("max-lr sgd --tau 10", "max-lr t2 --tau-fwd 40 --tau-bkwd 10 --delta 5 --json")


def register(sub) -> None:
    p = add_command(
        sub,
        "max-lr",
        usage="RULE [--method M] [rule flags] [--json]",
        help="exact maximal stable step size (boundary locus or certified bisection)",
        description="First lr > 0 at which a root of RULE's characteristic polynomial reaches "
        "the unit circle (none: stable for every lr), with the angle θ of that root e^{iθ}.",
        examples=EXAMPLES,
    )
    add_rule_arguments(p)
    p.add_argument(
        "--method",
        choices=("auto", "locus", "bisection"),
        default="auto",
        help="boundary locus (polynomials affine in lr) or bisection on the spectral radius",
    )
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args):
    from stability.api.max_lr import max_lr
    from stability.cli.args import rule_values

    return max_lr(args.rule, method=args.method, **rule_values(args))


def report(result) -> str:
    from stability.cli.report import lines

    out = lines(result, ["rule", "max_lr", "crossing_angle", "method"])
    if result.max_lr is None:
        out[1] = out[1].replace("—", "none: stable for every lr > 0")
    return "\n".join(out)
