"""What ``st.train``, ``st.validate`` and ``st.coupled`` share: the problem trained on, its
linearization, and the pipeline schedule that gives per-stage delays.

The problem keywords are those of the commands' flags: ``problem`` (``"linreg"`` or ``"mlp"``),
``data`` (a CSV or LIBSVM path; default the shipped cpusmall), ``standardize``, ``bias``,
``samples``, ``hidden``, ``activation``, ``task`` and ``l2`` (the MLP's ℓ2 regularization).
"""

from __future__ import annotations

from typing import Any

from stability.checks import MAX_DELAY, check_choice, check_integer

SCHEDULES = ("pipemare", "pipedream", "gpipe", "pb", "uniform")
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

    ``standardize`` defaults to ``"features"`` for linreg and ``"all"`` for the MLP, which
    also keeps at most 128 rows unless ``samples`` says otherwise (validation runs many full
    batches).
    """
    from stability.checks import check_real
    from stability.trainer.problems import PROBLEMS, ProblemOptions

    check_choice("problem", problem, PROBLEMS)
    mlp = problem == "mlp"
    if samples is not None:
        samples = check_integer("samples", samples, low=1)
    hidden = tuple(check_integer("hidden", h, low=1) for h in hidden)
    return ProblemOptions(
        problem=problem,
        data=None if data is None else str(data),
        standardize=standardize or ("all" if mlp else "features"),
        bias=bool(bias),
        samples=samples,
        max_samples=128 if mlp else None,
        hidden=hidden,
        activation=activation,
        task=task,
        weight_decay=check_real("l2", l2, low=0.0),
    )


def build(options, *, fit_seed: int = 0):
    """``(problem, data, setup)``: the trainable problem, its data set and the `Setup` that
    linearizes it (exact for linreg; at the minimizer fitted from ``fit_seed`` for the MLP)."""
    from stability.agreement.comparison import linreg_setup, mlp_setup
    from stability.trainer.problems import build_problem

    problem, data = build_problem(options)
    if options.problem == "linreg":
        return problem, data, linreg_setup(problem)
    return problem, data, mlp_setup(problem, seed=check_integer("fit_seed", fit_seed))


def schedule_pipeline(
    schedule: str | None, stages: int | None, microbatches: int | None, tau: int | None
):
    """The per-stage delays of ``schedule`` over ``stages`` P (default 2) and ``microbatches``
    N (default 1) (PipeMare Table 1, `stability.pipeline`); ``uniform`` takes ``tau``.  None
    without a schedule (then ``stages``/``microbatches`` may not be given)."""
    if schedule is None:
        for name, value in (("stages", stages), ("microbatches", microbatches)):
            if value is not None:
                raise ValueError(f"{name} needs a schedule (the pipeline it describes)")
        return None
    from stability.pipeline import pipeline

    check_choice("schedule", schedule, SCHEDULES)
    stages = check_integer("stages", 2 if stages is None else stages, low=1, high=MAX_DELAY)
    microbatches = check_integer(
        "microbatches", 1 if microbatches is None else microbatches, low=1, high=MAX_DELAY
    )
    return pipeline(schedule, stages, microbatches, tau=tau if schedule == "uniform" else None)


def schedule_sets(spec, schedule: str | None) -> dict[str, str]:
    """The delay parameters a pipeline schedule sets per stage (so the rule may not be given
    them): the main delay (except for ``uniform``, whose one delay it is) and ``tau_bkwd``."""
    if schedule is None or spec.delay_parameter is None:
        return {}
    setter = f"the schedule ({schedule})"
    out = {} if schedule == "uniform" else {spec.delay_parameter: setter}
    if spec.delay_parameter == "tau_fwd":
        out["tau_bkwd"] = setter
    return out
