"""``stability t1-audit RULE --lr-schedule S --taus T1,T2,… --anneal-steps K --steps N``.

Checks PipeMare's T1 step sizes α_{k,i} = α_base,k/τ_i^{p_k} (eq. 4) against each stage's max
stable lr (`stability.analysis.t1_audit`): the unsafe (step, stage) windows (none when safe) and the
margin.  Stage delays come from ``--taus`` or from a pipeline schedule (``--pipeline
NAME:P[:N]``, P stages and N microbatches, `stability.pipeline`); ``--lam`` is λ_max of the
problem.
"""

from __future__ import annotations

from stability.cli.args import UsageError, add_output_arguments, add_rule_arguments, rule_values


def register(sub) -> None:
    p = sub.add_parser(
        "t1-audit",
        help="check PipeMare T1 rescheduled step sizes against each stage's max stable lr",
        description="At every step k < --steps and stage i, is α_{k,i} = α_base,k / τ_i^{p_k} "
        "(PipeMare eq. 4, p_k = 1 − min(k/K, 1)) below max-lr(RULE, λ, τ_i)?  Reports the "
        "unsafe windows (none when safe), the worst point and the margin 1 − max α/max-lr.",
    )
    add_rule_arguments(p)
    p.add_argument(
        "--lr-schedule",
        required=True,
        metavar="S",
        help="base schedule: constant:LR | step:LR:FACTOR:B1,B2,... | warmup:LR:W | cosine:LR:T",
    )
    p.add_argument("--taus", metavar="T1,T2,...", help="stage delays τ_i (comma-separated)")
    p.add_argument(
        "--pipeline",
        metavar="NAME:P[:N]",
        help="take τ_fwd,i of a pipeline schedule (pipemare, pipedream, pb, ...) with P stages "
        "and N microbatches (default 1)",
    )
    p.add_argument("--anneal-steps", type=int, required=True, metavar="K", help="T1's K")
    p.add_argument("--steps", type=int, required=True, metavar="N", help="steps to audit")
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def _taus(args) -> list[int]:
    if (args.taus is None) == (args.pipeline is None):
        raise UsageError("give the stage delays with --taus or with --pipeline (one of them)")
    if args.taus is not None:
        try:
            return [int(t) for t in args.taus.split(",") if t.strip()]
        except ValueError:
            raise UsageError(
                f"--taus must be comma-separated integers, got {args.taus!r}"
            ) from None
    from stability.pipeline import pipeline

    parts = args.pipeline.split(":")
    try:
        sizes = [int(x) for x in parts[1:]]
    except ValueError:
        sizes = []
    if not 1 <= len(sizes) <= 2:
        raise UsageError(f"--pipeline is written NAME:P[:N], got {args.pipeline!r}")
    return pipeline(parts[0], *sizes).tau_fwd.tolist()


def run(args) -> dict:
    from stability.analysis.t1_audit import audit, parse_schedule
    from stability.rules.registry import delay_parameter, get_spec

    get_spec(args.rule)
    values = rule_values(args)
    key = delay_parameter(args.rule)
    if key in values:
        raise UsageError(f"--{key.replace('_', '-')} is set per stage by the audit: leave it out")
    result = audit(
        args.rule,
        values,
        parse_schedule(args.lr_schedule),
        _taus(args),
        args.anneal_steps,
        args.steps,
    )
    return {
        "rule": result.rule,
        "lr_schedule": args.lr_schedule,
        "anneal_steps": result.anneal_steps,
        "steps": result.steps,
        "taus": list(result.taus),
        "max_lr": list(result.max_lr),
        "safe": result.safe,
        "margin": result.margin,
        "worst": {"step": result.worst_step, "stage": result.worst_stage},
        "unsafe": [
            {
                "stage": w.stage,
                "tau": w.tau,
                "start": w.start,
                "end": w.end,
                "worst_ratio": w.worst_ratio,
            }
            for w in result.windows
        ],
    }


def report(result: dict) -> str:
    lines = [
        f"rule {result['rule']}, schedule {result['lr_schedule']}, K = {result['anneal_steps']}, "
        f"{result['steps']} steps",
        "stage delays: " + ", ".join(str(t) for t in result["taus"]),
        f"{'SAFE' if result['safe'] else 'UNSAFE'}: margin {result['margin']:.4g} "
        f"(worst at step {result['worst']['step']}, stage {result['worst']['stage']})",
    ]
    for w in result["unsafe"]:
        lines.append(
            f"  stage {w['stage']} (τ = {w['tau']}): steps {w['start']}–{w['end']}, "
            f"α up to {w['worst_ratio']:.4g}× its max stable lr"
        )
    return "\n".join(lines)
