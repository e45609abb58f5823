"""``st.train``: one reference-trainer run, the measured rate next to the predicted one
(``stability train``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stability.api.commands import command
from stability.api.resolve import check_params, rule_name
from stability.api.setup import build, problem_options, schedule_sets, trainer_inputs
from stability.checks import finite_or_none
from stability.options import check_options
from stability.result import Result, output


@dataclass(frozen=True)
class Training(Result):
    """A training run of the numpy reference trainer with the theory's prediction beside it."""

    problem: dict[str, Any] = output("the problem trained (model, samples, parameters, ...)")
    data: dict[str, Any] = output("the data set and its preprocessing")
    rule: str = output("the rule's registry name")
    update: str = output("analysed (the linearised rule) or real (its real update)")
    lr: float = output("step size")
    steps: int = output("steps run", "steps")
    batch: int | None = output("minibatch size (null: full batch)")
    seed: int = output("seed of the initialization and the minibatches")
    diverged: bool = output("the loss exceeded divergence × its initial value")
    diverged_step: int | None = output("step at which it did", "steps")
    diverged_loss: float | None = output("loss at that step")
    initial_loss: float | None = output("loss at step 0")
    final_loss: float | None = output("loss at the last step (null after divergence)")
    predicted_max_lr: float | None = output(
        "theory's max stable lr on the problem's modes (null with a schedule: see "
        "scalar_predictions)"
    )
    prediction_note: str | None = output("caveat of the prediction")
    measured_log_rate: float | None = output("measured ln ρ̂ (slope of ln‖w_t − w*‖ per step)")
    measured_rate: float | None = output("measured ρ̂ per step")
    predicted_log_rate: float | None = output("predicted ln ρ at lr")
    predicted_rate: float | None = output("predicted ρ per step")
    rate_steps: int | None = output("length of the run the rate was measured on", "steps")
    rate_method: str = output("how the rate was measured (none for minibatch runs)")
    pipeline: dict[str, Any] | None = output("the schedule's per-stage delays, utilization, memory")
    scalar_predictions: dict[str, Any] | None = output(
        "with a schedule: the scalar theory's max lr (worst stage, per stage, min) and the "
        "exact coupled one (linreg)"
    )
    assumptions: tuple[str, ...] = output("assumptions of the MLP linearization (empty: linreg)")
    loss_curve: tuple[tuple[int, float | None], ...] = output(
        "[step, loss] pairs, subsampled; null after divergence"
    )


