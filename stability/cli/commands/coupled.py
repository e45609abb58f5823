"""``stability coupled``: exact max stable lr of per-stage delays on a problem's full Hessian.

The coupled ``max_lr`` (`stability.coupled.scan`) with its ``crossing_angle``,
``critical_stage`` (1 … P) and ``stage_shares``; the scalar theory beside it — ``scalar_bound``
at (λ_max, τ_max) with ``scalar_ratio`` = scalar/coupled (its error), ``per_stage_bounds``
with ``min_stage_ratio``; with ``--measure`` the trainer's ``measured_max_lr`` on the same
per-stage rule and ``measured_ratio`` = measured/coupled.
"""

from __future__ import annotations

from stability.cli.args import UsageError
from stability.cli.declared import call, register_declared

API = "coupled"
EXAMPLES = (
    "coupled --rule sgd --stages 4 --schedule pipemare",
    "coupled --rule momentum --momentum 0.5 --stages 3 --schedule pipedream --measure "
    "--steps 2000 --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "coupled",
        title="coupled model and measurement (--measure: the trainer's max-lr bisection)",
        usage="--rule RULE --stages P [options] [rule flags] [--json]",
        help="per-stage delays on a full Hessian: exact coupled max lr vs the scalar bounds",
        description="Every pipeline stage with its own delays on the problem's full Hessian: "
        "the exact max stable lr of the coupled system next to the scalar theory's bounds "
        "(at the largest delay and eigenvalue, and per stage), optionally measured on the "
        "trainer.",
        examples=EXAMPLES,
        report=report,
        run=run,
    )


def run(args):
    if args.stages is None:
        raise UsageError("--stages P is required (the number of pipeline stages)")
    return call("coupled", args)


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
