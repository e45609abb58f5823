"""``st.radius``: spectral radius, half-life and dominant root at one step size, optionally
with an exact verdict (``stability radius``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from stability.api.commands import command
from stability.api.resolve import resolve, staged
from stability.options import check_options
from stability.result import Result, output


@dataclass(frozen=True)
class Radius(Result):
    """ρ = the largest root modulus of the rule's dynamics at ``lr`` (per step), refined in
    mpmath; with ``certify`` the exact Schur-Cohn verdict replaces the float one in ``stable``."""

    rule: str = output("the rule's registry name")
    lr: float = output("step size")
    spectral_radius: float = output("largest root modulus ρ (float64 of a 40-digit value)")
    half_life: float | None = output("−ln 2 / ln ρ; null when ρ ≥ 1", "steps")
    stable: bool = output("ρ < 1; with certify, the exact verdict")
    dominant_root: complex = output("the root of modulus ρ (upper half-plane)")
    method: str = output("how ρ was computed")
    certified: bool | None = output(
        "the exact verdict was possible (null: not asked; false: see reason)"
    )
    certificate: str | None = output("the exact test and the polynomial degree")
    lr_exact: str | None = output("the step size as the exact fraction that was certified")
    reason: str | None = output("why no exact verdict was possible")


@dataclass(frozen=True, kw_only=True)
class PipelineRadius(Radius):
    """`Radius` of a pipeline at one common step size: the largest of the stages' radii (the
    critical stage's), every stage reported (`stability.analysis.stages`)."""

    pipeline: dict[str, Any] = output("the pipeline: schedule, per-stage delays, utilization")
    critical_stage: int = output("the stage (1 = first) whose radius is the pipeline's")
    stages: tuple[dict[str, Any], ...] = output(
        "per stage: stage, tau_fwd, tau_bkwd, spectral_radius, half_life"
    )


def radius(
    rule: Any,
    *,
    lr: Any,
    certify: bool = False,
    pipeline: Any = None,
    progress: Callable[[int, int], None] | None = None,
    **params: Any,
) -> Radius:
    """ρ, half-life −ln2/ln ρ (Kosson Sec. 3.4) and the dominant root of ``rule`` at ``lr``.

    The root is that of the characteristic polynomial (PipeMare eq. 13 and its relatives,
    derived from the rule's step), refined in mpmath (`stability.spectrum.dominant_root_at`);
    periodic rules give the per-step Floquet multiplier.  ``certify`` decides stability
    exactly (Schur-Cohn in rational arithmetic, `stability.analysis.certify`, up to degree
    `stability.limits.CERTIFY_MAX_DEGREE`): decimal text (a string, or a CLI float that kept its
    text) and fractions are read exactly; ``progress(done, total)`` follows its reduction.
    ``pipeline`` (a `stability.pipeline.Pipeline`): every stage's rule at its own delays at
    the same ``lr``; ρ is the largest stage radius (`stability.analysis.stages`).

    >>> import stability as st
    >>> st.radius("sgd", tau=0, lr=0.25, lam=2).spectral_radius
    0.5
    """
    from stability.spectrum import dominant_root_at, half_life

    exact_lr = lr
    if isinstance(lr, (str, Fraction)):
        try:
            lr = float(Fraction(lr.strip() if isinstance(lr, str) else lr))
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"lr must be a real number, got {exact_lr!r}") from None
    check_options(command("radius").options, {"lr": lr, "certify": certify})
    if pipeline is not None:
        if certify:
            raise ValueError(
                "certify decides one rule exactly: give a uniform delay, not a pipeline"
            )
        return _pipeline_radius(rule, pipeline, float(lr), params)
    r = resolve(rule, **params)
    _check_representable(float(lr), params)
    dom = dominant_root_at(r.rule, r.model, lr)
    stable = dom.radius < 1
    certified = certificate = lr_text = reason = None
    if certify:
        from stability.analysis.certify import NotCertifiable
        from stability.analysis.certify import certify as exact_verdict

        if r.spec is None:
            raise ValueError("certify needs a registered rule name (it rebuilds it exactly)")
        try:
            cert = exact_verdict(r.spec, exact_lr, progress, **params)
        except NotCertifiable as err:
            certified, reason = False, str(err)
        else:
            certified, stable, lr_text = True, cert.stable, str(cert.lr)
            certificate = f"{cert.method}, degree {cert.degree}"
    return Radius(
        r.name,
        float(lr),
        float(dom.radius),
        half_life(dom.radius),
        bool(stable),
        complex(dom.root),
        dom.method,
        certified,
        certificate,
        lr_text,
        reason,
    )


def _check_representable(lr: float, params: dict[str, Any]) -> None:
    """Refuse, naming ``lr``, an lr·s above `stability.limits.MAX_STEP_CURVATURE`, s the largest
    coefficient of the gradient oracle (λ + Δ, Δ − Φ, Φ: PipeMare App. D.1): the polynomial's
    coefficients would overflow float64 and the roots say nothing."""
    from stability.limits import MAX_STEP_CURVATURE

    values = {k: v for k, v in params.items() if v is not None}  # None: the default, as elsewhere
    lam, delta, phi = (float(values.get(k, d)) for k, d in (("lam", 1.0), ("delta", 0), ("phi", 0)))
    reach = abs(lr) * max(abs(lam + delta), abs(delta - phi), abs(phi))
    if not reach <= MAX_STEP_CURVATURE:
        raise ValueError(
            f"lr: lr·max(|λ + Δ|, |Δ − Φ|, |Φ|) = {reach:.3g} would overflow float64; at most "
            f"{MAX_STEP_CURVATURE:.0e}"
        )


def _pipeline_radius(rule: Any, pipe: Any, lr: float, params: dict[str, Any]) -> PipelineRadius:
    from stability.analysis.stages import stage_radii, stage_table
    from stability.spectrum import half_life

    name, values = staged(rule, pipe, params)
    _check_representable(lr, params)
    roots = stage_radii(name, values, pipe, lr)
    critical = max(range(len(roots)), key=lambda i: (roots[i].radius, -i))
    dom = roots[critical]
    rows = [{"spectral_radius": float(d.radius), "half_life": half_life(d.radius)} for d in roots]
    return PipelineRadius(
        name,
        lr,
        float(dom.radius),
        half_life(dom.radius),
        bool(dom.radius < 1),
        complex(dom.root),
        dom.method,
        None,
        None,
        None,
        None,
        pipeline=pipe.describe(),
        critical_stage=critical + 1,
        stages=stage_table(pipe, rows),
    )


__all__ = ["PipelineRadius", "Radius", "radius"]
