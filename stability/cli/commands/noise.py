"""``stability noise RULE --batch B --lr X``: minibatch least squares — thresholds, expected loss,
noise floor (`stability.noise.minibatch`, ``st.noise``); ``--measure`` adds R independent
trainer runs.
"""

from __future__ import annotations

from stability.cli.args import (
    add_command,
    add_minibatch_arguments,
    add_output_arguments,
    add_rule_arguments,
    choice_arg,
    float_arg,
    int_arg,
    int_list,
)
from stability.cli.problem_args import add_pipeline_arguments

API = "noise"
EXAMPLES = (
    "noise sgd --tau 2 --batch 8 --lr 0.05 --samples 64 --steps 100 --lyapunov-steps 200 "
    "--lyapunov-runs 4",
    "noise momentum --tau 1 --momentum 0.5 --batch 16 --lr 0.02 --samples 64 --steps 100 "
    "--lyapunov-steps 200 --lyapunov-runs 4 --json",
)


def add_data_arguments(parser) -> None:
    """Data flags of the least-squares problem (shared with ``stability tradeoff``)."""
    from stability.trainer.data import STANDARDIZE

    g = parser.add_argument_group("problem and data (least squares)")
    g.add_argument(
        "--problem",
        type=choice_arg("--problem", ("linreg",)),
        default="linreg",
        help="least squares (the only problem with exact second moments)",
    )
    g.add_argument("--data", default=None, metavar="PATH", help="CSV or LIBSVM file (cpusmall)")
    g.add_argument(
        "--standardize",
        type=choice_arg("--standardize", STANDARDIZE),
        default="features",
        help="none: as stored; features: z-score features, centre the target; all: also "
        "scale the target",
    )
    g.add_argument("--bias", action="store_true", help="append an intercept column")
    g.add_argument(
        "--samples",
        type=int_arg("--samples", 1),
        default=None,
        metavar="N",
        help="use a seeded random subset of N rows (default: every row)",
    )
    g.add_argument("--batch", type=int_arg("--batch", 1), required=True, help="minibatch size B")


def register(sub) -> None:
    from stability.limits import NOISE_MAX_STAGED_WORK
    from stability.noise.minibatch import MAX_PARAMETERS, MAX_STATE, MAX_STEPS

    p = add_command(
        sub,
        "noise",
        usage="RULE --batch B --lr X [options] [rule flags] [--json]",
        help="minibatch least squares: exact mean-square threshold, expected loss, floor",
        description="For RULE trained on least squares with minibatches of B rows drawn iid: "
        "the full-batch, exact mean-square and almost-sure max stable lr, the expected excess "
        "loss E f − f* over time from the exact second-moment recursion, its floor and rate; "
        f"--measure compares with independent trainer runs.  At most {MAX_PARAMETERS} "
        f"parameters and a state of {MAX_STATE} entries (parameters × delay slots); per-stage "
        f"delays: d(d+1)/2 × (slots read)³ ≤ {NOISE_MAX_STAGED_WORK:.1e} (docs/limits.md).",
        examples=EXAMPLES,
    )
    add_rule_arguments(p, exclude=("stages", "microbatches"))
    add_data_arguments(p)
    g = p.add_argument_group("prediction")
    g.add_argument("--lr", type=float_arg("--lr"), required=True, help="step size > 0")
    g.add_argument(
        "--steps",
        type=int_arg("--steps", 1, MAX_STEPS),
        default=1000,
        help="horizon of the expected-loss curve",
    )
    g.add_argument(
        "--at",
        type=int_list("--at"),
        default=None,
        help="time points t1,t2,... of the curve (default: 0, 1, 2, 5, 10, …, steps)",
    )
    add_minibatch_arguments(g, MAX_STEPS)
    m = p.add_argument_group("measurement")
    m.add_argument("--measure", action="store_true", help="independent trainer runs")
    m.add_argument(
        "--runs",
        type=int_arg("--runs", 2, 100_000),
        default=256,
        help="independently seeded trainer runs of --measure",
    )
    add_pipeline_arguments(p)
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args):
    from stability.cli.args import rule_values
    from stability.noise.minibatch import noise

    return noise(
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
        stage_delays=args.stage_delays,
        stages=args.stages,
        microbatches=args.microbatches,
        measure=args.measure,
        runs=args.runs,
        seed=args.seed,
        lyapunov_steps=args.lyapunov_steps,
        lyapunov_runs=args.lyapunov_runs,
        **rule_values(args),
    )


def report(result) -> str:
    """The thresholds, the expected-loss curve (predicted, and measured with --measure) and the
    floor; every field of the measured block, text ones as they are."""
    from stability.cli.report import aligned, lines, number, value

    out = lines(
        result,
        ["rule", "batch", "lr", "sampling", "samples", "parameters", "sampling_factor",
         "full_batch_max_lr", "ms_max_lr", "as_max_lr", "as_bracket", "floor", "rate",
         "half_life", "ms_radius", "mean_radius"] + (["stages"] if result.stages else []),
    )  # fmt: skip
    m = result.measured
    measured = {} if m is None else {int(t): (mean, se) for t, mean, se in m["expected_loss"]}
    out.append("expected excess loss E f − f*:" + ("   predicted   measured ± se" if m else ""))
    for t, v in result.expected_loss:
        row = f"  t = {t:<8}{number(v, 6)}"
        if t in measured:
            mean, se = measured[t]
            row = f"{row:<26}{number(mean, 6)} ± {number(se, 3)}"
        out.append(row)
    if m is not None:
        pairs = [(k, value(v, 6)) for k, v in m.items() if k != "expected_loss"]
        out.append("measured:")
        out += ["  " + line for line in aligned(pairs)]
    out += [f"note: {n}" for n in result.notes]
    return "\n".join(out)
