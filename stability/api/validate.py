"""``st.validate``: theory vs trainer — predicted and measured max stable lr and rates
(``stability validate``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stability.api.resolve import check_params, rule_name
from stability.api.setup import build, problem_options, schedule_sets
from stability.checks import check_integer, check_real
from stability.limits import TRAIN_MAX_STEPS
from stability.pipeline import Pipeline
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
        "measured_max_lr, ratio_to_worst_stage / _min_stage / _coupled"
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
    schedule: str | None = None,
    stage_delays: Any = None,
    stages: int | None = None,
    microbatches: int | None = None,
    problem: str = "linreg",
    data: Any = None,
    standardize: str | None = None,
    bias: bool = False,
    samples: int | None = None,
    hidden: tuple[int, ...] = (4, 4),
    activation: str = "tanh",
    task: str = "regression",
    l2: float = 0.1,
    progress: Callable[[int, int], None] | None = None,
    **params: Any,
) -> Validation:
    """Does the trainer become unstable where the theory says?  For each rule and uniform delay
    τ (the rule's ``tau``, or ``tau_fwd`` for the discrepancy family), the predicted max lr
    on the problem's Hessian modes (PipeMare eq. 5 per mode, `stability.analysis.modes`)
    against the trainer's, found by bisection, and the predicted vs measured rates
    (`stability.agreement.comparison`).  ``schedule`` replaces the uniform delays by a
    pipeline's per-stage delays (PipeMare Table 1) over ``stages``, or an explicit profile
    ``stage_delays`` (`stability.pipeline.Pipeline.from_options`).  Each entry of ``params``
    applies to the rules that take it (one that none takes is refused).
    ``progress(done, total)`` counts rows.

    >>> import stability as st
    >>> v = st.validate(["sgd"], taus=[2], steps=2000, rate_steps=2000, rate_doublings=0)
    >>> row = v.rows[0]
    >>> abs(row["ratio"] - 1) < 0.01
    True
    """
    from stability.agreement.comparison import Protocol, validate_pipeline, validate_uniform
    from stability.rules.registry import get_spec

    names = _names(rules)
    values = {k: v for k, v in params.items() if v is not None}
    specs = [get_spec(name) for name in names]
    for key in values:
        if not any(key in s.param_names for s in specs):
            raise ValueError(f"no rule of {', '.join(names)} has a parameter {key!r}")
    pipe = Pipeline.from_options(
        schedule,
        stage_delays=stage_delays,
        tau=values.get("tau") if schedule == "uniform" else None,
        stages=stages,
        microbatches=microbatches,
    )
    for spec in specs:
        if pipe is None and spec.delay_parameter is not None:
            set_by = {spec.delay_parameter: "taus"}
        else:
            set_by = schedule_sets(spec, pipe)
        taken = {k: v for k, v in values.items() if k in spec.param_names}
        check_params([spec.name], taken, set_by=set_by)
    taus = tuple(check_integer("taus", t) for t in taus)
    if not taus:
        raise ValueError("taus must give at least one delay")
    options = problem_options(
        problem, data, standardize, bias, samples, hidden, activation, task, l2
    )
    default = Protocol(**options.kind.protocol)
    rel_tol = rel_tol if rel_tol is not None else default.rel_tol
    check_real("rel_tol", rel_tol, low=0.0, high=1.0, low_open=True)
    check_real("divergence", divergence, low=1.0, low_open=True)
    if batch is not None:
        batch = check_integer("batch", batch, low=1)
    protocol = Protocol(
        steps=check_integer("steps", steps or default.steps, low=10, high=TRAIN_MAX_STEPS),
        rate_steps=check_integer("rate_steps", rate_steps or default.rate_steps, low=10),
        rate_doublings=check_integer(
            "rate_doublings",
            rate_doublings if rate_doublings is not None else default.rate_doublings,
        ),
        divergence=float(divergence),
        seeds=tuple(check_integer("seeds", s) for s in seeds),
        rel_tol=float(rel_tol),
    )
    start = time.monotonic()
    model, dataset, setup = build(options, fit_seed=fit_seed)
    total = len(names) * (len(taus) if pipe is None else 1)
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
    names = tuple(rule_name(r) for r in rules)
    if not names:
        raise ValueError("rules must name at least one rule")
    return names


__all__ = ["Validation", "validate"]
