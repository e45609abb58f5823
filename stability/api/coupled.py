"""``st.coupled``: exact max stable lr of per-stage delays on a problem's full Hessian, next to
the scalar theory (``stability coupled``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stability.api.commands import command
from stability.api.resolve import check_params, rule_name
from stability.api.setup import build, pipeline_of, problem_options, split_keywords
from stability.checks import MAX_DELAY, check_integer, check_real
from stability.coupled.summary import CoupledAnalysis
from stability.limits import (
    COUPLED_MLP_WORK_SHARE,
    COUPLED_SCAN_SHARE,
    DENSE_SEARCH_MAX_STATES,
    SCAN_MAX_PARAMETERS,
    TRAIN_MAX_STEPS,
)
from stability.options import check_options
from stability.pipeline import worst_delay
from stability.result import output


@dataclass(frozen=True)
class Coupled(CoupledAnalysis):
    """The coupled analysis (`CoupledAnalysis`) of a trainer problem under a pipeline schedule,
    with what built it and, on request, the trainer's measured max lr."""

    rule: str = output("the rule's registry name")
    problem: dict[str, Any] = output("the problem (model, samples, parameters, ...)")
    data: dict[str, Any] = output("the data set and its preprocessing")
    schedule: str = output("pipeline schedule giving the per-stage delays")
    microbatches: int = output("microbatches N")
    t1_power: float = output("T1 exponent p: stage i steps with lr·τ_i^(−p)")
    stage_tau_bkwd: tuple[int, ...] = output("backward delay of each stage", "steps")
    hessian_shape: tuple[int, int] = output("shape of the full Hessian")
    backward_to_forward: float | None = output("‖H_b‖/‖H_f‖ (the network's Δ; null: H_b = 0)")
    notes: tuple[str, ...] = output("remarks on the model")
    measured_max_lr: float | None = output("the trainer's max stable lr (null: not measured)")
    measured_bracket: tuple[float | None, float | None] | None = output(
        "[stable, unstable] lr bracketing it"
    )
    measured_ratio: float | None = output("measured_max_lr / max_lr")
    measured_runs: int | None = output("trainer runs of the bisection")
    protocol: dict[str, Any] | None = output("the measurement protocol (null: not measured)")


