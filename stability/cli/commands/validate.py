"""``stability validate``: predicted vs measured max stable lr and rates, one row per rule × τ.

τ sets each rule's main delay: ``tau``, or ``tau_fwd`` for the discrepancy family (whose
``tau_bkwd`` comes from ``--tau-bkwd``, default 0).  A rule flag applies to the rules of
``--rules`` that take it (``--momentum 0.9`` sets the momentum of momentum, sc, lwp, …, not
of sgd); a flag that none of them takes is refused.  ``--schedule S --stages P`` replaces
the uniform delays by a pipeline's per-stage delays and reports what the scalar theory and
(for linear regression) the exact coupled model predict for them.
"""

from __future__ import annotations

from stability.cli.args import (
    add_command,
    add_output_arguments,
    add_rule_arguments,
    float_arg,
    int_arg,
    int_list,
)
from stability.cli.problem_args import add_pipeline_arguments, add_problem_arguments
from stability.limits import TRAIN_MAX_STEPS

API = "validate"
EXAMPLES = (
    "validate --rules sgd --taus 0,2 --steps 2000 --rate-steps 2000 --rate-doublings 0",
    "validate --rules sgd --schedule pipemare --stages 3 --steps 2000 --json",
)


def register(sub) -> None:
    p = add_command(
        sub,
        "validate",
        usage="--rules R1,R2,... [options] [rule flags] [--json]",
        help="theory vs trainer: predicted and measured max stable lr and rates",
        description="For each rule of --rules and delay of --taus: the predicted max stable lr "
        "on the problem's Hessian modes against the trainer's, found by bisection, and the "
        "predicted vs measured convergence rates; with --schedule, per-stage delays.",
        examples=EXAMPLES,
    )
    add_rule_arguments(p, rule="--rules", exclude=("stages", "microbatches"))
    p.add_argument("--taus", type=int_list("--taus"), default=(0, 1, 4, 16), help="delays τ")
    add_problem_arguments(p)
    g = p.add_argument_group("measurement protocol")
    g.add_argument(
        "--batch",
        type=int_arg("--batch", 1),
        default=None,
        help="minibatch size (default: full batch)",
    )
    g.add_argument(
        "--steps",
        type=int_arg("--steps", 10, TRAIN_MAX_STEPS),
        default=None,
        help="steps per stability run (default 20000; 5000 for mlp)",
    )
    g.add_argument(
        "--rate-steps",
        type=int_arg("--rate-steps", 10),
        default=None,
        help="first length of the rate runs, doubled until the rate settles",
    )
    g.add_argument(
        "--rate-doublings",
        type=int_arg("--rate-doublings"),
        default=None,
        help="most doublings of the rate runs (default 5; 1 for mlp)",
    )
    g.add_argument(
        "--seeds",
        type=int_list("--seeds"),
        default=(0, 1, 2),
        help="minibatch seeds (unstable if any diverges)",
    )
    g.add_argument(
        "--divergence",
        type=float_arg("--divergence"),
        default=1e6,
        help="a run diverged once its loss is non-finite or exceeds this × its initial loss",
    )
    g.add_argument(
        "--rel-tol",
        type=float_arg("--rel-tol"),
        default=None,
        help="bisection bracket width (default 1e-3; 1e-2 for mlp)",
    )
    g.add_argument(
        "--fit-seed",
        type=int_arg("--fit-seed"),
        default=0,
        help="mlp: initialization the minimizer is fitted from",
    )
    add_pipeline_arguments(p)
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args):
    from stability.api.validate import validate
    from stability.cli.args import rule_values
    from stability.cli.problem_args import pipeline_values, problem_values
    from stability.cli.progress import progress_bar

    with progress_bar("validate", json=args.json) as progress:
        return validate(
            args.rules,
            taus=args.taus,
            batch=args.batch,
            steps=args.steps,
            rate_steps=args.rate_steps,
            rate_doublings=args.rate_doublings,
            seeds=args.seeds,
            divergence=args.divergence,
            rel_tol=args.rel_tol,
            fit_seed=args.fit_seed,
            progress=progress,
            **pipeline_values(args),
            **problem_values(args),
            **rule_values(args),
        )


def report(result) -> str:
    """A table: the predicted max lr(s), the measured one and their ratios; rates."""
    from stability.cli.report import number, pipeline_line

    p = result.problem
    lines = [f"{p['problem']}: {p['samples']} samples, {p['parameters']} parameters; "
             f"{result.seconds:.1f} s"]  # fmt: skip
    if result.pipeline is None:
        lines.append(
            f"{'rule':<12}{'τ':>6}{'predicted':>14}{'measured':>14}{'ratio':>9}"
            "  ln ρ measured/predicted"
        )
        for row in result.rows:
            rates = " ".join(number(r, 5) for r in row.get("log_rate_ratio") or [])
            lines.append(
                f"{row['rule']:<12}{row['tau']:>6}{number(row['predicted_max_lr'], 6):>14}"
                f"{number(row.get('measured_max_lr'), 6):>14}{number(row.get('ratio'), 5):>9}"
                f"  {rates or '—'}"
            )
        return "\n".join(lines)
    pipe = result.pipeline
    lines.append(pipeline_line(pipe))
    lines.append(
        f"{'rule':<12}{'measured':>12}  {'predicted by':<22}{'max lr':>12}{'measured/pred.':>16}"
    )
    for row in result.rows:
        readings = [
            ("coupled model (exact)", "predicted_max_lr_coupled", "ratio_to_coupled"),
            ("worst stage (scalar)", "predicted_max_lr_worst_stage", "ratio_to_worst_stage"),
            ("min stage (scalar)", "predicted_max_lr_min_stage", "ratio_to_min_stage"),
        ]
        first = True
        for label, key, ratio in readings:
            if key not in row:
                continue
            head = (
                f"{row['rule']:<12}{number(row.get('measured_max_lr'), 6):>12}"
                if first
                else " " * 24
            )
            lines.append(
                f"{head}  {label:<22}{number(row[key], 6):>12}{number(row.get(ratio), 5):>16}"
            )
            first = False
    return "\n".join(lines)
