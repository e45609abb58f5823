"""``stability train``: one reference-trainer run, measured rate next to the predicted one.

``stability train --problem linreg|mlp [--data PATH] --rule RULE [rule flags] --lr X --steps N
[--batch B] [--seed S] [--schedule S --stages P --microbatches N] [--t1 K]
[--warmup-epochs E] --json`` prints ``diverged``, ``final_loss``, ``measured_rate``,
``predicted_rate`` (and their logarithms), ``predicted_max_lr`` and ``loss_curve``
([step, loss] pairs, subsampled; null after divergence).

The measured rate is the slope of log ‖w_t − w*‖ (`stability.trainer.measure`): for full-batch
linear regression on the error recursion (`LinearRegression.error_problem`, the same sequence
without float64's rounding floor), run at least ``--steps`` steps and doubled until it
settles; for an MLP on the run itself, against the minimizer fitted from the same start; null
for minibatch runs (the gradient noise sets a floor: there is no asymptotic rate).
"""

from __future__ import annotations

import argparse

from stability.cli.args import (
    UsageError,
    add_output_arguments,
    add_rule_arguments,
    float_arg,
    rule_values,
)
from stability.cli.args import int_arg as _int_arg

SCHEDULE_CHOICES = ("pipemare", "pipedream", "gpipe", "pb", "uniform")


def _int_list(name: str):
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(t) for t in text.split(",") if t.strip())
        except ValueError:
            raise UsageError(f"{name} must be comma-separated integers, got {text!r}") from None
        if not values or any(v < 0 for v in values):
            raise UsageError(f"{name} must be comma-separated integers ≥ 0, got {text!r}")
        return values

    return parse


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """Problem and data flags (shared with ``stability validate``)."""
    from stability.trainer.data import STANDARDIZE
    from stability.trainer.mlp import ACTIVATIONS, TASKS

    g = parser.add_argument_group("problem and data")
    g.add_argument("--problem", choices=("linreg", "mlp"), default="linreg")
    g.add_argument(
        "--data",
        default=None,
        metavar="PATH",
        help="CSV (target in column 0) or LIBSVM file; default: cpusmall (shared copy, "
        "user cache, or downloaded from the LIBSVM page)",
    )
    g.add_argument(
        "--standardize",
        choices=STANDARDIZE,
        default=None,
        help="none: as stored; features: z-score features, centre the target; all: also "
        "scale the target (default: features for linreg, all for mlp)",
    )
    g.add_argument("--bias", action="store_true", help="append an intercept column")
    g.add_argument(
        "--samples",
        type=_int_arg("samples", 1),
        default=None,
        help="train on a seeded random subset of this many rows (mlp default: at most 128)",
    )
    g.add_argument(
        "--hidden",
        type=_int_list("hidden"),
        default=(4, 4),
        help="MLP hidden widths (default 4,4: with one hidden layer the backward weights do "
        "not enter the gradient's linearization at a minimum)",
    )
    g.add_argument("--activation", choices=ACTIVATIONS, default="tanh")
    g.add_argument("--task", choices=TASKS, default="regression")
    g.add_argument(
        "--l2",
        type=float_arg("l2"),
        default=0.1,
        help="MLP loss regularization l2/2·‖w‖² (a strict minimum; default 0.1)",
    )


def problem_options(args):
    from stability.trainer.problems import ProblemOptions

    mlp = args.problem == "mlp"
    standardize = args.standardize or ("all" if mlp else "features")
    return ProblemOptions(
        problem=args.problem,
        data=args.data,
        standardize=standardize,
        bias=args.bias,
        samples=args.samples,
        max_samples=128 if mlp else None,  # the tiny MLP: validation runs many full batches
        hidden=args.hidden,
        activation=args.activation,
        task=args.task,
        weight_decay=args.l2,
    )


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    """``--schedule``; the stage count P and microbatches N are the rule flags ``--stages`` and
    ``--microbatches`` (shared with the gpipe rule, same meaning)."""
    g = parser.add_argument_group("pipeline (per-stage delays, PipeMare Table 1)")
    g.add_argument(
        "--schedule",
        choices=SCHEDULE_CHOICES,
        default=None,
        help="per-stage delays of this schedule over --stages P (default 2) stage blocks, "
        "--microbatches N (default 1); uniform takes --tau",
    )


