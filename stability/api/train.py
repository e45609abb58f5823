"""``st.train``: one reference-trainer run, the measured rate next to the predicted one
(``stability train``)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.api.commands import command
from stability.api.resolve import check_params, rule_name
from stability.api.setup import build, problem_options, schedule_sets, trainer_inputs
from stability.checks import finite_or_none
from stability.options import check_options
from stability.result import Result, output


@dataclass(frozen=True)
class TrainRun(Result):
    """The outcome of one reference-trainer run of `train_runs` (the keys of
    ``stability train --json`` it shares with `Training`)."""

    diverged: bool = output("the loss exceeded divergence × its initial value (or overflowed)")
    diverged_step: int | None = output("first divergence check that tripped; null: none", "step")
    diverged_loss: float | None = output("loss at that check; null: none or non-finite", "loss")
    initial_loss: float | None = output("loss at the initial weights", "loss")
    final_loss: float | None = output("loss after the last step; null if diverged", "loss")


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


UNSETTLED = 0.01
"""A measured rate whose ln ρ̂ still moved by more than this (relative) over the last doubling
of the error recursion carries a warning that says by how much (the doublings stop at 1e-3)."""


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

    name = rule_name(rule)
    spec = get_spec(name)
    problem_kw, pipe, values = trainer_inputs(keywords, pipeline, [spec])
    given = dict(lr=lr, steps=steps, batch=batch, seed=seed, divergence=divergence, t1=t1)
    given |= dict(warmup_epochs=warmup_epochs, start=start, curve_points=curve_points)
    o = check_options(command("train").options, {**given, "update": update})
    lr, steps, batch, seed, divergence = o["lr"], o["steps"], o["batch"], o["seed"], o["divergence"]
    check_params([name], values, set_by=schedule_sets(spec, pipe))
    model, dataset, setup = build(problem_options(**problem_kw), fit_seed=seed)
    runs = _Runs.prepare(name, values, o, model, pipe, setup)
    deterministic = batch is None
    res = runs.train([lr], track=("error",) if deterministic else (), progress=progress)
    analysed, trained, phases, sizes = runs.analysed, runs.trained, runs.phases, runs.sizes

    note, pred_log, pred_max = None, None, None
    if pipe is None:
        prediction = predict_modes(analysed, modes_of(setup.jacobians_for(analysed)), lr)
        pred_max, pred_log = prediction.max_lr, prediction.log_rate
        note = prediction.note
        if note is None and trained is not analysed:
            note = "predictions are for the analysed (linearised) rule"
    else:
        note = "per-stage delays: see scalar_predictions"
    meas_log, rate_steps, warnings = None, None, []
    if deterministic and setup.exact:
        rates = measure.converged_log_rate(
            lambda T: setup.rate_run(phases, [lr], steps=T, divergence=divergence),
            steps,
            decades=None,
            max_doublings=3,
        )
        meas_log, rate_steps = finite_or_none(rates.log_rate[0]), rates.steps
        if meas_log is not None and not rates.converged[0] and rates.change[0] > UNSETTLED:
            warnings.append(
                f"the measured rate had not settled: ln ρ̂ moved by {rates.change[0]:.1%} "
                f"between the last two lengths of the error recursion (… → {rate_steps:,} "
                "steps), so the faster modes' transients are still in it; more --steps "
                "read the slowest mode"
            )
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
        **_outcome(res, 0),
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
        warnings=tuple(warnings),
    )


def train_runs(
    rule: Any, *, lr: Any, pipeline: Any = None, **keywords: Any
) -> tuple[TrainRun, ...]:
    """R runs of `train` in lockstep, without the theory beside them: what each run's
    ``diverged``, ``diverged_step``, ``diverged_loss``, ``initial_loss`` and ``final_loss``
    would be from ``st.train`` with the same keywords (`TrainRun`), computed as one array
    computation (the sweep's ``train`` chunks, PipeMare Fig. 5(b)'s grids).

    ``lr``: the R step sizes; a rule parameter given as a list (or array) of R values: one value
    per run (a (R, 1) array field of one rule); every other keyword as in `train` (its option
    table, `stability.api.commands.TRAIN_OPTIONS`, the problem's and the pipeline's), shared by
    the runs.  The same options table, problem builder (built once per process and problem
    keywords), rule builder, phases, start and divergence checks as `train`: the runs are
    ``st.train``'s (only the products of R runs in lockstep may round differently in the last
    bit, ~1e-16 relative).

    >>> import stability as st
    >>> runs = st.train_runs("sgd", tau=[1, 4], lr=[0.01, 0.5], steps=300, data=None)
    >>> runs[0].diverged, runs[1].diverged
    (False, True)
    """
    from stability.rules.registry import get_spec

    name = rule_name(rule)
    spec = get_spec(name)
    lrs = [lr] if np.ndim(lr) == 0 else list(np.asarray(lr, dtype=float).reshape(-1))
    if not lrs:
        raise ValueError("lr must give at least one step size")
    per_run = {k: keywords.pop(k) for k in spec.param_names if np.ndim(keywords.get(k)) > 0}
    for key, column in per_run.items():
        if len(column) != len(lrs):
            raise ValueError(f"{key} must give one value per run ({len(lrs)}), got {len(column)}")
    table = command("train").options
    given = {o.name: keywords.pop(o.name) for o in table if o.name in keywords}
    problem_kw, pipe, values = trainer_inputs(keywords, pipeline, [spec])
    if per_run and pipe is not None:
        raise ValueError("per-run rule parameters need a uniform delay (no pipeline)")
    o = {}
    for value in lrs:
        o = check_options(table, {**given, "lr": value})
    set_by = schedule_sets(spec, pipe)
    runs = []
    for r in range(len(lrs)):
        run_values = {**values, **{k: column[r] for k, column in per_run.items()}}
        check_params([name], run_values, set_by=set_by)
        runs.append(spec.resolve(**run_values) if per_run else run_values)
    model = _built(problem_options(**problem_kw))
    setup = None
    if o["start"] != "init":
        setup = problem_options(**problem_kw).kind.linearize(model, o["seed"])
    res = _Runs.prepare(name, stacked(runs), o, model, pipe, setup).train(lrs, track=())
    return tuple(TrainRun(**_outcome(res, r)) for r in range(len(lrs)))


@dataclass(frozen=True)
class _Runs:
    """The rule, phases and start of `train`'s runs on a built problem (one place for
    `train` and `train_runs`)."""

    options: dict[str, Any]
    model: Any
    setup: Any
    analysed: Any
    trained: Any
    phases: Any
    sizes: Any

    @classmethod
    def prepare(cls, name, values, o, model, pipe, setup) -> _Runs:
        """``setup``: the problem's `stability.trainer.linearize.Linearization` (None: start
        from the problem's initial weights, no error track)."""
        from stability.rules.registry import get_spec
        from stability.trainer.schedules import pipeline_rule, plan, synchronous_rule

        if pipe is None:
            analysed, _ = get_spec(name).build(**values)
            sizes = None
        else:
            sizes = model.stage_sizes(pipe.stages)
            analysed = pipeline_rule(name, values, pipe, sizes)
        trained = analysed
        if o["update"] == "real":
            if not hasattr(analysed, "trainer_rule"):
                raise ValueError(
                    f"rule {name!r} has no separate real update (its analysis is exact); "
                    "use update='analysed'"
                )
            trained = analysed.trainer_rule()
        batch = o["batch"]
        epoch = 1 if batch is None else max(1, model.samples // batch)
        warmup_steps = o["warmup_epochs"] * epoch
        phases = plan(
            trained,
            t1_steps=o["t1"],
            warmup=synchronous_rule(name, values, trained) if warmup_steps else None,
            warmup_steps=warmup_steps,
        )
        return cls(o, model, setup, analysed, trained, phases, sizes)

    def train(self, lrs, *, track, progress=None):
        """The engine's result of the runs at step sizes ``lrs`` (`stability.trainer.engine`),
        from the linearization's ``start`` (`Linearization.run`), or from the problem's initial
        weights without one."""
        from stability.trainer.engine import train as run_trainer

        o, steps = self.options, self.options["steps"]
        options = dict(
            steps=steps,
            batch=o["batch"],
            seed=o["seed"],
            divergence=o["divergence"],
            record_every=max(1, steps // (o["curve_points"] - 1)),
            track=track,
            progress=None if progress is None else (lambda done: progress(done, steps)),
        )
        if self.setup is None:
            return run_trainer(self.model, self.phases, lrs, **options)
        return self.setup.run(self.phases, lrs, start=o["start"], **options)


def _outcome(res, r: int) -> dict[str, Any]:
    """Run ``r``'s divergence and losses (`TrainRun`'s fields) from the engine's result."""
    return dict(
        diverged=bool(res.diverged[r]),
        diverged_step=int(res.diverged_step[r]) if res.diverged[r] else None,
        diverged_loss=finite_or_none(res.diverged_loss[r]),
        initial_loss=finite_or_none(res.initial_loss[r]),
        final_loss=finite_or_none(res.final_loss[r]),
    )


def stacked(values: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs' rule parameters as one rule's: those equal across runs as they are, the
    others as (R, 1) arrays (`TypeError` for a parameter that differs and is not a number)."""
    out = {}
    for name in values[0]:
        column = [v[name] for v in values]
        if all(c == column[0] for c in column):
            out[name] = column[0]
        elif any(c is None or isinstance(c, bool | str) for c in column):
            raise TypeError(f"{name} differs between runs and is not a number")
        else:
            dtype = np.int64 if all(isinstance(c, int | np.integer) for c in column) else float
            out[name] = np.array(column, dtype=dtype).reshape(-1, 1)
    return out


@functools.lru_cache(maxsize=4)
def _built(options):
    """The problem of ``options`` (`ProblemOptions`), built once per process for
    `train_runs` (a sweep's chunks share it)."""
    from stability.trainer.problems import build_problem

    return build_problem(options)[0]


def _rate_method(exact: bool, deterministic: bool) -> str:
    if not deterministic:
        return "none: minibatch noise sets a floor, there is no asymptotic rate"
    if exact:
        return "slope of log‖w_t − w*‖ on the error recursion (LinearRegression.error_problem)"
    return "slope of log‖w_t − w*‖ over the last half of the run, w* fitted from the same start"


def _exp(x: float | None) -> float | None:
    return None if x is None else math.exp(x)


__all__ = ["TrainRun", "Training", "stacked", "train", "train_runs"]
