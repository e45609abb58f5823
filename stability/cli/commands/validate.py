"""``stability validate``: predicted vs measured max stable lr and rates, one row per rule × τ.

τ sets each rule's main delay: ``tau``, or ``tau_fwd`` for the discrepancy family (whose
``tau_bkwd`` comes from ``--tau-bkwd``, default 0).  A rule flag applies to the rules of
``--rules`` that take it (``--momentum 0.9`` sets the momentum of momentum, sc, lwp, …, not
of sgd); a flag that none of them takes is refused.  ``--schedule S --stages P`` replaces
the uniform delays by a pipeline's per-stage delays and reports what the scalar theory and
(for linear regression) the exact coupled model predict for them.
"""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "validate"
EXAMPLES = (
    "validate --rules sgd --taus 0,2 --steps 2000 --rate-steps 2000 --rate-doublings 0",
    "validate --rules sgd --schedule pipemare --stages 3 --steps 2000 --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "validate",
        title="measurement protocol",
        usage="--rules R1,R2,... [options] [rule flags] [--json]",
        help="theory vs trainer: predicted and measured max stable lr and rates",
        description="For each rule of --rules and delay of --taus: the predicted max stable lr "
        "on the problem's Hessian modes against the trainer's, found by bisection, and the "
        "predicted vs measured convergence rates; with --schedule, per-stage delays.",
        examples=EXAMPLES,
        report=report,
        progress="validate",
    )


def report(result) -> str:
    """A table: the predicted max lr(s), the measured one and their ratios; rates."""
    from stability.cli.report import number, pipeline_line

    p = result.problem
    lines = [f"{p['problem']}: {p['samples']} samples, {p['parameters']} parameters; "
             f"{result.seconds:.1f} s"]  # fmt: skip
    width = max([12, *(len(row["rule"]) + 1 for row in result.rows)])
    if result.pipeline is None:
        lines.append(
            f"{'rule':<{width}}{'τ':>6}{'predicted':>14}{'measured':>14}{'ratio':>9}"
            "  ln ρ measured/predicted"
        )
        for row in result.rows:
            rates = " ".join(number(r, 5) for r in row.get("log_rate_ratio") or [])
            lines.append(
                f"{row['rule']:<{width}}{row['tau']:>6}{number(row['predicted_max_lr'], 6):>14}"
                f"{number(row.get('measured_max_lr'), 6):>14}{number(row.get('ratio'), 5):>9}"
                f"  {rates or '—'}"
            )
        return "\n".join(lines + _notes(result.rows))
    pipe = result.pipeline
    lines.append(pipeline_line(pipe))
    lines.append(
        f"{'rule':<{width}}{'measured':>12}  {'predicted by':<22}{'max lr':>12}"
        f"{'measured/pred.':>16}"
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
                f"{row['rule']:<{width}}{number(row.get('measured_max_lr'), 6):>12}"
                if first
                else " " * (width + 12)
            )
            lines.append(
                f"{head}  {label:<22}{number(row[key], 6):>12}{number(row.get(ratio), 5):>16}"
            )
            first = False
    return "\n".join(lines + _notes(result.rows))


def _notes(rows) -> list[str]:
    """The caveats of the rows (``prediction_note``, ``measurement_note``), one line each."""
    return [
        f"note ({row['rule']}" + (f", τ = {row['tau']}" if "tau" in row else "") + f"): {row[key]}"
        for row in rows
        for key in ("prediction_note", "measurement_note")
        if row.get(key)
    ]
