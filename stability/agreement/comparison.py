r"""Theory vs practice: predicted and measured max stable lr and rates, side by side.

For each rule × delay τ (or pipeline schedule):

* **predicted** max lr and rates from the problem's modes (`stability.analysis.modes`);
* **measured** max lr by `stability.trainer.measure.bisect_max_lr` on real training runs of
  the same rule object, and measured ln ρ̂ at the fractions `Protocol.lr_fractions` of the
  predicted max lr (deterministic runs only).

The measurement protocol (`Protocol`) is fixed and reported with every table:

* full batch: a run is unstable if it diverges (loss > ``divergence`` × initial loss) or its
  measured ln ρ̂ of the weight increments is > 0 over ``steps`` steps (w₀ = 0 for linear
  regression);
* minibatch B: unstable if any of the ``seeds`` diverges within ``steps`` steps (no rate:
  the gradient noise sets a floor); the batches are shared by the runs of one seed;
* rates: linear regression on its error recursion (`LinearRegression.error_problem`, no
  rounding floor), an MLP from w* + ``perturbation``·‖w*‖·(random unit vector); runs start at
  ``rate_steps`` steps and double until the estimate settles (`converged_log_rate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stability.analysis.modes import (
    modes_from_hessian,
    modes_from_passes,
    modes_log_rate,
    modes_of,
    predict_modes,
    predicted_max_lr,
    stage_blocks,
)
from stability.checks import finite_or_none
from stability.pipeline import Pipeline
from stability.rules.base import history_depth
from stability.trainer import measure
from stability.trainer.linearize import Linearization
from stability.trainer.linreg import LinearRegression
from stability.trainer.schedules import DELAY_NAMES, pipeline_rule, stage_rule, uniform_rule


@dataclass(frozen=True)
class Protocol:
    """The fixed measurement protocol (module doc); reported as ``protocol`` in the output."""

    steps: int = 20_000
    rate_steps: int = 20_000
    divergence: float = 1e6
    seeds: tuple[int, ...] = (0, 1, 2)
    per_round: int = 16
    rel_tol: float = 1e-3
    span: float = 4.0
    lr_fractions: tuple[float, ...] = (0.5, 0.95)
    check_every: int = 10
    rate_doublings: int = 5
    perturbation: float = 1e-7
    rate_perturbation: float = 1e-4

    def describe(self, batch: int | None) -> dict[str, Any]:
        d = asdict(self)
        d["batch"] = batch
        d["stability_test"] = (
            "unstable if loss > divergence × initial loss or measured ln ρ̂ of w_t − w_{t−1} > 0"
            if batch is None
            else "unstable if loss > divergence × initial loss for any seed within steps"
        )
        if batch is None:
            d["seeds"] = []
        return d


def check_mlp_work(
    model, rows: int, protocol: Protocol, batch: int | None, *, share: float = 1.0
) -> None:
    """Refuse an MLP measurement (validate, coupled --measure) above ``share`` ×
    `VALIDATE_MLP_MAX_WORK` (its cost model, docs/limits.md): rows × steps × (B·p + 10,000),
    × the seeds with minibatches, × the verdict rounds ``rel_tol`` needs over the 3 of the
    MLP's default 0.01 (`stability.trainer.measure.verdict_rounds`) where it needs more, ×
    `CLASSIFICATION_WORK_FACTOR` for a classification MLP."""
    from stability.limits import (
        CLASSIFICATION_WORK_FACTOR,
        MLP_WORK_REL_TOL,
        VALIDATE_MLP_MAX_WORK,
    )
    from stability.trainer.measure import verdict_rounds
    from stability.trainer.mlp import MLP

    if not isinstance(model, MLP):
        return
    rows_per_step = batch or model.samples
    repeats = len(protocol.seeds) if batch else 1
    measured_at = verdict_rounds(MLP_WORK_REL_TOL)
    rounds = max(verdict_rounds(protocol.rel_tol), measured_at)
    extra = rounds / measured_at
    task = CLASSIFICATION_WORK_FACTOR if model.task == "classification" else 1.0
    work = rows * protocol.steps * (rows_per_step * model.dim + 10_000) * repeats * extra * task
    limit = share * VALIDATE_MLP_MAX_WORK
    if work > limit:
        seeds = f" × {repeats} seeds" if batch else ""
        tight = f" × {rounds}/{measured_at} verdict rounds for rel_tol {protocol.rel_tol:g}"
        tight = tight if extra > 1 else ""
        classes = f" × {task:g} (classification)" if task != 1.0 else ""
        raise ValueError(
            f"steps: an MLP measurement of {rows} rows (rules × taus) × {protocol.steps} steps × "
            f"({rows_per_step} samples × {model.dim} parameters + 10,000){seeds}{tight}"
            f"{classes} = {work:.2g} exceeds {limit:.2g} (docs/limits.md); use fewer taus or "
            "rules, fewer steps or samples, or a looser rel_tol"
        )


def _train(
    setup: Linearization, rule, lrs, protocol: Protocol, *, steps, batch=None, seed=0, track=()
):
    return setup.run(
        rule,
        lrs,
        steps=steps,
        batch=batch,
        seed=seed,
        divergence=protocol.divergence,
        check_every=protocol.check_every,
        track=track,
    )


def measure_max_lr(
    setup: Linearization, rule, guess: float, protocol: Protocol, batch: int | None
) -> measure.MaxLrMeasurement:
    """The empirical max stable lr of ``rule`` under ``protocol`` (module doc)."""
    if batch is None:
        verdict = measure.deterministic_verdict(
            lambda lrs: _train(
                setup, rule, lrs, protocol, steps=protocol.steps, track=("increment",)
            )
        )
    else:
        verdict = measure.minibatch_verdict(
            lambda lrs, seed: _train(
                setup, rule, lrs, protocol, steps=protocol.steps, batch=batch, seed=seed
            ),
            protocol.seeds,
        )
    return measure.bisect_max_lr(
        verdict, guess, per_round=protocol.per_round, rel_tol=protocol.rel_tol, span=protocol.span
    )


def measure_rates(setup: Linearization, rule, lrs, protocol: Protocol) -> measure.RateMeasurement:
    """Measured ln ρ̂ at step sizes ``lrs`` (deterministic, module doc)."""

    def run(steps: int):
        return setup.rate_run(
            rule, lrs, steps=steps, divergence=protocol.divergence, check_every=protocol.check_every
        )

    return measure.converged_log_rate(
        run, protocol.rate_steps, decades=setup.rate_decades, max_doublings=protocol.rate_doublings
    )


SHORT_RUN_DELAYS = 20
"""A bisection run shorter than this many largest delays is flagged (`short_run_note`)."""


def short_run_note(rule, protocol: Protocol) -> str | None:
    """Why a measured max lr may not be the asymptotic one: runs shorter than a few delays.

    Until step τ every delayed read returns the initial weights, and near the threshold the
    dynamics settle over many delays, so a short run judges its transient.  Measured with
    delayed SGD at τ = 100 on the default regression (20 samples), measured/predicted max lr
    is 0.43 at 4τ steps, 1.04 at 10τ, 1.027 at 20τ and 1.006 at 40τ; at τ = 10⁵ and 2,000
    steps it was 168.  Runs shorter than `SHORT_RUN_DELAYS`·τ are flagged."""
    delay = history_depth(rule) - 1
    if protocol.steps >= SHORT_RUN_DELAYS * delay:
        return None
    return (
        f"the runs ({protocol.steps:,} steps) are shorter than {SHORT_RUN_DELAYS}× the largest "
        f"delay ({delay:,}): they judge a transient, and the measured max lr may be off either "
        "way (raise --steps)"
    )


def _ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def _exp(x):
    return None if x is None or not math.isfinite(x) else math.exp(x)


def validation_row(
    setup: Linearization, name: str, rule, protocol: Protocol, batch: int | None, **labels
) -> dict[str, Any]:
    """One row: predicted vs measured max lr (and rates for full batch)."""
    modes = modes_of(setup.jacobians_for(rule))
    prediction = predict_modes(rule, modes)
    predicted = prediction.max_lr
    row: dict[str, Any] = {"rule": name, **labels, "predicted_max_lr": predicted}
    if prediction.note:
        row["prediction_note"] = prediction.note
    if predicted == 0:  # stable for no lr > 0: nothing to bisect
        row.update(measured_max_lr=None, ratio=None, predicted_rate=[], measured_rate=[])
        return row
    # without a prediction the search starts at 1/λ_max (its bracket is verified anyway)
    guess = predicted or 1.0 / float(np.max(modes.lam))
    m = measure_max_lr(setup, rule, guess, protocol, batch)
    row.update(
        measured_max_lr=m.max_lr,
        measured_bracket=[m.stable, m.unstable],
        ratio=_ratio(m.max_lr, predicted),
        runs=m.runs,
    )
    if note := short_run_note(rule, protocol):
        row["measurement_note"] = note
    if not predicted:
        return row
    lrs = [f * predicted for f in protocol.lr_fractions]
    pred_log = [modes_log_rate(rule, modes, lr) for lr in lrs]
    row.update(
        rate_lr_fractions=list(protocol.lr_fractions),
        rate_lr=lrs,
        predicted_log_rate=pred_log,
        predicted_rate=[_exp(x) for x in pred_log],
    )
    if batch is None:
        rates = measure_rates(setup, rule, np.array(lrs), protocol)
        meas_log = [finite_or_none(x) for x in rates.log_rate]
        row.update(
            measured_log_rate=meas_log,
            measured_rate=[_exp(x) for x in meas_log],
            log_rate_ratio=[
                _ratio(a, b) if ok else None
                for a, b, ok in zip(meas_log, pred_log, rates.converged, strict=True)
            ],
            rate_steps=rates.steps,
            rate_converged=[bool(c) for c in rates.converged],
        )
    else:
        row.update(measured_log_rate=None, measured_rate=None, log_rate_ratio=None)
    if modes.dropped or modes.offdiagonal:
        row.update(dropped_modes=modes.dropped, offdiagonal=modes.offdiagonal)
    return row


def validate_uniform(
    setup: Linearization,
    rules: Sequence[str],
    values: dict[str, Any],
    taus: Sequence[int],
    protocol: Protocol,
    *,
    batch: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Rows for every rule × uniform delay τ."""
    rows = []
    for name in rules:
        for tau in taus:
            rule = uniform_rule(name, values, int(tau))
            rows.append(validation_row(setup, name, rule, protocol, batch, tau=int(tau)))
            if progress is not None:
                progress(len(rows))
    return rows