def coupled(
    rule: Any,
    *,
    pipeline: Any = None,
    taus: Sequence[int] | None = None,
    t1_power: float = 0.0,
    method: str = "scan",
    measure: bool = False,
    steps: int | None = None,
    rel_tol: float | None = None,
    fit_seed: int = 0,
    **keywords: Any,
) -> Coupled:
    """Every stage with its own delays on the full Hessian: the exact max lr of the coupled
    linear system (frequency scan, `stability.coupled.scan`, or the block-state-matrix
    bisection with ``method="dense"``) beside the scalar theory's bounds (PipeMare Lemma 1-3
    at (λ_max, τ_max), and per stage on its diagonal block; `stability.coupled.summary`).
    The ``pipeline`` (a `stability.pipeline.Pipeline`, or its keywords: ``stages`` (required),
    ``schedule`` (default pipemare; uniform at PipeMare's largest delay), ``microbatches``);
    ``taus`` overrides the schedule's forward delays (the ``stage_delays`` of the pipeline);
    ``t1_power`` applies T1's factor τ_i^(−p) (PipeMare eq. 4); ``measure`` bisects the
    trainer's max lr on the same rule.  The problem's keywords are those of
    `stability.api.commands.PROBLEM_OPTIONS`; every other keyword is a rule parameter.

    >>> import stability as st
    >>> c = st.coupled("sgd", stages=4, schedule="pipemare")
    >>> c.critical_stage, c.scalar_ratio < 1
    (2, True)
    """
    from stability.agreement.comparison import check_mlp_work
    from stability.agreement.coupled_runs import measure as measure_trainer
    from stability.agreement.coupled_runs import problem_system
    from stability.coupled.scan import check_scan_size
    from stability.coupled.summary import analyze
    from stability.rules.registry import get_spec

    name = rule_name(rule)
    spec = get_spec(name)
    problem_kw, pipeline_kw, params = split_keywords(keywords)
    values = {k: v for k, v in params.items() if v is not None}
    check_params([name], values, set_by=_set_by(spec))
    given = dict(taus=taus, t1_power=t1_power, method=method, measure=measure, steps=steps)
    o = check_options(
        command("coupled").options, {**given, "rel_tol": rel_tol, "fit_seed": fit_seed}
    )
    taus, steps, rel_tol = o["taus"], o["steps"], o["rel_tol"]
    if pipeline is None:
        if "stages" not in pipeline_kw:
            raise ValueError("stages must be given (the number of pipeline stages)")
        stages = check_integer("stages", pipeline_kw["stages"], low=1, high=MAX_DELAY)
        pipeline_kw.setdefault("schedule", "pipemare")
        if taus is not None:
            if len(taus) not in (1, stages):
                raise ValueError(
                    f"taus must give 1 or {stages} delays (one per stage), got {len(taus)}"
                )
            if "stage_delays" in pipeline_kw:
                raise ValueError("give taus or stage_delays (the same profile), not both")
            pipeline_kw["stage_delays"] = taus
    elif taus is not None:
        raise ValueError("taus overrides a schedule's delays: give them in the pipeline")
    tau = None  # uniform without taus: PipeMare's largest delay for every stage
    if "stage_delays" not in pipeline_kw:
        tau = worst_delay(
            pipeline_kw.get("schedule"), pipeline_kw.get("stages"), pipeline_kw.get("microbatches")
        )
    pipe = pipeline_of(pipeline, pipeline_kw, tau=tau)
    options = problem_options(**problem_kw)
    protocol = _protocol(options, steps, rel_tol) if measure else None

    def before_fit(model) -> None:  # refusals that need neither the minimum nor a prediction
        if method == "scan":
            check_scan_size(model.dim, options.kind.size_flag)
        if measure:
            check_mlp_work(model, 1, protocol, None, share=measurement_share(model.dim, method))

    model, dataset, setup = build(options, fit_seed=fit_seed, before_fit=before_fit)
    built = problem_system(setup, pipe, name, values, t1_power)
    system = built.system
    if method == "dense" and system.state_size > DENSE_SEARCH_MAX_STATES:
        raise ValueError(
            f"method dense diagonalises the block state matrix ~30 times and allows at most "
            f"{DENSE_SEARCH_MAX_STATES} rows (docs/limits.md); this one has "
            f"{system.state_size} (method scan, the default, answers at any delays)"
        )
    analysis = analyze(system, method=method)
    analysis = dataclasses.replace(
        analysis, stage_shares=tuple(round(float(s), 6) for s in analysis.stage_shares)
    )
    norms = system.hessian_norms()
    notes = []
    if "backward" not in norms:
        notes.append("H_b = 0: the gradient reads the forward weights only")
    if "tau" in spec.param_names and not pipe.consistent:
        notes.append(f"{name} has one delay: its backward pass reads w_(t−τ_bkwd,i)")
    measured: dict[str, Any] = dict.fromkeys(
        ("measured_max_lr", "measured_bracket", "measured_ratio", "measured_runs", "protocol")
    )
    if measure:
        if not analysis.max_lr:
            raise ValueError("measure: nothing to measure, the coupled system has no finite max lr")
        m = measure_trainer(built, setup, analysis.max_lr, protocol)
        measured.update(
            measured_max_lr=m.max_lr,
            measured_bracket=(m.stable, m.unstable),
            measured_ratio=None if m.max_lr is None else m.max_lr / analysis.max_lr,
            measured_runs=m.runs,
            protocol=protocol.describe(None),
        )
    return Coupled(
        **{f.name: getattr(analysis, f.name) for f in dataclasses.fields(analysis)},
        rule=name,
        problem=model.describe(),
        data=dataset.describe(),
        schedule=pipe.schedule,
        microbatches=pipe.microbatches,
        t1_power=float(t1_power),
        stage_tau_bkwd=tuple(int(t) for t in pipe.backward_delays),
        hessian_shape=(system.dim, system.dim),
        backward_to_forward=norms["backward"] / norms["forward"] if "backward" in norms else None,
        notes=tuple(notes),
        **measured,
    )


def measurement_share(parameters: int, method: str) -> float:
    """The share of `stability.limits.VALIDATE_MLP_MAX_WORK` a ``coupled --measure`` on an MLP
    may take: what its prediction leaves of `COUPLED_MLP_WORK_SHARE`, the frequency scan
    counting `COUPLED_SCAN_SHARE` × (p / `SCAN_MAX_PARAMETERS`)³ (p × p eigen-decompositions)."""
    scan = COUPLED_SCAN_SHARE * (parameters / SCAN_MAX_PARAMETERS) ** 3 if method == "scan" else 0.0
    return COUPLED_MLP_WORK_SHARE - scan


def _protocol(options, steps: int | None, rel_tol: float | None):
    """The measurement's protocol: the problem kind's defaults, ``steps`` and ``rel_tol``."""
    from stability.agreement.comparison import Protocol

    default = Protocol(**options.kind.protocol)
    rel_tol = rel_tol if rel_tol is not None else default.rel_tol
    check_real("rel_tol", rel_tol, low=0.0, high=1.0, low_open=True)
    steps = default.steps if steps is None else steps
    steps = check_integer("steps", steps, low=10, high=TRAIN_MAX_STEPS)
    return Protocol(steps=steps, rel_tol=float(rel_tol))


def _set_by(spec) -> dict[str, str]:
    """The delays that the schedule (or ``taus``) sets per stage."""
    setter = "the schedule (per stage; taus overrides it)"
    return {
        k: setter for k in ("tau", "tau_fwd", "tau_bkwd", "tau_recomp") if k in spec.param_names
    }


__all__ = ["Coupled", "coupled"]
