"""``stability max-lr RULE``: the exact maximal stable step size and its crossing angle."""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "max_lr"
EXAMPLES = (
    "max-lr sgd --tau 10",
    "max-lr momentum --momentum 0.9 --schedule pipemare --stages 8 --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "max-lr",
        usage="RULE [--method M] [--schedule S --stages P | --stage-delays T1,...] [rule flags] "
        "[--json]",
        help="exact maximal stable step size (boundary locus or certified bisection)",
        description="First lr > 0 at which a root of RULE's characteristic polynomial reaches "
        "the unit circle (none: stable for every lr), with the angle θ of that root e^{iθ}: "
        "every lr below it is stable.  Some rules are stable again above it (dc, τ = 5, "
        "quality 0.8, momentum 0.9: max lr 0.236, stable again on (0.288, 1.454)); radius and "
        "heatmap show the whole set.  "
        "With a pipeline (--schedule, --stage-delays) every stage's rule at its own delays on "
        "the same curvature, one common lr: the max lr is the critical stage's.",
        examples=EXAMPLES,
        report=report,
    )


def report(result) -> str:
    from stability.cli.declared import stage_lines
    from stability.cli.report import lines

    out = lines(result, ["rule", "max_lr", "crossing_angle", "method"])
    if result.max_lr is None:
        out[1] = out[1].replace("—", "none: stable for every lr > 0")
    return "\n".join(out + stage_lines(result, ["max_lr"]))