def scalar_stage_predictions(
    setup: Linearization, name: str, values: dict[str, Any], pipe: Pipeline, sizes
) -> dict[str, Any]:
    """What the scalar theory says about per-stage delays (`stability.analysis.modes`).

    ``worst_stage``: every weight at the largest stage delay, on the whole problem;
    ``per_stage``: stage i's own rule on the diagonal blocks of (H_f, H_b, H_r), i.e. as if the
    other stages were frozen; ``min_stage`` the smallest of those.  For linear regression also
    the exact answer of the coupled model (`stability.coupled.system`: the same linear
    dynamics as the trainer, every stage with its own delay on the full Hessian).
    """
    worst_stage = int(np.argmax(pipe.tau_fwd))
    worst = stage_rule(name, values, pipe, worst_stage)
    out: dict[str, Any] = {
        "predicted_max_lr_worst_stage": predicted_max_lr(
            worst, modes_of(setup.jacobians_for(worst))
        )
    }
    per_stage = []
    for i in range(pipe.stages):
        rule = stage_rule(name, values, pipe, i)
        blocks = [stage_blocks(M, sizes)[i] for M in setup.jacobians_for(rule)]
        modes = (
            modes_from_hessian(blocks[0])
            if not blocks[1].any() and not blocks[2].any()
            else modes_from_passes(*blocks)
        )
        per_stage.append(predicted_max_lr(rule, modes))
    finite = [x for x in per_stage if x]
    out["predicted_max_lr_per_stage"] = per_stage
    out["predicted_max_lr_min_stage"] = min(finite) if finite else None
    if isinstance(setup.problem, LinearRegression):
        out["predicted_max_lr_coupled"] = coupled_max_lr(setup, name, values, pipe, sizes)
    return out


