"""``stability t1-audit RULE --lr-schedule S --taus T1,T2,… --anneal-steps K --steps N``.

Checks PipeMare's T1 step sizes α_{k,i} = α_base,k/τ_i^{p_k} (eq. 4) against each stage's max
stable lr (`stability.analysis.rescheduling`): the unsafe (step, stage) windows (none when safe)
and the margin.  Stage delays come from ``--taus`` or from a pipeline schedule (``--pipeline
NAME:P[:N]``, P stages and N microbatches, `stability.pipeline`); ``--lam`` is λ_max of the
problem.
"""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "t1_audit"
EXAMPLES = (
    "t1-audit sgd --lam 4 --lr-schedule constant:0.1 --taus 1,4,16 --anneal-steps 1000 "
    "--steps 2000",
    "t1-audit momentum --momentum 0.9 --lr-schedule cosine:0.01:500 --pipeline pipemare:4 "
    "--anneal-steps 100 --steps 500 --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "t1-audit",
        usage="RULE --lr-schedule S (--taus T1,... | --pipeline NAME:P[:N]) --anneal-steps K "
        "--steps N [rule flags] [--json]",
        help="check PipeMare T1 rescheduled step sizes against each stage's max stable lr",
        description="At every step k < --steps and stage i, is α_{k,i} = α_base,k / τ_i^{p_k} "
        "(PipeMare eq. 4, p_k = 1 − min(k/K, 1)) below max-lr(RULE, λ, τ_i)?  Reports the "
        "unsafe windows (none when safe), the worst point and the margin 1 − max α/max-lr.",
        examples=EXAMPLES,
        report=report,
    )


def report(result) -> str:
    import math

    from stability.cli.report import number

    lines = [
        f"rule {result.rule}, schedule {result.lr_schedule}, K = {result.anneal_steps}, "
        f"{result.steps} steps",
        "stage delays:  " + ", ".join(str(t) for t in result.taus),
        "stage max lr:  " + ", ".join(number(x, 6) for x in result.max_lr),
    ]
    where = f"(worst at step {result.worst_step}, stage {result.worst_stage})"
    if math.isfinite(result.margin):
        lines.append(f"{'SAFE' if result.safe else 'UNSAFE'}: margin {result.margin:.4g} {where}")
    else:  # a stage whose max lr is 0: no margin to speak of
        lines.append(f"UNSAFE: a stage is stable for no lr > 0 {where}")
    for w in result.windows:
        ratio = (
            f"α up to {w.worst_ratio:.4g}× its max stable lr"
            if math.isfinite(w.worst_ratio)
            else "its max stable lr is 0 (stable for no lr > 0)"
        )
        lines.append(f"  stage {w.stage} (τ = {w.tau}): steps {w.start}–{w.end}, {ratio}")
    return "\n".join(lines)
