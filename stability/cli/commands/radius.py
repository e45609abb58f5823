"""``stability radius RULE --lr X``: spectral radius, half-life, stability, dominant root.

``--certify`` adds an exact verdict (`stability.analysis.certify`): the decimal texts of ``--lr``
and of the real rule flags are read as exact fractions (`stability.cli.args.ExactFloat`), ``stable``
becomes the Schur-Cohn verdict and ``certified`` says whether one was possible (false, with a
``reason``, for irrational parameters such as γ = D^{1/(τf−τb)}).
"""

from __future__ import annotations

from stability.cli.args import add_output_arguments, add_rule_arguments, build_from_args, float_arg


def register(sub) -> None:
    p = sub.add_parser(
        "radius",
        help="spectral radius, half-life and dominant root at one step size",
        description="Spectral radius ρ of RULE's dynamics at step size lr, refined in mpmath "
        "(40 digits); half-life −ln2/ln ρ (null when ρ ≥ 1).",
    )
    add_rule_arguments(p)
    p.add_argument("--lr", type=float_arg("lr"), required=True, help="step size lr > 0")
    p.add_argument(
        "--certify",
        action="store_true",
        help="decide stability exactly (Schur-Cohn in rational arithmetic; decimals read exactly)",
    )
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.checks import check_real
    from stability.spectrum import dominant_root_at, half_life

    spec, rule, model = build_from_args(args)
    lr = check_real("lr", args.lr, low=0.0, low_open=True)
    dom = dominant_root_at(rule, model, lr)
    out = {
        "rule": spec.name,
        "spectral_radius": dom.radius,
        "half_life": half_life(dom.radius),
        "stable": dom.radius < 1,
        "dominant_root": [dom.root.real, dom.root.imag],
        "method": dom.method,
    }
    if getattr(args, "certify", False):
        out.update(_certificate(spec, args))
    return out


def _certificate(spec, args) -> dict:
    """``certified``, the exact ``stable`` verdict, ``lr_exact`` and the method (or a reason)."""
    from stability.analysis.certify import NotCertifiable, certify
    from stability.cli.args import rule_values
    from stability.cli.progress import Progress

    bar = Progress(1, "Schur-Cohn")  # shown on a terminal (or STABILITY_PROGRESS=1)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done)

    try:
        cert = certify(spec, args.lr, progress, **rule_values(args))
    except NotCertifiable as err:
        return {"certified": False, "reason": str(err)}
    finally:
        bar.close()
    return {
        "certified": True,
        "stable": cert.stable,
        "lr_exact": str(cert.lr),
        "certificate": f"{cert.method}, degree {cert.degree}",
    }
