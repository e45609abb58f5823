"""Rules with per-stage delays, T1, warm-up; per-stage training against the exact coupled
analysis (`stability.coupled.system`, an independent construction of the same linear dynamics)."""

from __future__ import annotations

import numpy as np
import pytest

from stability.agreement.comparison import Protocol, measure_max_lr, validate_pipeline
from stability.pipeline import per_parameter, pipeline
from stability.rules.discrepancy import optimal_gamma
from stability.rules.lwp_sc import spike_coefficients
from stability.trainer.data import synthetic_regression
from stability.trainer.linearize import linreg_linearization
from stability.trainer.linreg import LinearRegression
from stability.trainer.schedules import (
    T1,
    pipeline_rule,
    plan,
    stage_rule,
    synchronous_rule,
    uniform_rule,
)

SIZES = [2, 3, 1]


def test_pipemare_schedule_gives_per_parameter_delays_and_inconsistency():
    pipe = pipeline("pipemare", 3, 1)  # τ_fwd = 5, 3, 1; τ_bkwd = 0
    rule = pipeline_rule("sgd", {}, pipe, SIZES)
    assert rule.tau_fwd.tolist() == [5, 5, 3, 3, 3, 1]
    assert rule.tau_bkwd.tolist() == [0] * 6  # the backward pass reads the current weights
    stash = pipeline_rule("sgd", {}, pipeline("pipedream", 3, 1), SIZES)
    assert stash.tau_bkwd is None  # weight stashing: consistent


def test_delay_dependent_defaults_are_per_stage():
    pipe = pipeline("pipemare", 3, 1)
    sc = pipeline_rule("sc", {"momentum": 0.9}, pipe, SIZES)
    a, b = spike_coefficients(0.9, per_parameter(pipe.tau_fwd, SIZES))
    np.testing.assert_allclose(sc.sc_a, a)
    np.testing.assert_allclose(sc.sc_b, b)
    t2 = pipeline_rule("t2", {"momentum": 0.5}, pipe, SIZES)
    np.testing.assert_allclose(t2.gamma, [optimal_gamma(t, 0) for t in (5, 5, 3, 3, 3, 1)])
    lwp = pipeline_rule("lwp", {"momentum": 0.9}, pipe, SIZES)
    assert lwp.horizon.tolist() == [5, 5, 3, 3, 3, 1]  # LWP_D per stage


def test_stage_rule_and_synchronous_rule():
    pipe = pipeline("pipemare", 3, 2)  # τ_fwd = 3, 2, 1
    r = stage_rule("lwp+sc", {"momentum": 0.9}, pipe, 1)
    assert (r.tau_fwd, r.tau_bkwd, r.horizon) == (2, 0, 2)
    sync = synchronous_rule("lwp", {"momentum": 0.9}, uniform_rule("lwp", {"momentum": 0.9}, 4))
    assert (sync.tau_fwd, sync.horizon) == (0, 0)
    t2 = uniform_rule("t2", {"tau_bkwd": 1}, 5)
    sync_t2 = synchronous_rule("t2", {}, t2)
    assert (sync_t2.tau_fwd, sync_t2.tau_bkwd, sync_t2.gamma) == (0, 0, t2.gamma)
    with pytest.raises(ValueError, match="recompute delays"):
        pipeline_rule("recompute", {}, pipe, SIZES)


def test_plan_phases():
    rule = pipeline_rule("momentum", {"momentum": 0.9}, pipeline("pipemare", 3, 1), SIZES)
    phases = plan(rule, t1_steps=50, warmup=synchronous_rule("momentum", {}, rule), warmup_steps=7)
    assert [p.steps for p in phases] == [7, None]
    assert isinstance(phases[1].lr_scale, T1)
    np.testing.assert_allclose(phases[1].lr_scale(0), 1 / rule.tau_fwd)
    with pytest.raises(ValueError, match="warm-up rule"):
        plan(rule, warmup_steps=3)


def test_uniform_rule_takes_per_run_delays():
    rule = uniform_rule("nesterov", {"momentum": 0.9, "delta": 3.0}, np.array([[0], [2]]))
    assert rule.tau_fwd.shape == (2, 1) and rule.sc_a == 0.9


def test_per_stage_training_matches_the_exact_coupled_analysis():
    problem = LinearRegression.from_dataset(synthetic_regression([3.0, 1.5, 1.0, 0.4, 0.2, 0.05]))
    setup = linreg_linearization(problem)
    pipe = pipeline("pipemare", 3, 1)
    rows = validate_pipeline(
        setup, ["sgd", "momentum"], {"momentum": 0.9}, pipe, Protocol(steps=6000, rel_tol=2e-3)
    )
    for row in rows:
        assert row["ratio_to_coupled"] == pytest.approx(1.0, abs=3e-3), row
        # the scalar readings bracket nothing in general; here both are far off
        assert row["predicted_max_lr_worst_stage"] < row["measured_max_lr"]
        assert len(row["predicted_max_lr_per_stage"]) == 3


def test_t1_at_its_start_matches_the_coupled_analysis_with_rescaled_stages():
    # with K ≫ the run, p_k ≈ 1: stage i steps with lr/τ_i (PipeMare eq. 4), which the coupled
    # model expresses as per-stage step-size factors
    from stability.coupled.system import coupled_system, dense_max_lr

    problem = LinearRegression.from_dataset(synthetic_regression([2.0, 1.0, 0.5, 0.3], seed=1))
    pipe = pipeline("pipemare", 2, 1)  # τ_fwd = 3, 1
    sizes = problem.stage_sizes(2)
    rule = pipeline_rule("sgd", {}, pipe, sizes)
    exact = dense_max_lr(
        coupled_system(problem.hessian, stage_sizes=sizes, rule="sgd", tau_fwd=[3, 1], t1_power=1)
    ).max_lr
    setup = linreg_linearization(problem)
    m = measure_max_lr(setup, plan(rule, t1_steps=10**12), exact, Protocol(steps=6000), None)
    plain = measure_max_lr(setup, rule, exact, Protocol(steps=6000, rel_tol=1e-2), None)
    assert m.max_lr == pytest.approx(exact, rel=3e-3)
    assert plain.max_lr < 0.9 * m.max_lr  # T1 buys stability at the start
