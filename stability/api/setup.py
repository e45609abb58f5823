"""What ``st.train``, ``st.validate`` and ``st.coupled`` share: the problem trained on, its
linearization, and the pipeline that gives per-stage delays.

Their keywords besides the rule's parameters come in two tables of `stability.api.commands`:
the problem's (`PROBLEM_OPTIONS`: ``problem`` (``"linreg"`` or ``"mlp"``), ``data``,
``standardize``, ``bias``, ``samples``, ``hidden``, ``activation``, ``task``, ``l2``), from which
`problem_options` builds a `stability.trainer.problems.ProblemOptions`, and the pipeline's
(`PIPELINE_OPTIONS`: ``schedule``, ``stage_delays``, ``stages``, ``microbatches``), from which
`pipeline_of` builds the `stability.pipeline.Pipeline` (or takes one given as ``pipeline=``).
`split_keywords` tells the three kinds of keyword apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def split_keywords(keywords: dict[str, Any]) -> tuple[dict, dict, dict]:
    """``(problem keywords, pipeline keywords, the rest)``: the rest are the rule's
    parameters."""
    from stability.api.commands import PIPELINE_OPTIONS, PROBLEM_OPTIONS

    problem_names = {o.name for o in PROBLEM_OPTIONS}
    pipeline_names = {o.name for o in PIPELINE_OPTIONS}
    problem = {k: v for k, v in keywords.items() if k in problem_names}
    pipe = {k: v for k, v in keywords.items() if k in pipeline_names and v is not None}
    rest = {k: v for k, v in keywords.items() if k not in problem_names | pipeline_names}
    return problem, pipe, rest


def problem_options(**keywords: Any):
    """`stability.trainer.problems.ProblemOptions` from the problem keywords (module doc),
    validated by their table.

    ``standardize`` and the row cap default to the kind's (`ProblemKind`: features and all
    rows for linreg; all and at most 128 rows for the MLP, as validation runs many full
    batches).
    """
    from stability.api.commands import PROBLEM_OPTIONS
    from stability.options import check_options
    from stability.trainer.problems import KINDS, ProblemOptions

    v = check_options(PROBLEM_OPTIONS, keywords)
    kind = KINDS[v["problem"]]
    return ProblemOptions(
        problem=v["problem"],
        data=v["data"],
        standardize=v["standardize"] or kind.standardize,
        bias=v["bias"],
        samples=v["samples"],
        max_samples=kind.max_samples,
        hidden=v["hidden"],
        activation=v["activation"],
        task=v["task"],
        weight_decay=v["l2"],
    )


def pipeline_of(pipeline: Any, keywords: dict[str, Any], **defaults: Any):
    """The `stability.pipeline.Pipeline` given as ``pipeline`` or built from the pipeline
    keywords (`Pipeline.from_options`, with ``defaults`` such as the uniform schedule's
    ``tau``); None without either.  Giving both is refused."""
    from stability.api.commands import PIPELINE_OPTIONS
    from stability.options import check_options
    from stability.pipeline import Pipeline

    if pipeline is not None:
        if keywords:
            raise ValueError(f"give pipeline= or its keywords ({', '.join(keywords)}), not both")
        if not isinstance(pipeline, Pipeline):
            raise ValueError(f"pipeline must be a Pipeline, got {pipeline!r}")
        return pipeline
    values = {k: v for k, v in check_options(PIPELINE_OPTIONS, keywords).items() if k in keywords}
    return Pipeline.from_options(**{**defaults, **values})


def trainer_inputs(keywords: dict[str, Any], pipeline: Any, specs) -> tuple[dict, Any, dict]:
    """``(problem keywords, pipeline or None, rule parameters given)`` of a trainer command
    for the rules ``specs``: the keywords split (`split_keywords`), the pipeline built
    (`pipeline_of`; ``uniform`` at the rules' ``tau``).  A rule without a delay parameter
    under per-stage delays is refused (`stability.rules.registry.delay_parameter`)."""
    from stability.rules.registry import delay_parameter, refuse_model_parameters

    problem_kw, pipeline_kw, params = split_keywords(keywords)
    values = {k: v for k, v in params.items() if v is not None}
    refuse_model_parameters(values, "here H (and Δ, Φ) come from the problem's Jacobians")
    staged = pipeline is not None or {"schedule", "stage_delays"} & set(pipeline_kw)
    for spec in specs:
        if staged and spec.delay_parameter is None:
            delay_parameter(spec.name)  # refuses: per-stage delays need a delay parameter
    keys = {spec.delay_parameter for spec in specs} & set(values)
    tau = values[keys.pop()] if pipeline_kw.get("schedule") == "uniform" and keys else None
    return problem_kw, pipeline_of(pipeline, pipeline_kw, tau=tau), values


def build(options, *, fit_seed: int = 0, before_fit: Callable[[Any], None] | None = None):
    """``(problem, data, linearization)``: the trainable problem, its data set and its
    `stability.trainer.linearize.Linearization` (exact for linreg; at the minimizer fitted
    from ``fit_seed`` for the MLP).  ``before_fit(problem)`` runs before the fit, so that a
    problem beyond a size or work limit is refused before the minute a large MLP's fit can
    take (`stability.coupled.scan.check_scan_size`, `stability.agreement.comparison
    .check_mlp_work`)."""
    from stability.trainer.problems import build_problem

    problem, data = build_problem(options)
    if before_fit is not None:
        before_fit(problem)
    return problem, data, options.kind.linearize(problem, fit_seed)


def schedule_sets(spec, pipe) -> dict[str, str]:
    """The delay parameters a `stability.pipeline.Pipeline` sets per stage (so the rule may
    not be given them): the main delay (except for ``uniform``, whose one delay it is) and
    ``tau_bkwd``."""
    if pipe is None or spec.delay_parameter is None:
        return {}
    schedule = pipe.schedule
    setter = f"the schedule ({schedule})"
    out = {} if schedule == "uniform" else {spec.delay_parameter: setter}
    if spec.delay_parameter == "tau_fwd":
        out["tau_bkwd"] = setter
    return out