def make_pipeline(args, problem):
    from stability.pipeline import pipeline

    if args.schedule is None:
        return None, None
    stages = args.stages if args.stages is not None else 2
    microbatches = args.microbatches if args.microbatches is not None else 1
    tau = getattr(args, "tau", None) if args.schedule == "uniform" else None
    pipe = pipeline(args.schedule, stages, microbatches, tau=tau)
    return pipe, problem.stage_sizes(stages)


def register(sub) -> None:
    p = sub.add_parser(
        "train",
        help="reference-trainer run: loss curve, divergence, measured vs predicted rate",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--rule", required=True, metavar="RULE", help="rule name (`stability rules`)")
    add_rule_arguments(p, positional=False)
    add_problem_arguments(p)
    g = p.add_argument_group("training")
    g.add_argument("--lr", type=float_arg("lr"), required=True, help="step size > 0")
    g.add_argument("--steps", type=_int_arg("steps", 1), default=10_000)
    g.add_argument("--batch", type=_int_arg("batch", 1), default=None, help="minibatch size")
    g.add_argument("--seed", type=_int_arg("seed"), default=0)
    g.add_argument("--divergence", type=float_arg("divergence"), default=1e6)
    g.add_argument(
        "--t1",
        type=_int_arg("t1", 1),
        default=None,
        metavar="K",
        help="T1 step-size rescheduling over K steps (PipeMare eq. 4)",
    )
    g.add_argument(
        "--warmup-epochs",
        type=_int_arg("warmup_epochs"),
        default=0,
        help="synchronous warm-up epochs first (PipeMareW)",
    )
    g.add_argument(
        "--start",
        choices=("init", "minimum"),
        default="init",
        help="mlp: seeded initialization, or next to the fitted minimizer",
    )
    g.add_argument("--curve-points", type=_int_arg("curve_points", 2), default=200)
    g.add_argument("--progress", action="store_true", help="progress bar on stderr")
    g.add_argument(
        "--update",
        choices=("analysed", "real"),
        default="analysed",
        help="train the rule as analysed (default) or its real update where the analysis "
        "linearises it (adam, pipeoptim with adam/adamw: real Adam; dc: outer-product DC)",
    )
    add_pipeline_arguments(p)
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.agreement.predict import predict
    from stability.agreement.validate import linreg_setup, mlp_setup, scalar_stage_predictions
    from stability.checks import check_real
    from stability.cli.progress import Progress
    from stability.rules.registry import get_spec
    from stability.trainer import measure
    from stability.trainer.engine import train
    from stability.trainer.problems import build_problem
    from stability.trainer.schedules import pipeline_rule, plan, synchronous_rule
    from stability.trainer.schedules import rule_values as values_for

    lr = check_real("lr", args.lr, low=0.0, low_open=True)
    check_real("divergence", args.divergence, low=1.0, low_open=True)
    problem, data = build_problem(problem_options(args))
    values = rule_values(args)
    name = args.rule
    spec = get_spec(name)
    pipe, sizes = make_pipeline(args, problem)
    if pipe is None:
        rule, _ = spec.build(**values_for(name, values))
    else:
        rule = pipeline_rule(name, values, pipe, sizes)
    analysed = rule
    if args.update == "real":
        if not hasattr(rule, "trainer_rule"):
            raise ValueError(
                f"rule {name!r} has no separate real update (its analysis is exact); "
                "use --update analysed"
            )
        rule = rule.trainer_rule()
    epoch = 1 if args.batch is None else max(1, problem.samples // args.batch)
    warmup_steps = args.warmup_epochs * epoch
    phases = plan(
        rule,
        t1_steps=args.t1,
        warmup=synchronous_rule(name, values, rule) if warmup_steps else None,
        warmup_steps=warmup_steps,
    )
    if args.problem == "linreg":
        setup = linreg_setup(problem)
        w0, loss_offset = setup.w0, 0.0
    else:  # next to the minimizer (the rate runs' start, above float64's floor), or the init
        setup = mlp_setup(problem, seed=args.seed)
        near = args.start == "minimum"
        w0, loss_offset = (setup.rate_w0, setup.loss_offset) if near else (None, 0.0)
    progress = Progress(args.steps, f"train {name}", force=args.progress)
    deterministic = args.batch is None
    res = train(
        problem,
        phases,
        [lr],
        steps=args.steps,
        batch=args.batch,
        seed=args.seed,
        w0=w0,
        w_star=setup.w_star,
        divergence=args.divergence,
        loss_offset=loss_offset,
        record_every=max(1, args.steps // (args.curve_points - 1)),
        track=("error",) if deterministic else (),
        progress=progress.update,
    )
    progress.close()

    out = {
        "problem": problem.describe(),
        "data": data.describe(),
        "rule": name,
        "update": args.update,
        "lr": lr,
        "steps": args.steps,
        "batch": args.batch,
        "seed": args.seed,
        "diverged": bool(res.diverged[0]),
        "diverged_step": int(res.diverged_step[0]) if res.diverged[0] else None,
        "diverged_loss": _num(res.diverged_loss[0]),
        "initial_loss": _num(res.initial_loss[0]),
        "final_loss": _num(res.final_loss[0]),
    }
    pred_log = None
    if pipe is None:
        prediction = predict(analysed, setup.modes_for(analysed), lr)
        out["predicted_max_lr"], pred_log = prediction.max_lr, prediction.log_rate
        if prediction.note:
            out["prediction_note"] = prediction.note
        elif analysed is not rule:
            out["prediction_note"] = "predictions are for the analysed (linearised) rule"
    else:
        out["predicted_max_lr"] = None
        out["prediction_note"] = "per-stage delays: see scalar_predictions"
    meas_log, rate_steps = None, None
    if deterministic and args.problem == "linreg":
        rates = measure.converged_log_rate(
            lambda T: train(
                setup.rate_problem,
                phases,
                [lr],
                steps=T,
                w0=setup.rate_w0,
                w_star=setup.rate_w_star,
                divergence=args.divergence,
                track=("error",),
            ),
            args.steps,
            decades=None,
            max_doublings=3,
        )
        meas_log, rate_steps = _num(rates.log_rate[0]), rates.steps
    elif deterministic:
        rate = measure.log_rate(res.energies["error"], res.block, decades=setup.rate_decades)
        meas_log, rate_steps = _num(rate[0]), args.steps
    out.update(
        measured_log_rate=meas_log,
        measured_rate=_exp(meas_log),
        predicted_log_rate=pred_log,
        predicted_rate=_exp(pred_log),
        rate_steps=rate_steps,
        rate_method=_rate_method(args, deterministic),
    )
    if pipe is not None:
        out["pipeline"] = pipe.describe(sizes)
        out["scalar_predictions"] = scalar_stage_predictions(setup, name, values, pipe, sizes)
    if args.problem == "mlp":
        out["assumptions"] = list(setup.assumptions)
    curve = zip(res.curve_steps, res.curve[0], strict=True)
    out["loss_curve"] = [[int(step), _num(loss)] for step, loss in curve]
    return out


def _rate_method(args, deterministic: bool) -> str:
    if not deterministic:
        return "none: minibatch noise sets a floor, there is no asymptotic rate"
    if args.problem == "linreg":
        return "slope of log‖w_t − w*‖ on the error recursion (LinearRegression.error_problem)"
    return "slope of log‖w_t − w*‖ over the last half of the run, w* fitted from the same start"


def _num(x):
    import math

    x = float(x)
    return x if math.isfinite(x) else None


def _exp(x):
    import math

    return None if x is None else math.exp(x)


__all__ = ["add_pipeline_arguments", "add_problem_arguments", "problem_options", "register"]
