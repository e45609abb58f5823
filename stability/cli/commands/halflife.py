"""``stability halflife RULE --kappa K``: optimal half-life over a spectrum (Kosson Sec. 3.4)."""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "halflife"
EXAMPLES = (
    "halflife momentum --tau 1 --kappa 100 --optimize-momentum",
    "halflife lwp+sc --tau 1 --kappa 1000 --optimize-momentum --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "halflife",
        usage="RULE --kappa K [options] [--schedule S --stages P | --stage-delays T1,...] "
        "[rule flags] [--json]",
        help="optimal half-life for condition number κ (Kosson Sec. 3.4)",
        description="Fastest convergence of RULE on a quadratic whose curvatures fill "
        "[lam, κ·lam]: the rate is the worst spectral radius over the spectrum, the half-life "
        "−ln2/ln(rate); minimised over lr (and the momentum or LWP horizon on request), "
        "refined to 1e-6 relative and evaluated in mpmath at the optimum.  With a pipeline "
        "(--schedule, --stage-delays) one common lr for every stage's rule: the worst stage "
        "rate is minimised.",
        examples=EXAMPLES,
        report=report,
        run=run,
    )


def run(args):
    from stability.cli.args import UsageError
    from stability.cli.declared import call

    if args.optimize is not None and (args.schedule or args.stage_delays):
        raise UsageError(
            f"--optimize-{args.optimize} applies to one rule: give a uniform delay, not a "
            "pipeline (--schedule, --stage-delays)"
        )
    return call("halflife", args)


def report(result) -> str:
    from stability.cli.report import lines

    keys = ["rule", "kappa", "lam_min", "half_life", "rate", "lr"]
    keys += [k for k in ("momentum", "horizon") if getattr(result, k) is not None]
    out = lines(result, keys)
    out.append(f"optimized over {', '.join(result.optimized)}")
    from stability.cli.declared import stage_lines

    return "\n".join(out + stage_lines(result, ["rate", "own_half_life"]))
