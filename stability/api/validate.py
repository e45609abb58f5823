"""``st.validate``: theory vs trainer — predicted and measured max stable lr and rates
(``stability validate``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stability.api.commands import command
from stability.api.resolve import check_params, rule_name
from stability.api.setup import build, problem_options, schedule_sets, trainer_inputs
from stability.checks import one_or_many
from stability.limits import TRAIN_MAX_STEPS
from stability.options import check_options
from stability.result import Result, output


@dataclass(frozen=True)
class Validation(Result):
    """Predicted vs measured max stable lr (and rates), one row per rule × delay (or per rule
    on a pipeline schedule)."""

    problem: dict[str, Any] = output("the problem trained (model, samples, parameters, ...)")
    data: dict[str, Any] = output("the data set and its preprocessing")
    hessian_eigenvalues: tuple[float, ...] = output("eigenvalues of the problem's Hessian at w*")
    protocol: dict[str, Any] = output("the fixed measurement protocol (steps, seeds, tolerances)")
    rows: tuple[dict[str, Any], ...] = output(
        "uniform delays: rule, tau, predicted_max_lr, measured_max_lr, ratio, rates at "
        "rate_lr_fractions of the predicted max; a schedule: rule, schedule, "
        "predicted_max_lr_worst_stage / _min_stage / _per_stage / _coupled (linreg), "
        "measured_max_lr, ratio_to_worst_stage / _min_stage / _coupled; prediction_note and "
        "measurement_note where a number has a caveat"
    )
    assumptions: tuple[str, ...] = output("assumptions behind the predictions")
    pipeline: dict[str, Any] | None = output("the schedule's per-stage delays (null: uniform)")
    seconds: float = output("wall time", "s")


def validate(
    rules: Sequence[Any] | str,
    *,
    taus: Sequence[int] = (0, 1, 4, 16),
    batch: int | None = None,
    steps: int | None = None,
    rate_steps: int | None = None,
    rate_doublings: int | None = None,
    seeds: Sequence[int] = (0, 1, 2),
    divergence: float = 1e6,
    rel_tol: float | None = None,
    fit_seed: int = 0,
    pipeline: Any = None,
    progress: Callable[[int, int], None] | None = None,
    **keywords: Any,
) -> Validation:
    """Does the trainer become unstable where the theory says?  For each rule and uniform delay
    τ (the rule's ``tau``, or ``tau_fwd`` for the discrepancy family), the predicted max lr
    on the problem's Hessian modes (PipeMare eq. 5 per mode, `stability.analysis.modes`)
    against the trainer's, found by bisection, and the predicted vs measured rates
    (`stability.agreement.comparison`).  A ``pipeline`` (a `stability.pipeline.Pipeline`, or
    its keywords ``schedule``/``stage_delays``/``stages``/``microbatches``, PipeMare Table 1)
    replaces the uniform delays by per-stage ones.  The problem's keywords (``problem``,
    ``data``, ``standardize``, …) are those of `stability.api.commands.PROBLEM_OPTIONS`; every
    other keyword is a rule parameter and applies to the rules that take it (one that none
    takes is refused).
    ``progress(done, total)`` counts rows.

    >>> import stability as st
    >>> v = st.validate(["sgd"], taus=[2], steps=2000, rate_steps=2000, rate_doublings=0)
    >>> row = v.rows[0]
    >>> abs(row["ratio"] - 1) < 0.01
    True
    """
    from stability.agreement.comparison import (
        Protocol,
        check_mlp_work,
        validate_pipeline,
        validate_uniform,
    )
    from stability.rules.registry import get_spec

    names = _names(rules)
    specs = [get_spec(name) for name in names]
    problem_kw, pipe, values = trainer_inputs(keywords, pipeline, specs)
    for key in values:
        if not any(key in s.param_names for s in specs):
            raise ValueError(f"no rule of {', '.join(names)} has a parameter {key!r}")
    for spec in specs:
        if pipe is None and spec.delay_parameter is not None:
            set_by = {spec.delay_parameter: "taus"}
        else:
            set_by = schedule_sets(spec, pipe)
        taken = {k: v for k, v in values.items() if k in spec.param_names}
        check_params([spec.name], taken, set_by=set_by)
    given = dict(taus=taus, batch=batch, steps=steps, rate_steps=rate_steps, seeds=seeds)
    given |= dict(rate_doublings=rate_doublings, divergence=divergence, rel_tol=rel_tol)
    o = check_options(command("validate").options, {**given, "fit_seed": fit_seed})
    taus, batch = o["taus"], o["batch"]
    options = problem_options(**problem_kw)
    default = Protocol(**options.kind.protocol)  # the kind's defaults where none is given
    chosen = {k: o[k] for k in ("steps", "rate_steps", "rate_doublings", "rel_tol")}
    protocol = Protocol(
        **{k: getattr(default, k) if v is None else v for k, v in chosen.items()},
        divergence=o["divergence"],
        seeds=o["seeds"],
    )
    longest = protocol.rate_steps * 2**protocol.rate_doublings
    if longest > TRAIN_MAX_STEPS:  # the last doubled rate run is a run too
        raise ValueError(
            f"rate_steps: the longest rate run ({protocol.rate_steps} steps doubled "
            f"{protocol.rate_doublings} times) has {longest} steps, at most {TRAIN_MAX_STEPS} "
            "per run (docs/limits.md)"
        )
    start = time.monotonic()
    total = len(names) * (len(taus) if pipe is None else 1)
    model, dataset, setup = build(
        options, fit_seed=fit_seed, before_fit=lambda m: check_mlp_work(m, total, protocol, batch)
    )
    counted = None if progress is None else (lambda done: progress(done, total))
    if pipe is None:
        rows = validate_uniform(setup, names, values, taus, protocol, batch=batch, progress=counted)
    else:
        rows = validate_pipeline(
            setup, names, values, pipe, protocol, batch=batch, progress=counted
        )
    return Validation(
        problem=model.describe(),
        data=dataset.describe(),
        hessian_eigenvalues=tuple(float(x) for x in setup.hessian_eigenvalues),
        protocol=protocol.describe(batch),
        rows=tuple(rows),
        assumptions=tuple(setup.assumptions),
        pipeline=None if pipe is None else pipe.describe(model.stage_sizes(pipe.stages)),
        seconds=time.monotonic() - start,
    )


def _names(rules: Sequence[Any] | str) -> tuple[str, ...]:
    if isinstance(rules, str):
        rules = [t.strip() for t in rules.split(",") if t.strip()]
    names = tuple(rule_name(r) for r in one_or_many(rules))
    if not names:
        raise ValueError("rules must name at least one rule")
    return names


__all__ = ["Validation", "validate"]