DENSE_ROW_MAX_STATES = 256
"""`coupled_max_lr` diagonalises the block state matrix (~35 times: a log grid, then Brent's
method) up to this many rows, and otherwise takes `coupled`'s own frequency scan, which is
cheaper from a few hundred rows on (one core: 3.2 s against 0.30 s at 400 rows, 18.6 s against
1.1 s at 784 — sgd on 40 features under PipeMare, 8 and 16 stages, the two agreeing to 4e-9);
the dense search stays where the scan is refused (more than
`stability.limits.SCAN_MAX_PARAMETERS` parameters) and the matrix is within
`stability.limits.DENSE_SEARCH_MAX_STATES`."""


def coupled_max_lr(setup: Linearization, name: str, values: dict[str, Any], pipe: Pipeline, sizes):
    """The exact max lr of the coupled per-stage model, as `coupled` answers it
    (`stability.coupled.quadratic_lr.quadratic_max_lr`: the frequency scan, certified on the
    block state matrix), or by the block-state-matrix search
    (`stability.coupled.system.dense_max_lr`) for a small matrix (`DENSE_ROW_MAX_STATES`)."""
    from stability.coupled.quadratic_lr import quadratic_max_lr
    from stability.coupled.scan import check_scan_size
    from stability.coupled.system import coupled_system, dense_max_lr
    from stability.limits import DENSE_SEARCH_MAX_STATES, SCAN_MAX_PARAMETERS
    from stability.trainer.schedules import rule_values

    params = {k: v for k, v in rule_values(name, values).items() if k not in DELAY_NAMES}
    for k in ("lam", "delta", "phi"):
        params.pop(k, None)
    system = coupled_system(
        setup.problem.hessian,
        stage_sizes=[int(n) for n in sizes],
        rule=name,
        tau_fwd=pipe.tau_fwd.tolist(),
        tau_bkwd=None if pipe.tau_bkwd is None else pipe.tau_bkwd.tolist(),
        **params,
    )
    rows = system.state_size
    if rows <= DENSE_ROW_MAX_STATES or (
        rows <= DENSE_SEARCH_MAX_STATES and system.dim > SCAN_MAX_PARAMETERS
    ):
        return dense_max_lr(system).max_lr
    check_scan_size(system.dim, "data")  # linear regression: one parameter per feature
    return quadratic_max_lr(system).max_lr


