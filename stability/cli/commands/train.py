"""``stability train``: one reference-trainer run, measured rate next to the predicted one.

The measured rate is the slope of log ‖w_t − w*‖ (`stability.trainer.measure`): for full-batch
linear regression on the error recursion (the same sequence without float64's rounding floor),
run at least ``--steps`` steps and doubled until it settles; for an MLP on the run itself,
against the minimizer fitted from the same start; none for minibatch runs (the gradient noise
sets a floor: there is no asymptotic rate).
"""

from __future__ import annotations

from stability.cli.args import (
    add_command,
    add_output_arguments,
    add_rule_arguments,
    float_arg,
    int_arg,
)
from stability.cli.problem_args import add_pipeline_arguments, add_problem_arguments
from stability.limits import TRAIN_MAX_STEPS

API = "train"
EXAMPLES = (
    "train --rule sgd --tau 4 --lr 0.05 --steps 300",
    "train --rule momentum --momentum 0.5 --lr 0.01 --steps 500 --schedule pipemare --stages 3 "
    "--json",
)


def register(sub) -> None:
    p = add_command(
        sub,
        "train",
        usage="--rule RULE --lr X [options] [rule flags] [--json]",
        help="reference-trainer run: loss curve, divergence, measured vs predicted rate",
        description="Train with RULE's own step (the one the analysis linearises) on linear "
        "regression or a small MLP, and compare the measured convergence rate and stability "
        "with the theory's prediction on the problem's Hessian modes.",
        examples=EXAMPLES,
    )
    add_rule_arguments(p, rule="--rule", exclude=("stages", "microbatches"))
    g = p.add_argument_group("training")
    g.add_argument("--lr", type=float_arg("--lr"), required=True, help="step size > 0")
    g.add_argument(
        "--steps", type=int_arg("--steps", 1, TRAIN_MAX_STEPS), default=10_000, help="steps"
    )
    g.add_argument(
        "--batch",
        type=int_arg("--batch", 1),
        default=None,
        help="minibatch size (default: full batch)",
    )
    g.add_argument(
        "--seed", type=int_arg("--seed"), default=0, help="minibatch and mlp initialization seed"
    )
    g.add_argument(
        "--divergence",
        type=float_arg("--divergence"),
        default=1e6,
        help="a run diverged once its loss is non-finite or exceeds this × its initial loss",
    )
    g.add_argument(
        "--t1",
        type=int_arg("--t1", 1),
        default=None,
        metavar="K",
        help="T1 step-size rescheduling over K steps (PipeMare eq. 4)",
    )
    g.add_argument(
        "--warmup-epochs",
        type=int_arg("--warmup-epochs"),
        default=0,
        help="synchronous warm-up epochs first (PipeMareW)",
    )
    g.add_argument(
        "--start",
        choices=("init", "minimum"),
        default="init",
        help="mlp: seeded initialization, or next to the fitted minimizer",
    )
    g.add_argument(
        "--curve-points",
        type=int_arg("--curve-points", 2),
        default=200,
        help="points of the reported loss curve (subsampled)",
    )
    g.add_argument(
        "--update",
        choices=("analysed", "real"),
        default="analysed",
        help="train the rule as analysed (default) or its real update where the analysis "
        "linearises it (adam, pipeoptim with adam/adamw: real Adam; dc: outer-product DC)",
    )
    add_problem_arguments(p)
    add_pipeline_arguments(p)
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args):
    from stability.api.train import train
    from stability.cli.args import rule_values
    from stability.cli.problem_args import pipeline_values, problem_values
    from stability.cli.progress import progress_bar

    with progress_bar(f"train {args.rule}", json=args.json) as progress:
        return train(
            args.rule,
            lr=args.lr,
            steps=args.steps,
            batch=args.batch,
            seed=args.seed,
            divergence=args.divergence,
            t1=args.t1,
            warmup_epochs=args.warmup_epochs,
            start=args.start,
            curve_points=args.curve_points,
            update=args.update,
            progress=progress,
            **pipeline_values(args),
            **problem_values(args),
            **rule_values(args),
        )


def report(result) -> str:
    """The run, the loss, the rates side by side, the per-stage predictions."""
    from stability.cli.report import MISSING, number, pipeline_line

    p, d = result.problem, result.data
    batch = "full batch" if result.batch is None else f"batch {result.batch}"
    lines = [
        f"{result.rule} ({result.update}) at lr {number(result.lr)}, {result.steps} steps, "
        f"{batch}, seed {result.seed}",
        f"problem  {p['problem']}: {p['samples']} samples, {p['parameters']} parameters; data "
        f"{d['source']} (standardize {d['standardize']})",
    ]
    if result.diverged:
        lines.append(
            f"loss     {number(result.initial_loss, 6)} at step 0; DIVERGED at step "
            f"{result.diverged_step} (loss {number(result.diverged_loss, 6)})"
        )
    else:
        lines.append(
            f"loss     {number(result.initial_loss, 6)} at step 0 → "
            f"{number(result.final_loss, 6)} at step {result.steps}"
        )
    lines.append(f"{'':<9}{'measured':>14}{'predicted':>14}")
    lines.append(
        f"{'rate ρ':<9}{number(result.measured_rate, 8):>14}{number(result.predicted_rate, 8):>14}"
        "  per step"
    )
    lines.append(f"{'max lr':<9}{MISSING:>14}{number(result.predicted_max_lr, 8):>14}")
    lines.append(f"rate measured by {result.rate_method}")
    if result.rate_steps:
        lines[-1] += f" ({result.rate_steps} steps)"
    if result.prediction_note:
        lines.append(f"note: {result.prediction_note}")
    if result.pipeline is not None:
        pipe, s = result.pipeline, result.scalar_predictions
        lines.append(pipeline_line(pipe))
        per_stage = ", ".join(number(x, 6) for x in s["predicted_max_lr_per_stage"])
        rows = [
            ("worst stage (scalar)", number(s["predicted_max_lr_worst_stage"], 8)),
            ("per stage (scalar)", per_stage),
        ]
        if "predicted_max_lr_coupled" in s:
            rows.append(("coupled model (exact)", number(s["predicted_max_lr_coupled"], 8)))
        lines += [f"max lr, {label:<22}{text}" for label, text in rows]
    for a in result.assumptions:
        lines.append(f"assumes: {a}")
    return "\n".join(lines)
