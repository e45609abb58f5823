"""What ``st.train``, ``st.validate`` and ``st.coupled`` share: the problem trained on, its
linearization, and the pipeline schedule that gives per-stage delays.

The problem keywords are those of the commands' flags: ``problem`` (``"linreg"`` or ``"mlp"``),
``data`` (a CSV or LIBSVM path; default the shipped cpusmall), ``standardize``, ``bias``,
``samples``, ``hidden``, ``activation``, ``task`` and ``l2`` (the MLP's ℓ2 regularization).
"""

from __future__ import annotations

from typing import Any

from stability.checks import check_choice, check_integer

PROBLEM_KEYS = (
    "problem",
    "data",
    "standardize",
    "bias",
    "samples",
    "hidden",
    "activation",
    "task",
    "l2",
)
"""The problem keywords, with the defaults of `problem_options`."""


def problem_options(
    problem: str = "linreg",
    data: Any = None,
    standardize: str | None = None,
    bias: bool = False,
    samples: int | None = None,
    hidden: tuple[int, ...] = (4, 4),
    activation: str = "tanh",
    task: str = "regression",
    l2: float = 0.1,
):
    """`stability.trainer.problems.ProblemOptions` from the keywords (module doc).

    ``standardize`` and the row cap default to the kind's (`ProblemKind`: features and all
    rows for linreg; all and at most 128 rows for the MLP, as validation runs many full
    batches).
    """
    from stability.checks import check_real
    from stability.trainer.problems import KINDS, PROBLEMS, ProblemOptions

    check_choice("problem", problem, PROBLEMS)
    kind = KINDS[problem]
    if samples is not None:
        samples = check_integer("samples", samples, low=1)
    hidden = tuple(check_integer("hidden", h, low=1) for h in hidden)
    return ProblemOptions(
        problem=problem,
        data=None if data is None else str(data),
        standardize=standardize or kind.standardize,
        bias=bool(bias),
        samples=samples,
        max_samples=kind.max_samples,
        hidden=hidden,
        activation=activation,
        task=task,
        weight_decay=check_real("l2", l2, low=0.0),
    )


def build(options, *, fit_seed: int = 0):
    """``(problem, data, linearization)``: the trainable problem, its data set and its
    `stability.trainer.linearize.Linearization` (exact for linreg; at the minimizer fitted
    from ``fit_seed`` for the MLP)."""
    from stability.trainer.problems import build_problem

    problem, data = build_problem(options)
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
