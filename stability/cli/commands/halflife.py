"""``stability halflife RULE --kappa K``: optimal half-life over a spectrum (Kosson Sec. 3.4)."""

from __future__ import annotations

from stability.cli.args import add_command, add_output_arguments, add_rule_arguments, float_arg

API = "halflife"
EXAMPLES = (
    "halflife momentum --tau 1 --kappa 100 --optimize-momentum",
    "halflife lwp+sc --tau 1 --kappa 1000 --optimize-momentum --json",
)


def register(sub) -> None:
    p = add_command(
        sub,
        "halflife",
        usage="RULE --kappa K [options] [rule flags] [--json]",
        help="optimal half-life for condition number κ (Kosson Sec. 3.4)",
        description="Fastest convergence of RULE on a quadratic whose curvatures fill "
        "[lam, κ·lam]: the rate is the worst spectral radius over the spectrum, the half-life "
        "−ln2/ln(rate); minimised over lr (and the momentum or LWP horizon on request), "
        "refined to 1e-6 relative and evaluated in mpmath at the optimum.",
        examples=EXAMPLES,
    )
    add_rule_arguments(p)
    p.add_argument(
        "--kappa", type=float_arg("--kappa"), required=True, help="condition number κ ≥ 1"
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--optimize-momentum", action="store_true", help="also minimise over the momentum m"
    )
    which.add_argument(
        "--optimize-horizon", action="store_true", help="also minimise over the LWP horizon T"
    )
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args):
    from stability.api.halflife import halflife
    from stability.cli.args import rule_values

    optimize = "momentum" if args.optimize_momentum else None
    optimize = "horizon" if args.optimize_horizon else optimize
    return halflife(args.rule, kappa=args.kappa, optimize=optimize, **rule_values(args))


def report(result) -> str:
    from stability.cli.report import lines

    keys = ["rule", "kappa", "lam_min", "half_life", "rate", "lr"]
    keys += [k for k in ("momentum", "horizon") if getattr(result, k) is not None]
    out = lines(result, keys)
    out.append(f"optimized over {', '.join(result.optimized)}")
    return "\n".join(out)