def validate_pipeline(
    setup: Linearization,
    rules: Sequence[str],
    values: dict[str, Any],
    pipe: Pipeline,
    protocol: Protocol,
    *,
    batch: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Rows for every rule on a pipeline schedule: the scalar theory's readings vs measured."""
    sizes = setup.problem.stage_sizes(pipe.stages)
    rows = []
    for name in rules:
        rule = pipeline_rule(name, values, pipe, sizes)
        scalar = scalar_stage_predictions(setup, name, values, pipe, sizes)
        guess = (
            scalar.get("predicted_max_lr_coupled")
            or scalar["predicted_max_lr_worst_stage"]
            or scalar["predicted_max_lr_min_stage"]
        )
        row: dict[str, Any] = {"rule": name, "schedule": pipe.schedule, **scalar}
        if guess:
            m = measure_max_lr(setup, rule, guess, protocol, batch)
            row.update(
                measured_max_lr=m.max_lr,
                measured_bracket=[m.stable, m.unstable],
                ratio_to_worst_stage=_ratio(m.max_lr, scalar["predicted_max_lr_worst_stage"]),
                ratio_to_min_stage=_ratio(m.max_lr, scalar["predicted_max_lr_min_stage"]),
                ratio_to_coupled=_ratio(m.max_lr, scalar.get("predicted_max_lr_coupled")),
                runs=m.runs,
            )
            if note := short_run_note(rule, protocol):
                row["measurement_note"] = note
        rows.append(row)
        if progress is not None:
            progress(len(rows))
    return rows


__all__ = [
    "DENSE_ROW_MAX_STATES",
    "SHORT_RUN_DELAYS",
    "Protocol",
    "check_mlp_work",
    "measure_max_lr",
    "measure_rates",
    "scalar_stage_predictions",
    "short_run_note",
    "validate_pipeline",
    "validate_uniform",
    "validation_row",
]
