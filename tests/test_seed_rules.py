"""The seed systems' rules (PipeOptim, Adam, SAPipe, baselines): the equivalences and limits
their docstrings state, each against an independent computation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from polytools import assert_same_up_to_omega

from stability.analysis.boundary import max_lr
from stability.cli.main import main
from stability.dynamics.linear import characteristic_polynomial
from stability.pipeline import pipeline
from stability.quadratic import QuadraticModel
from stability.rules.adam import Adam
from stability.rules.base import History, step
from stability.rules.baselines import SpecTrain, gpipe_utilization
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.pipeoptim import version_difference
from stability.rules.registry import RULES, build_rule
from stability.rules.sapipe import DelayCompensation, partial_staleness_delays

NEW_RULES = (
    "pipeoptim",
    "adam",
    "pipesgd",
    "dc",
    "wp",
    "ea",
    "stash",
    "gpipe",
    "spectrain",
    "shrink",
    "random-delay",
)


def _max_lr(name, **kw) -> float:
    rule, model = build_rule(name, **kw)
    return max_lr(rule, model).max_lr


def _cli_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# -- registry ----------------------------------------------------------------------------------


def test_rules_command_lists_every_seed_rule_with_parameters_and_sources(capsys):
    listed = {r["name"]: r for r in _cli_json(capsys, "rules")["rules"]}
    for name in NEW_RULES:
        assert listed[name]["sources"] and listed[name]["closed_forms"], name
        assert all(p["doc"] and p["allowed"] for p in listed[name]["parameters"]), name
    assert listed["pipeoptim"]["parameters"][1] == {
        "name": "optimizer",
        "flag": "--optimizer",
        "kind": "choice",
        "default": "sgdm",
        "allowed": "one of sgdm, adam, adamw",
        "doc": "optimizer whose step ΔW PipeOptim predicts with (Table I)",
    }


def test_choice_parameter_rejects_bad_values_in_one_line(capsys):
    assert main(["max-lr", "pipeoptim", "--optimizer", "sgd"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "optimizer must be one of sgdm, adam, adamw" in err
    with pytest.raises(ValueError, match="option must be one of 1, 2, 3"):
        build_rule("wp", option="4")


# -- PipeOptim ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tau, m, s", [(1, 0.9, 1), (4, 0.9, 4), (16, 0.5, 16), (8, 0.95, 3)])
def test_pipeoptim_sgdm_is_lwp_v_with_horizon_s(capsys, tau, m, s):
    """Acceptance: max-lr pipeoptim --optimizer sgdm = max-lr lwp-v --horizon s to 1e-10."""
    args = ["--tau", str(tau), "--momentum", str(m), "--horizon", str(s)]
    ours = _cli_json(capsys, "max-lr", "pipeoptim", "--optimizer", "sgdm", *args)["max_lr"]
    kosson = _cli_json(capsys, "max-lr", "lwp-v", *args)["max_lr"]
    assert ours == pytest.approx(kosson, rel=1e-10)


def test_pipeoptim_default_horizon_is_the_delay_eq_4():
    assert _max_lr("pipeoptim", tau=6) == pytest.approx(_max_lr("lwp-v", tau=6), rel=1e-12)
    assert [version_difference(4, r) for r in range(4)] == [3, 2, 1, 0]
    with pytest.raises(ValueError, match="rank must be an integer in"):
        version_difference(4, 4)


@pytest.mark.parametrize("d", [0.1, 0.5, 0.9])
def test_dampening_scales_the_step_by_one_minus_d(d):
    base = _max_lr("pipeoptim", tau=5, momentum=0.8, horizon=3)
    damped = _max_lr("pipeoptim", tau=5, momentum=0.8, horizon=3, dampening=d)
    assert damped == pytest.approx(base / (1 - d), rel=1e-10)


@pytest.mark.parametrize("tau, s, b1, P", [(0, 0, 0.9, 1.0), (3, 3, 0.9, 2.0), (5, 2, 0.5, 0.3)])
def test_frozen_adam_is_the_engine_at_a_rescaled_step(tau, s, b1, P):
    """Without decay, frozen Adam = DelayedMomentum(β1, a = (1−β1)P, LWP^v horizon s(1−β1)P)."""
    rule, model = build_rule("pipeoptim", optimizer="adam", tau=tau, horizon=s, beta1=b1, precond=P)
    engine = DelayedMomentum(
        tau_fwd=tau,
        tau_bkwd=0,
        momentum=b1,
        sc_a=(1 - b1) * P,
        horizon=s * (1 - b1) * P,
        prediction="velocity",
    )
    for lr in (0.01, 0.3):
        assert_same_up_to_omega(
            characteristic_polynomial(rule, model).at(lr),
            characteristic_polynomial(engine, model).at(lr),
        )


def _textbook_adam(grad, w0, lr, steps, *, b1, b2, eps, wd, horizon):
    """Kingma & Ba Alg. 1 (+ AdamW decay, + PipeOptim eq. 5 prediction), written as a loop."""
    w, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    last = np.zeros_like(w0)  # ΔW of the previous step (PipeOptim Table I)
    for t in range(1, steps + 1):
        g = grad(w - lr * horizon * last)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        last = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        w = w - lr * (last + wd * w)
    return w


@pytest.mark.parametrize("wd, horizon", [(0.0, 0.0), (0.05, 0.0), (0.0, 2.0), (0.01, 3.0)])
def test_real_adam_step_matches_a_textbook_loop(wd, horizon):
    H = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, -0.2], [0.0, -0.2, 0.5]])

    def grad(u):
        return H @ u - np.array([1.0, -1.0, 0.5])

    kw = dict(b1=0.9, b2=0.99, eps=1e-8, wd=wd, horizon=horizon)
    rule = Adam(tau=0, beta1=0.9, beta2=0.99, weight_decay=wd, horizon=horizon).trainer_rule()
    w0 = np.array([1.0, 2.0, -1.0])
    hist = History.constant(rule, w0)
    for _ in range(40):
        hist = step(rule, hist, lambda f, b, r: grad(f), 0.05)
    expected = _textbook_adam(grad, w0, 0.05, 40, **kw)
    np.testing.assert_allclose(hist.weights, expected, rtol=1e-12, atol=1e-14)


def test_adam_weight_decay_needs_adamw_and_trainer_rules_are_real():
    with pytest.raises(ValueError, match="use optimizer adamw"):
        build_rule("pipeoptim", optimizer="adam", weight_decay=0.1)
    rule, _ = build_rule("pipeoptim", optimizer="adamw", weight_decay=0.1, tau=2)
    real = rule.trainer_rule()
    assert real.precond is None and real.variables == ("w", "m", "s") and real.horizon == 2


# -- SAPipe ------------------------------------------------------------------------------------


def test_pipesgd_fraction_one_is_delayed_heavy_ball_and_zero_is_undelayed():
    for tau in (1, 4):
        full = _max_lr("pipesgd", tau=tau, momentum=0.5)
        assert full == pytest.approx(_max_lr("momentum", tau=tau, momentum=0.5), rel=1e-12)
    assert _max_lr("pipesgd", tau=7, stale_fraction=0.0) == pytest.approx(2.0, rel=1e-12)
    np.testing.assert_array_equal(partial_staleness_delays(1, 0.25, 8), [1, 1, 0, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("q, expected", [(1.0, 2.0), (0.0, 2 * math.sin(math.pi / 22))])
def test_dc_quality_one_removes_the_delay_and_zero_keeps_it(q, expected):
    """q = 1: an exact Hessian makes g_DC the fresh gradient; q = 0: delayed SGD (Lemma 1)."""
    assert _max_lr("dc", tau=5, quality=q) == pytest.approx(expected, rel=1e-10)


def test_dc_at_one_step_staleness_has_threshold_two_over_lambda():
    """τ = 1, q = ½: ω² − (1 − lrλ/2)ω + lrλ/2, Schur-Cohn stable iff lrλ < 2."""
    for lam in (0.5, 1.0, 3.0, 3.876744514529965):  # the last: cpusmall's λ_max
        assert _max_lr("dc", tau=1, quality=0.5, lam=lam) == pytest.approx(2 / lam, rel=1e-10)


def test_dc_trainer_forms_follow_sapipe_eq_1():
    g_of = np.array([[0.5, -1.0, 2.0]])  # a gradient, one run
    w_now, w_old = np.array([[1.0, 2.0, 3.0]]), np.array([[0.0, 1.0, 1.0]])
    dx = w_now - w_old
    hist = History({"w": (w_now, w_old), "v": (0 * w_now, 0 * w_now)})
    rule = DelayCompensation(tau=1, dc_lambda=0.2, momentum=0.0)
    for form, compensated in (
        ("outer", g_of + 0.2 * g_of * (g_of @ dx.T).item()),  # g + λ g gᵀ Δx
        ("diagonal", g_of + 0.2 * g_of * g_of * dx),  # DC-ASGD: g + λ g∘g∘Δx
    ):
        new = rule.trainer_rule(form).update(hist, g_of, 0.1)
        np.testing.assert_allclose(new["w"], w_now - 0.1 * compensated, rtol=1e-15)
    assert rule.passes(hist, 0.1).forward[0, 0] == pytest.approx(0.5)  # w_old + ½Δx


def test_wp_options_limits():
    # option 1 at τ = 1 predicts the weights exactly: the undelayed heavy ball, lr < 2(1+m)/λ
    assert _max_lr("wp", tau=1, option="1", momentum=0.5) == pytest.approx(3.0, rel=1e-12)
    # option 2 without momentum is weight-form LWP with T = τ ... for τ = 1
    assert _max_lr("wp", tau=1, option="2") == pytest.approx(
        _max_lr("lwp", tau=1, momentum=0.0, horizon=1), rel=1e-12
    )
    # option 3 with one worker is option 1; with many workers and no DC it tends to option 2
    for tau in (1, 3):
        assert _max_lr("wp", tau=tau, option="3", workers=1.0, momentum=0.3) == pytest.approx(
            _max_lr("wp", tau=tau, option="1", momentum=0.3), rel=1e-10
        )
    many = _max_lr("wp", tau=3, option="3", workers=1e6, momentum=0.3)
    assert many == pytest.approx(_max_lr("wp", tau=3, option="2", momentum=0.3), rel=1e-5)


# -- baselines ---------------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [-3.0, 0.0, 5.0])
def test_stashing_makes_delta_irrelevant(delta):
    stash = _max_lr("stash", tau=6, momentum=0.5, delta=delta)
    assert stash == pytest.approx(_max_lr("momentum", tau=6, momentum=0.5), rel=1e-12)
    # without stashing the same discrepancy moves the threshold (PipeMare Lemma 2)
    if delta:
        moved = _max_lr("discrepancy", tau_fwd=6, tau_bkwd=0, delta=delta, momentum=0.5)
        assert abs(moved / stash - 1) > 0.01


def test_gpipe_is_undelayed_with_pipemare_table_1_utilization():
    rule, _ = build_rule("gpipe", stages=8, microbatches=4)
    assert rule.utilization == pipeline("gpipe", 8, 4).utilization == pytest.approx(4 / 11)
    assert gpipe_utilization(1, 1) == 1.0
    assert _max_lr("gpipe", momentum=0.9) == pytest.approx(3.8, rel=1e-12)  # 2(1+m)/λ
    assert rule.rate_per_time(0.5) == pytest.approx(0.5 ** (4 / 11))


def test_spectrain_horizons_on_a_pb_pipeline():
    """Kosson Fig. 16: stage i of S predicts to the first stage's update."""
    delays = pipeline("pb", 5).tau_fwd  # 2(S − i): [8, 6, 4, 2, 0]
    for i, d in enumerate(delays):
        st = SpecTrain(tau=int(d), tau_max=int(delays[0]), momentum=0.9)
        assert st.backward_horizon == i  # the backward pass runs i steps before stage 1's update
        assert st.forward_horizon == int(d) + i
    # with a common time equal to its own update it is LWP^v_D (Δ = 0 model)
    assert _max_lr("spectrain", tau=4) == pytest.approx(_max_lr("lwp-v", tau=4), rel=1e-12)


