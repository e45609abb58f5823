"""``stability heatmap RULE --x P:lo:hi:n[:log] --y ...``: spectral radius over a grid."""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "heatmap"
EXAMPLES = (
    "heatmap sgd --x lr:0.01:1:32:log --y tau:0:8:9 --csv sgd.csv",
    "heatmap momentum --tau 1 --x lr:1e-3:10:64:log --y momentum:0:0.999:64 --out momentum.png",
)


def register(sub) -> None:
    register_declared(
        sub,
        "heatmap",
        usage="RULE --x P:lo:hi:n[:log] --y P:lo:hi:n[:log] [options] [rule flags] [--json]",
        help="spectral radius / half-life / stability over a grid of two parameters",
        description="Evaluate RULE on the grid --y × --x (each P:lo:hi:n[:log]; P is lr, "
        "lam*lr (ηλ with λ = 1) or a rule parameter such as momentum, tau, delta, decay, "
        "horizon) and write a PNG (--out, unstable region black, exact max-lr curve overlaid "
        "when one axis is the step size) and/or a CSV (--csv, one row per grid point); --json "
        "prints the whole grid.",
        examples=EXAMPLES,
        report=report,
        progress="heatmap",
    )


def report(result) -> str:
    from stability.cli.report import number

    lines = [
        f"{result.rule}: {result.y.n} × {result.x.n} grid ({result.y.name} × {result.x.name}) "
        f"in {result.seconds:.2f} s",
        f"stable: {100 * result.stable_fraction:.1f} % of the points; ρ from "
        f"{number(result.radius_min, 6)} to {number(result.radius_max, 6)}; "
        f"{result.refined_points} points refined in mpmath",
    ]
    if result.best is None:
        lines.append("best point: none (no stable point on the grid)")
    else:
        where = ", ".join(f"{k} {number(v, 6)}" for k, v in list(result.best.items())[:2])
        lines.append(
            f"best point (smallest ρ): {where}: ρ {number(result.best['radius'], 6)}, "
            f"half-life {number(result.best['half_life'], 6)} steps"
        )
    for path in (result.png, result.csv):
        if path:
            lines.append(f"wrote {path}")
    if not (result.png or result.csv):
        lines.append("no file written (--out F.png, --csv F.csv; --json prints the grid)")
    return "\n".join(lines)
