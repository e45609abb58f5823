"""``stability halflife RULE --kappa K``: optimal half-life over a spectrum (Kosson Sec. 3.4)."""

from __future__ import annotations

from stability.cli.args import add_output_arguments, add_rule_arguments, float_arg, rule_values


def register(sub) -> None:
    p = sub.add_parser(
        "halflife",
        help="optimal half-life for condition number κ (Kosson Sec. 3.4)",
        description="Fastest convergence of RULE on a quadratic whose curvatures fill "
        "[lam, κ·lam]: the rate is the worst spectral radius over the spectrum, the half-life "
        "−ln2/ln(rate); minimised over lr (and the momentum or LWP horizon on request), "
        "refined to 1e-6 relative and evaluated in mpmath at the optimum.",
    )
    add_rule_arguments(p)
    p.add_argument("--kappa", type=float_arg("kappa"), required=True, help="condition number κ ≥ 1")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--optimize-momentum", action="store_true", help="also minimise over the momentum m"
    )
    which.add_argument(
        "--optimize-horizon", action="store_true", help="also minimise over the LWP horizon T"
    )
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.analysis.conditioning import optimal_half_life
    from stability.rules.registry import get_spec

    spec = get_spec(args.rule)
    values = rule_values(args)
    optimize = "momentum" if args.optimize_momentum else None
    optimize = "horizon" if args.optimize_horizon else optimize
    result = optimal_half_life(spec.name, args.kappa, optimize=optimize, precise=True, **values)
    found = {k: float(v) for k, v in result.values.items()}
    rule, _ = spec.build(**{**values, **found})
    out = {
        "rule": spec.name,
        "kappa": args.kappa,
        "lam_min": float(spec.resolve(**values).get("lam", 1.0)),
        "half_life": _number(result.half_life),
        "rate": float(result.rate),
        "lr": _number(result.lr),
    }
    for name in ("momentum", "horizon"):
        if name in spec.param_names:
            out[name] = float(getattr(rule, name))
    out["optimized"] = ["lr", *found]
    return out


def _number(v) -> float | None:
    v = float(v)
    return v if v == v and v != float("inf") else None
