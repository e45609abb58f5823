"""``stability radius RULE --lr X``: spectral radius, half-life, stability, dominant root.

``--certify`` adds an exact verdict (`stability.analysis.certify`): the decimal texts of ``--lr``
and of the real rule flags are read as exact fractions (`stability.cli.args.ExactFloat`), ``stable``
becomes the Schur-Cohn verdict and ``certified`` says whether one was possible (false, with a
``reason``, for irrational parameters such as γ = D^{1/(τf−τb)}).
"""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "radius"
EXAMPLES = (
    "radius sgd --tau 4 --lr 0.2",
    "radius sgd --tau 3 --lr 0.4450418679126288000000123 --certify",
)
UNIT_CIRCLE = 1e-12
"""|ρ − 1| below which float64 cannot tell the side of the unit circle (the exact test can)."""


def register(sub) -> None:
    register_declared(
        sub,
        "radius",
        usage="RULE --lr X [--certify] [--schedule S --stages P | --stage-delays T1,...] "
        "[rule flags] [--json]",
        help="spectral radius, half-life and dominant root at one step size",
        description="Spectral radius ρ of RULE's dynamics at step size lr, refined in mpmath "
        "(40 digits); half-life −ln2/ln ρ (none when ρ ≥ 1).  --certify decides stability "
        "exactly: Schur-Cohn in rational arithmetic, the decimal texts read exactly.  With a "
        "pipeline (--schedule, --stage-delays) ρ is the largest of the stages' radii.",
        examples=EXAMPLES,
        report=report,
        progress="Schur-Cohn",
    )


def report(result) -> str:
    """ρ to all its float64 digits; with a certificate, the exact verdict (which also decides
    when ρ is on the unit circle to float precision)."""
    from stability.cli.report import aligned, number, rows

    shown = dict(rows(result, ["rule", "half_life", "dominant_root", "method"]))
    rho = repr(result.spectral_radius)
    if abs(result.spectral_radius - 1) <= UNIT_CIRCLE:
        rho += " (on the unit circle to float64 precision"
        rho += ": the exact test decides)" if result.certified else "; --certify decides)"
    if result.certified:
        stable = f"{number(result.stable)}: certified {'' if result.stable else 'not '}stable"
    else:
        stable = f"{number(result.stable)} (ρ {'<' if result.stable else '≥'} 1 in floating point)"
    half_life = shown["half_life"]
    if result.stable and result.half_life is None:
        half_life = "longer than float64 resolves (ρ rounds to 1)"
    pairs = [
        ("rule", shown["rule"]),
        ("lr", repr(result.lr)),
        ("spectral_radius", rho),
        ("stable", stable),
        ("half_life", half_life),
        ("dominant_root", shown["dominant_root"]),
        ("method", shown["method"]),
    ]
    if result.certified:
        pairs += [("certificate", result.certificate), ("lr_exact", result.lr_exact)]
    elif result.certified is False:
        pairs.append(("certified", f"no: {result.reason}"))
    from stability.cli.declared import stage_lines

    return "\n".join(aligned(pairs) + stage_lines(result, ["spectral_radius", "half_life"]))
