"""``st.max_lr``: the exact maximal stable step size of a rule (``stability max-lr``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from stability.analysis.boundary import MaxLr
from stability.analysis.boundary import max_lr as _max_lr
from stability.api.commands import command
from stability.api.resolve import resolve, staged
from stability.options import check_options
from stability.result import output


@dataclass(frozen=True, kw_only=True)
class PipelineMaxLr(MaxLr):
    """`MaxLr` of a pipeline at one common step size: ``max_lr`` is the critical stage's
    (the smallest of the stages'), every stage reported (`stability.analysis.stages`)."""

    pipeline: dict[str, Any] = output("the pipeline: schedule, per-stage delays, utilization")
    critical_stage: int = output("the stage (1 = first) whose max lr is the pipeline's")
    stages: tuple[dict[str, Any], ...] = output(
        "per stage: stage, tau_fwd, tau_bkwd, max_lr, crossing_angle, method"
    )


def max_lr(rule: Any, *, method: str = "auto", pipeline: Any = None, **params: Any) -> MaxLr:
    """Exact max stable lr of ``rule`` (a name or rule value) with ``params`` (the rule flags):
    the first lr > 0 at which a root reaches the unit circle, so every lr below it is stable.
    The stable set need not be an interval: some rules are stable again above it (dc at τ = 5,
    quality 0.8, momentum 0.9: max lr 0.236, stable again on (0.288, 1.454)); `radius` and
    `heatmap` show the whole set.

    ``method``: ``"auto"`` (boundary locus when the characteristic polynomial is affine in
    lr, PipeMare App. B.1's D-decomposition; else certified bisection), ``"locus"`` or
    ``"bisection"``; periodic rules are bisected on their Floquet monodromy.  See
    `stability.analysis.boundary.max_lr` for the method and its accuracy.  ``pipeline`` (a
    `stability.pipeline.Pipeline`): every stage's rule at its own delays on the same curvature;
    the pipeline's max lr is the critical stage's (`stability.analysis.stages`).

    >>> import stability as st
    >>> round(st.max_lr("sgd", tau=10).max_lr, 12)  # PipeMare Lemma 1: 2·sin(π/(4τ + 2))
    0.149460187173
    >>> pipe = st.Pipeline.from_options("pipemare", stages=8)  # stage delays 15, 13, …, 1
    >>> st.max_lr("sgd", pipeline=pipe).max_lr == st.max_lr("sgd", tau=15).max_lr
    True
    """
    method = check_options(command("max-lr").options, {"method": method})["method"]
    if pipeline is not None:
        return _pipeline_max_lr(rule, pipeline, method, params)
    r = resolve(rule, **params)
    found = _max_lr(r.rule, r.model, method=method, where=r.described)
    return dataclasses.replace(found, rule=r.name)


def _pipeline_max_lr(rule: Any, pipe: Any, method: str, params: dict[str, Any]) -> PipelineMaxLr:
    from stability.analysis.stages import stage_max_lrs, stage_table

    name, values = staged(rule, pipe, params)
    found, critical = stage_max_lrs(name, values, pipe, method=method)
    rows = [
        {"max_lr": r.max_lr, "crossing_angle": r.crossing_angle, "method": r.method} for r in found
    ]
    worst = found[critical]
    return PipelineMaxLr(
        max_lr=worst.max_lr,
        crossing_angle=worst.crossing_angle,
        method=worst.method,
        rule=name,
        pipeline=pipe.describe(),
        critical_stage=critical + 1,
        stages=stage_table(pipe, rows),
    )


__all__ = ["MaxLr", "PipelineMaxLr", "max_lr"]
