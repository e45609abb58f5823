"""``stability train``: one reference-trainer run, measured rate next to the predicted one.

The measured rate is the slope of log ‖w_t − w*‖ (`stability.trainer.measure`): for full-batch
linear regression on the error recursion (the same sequence without float64's rounding floor),
run at least ``--steps`` steps and doubled until it settles; for an MLP on the run itself,
against the minimizer fitted from the same start; none for minibatch runs (the gradient noise
sets a floor: there is no asymptotic rate).
"""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "train"
EXAMPLES = (
    "train --rule sgd --tau 4 --lr 0.05 --steps 300",
    "train --rule momentum --momentum 0.5 --lr 0.01 --steps 500 --schedule pipemare --stages 3 "
    "--json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "train",
        title="training",
        usage="--rule RULE --lr X [options] [rule flags] [--json]",
        help="reference-trainer run: loss curve, divergence, measured vs predicted rate",
        description="Train with RULE's own step (the one the analysis linearises) on linear "
        "regression or a small MLP, and compare the measured convergence rate and stability "
        "with the theory's prediction on the problem's Hessian modes.",
        examples=EXAMPLES,
        report=report,
        progress=lambda args: f"train {args.rule}",
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
