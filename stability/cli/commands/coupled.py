"""``stability coupled``: exact max stable lr of per-stage delays on a problem's full Hessian.

The coupled ``max_lr`` (`stability.coupled.scan`) with its ``crossing_angle``,
``critical_stage`` (1 … P) and ``stage_shares``; the scalar theory beside it — ``scalar_bound``
at (λ_max, τ_max) with ``scalar_ratio`` = scalar/coupled (its error), ``per_stage_bounds``
with ``min_stage_ratio``; with ``--measure`` the trainer's ``measured_max_lr`` on the same
per-stage rule and ``measured_ratio`` = measured/coupled.
"""

from __future__ import annotations

from stability.cli.args import (
    UsageError,
    add_command,
    add_output_arguments,
    add_rule_arguments,
    float_arg,
    int_arg,
    int_list,
)
from stability.cli.problem_args import add_pipeline_arguments, add_problem_arguments
from stability.limits import TRAIN_MAX_STEPS

API = "coupled"
EXAMPLES = (
    "coupled --rule sgd --stages 4 --schedule pipemare",
    "coupled --rule momentum --momentum 0.5 --stages 3 --schedule pipedream --measure "
    "--steps 2000 --json",
)


def register(sub) -> None:
    p = add_command(
        sub,
        "coupled",
        usage="--rule RULE --stages P [options] [rule flags] [--json]",
        help="per-stage delays on a full Hessian: exact coupled max lr vs the scalar bounds",
        description="Every pipeline stage with its own delays on the problem's full Hessian: "
        "the exact max stable lr of the coupled system next to the scalar theory's bounds "
        "(at the largest delay and eigenvalue, and per stage), optionally measured on the "
        "trainer.",
        examples=EXAMPLES,
    )
    add_rule_arguments(p, rule="--rule", exclude=("stages", "microbatches"))
    add_problem_arguments(p)
    add_pipeline_arguments(p, schedule_default="pipemare", stage_delays=False)
    g = p.add_argument_group("coupled model")
    g.add_argument(
        "--taus",
        type=int_list("--taus"),
        default=None,
        help="forward delays per stage (or one for all), overriding the schedule's",
    )
    g.add_argument(
        "--t1-power",
        type=float_arg("--t1-power"),
        default=0.0,
        help="T1 exponent p: stage i steps with lr·τ_i^(−p) (PipeMare eq. 4)",
    )
    g.add_argument(
        "--method",
        choices=("scan", "dense"),
        default="scan",
        help="frequency scan (any size) or block-state-matrix bisection (small)",
    )
    m = p.add_argument_group("measurement (--measure: the trainer's max-lr bisection)")
    m.add_argument("--measure", action="store_true", help="measure the max lr on the trainer")
    m.add_argument(
        "--steps",
        type=int_arg("--steps", 10, TRAIN_MAX_STEPS),
        default=None,
        help="steps per run (default 20000; 5000 for mlp)",
    )
    m.add_argument(
        "--rel-tol",
        type=float_arg("--rel-tol"),
        default=None,
        help="bisection bracket width (default 1e-3; 1e-2 for mlp)",
    )
    m.add_argument(
        "--fit-seed",
        type=int_arg("--fit-seed"),
        default=0,
        help="mlp: initialization the minimizer is fitted from",
    )
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args):
    from stability.api.coupled import coupled
    from stability.cli.args import rule_values
    from stability.cli.problem_args import problem_values

    if args.stages is None:
        raise UsageError("--stages P is required (the number of pipeline stages)")
    return coupled(
        args.rule,
        stages=args.stages,
        schedule=args.schedule,
        microbatches=args.microbatches or 1,
        taus=args.taus,
        t1_power=args.t1_power,
        method=args.method,
        measure=args.measure,
        steps=args.steps,
        rel_tol=args.rel_tol,
        fit_seed=args.fit_seed,
        **problem_values(args),
        **rule_values(args),
    )


def report(result) -> str:
    """Coupled, scalar and (measured) max lr side by side, then the per-stage bounds."""
    from stability.cli.report import number

    def f(x):
        return number(x, 6)

    lines = [
        f"{result.rule} on {result.problem['problem']} ({result.hessian_shape[0]} parameters), "
        f"schedule {result.schedule}, {len(result.stage_sizes)} stages",
        f"coupled max lr     {f(result.max_lr)}   (critical stage {f(result.critical_stage)}, "
        f"crossing angle {f(result.crossing_angle)} rad, {result.method})",
        f"scalar bound       {f(result.scalar_bound)}   (λ_max, τ_max; "
        f"scalar/coupled = {f(result.scalar_ratio)})",
    ]
    if result.measured_max_lr is not None or result.protocol is not None:
        lines.append(
            f"measured max lr    {f(result.measured_max_lr)}   "
            f"(measured/coupled = {f(result.measured_ratio)}, {result.measured_runs} runs)"
        )
    lines.append(
        f"{'stage':>6}{'size':>6}{'τ_fwd':>7}{'τ_bkwd':>8}{'per-stage bound':>18}{'share':>9}"
    )
    shares = result.stage_shares or (None,) * len(result.stage_sizes)
    rows = zip(
        result.stage_sizes,
        result.stage_taus,
        result.stage_tau_bkwd,
        result.per_stage_bounds,
        shares,
        strict=True,
    )
    for i, (n, tf, tb, b, sh) in enumerate(rows, start=1):
        lines.append(f"{i:>6}{n:>6}{tf:>7}{tb:>8}{f(b):>18}{f(sh):>9}")
    if result.backward_to_forward is not None:
        lines.append(f"‖H_b‖/‖H_f‖ = {f(result.backward_to_forward)}")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
