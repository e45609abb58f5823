"""``stability noise RULE``: minibatch least squares — thresholds, expected loss, noise floor.

``stability noise RULE [rule flags] --problem linreg [--data FILE] --batch B --lr X
[--steps N] [--at t1,t2,...] [--sampling iid|reshuffle] [--schedule S --stages P]
[--measure --runs R] --json`` prints ``ms_max_lr``, ``as_max_lr``, ``as_bracket``,
``full_batch_max_lr``, ``expected_loss`` ([[t, E f − f*], ...]), ``floor``, ``rate`` (see
`stability.noise.minibatch`); ``--measure`` adds ``measured`` from R independent trainer runs.
"""

from __future__ import annotations

from stability.cli.args import (
    UsageError,
    add_output_arguments,
    add_rule_arguments,
    choice_arg,
    float_arg,
    rule_values,
)
from stability.cli.commands.train import _int_arg, _int_list


def add_data_arguments(parser) -> None:
    """Data flags of the least-squares problem (shared with ``stability tradeoff``)."""
    from stability.trainer.data import STANDARDIZE

    g = parser.add_argument_group("problem and data (least squares)")
    g.add_argument("--problem", type=choice_arg("problem", ("linreg",)), default="linreg")
    g.add_argument("--data", default=None, metavar="PATH", help="CSV or LIBSVM file (cpusmall)")
    g.add_argument("--standardize", type=choice_arg("standardize", STANDARDIZE), default="features")
    g.add_argument("--bias", action="store_true", help="append an intercept column")
    g.add_argument("--samples", type=_int_arg("samples", 1), default=None, metavar="N")
    g.add_argument("--batch", type=_int_arg("batch", 1), required=True, help="minibatch size B")


def register(sub) -> None:
    p = sub.add_parser(
        "noise",
        help="minibatch least squares: exact mean-square threshold, expected loss, floor",
        description=__doc__.split("\n\n")[0],
    )
    add_rule_arguments(p)
    add_data_arguments(p)
    g = p.add_argument_group("prediction")
    g.add_argument("--lr", type=float_arg("lr"), required=True, help="step size > 0")
    g.add_argument("--steps", type=_int_arg("steps", 1), default=1000)
    g.add_argument("--at", type=_int_list("at"), default=None, help="time points t1,t2,...")
    g.add_argument("--sampling", type=choice_arg("sampling", ("iid", "reshuffle")), default="iid")
    g.add_argument("--schedule", default=None, metavar="S", help="per-stage delays (--stages P)")
    g.add_argument("--seed", type=_int_arg("seed"), default=0)
    g.add_argument("--lyapunov-steps", type=_int_arg("lyapunov_steps", 100), default=4000)
    g.add_argument("--lyapunov-runs", type=_int_arg("lyapunov_runs", 2), default=32)
    m = p.add_argument_group("measurement")
    m.add_argument("--measure", action="store_true", help="independent trainer runs")
    m.add_argument("--runs", type=_int_arg("runs", 2), default=256)
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.noise.minibatch import noise

    values = rule_values(args)
    stages, microbatches = values.pop("stages", None), values.pop("microbatches", None)
    if args.schedule is None and stages is not None and args.rule != "gpipe":
        raise UsageError("--stages needs --schedule (per-stage delays)")
    result = noise(
        args.rule,
        batch=args.batch,
        lr=args.lr,
        data=args.data,
        standardize=args.standardize,
        bias=args.bias,
        samples=args.samples,
        steps=args.steps,
        at=args.at,
        sampling=args.sampling,
        schedule=args.schedule,
        stages=stages,
        microbatches=microbatches,
        measure=args.measure,
        runs=args.runs,
        seed=args.seed,
        lyapunov_steps=args.lyapunov_steps,
        lyapunov_runs=args.lyapunov_runs,
        **values,
    )
    return result.to_json()