def train(
    rule: Any,
    *,
    lr: float,
    steps: int = 10_000,
    batch: int | None = None,
    seed: int = 0,
    divergence: float = 1e6,
    t1: int | None = None,
    warmup_epochs: int = 0,
    start: str = "init",
    curve_points: int = 200,
    update: str = "analysed",
    pipeline: Any = None,
    progress: Callable[[int, int], None] | None = None,
    **keywords: Any,
) -> Training:
    """Train ``rule`` (with its ``params``) at ``lr`` on linear regression or a small MLP.

    The rule's own step (the one the analysis linearises) runs in the reference trainer
    (`stability.trainer.engine`); ``t1`` applies PipeMare's step-size rescheduling (eq. 4)
    over that many steps, ``warmup_epochs`` synchronous epochs first (PipeMareW), and
    per-stage delays of a ``pipeline`` over the problem's parameter blocks (a
    `stability.pipeline.Pipeline`, or its keywords ``schedule``/``stage_delays``/``stages``/
    ``microbatches``, PipeMare Table 1; ``uniform`` takes the rule's delay).  The problem's
    keywords (``problem``, ``data``, ``standardize``, …) are those of
    `stability.api.commands.PROBLEM_OPTIONS`; every other keyword is a rule parameter.
    The prediction is the rule's max lr and rate on the problem's Hessian modes (PipeMare
    eq. 5 per mode; `stability.analysis.modes`).  The rate is the slope of ln‖w_t − w*‖
    (`stability.trainer.measure`), null for minibatch runs (noise sets a floor).
    ``progress(done, total)`` is called with the steps done.

    >>> import stability as st
    >>> run = st.train("sgd", tau=2, lr=0.01, steps=300, data=None)
    >>> run.diverged, run.final_loss < run.initial_loss
    (False, True)
    """
    from stability.agreement.comparison import scalar_stage_predictions
    from stability.analysis.modes import modes_of, predict_modes
    from stability.rules.registry import get_spec
    from stability.trainer import measure
    from stability.trainer.schedules import pipeline_rule, plan, synchronous_rule

    name = rule_name(rule)
    spec = get_spec(name)
    problem_kw, pipe, values = trainer_inputs(keywords, pipeline, [spec])
    given = dict(lr=lr, steps=steps, batch=batch, seed=seed, divergence=divergence, t1=t1)
    given |= dict(warmup_epochs=warmup_epochs, start=start, curve_points=curve_points)
    o = check_options(command("train").options, {**given, "update": update})
    steps, batch, seed, t1 = o["steps"], o["batch"], o["seed"], o["t1"]
    warmup_epochs, curve_points = o["warmup_epochs"], o["curve_points"]
    check_params([name], values, set_by=schedule_sets(spec, pipe))
    options = problem_options(**problem_kw)
    model, dataset, setup = build(options, fit_seed=seed)
    if pipe is None:
        analysed, _ = spec.build(**values)
        sizes = None
    else:
        sizes = model.stage_sizes(pipe.stages)
        analysed = pipeline_rule(name, values, pipe, sizes)
    trained = analysed
    if update == "real":
        if not hasattr(analysed, "trainer_rule"):
            raise ValueError(
                f"rule {name!r} has no separate real update (its analysis is exact); "
                "use update='analysed'"
            )
        trained = analysed.trainer_rule()
    epoch = 1 if batch is None else max(1, model.samples // batch)
    warmup_steps = warmup_epochs * epoch
    phases = plan(
        trained,
        t1_steps=t1,
        warmup=synchronous_rule(name, values, trained) if warmup_steps else None,
        warmup_steps=warmup_steps,
    )
    deterministic = batch is None
    res = setup.run(
        phases,
        [lr],
        start=start,
        steps=steps,
        batch=batch,
        seed=seed,
        divergence=divergence,
        record_every=max(1, steps // (curve_points - 1)),
        track=("error",) if deterministic else (),
        progress=None if progress is None else (lambda done: progress(done, steps)),
    )

    note, pred_log, pred_max = None, None, None
    if pipe is None:
        prediction = predict_modes(analysed, modes_of(setup.jacobians_for(analysed)), lr)
        pred_max, pred_log = prediction.max_lr, prediction.log_rate
        note = prediction.note
        if note is None and trained is not analysed:
            note = "predictions are for the analysed (linearised) rule"
    else:
        note = "per-stage delays: see scalar_predictions"
    meas_log, rate_steps = None, None
    if deterministic and setup.exact:
        rates = measure.converged_log_rate(
            lambda T: setup.rate_run(phases, [lr], steps=T, divergence=divergence),
            steps,
            decades=None,
            max_doublings=3,
        )
        meas_log, rate_steps = finite_or_none(rates.log_rate[0]), rates.steps
    elif deterministic:
        rate = measure.log_rate(res.energies["error"], res.block, decades=setup.rate_decades)
        meas_log, rate_steps = finite_or_none(rate[0]), steps
    return Training(
        problem=model.describe(),
        data=dataset.describe(),
        rule=name,
        update=update,
        lr=float(lr),
        steps=steps,
        batch=batch,
        seed=seed,
        diverged=bool(res.diverged[0]),
        diverged_step=int(res.diverged_step[0]) if res.diverged[0] else None,
        diverged_loss=finite_or_none(res.diverged_loss[0]),
        initial_loss=finite_or_none(res.initial_loss[0]),
        final_loss=finite_or_none(res.final_loss[0]),
        predicted_max_lr=pred_max,
        prediction_note=note,
        measured_log_rate=meas_log,
        measured_rate=_exp(meas_log),
        predicted_log_rate=pred_log,
        predicted_rate=_exp(pred_log),
        rate_steps=rate_steps,
        rate_method=_rate_method(setup.exact, deterministic),
        pipeline=None if pipe is None else pipe.describe(sizes),
        scalar_predictions=None
        if pipe is None
        else scalar_stage_predictions(setup, name, values, pipe, sizes),
        assumptions=() if setup.exact else tuple(setup.assumptions),
        loss_curve=tuple(
            (int(s), finite_or_none(loss))
            for s, loss in zip(res.curve_steps, res.curve[0], strict=True)
        ),
    )


def _rate_method(exact: bool, deterministic: bool) -> str:
    if not deterministic:
        return "none: minibatch noise sets a floor, there is no asymptotic rate"
    if exact:
        return "slope of log‖w_t − w*‖ on the error recursion (LinearRegression.error_problem)"
    return "slope of log‖w_t − w*‖ over the last half of the run, w* fitted from the same start"


def _exp(x: float | None) -> float | None:
    return None if x is None else math.exp(x)


__all__ = ["Training", "train"]