@pytest.mark.parametrize("s, tau", [(0.9, 4), (0.97, 16), (0.99, 1), (1e-12, 16), (1e-30, 9)])
def test_gradient_shrinking_raises_the_threshold_by_s_to_the_minus_tau(s, tau):
    """Also where s^τ ~ 1e-192 (|lr-coefficient|² underflows unless the locus rescales it:
    it answered 0, "stable for no lr", t1-audit's fuzz, issue 25)."""
    shrunk = _max_lr("shrink", tau=tau, momentum=0.9, shrink_factor=s)
    assert shrunk == pytest.approx(_max_lr("momentum", tau=tau, momentum=0.9) / s**tau, rel=1e-10)


def test_every_new_rule_builds_with_defaults_and_has_a_threshold():
    for name in NEW_RULES:
        assert name in RULES
        rule, model = build_rule(name)
        result = max_lr(rule, model)
        assert result.max_lr is not None and result.max_lr > 0, name


def test_model_independent_rules_accept_array_momentum():
    """Grid evaluation (one batched call) for the wrapped rules."""
    rule, model = build_rule("spectrain", tau=3, tau_max=7, momentum=np.array([0.0, 0.9]))
    cp = characteristic_polynomial(rule, QuadraticModel(model.lam))
    single = characteristic_polynomial(*build_rule("spectrain", tau=3, tau_max=7, momentum=0.9))
    assert_same_up_to_omega(
        cp.at(0.1).map_coefficients(lambda c: np.asarray(c)[1] if np.ndim(c) else c),
        single.at(0.1),
    )


