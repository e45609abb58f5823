"""``st.t1_audit``: PipeMare's T1 step sizes against each stage's max stable lr
(``stability t1-audit``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stability.analysis.rescheduling import Audit, UnsafeWindow
from stability.api.commands import command
from stability.api.resolve import rule_name
from stability.checks import check_integer, one_or_many
from stability.options import check_options


def t1_audit(
    rule: Any,
    *,
    lr_schedule: str,
    anneal_steps: int,
    steps: int,
    taus: Sequence[int] | None = None,
    pipeline: Any = None,
    **params: Any,
) -> Audit:
    """Is α_{k,i} = α_base,k / τ_i^{p_k} (PipeMare eq. 4, p_k = 1 − min(k/K, 1)) below
    max-lr(rule, λ, τ_i) at every step k < ``steps`` and stage i?

    ``lr_schedule``: ``constant:LR``, ``step:LR:FACTOR:B1,B2,...``, ``warmup:LR:W`` or
    ``cosine:LR:T``; the stage delays come from ``taus`` or from ``pipeline`` =
    ``"NAME:P[:N]"`` (a schedule of `stability.pipeline` with P stages, N microbatches) or a
    `stability.pipeline.Pipeline`;
    ``lam`` is λ_max of the problem (`stability.analysis.rescheduling`).

    >>> import stability as st
    >>> st.t1_audit("sgd", lr_schedule="constant:0.01", taus=[1, 4], anneal_steps=10,
    ...             steps=20).safe
    True
    """
    from stability.analysis.rescheduling import audit, parse_schedule
    from stability.pipeline import Pipeline
    from stability.rules.registry import delay_parameter

    given = {"lr_schedule": lr_schedule, "anneal_steps": anneal_steps, "steps": steps}
    if isinstance(pipeline, Pipeline):  # given whole: its forward delays
        if taus is not None:
            raise ValueError("pipeline: give the stage delays with taus or with pipeline")
        taus, pipeline = pipeline.tau_fwd.tolist(), None
    o = check_options(command("t1-audit").options, {**given, "taus": taus, "pipeline": pipeline})
    name = rule_name(rule)
    key = delay_parameter(name)
    values = {k: v for k, v in params.items() if v is not None}
    if key in values:
        raise ValueError(f"{key} is set per stage by the audit: leave it out")
    stage_taus = _stage_delays(taus, pipeline)
    return audit(
        name,
        values,
        parse_schedule(lr_schedule),
        stage_taus,
        o["anneal_steps"],
        o["steps"],
    )


def _stage_delays(taus: Sequence[int] | None, pipeline: str | None) -> list[int]:
    if (taus is None) == (pipeline is None):
        raise ValueError("pipeline: give the stage delays with taus or with pipeline (one of them)")
    if taus is not None:
        return [check_integer("taus", t) for t in one_or_many(taus)]
    from stability.pipeline import pipeline as schedule

    parts = pipeline.split(":")
    try:
        sizes = [int(x) for x in parts[1:]]
    except ValueError:
        sizes = []
    if not 1 <= len(sizes) <= 2:
        raise ValueError(f"pipeline is written NAME:P[:N], got {pipeline!r}")
    try:
        return schedule(parts[0], *sizes).tau_fwd.tolist()
    except ValueError as err:  # its words name the schedule's own parameters (stages, …)
        raise ValueError(f"pipeline {pipeline!r}: {err}") from None


__all__ = ["Audit", "UnsafeWindow", "t1_audit"]
