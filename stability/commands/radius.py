"""``stability radius RULE --lr X``: spectral radius, half-life, stability, dominant root."""

from __future__ import annotations

from stability.cli import _float_arg, add_output_arguments, add_rule_arguments, build_from_args


def register(sub) -> None:
    p = sub.add_parser(
        "radius",
        help="spectral radius, half-life and dominant root at one step size",
        description="Spectral radius ρ of RULE's dynamics at step size lr, refined in mpmath "
        "(40 digits); half-life −ln2/ln ρ (null when ρ ≥ 1).",
    )
    add_rule_arguments(p)
    p.add_argument("--lr", type=_float_arg("lr"), required=True, help="step size lr > 0")
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.linear import dominant_root_at
    from stability.spectrum import half_life
    from stability.validation import check_real

    spec, rule, model = build_from_args(args)
    lr = check_real("lr", args.lr, low=0.0, low_open=True)
    dom = dominant_root_at(rule, model, lr)
    return {
        "rule": spec.name,
        "spectral_radius": dom.radius,
        "half_life": half_life(dom.radius),
        "stable": dom.radius < 1,
        "dominant_root": [dom.root.real, dom.root.imag],
        "method": dom.method,
    }
