"""``st.halflife``: the optimal half-life over a spectrum with condition number κ
(``stability halflife``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from stability.api.commands import command
from stability.api.resolve import given, rule_name, staged
from stability.checks import finite_or_none
from stability.options import check_options
from stability.result import Result, output


@dataclass(frozen=True)
class HalfLife(Result):
    """The fastest convergence of a rule on a quadratic whose curvatures fill [λ, κλ]."""

    rule: str = output("the rule's registry name")
    kappa: float = output("condition number κ")
    lam_min: float = output("smallest curvature λ of the spectrum (the lam parameter)")
    half_life: float | None = output(
        "optimal half-life −ln2/ln(rate); null when no lr converges", "steps"
    )
    rate: float = output("worst spectral radius over the spectrum at the optimum")
    lr: float | None = output("the step size that attains it")
    momentum: float | None = output("the momentum used (optimal with optimize='momentum')")
    horizon: float | None = output("the LWP horizon T used (optimal with optimize='horizon')")
    optimized: tuple[str, ...] = output("the parameters minimised over")


@dataclass(frozen=True, kw_only=True)
class PipelineHalfLife(HalfLife):
    """`HalfLife` of a pipeline with one common step size: the worst stage rate minimised over
    lr (`stability.analysis.stages.stage_half_life`), every stage reported."""

    pipeline: dict[str, Any] = output("the pipeline: schedule, per-stage delays, utilization")
    critical_stage: int | None = output("the stage (1 = first) whose rate is the pipeline's")
    stages: tuple[dict[str, Any], ...] = output(
        "per stage: stage, tau_fwd, tau_bkwd, rate at lr, own_half_life and own_lr (the "
        "stage's optimum alone)"
    )


def halflife(
    rule: Any,
    *,
    kappa: float,
    optimize: str | None = None,
    pipeline: Any = None,
    **params: Any,
) -> HalfLife:
    """min over lr of −ln 2 / ln max_{λ ∈ [lam, κ·lam]} ρ(lr, λ) (Kosson Sec. 3.4, Fig. 7-9).

    ``optimize``: also minimise over ``"momentum"`` or ``"horizon"`` (LWP's T).  Refined to
    1e-6 relative, the optimum evaluated in mpmath (`stability.analysis.conditioning`).
    ``pipeline`` (a `stability.pipeline.Pipeline`): every stage's rule at its own delays, one
    common step size; the half-life is that of the worst stage rate, minimised over lr (never
    shorter than the worst stage's own optimum; `stability.analysis.stages`).

    >>> import stability as st
    >>> round(st.halflife("momentum", tau=0, kappa=100, momentum=0).lr, 6)  # 2/(λ + κλ)
    0.019802
    """
    from stability.analysis.boundary import UnresolvedCrossing
    from stability.analysis.conditioning import optimal_half_life
    from stability.rules.registry import get_spec

    check_options(command("halflife").options, {"kappa": kappa, "optimize": optimize})
    if pipeline is not None:
        if optimize is not None:
            raise ValueError(
                "schedule: --optimize-momentum / --optimize-horizon apply to one rule: give a "
                "uniform delay, not a pipeline"
            )
        return _pipeline_half_life(rule, pipeline, float(kappa), params)

    spec = get_spec(rule_name(rule))
    values = {k: v for k, v in params.items() if v is not None}
    try:
        result = optimal_half_life(spec.name, kappa, optimize=optimize, precise=True, **values)
    except UnresolvedCrossing as err:  # a valid input the locus cannot answer: say where
        searched = f"{optimize} over its search range" if optimize else "the given values"
        raise err.refusal(f"{spec.name} at {searched} ({given(values)})") from None
    found = {k: float(v) for k, v in result.values.items()}
    resolved = spec.resolve(**{**values, **found})
    rule_value, _ = spec.build(**{**values, **found})
    shown = {
        name: float(getattr(rule_value, name)) if name in spec.param_names else None
        for name in ("momentum", "horizon")
    }
    return _note_discrepancy(
        values,
        HalfLife(
            spec.name,
            float(kappa),
            float(resolved.get("lam", 1.0)),
            finite_or_none(result.half_life),
            float(result.rate),
            finite_or_none(result.lr),
            shown["momentum"],
            shown["horizon"],
            ("lr", *found),
        ),
    )


def _pipeline_half_life(rule: Any, pipe: Any, kappa: float, params: dict[str, Any]):
    from stability.analysis.stages import stage_half_life, stage_model, stage_table

    name, values = staged(rule, pipe, params)
    found = stage_half_life(name, values, pipe, kappa)
    rows = [
        {"rate": rate, "own_half_life": own[0], "own_lr": own[1]}
        for rate, own in zip(found.stage_rates, found.stage_optima, strict=True)
    ]
    critical = max(range(len(rows)), key=lambda i: (found.stage_rates[i], -i))
    shown = {k: values.get(k) for k in ("momentum", "horizon")}
    return PipelineHalfLife(
        name,
        kappa,
        float(stage_model(name, values).lam),
        found.half_life,
        float(found.rate),
        found.lr,
        None if shown["momentum"] is None else float(shown["momentum"]),
        None if shown["horizon"] is None else float(shown["horizon"]),
        ("lr",),
        pipeline=pipe.describe(),
        critical_stage=critical + 1,
        stages=stage_table(pipe, rows),
    )


def _note_discrepancy(values: dict[str, Any], result: HalfLife) -> HalfLife:
    """A Δ or Φ ≠ 0 that was accepted does not enter the rule's dynamics (the polynomial
    depends on lr·λ only: the backward pass reads the forward weights, or T2 corrects the
    discrepancy exactly); say so instead of accepting it silently."""
    given = [f"{k} = {values[k]:g}" for k in ("delta", "phi") if values.get(k)]
    if not given:
        return result
    note = (
        f"{', '.join(given)} does not enter {result.rule}'s dynamics with these delays (its "
        "characteristic polynomial is the same as at Δ = Φ = 0): the half-life is Δ = 0's"
    )
    return dataclasses.replace(result, warnings=(*result.warnings, note))


__all__ = ["HalfLife", "PipelineHalfLife", "halflife"]