# -- trainer (cpusmall, full batch) --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, kw",
    [
        ("pipeoptim", {"optimizer": "adamw", "weight_decay": 0.01}),
        ("pipesgd", {"stale_fraction": 0.5, "momentum": 0.9}),
        ("dc", {}),
        ("wp", {"option": "3", "workers": 4.0, "hessian_estimate": 1.0}),
        ("spectrain", {"tau_max": 32}),
    ],
)
def test_trainer_on_cpusmall_matches_the_prediction(name, kw, cpusmall_csv):
    """Acceptance (a representative subset at τ = 4; benchmarks/bench_seed.py --validate runs
    every rule at τ = 1, 4, 16): measured / predicted max stable lr within 2 %."""
    from stability.agreement.comparison import Protocol, measure_max_lr
    from stability.trainer.data import load_regression
    from stability.trainer.linearize import linreg_linearization
    from stability.trainer.linreg import LinearRegression

    problem = LinearRegression.from_dataset(load_regression(cpusmall_csv))
    setup = linreg_linearization(problem)
    rule, _ = build_rule(name, tau=4, **kw)
    predicted = min(
        max_lr(rule, QuadraticModel(float(lam))).max_lr for lam in setup.hessian_eigenvalues
    )
    protocol = Protocol(steps=6000, per_round=8, rel_tol=5e-3)
    measured = measure_max_lr(setup, rule, predicted, protocol, None)
    assert measured.max_lr == pytest.approx(predicted, rel=0.02)
