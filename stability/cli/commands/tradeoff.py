"""``stability tradeoff``: speed (half-life of E f − f*) against noise floor, per mitigation.

``stability tradeoff --problem linreg [--data FILE] --batch B --tau T --rules r1,r2,...
[--target X] [--out F.png] --json`` prints each rule's Pareto front of (half_life, floor) over
lr, momentum and horizon (`stability.noise.tradeoff`), and with ``--target`` which rule reaches
that excess loss fastest.
"""

from __future__ import annotations

from stability.cli.args import add_output_arguments, delay_arg, float_arg
from stability.cli.commands.noise import add_data_arguments


def register(sub) -> None:
    p = sub.add_parser(
        "tradeoff",
        help="minibatch least squares: Pareto fronts of half-life vs noise floor per rule",
        description=__doc__.split("\n\n")[0],
    )
    add_data_arguments(p)
    p.add_argument("--tau", type=delay_arg("tau"), required=True, help="delay τ")
    p.add_argument("--rules", default="sgd,momentum,lwp+sc", help="comma-separated rule names")
    p.add_argument("--target", type=float_arg("target"), default=None, help="excess loss")
    p.add_argument("--out", default=None, metavar="F.png", help="write the figure")
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.noise.tradeoff import tradeoff

    rules = [r.strip() for r in args.rules.split(",") if r.strip()]
    return tradeoff(
        batch=args.batch,
        tau=args.tau,
        rules=rules,
        data=args.data,
        standardize=args.standardize,
        bias=args.bias,
        samples=args.samples,
        target=args.target,
        out=args.out,
    ).to_json()
