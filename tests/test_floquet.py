"""Periodic dynamics (Floquet) and EA-Pipe: monodromy, per-step rate, max lr, CLI, trainer.

Independent references: for period 1 the characteristic-polynomial path (boundary locus,
dominant root), which shares nothing with the monodromy but the rule's step; for EA-Pipe the
per-step matrices of Alg. 1 written out by hand (tests/eapipe_reference.py) and the trainer.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from eapipe_reference import monodromy as alg1_monodromy
from oracles import dense_max_lr

from stability.agreement.comparison import Protocol, measure_max_lr, measure_rates
from stability.analysis.boundary import max_lr
from stability.cli.main import main
from stability.dynamics.linear import characteristic_polynomial
from stability.dynamics.monodromy import monodromy, monodromy_polynomial
from stability.dynamics.round_robin import round_robin_function
from stability.quadratic import QuadraticModel
from stability.rules.eapipe import ElasticAveraging, mixing_matrix, sync_matrix
from stability.rules.registry import build_rule
from stability.spectrum import (
    dominant_root_at,
    floquet_multipliers,
    floquet_radius,
    floquet_stable,
)
from stability.trainer.data import synthetic_regression
from stability.trainer.linearize import linreg_linearization
from stability.trainer.linreg import LinearRegression


@pytest.mark.parametrize(
    "name, kw",
    [
        ("sgd", {"tau": 3}),
        ("momentum", {"tau": 2, "momentum": 0.7}),
        ("lwp-v+sc", {"tau": 4}),
        ("t2", {"tau_fwd": 5, "tau_bkwd": 1, "delta": 2.0}),
        ("wp", {"tau": 2, "option": "3", "workers": 2.0, "hessian_estimate": 0.5}),
    ],
)
def test_period_one_reduces_to_the_time_invariant_analysis(name, kw):
    """For P = 1 the monodromy is the state matrix: its radius is the characteristic
    polynomial's dominant root, and bisecting it gives the boundary-locus max lr."""
    rule, model = build_rule(name, **kw)
    exact = max_lr(rule, model).max_lr  # boundary locus on the characteristic polynomial
    on_monodromy = dense_max_lr(rule, model, lo=1e-3 * exact, hi=10 * exact, radius=floquet_radius)
    assert on_monodromy == pytest.approx(exact, rel=1e-9)
    for lr in (0.3 * exact, 0.9 * exact):
        rate = float(floquet_radius(rule, model, lr))
        assert rate == pytest.approx(dominant_root_at(rule, model, lr).radius, rel=1e-9)


def alg1_radius(rule: ElasticAveraging, lam: float, lr: float) -> float:
    """ρ(M)^{1/P} of EA-Pipe Alg. 1's hand-written monodromy."""
    M = alg1_monodromy(rule.replicas, rule.tau, rule.elastic, rule.sync_period, lam, lr)
    return float(np.max(np.abs(np.linalg.eigvals(M)))) ** (1 / rule.period)


def test_mixing_matrix_is_doubly_stochastic_and_the_monodromy_at_lr_zero():
    """EA-Pipe App. A Lemma 1: W = M^1⋯M^N is doubly stochastic; with no gradient one period
    of the round-robin syncs is W (consensus eigenvalue 1)."""
    for n, alpha in ((2, 0.3), (4, 0.5), (7, 0.9)):
        W = mixing_matrix(n, alpha)
        np.testing.assert_allclose(W.sum(axis=0), 1.0, rtol=1e-14)
        np.testing.assert_allclose(W.sum(axis=1), 1.0, rtol=1e-14)
        assert np.all(W >= 0) and np.all(W[-1] > 0) and np.all(W[:, -1] > 0)  # Lemma 3
        assert np.allclose(sync_matrix(n, 0, alpha), sync_matrix(n, 0, alpha).T)
        rule = ElasticAveraging(tau=n - 1, elastic=alpha)
        M = monodromy(rule, QuadraticModel(1.0), 0.0)
        np.testing.assert_allclose(
            np.sort_complex(np.linalg.eigvals(M)), np.sort_complex(np.linalg.eigvals(W)), atol=1e-12
        )
        assert max(abs(np.linalg.eigvals(W))) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("n, s, tau", [(1, 1, 0), (3, 2, 2), (4, 1, 1), (2, 3, 1)])
def test_independent_replicas_without_elastic_force(n, s, tau):
    """α = 0: each replica does undelayed SGD on its own turn: rate |1 − lrλ|^{1/N} per step
    (the master stays put: multiplier 1), unstable from lr = 2/λ."""
    rule, model = build_rule("ea", tau=tau, replicas=n, elastic=0.0, sync_period=s, lam=2.0)
    mu = np.sort(np.abs(floquet_multipliers(rule, model, 0.3)))
    np.testing.assert_allclose(mu, sorted([abs(1 - 0.6) ** s] * n + [1.0]), rtol=1e-12)
    rule2, model2 = build_rule("ea", tau=tau, replicas=n, elastic=0.5, sync_period=s, lam=2.0)
    assert floquet_radius(rule2, model2, 0.3) < 1  # the force pulls the master in too


def test_staleness_appears_with_fewer_replicas_than_minibatches_in_flight():
    enough = ElasticAveraging(tau=3, replicas=4)
    short = ElasticAveraging(tau=3, replicas=2)
    assert (enough.forward_lag, enough.replica_lag) == (3, 3)
    assert (short.forward_lag, short.replica_lag) == (3, 1)
    model = QuadraticModel(1.0)
    assert max_lr(short, model).max_lr < max_lr(enough, model).max_lr


def test_periodic_rules_in_the_core_entry_points(capsys):
    rule, model = build_rule("ea", tau=3, sync_period=2)
    with pytest.raises(ValueError, match="periodic rule \\(period 8\\)"):
        characteristic_polynomial(rule, model)
    dom = dominant_root_at(rule, model, 0.2)
    assert dom.radius == pytest.approx(alg1_radius(rule, 1.0, 0.2), rel=1e-12)
    assert abs(dom.root) == pytest.approx(dom.radius, rel=1e-12)
    result = max_lr(rule, model)
    assert result.method == "Floquet bisection (certified)"
    exact = dense_max_lr(
        rule, model, lo=1e-3, hi=10.0, radius=lambda r, m, lr: alg1_radius(r, 1.0, lr)
    )
    assert result.max_lr == pytest.approx(exact, rel=1e-9)
    assert alg1_radius(rule, 1.0, result.max_lr * (1 - 1e-6)) < 1
    assert alg1_radius(rule, 1.0, result.max_lr * (1 + 1e-6)) > 1
    assert main(["radius", "ea", "--tau", "3", "--sync-period", "2", "--lr", "0.2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["spectral_radius"] == pytest.approx(dom.radius, rel=1e-12)
    assert out["half_life"] == pytest.approx(-math.log(2) / math.log(dom.radius), rel=1e-12)
    assert main(["poly", "ea", "--tau", "3", "--sync-period", "2", "--lr", "0.2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no time-invariant characteristic polynomial" in err


@pytest.mark.parametrize(
    "kw",
    [
        {"replicas": 3, "sync_period": 2},
        {"replicas": 2, "sync_period": 2},
        {"replicas": 1, "sync_period": 3},
    ],
)
def test_monodromy_polynomial_has_the_alg_1_multipliers_as_roots(kw):
    """Roots of det(μI − M) = the nonzero multipliers of Alg. 1's monodromy (stale or not)."""
    rule, model = build_rule("ea", tau=2, elastic=0.4, **kw)
    poly = monodromy_polynomial(rule, model, 0.3)
    roots = np.sort_complex(np.roots(poly.normalized().dense()))
    M = alg1_monodromy(rule.replicas, 2, 0.4, rule.sync_period, 1.0, 0.3)
    mu = np.linalg.eigvals(M)
    mu = np.sort_complex(mu[np.abs(mu) > 1e-9 * np.max(np.abs(mu))])
    np.testing.assert_allclose(roots, mu, atol=1e-10)


@pytest.mark.parametrize(
    "kw",
    [
        {"tau": 3, "elastic": 0.5, "sync_period": 2},
        {"tau": 1, "replicas": 2, "elastic": 0.3, "sync_period": 3},
        {"tau": 4, "replicas": 2, "elastic": 0.6},
    ],
)
def test_ea_pipe_predictions_match_the_trainer(kw):
    """Acceptance: per-step rate ρ(M)^{1/P} and max lr vs the trainer on a deterministic
    quadratic (least squares, Hessian eigenvalues 0.3, 1, 2.5), each within 2 %."""
    problem = LinearRegression.from_dataset(synthetic_regression([0.3, 1.0, 2.5], seed=1))
    setup = linreg_linearization(problem)
    lams = setup.hessian_eigenvalues
    rule, _ = build_rule("ea", **kw)
    predicted = min(max_lr(rule, QuadraticModel(float(lam))).max_lr for lam in lams)
    protocol = Protocol(steps=6000, rate_steps=2000, per_round=8, rel_tol=2e-3)
    measured = measure_max_lr(setup, rule, predicted, protocol, None)
    assert measured.max_lr == pytest.approx(predicted, rel=0.02)
    lrs = np.array([0.3, 0.8]) * predicted
    rates = np.exp(measure_rates(setup, rule, lrs, protocol).log_rate)
    for lr, rate in zip(lrs, rates, strict=True):
        theory = max(float(floquet_radius(rule, QuadraticModel(float(lam)), lr)) for lam in lams)
        assert rate == pytest.approx(theory, rel=0.02)


def _dense_radius(rule, model, lr):
    return float(np.max(np.abs(np.linalg.eigvals(monodromy(rule, model, lr)))))


@pytest.mark.parametrize(
    "kw, lr",
    [
        ({"tau": 2, "elastic": 0.4}, 0.7),
        ({"tau": 4, "replicas": 2, "elastic": 0.6}, 0.3),  # stale replicas: m = 3
        ({"tau": 5, "replicas": 3, "elastic": 0.3, "sync_period": 2}, 0.2),
        ({"tau": 1, "replicas": 2, "elastic": 0.3, "sync_period": 3}, 6.0),
    ],
)
def test_round_robin_function_is_the_characteristic_polynomial_of_the_monodromy(kw, lr):
    """det(μI − M) = μ·d(μ)^N − n(μ)^N (`stability.dynamics.round_robin` theorem), expanded
    here by polynomial products and compared with the dense monodromy's coefficients."""
    rule, model = build_rule("ea", **kw)
    f = round_robin_function(rule, model, lr)
    d, n = f.d[:, 0], f.n[:, 0]
    expanded = np.polysub(
        np.polymul([1.0, 0.0], _power(d, rule.replicas)), _power(n, rule.replicas)
    )
    np.testing.assert_allclose(expanded, np.poly(monodromy(rule, model, lr)), atol=1e-11)


def test_value_and_phase_rate_from_one_evaluation_count_the_multipliers():
    """`RoundRobinColumns.at_and_phase_rate` gives F as `at` does and its phase rate as
    |Re(z/(F/F'))| from `newton_step`'s F/F' (the derivative by another formula), on circles
    1e-9 outside the largest multiplier of a cluster (deep subdivision in `winding_turns`);
    the winding count there is every multiplier (the degree N·m + 1)."""
    from stability.winding import count_inside, largest_root

    rule, model = build_rule("ea", tau=3, replicas=3, elastic=0.0249, lam=20.0)
    f = round_robin_function(rule, model, np.array([1.0, 0.658]))
    rho = largest_root(f).radius
    cols = np.array([0, 1])
    theta = np.linspace(-math.pi, math.pi, 257)
    z = (rho * (1 + 1e-9))[:, None] * np.exp(1j * theta)[None, :]
    pick = np.broadcast_to(cols[:, None], z.shape)
    value, rate = f.at_and_phase_rate(z, pick)
    np.testing.assert_array_equal(value, f.at(z, pick))
    np.testing.assert_allclose(rate, np.abs((z / f.newton_step(z, pick)).real), rtol=1e-9)
    np.testing.assert_array_equal(count_inside(f, rho * (1 + 1e-9), cols), f.degree[cols])


def _power(p, k):
    out = np.array([1.0])
    for _ in range(k):
        out = np.polymul(out, p)
    return out


@pytest.mark.parametrize(
    "kw", [{"tau": 100}, {"tau": 100, "replicas": 7}, {"tau": 30, "replicas": 4, "sync_period": 2}]
)
def test_round_robin_radius_and_stability_agree_with_dense_eigenvalues(kw):
    """ρ(M) and 'every multiplier inside the unit circle' from the argument principle on F
    (no eigensolver) vs float64 eigenvalues of the dense monodromy, across the threshold."""
    rule, model = build_rule("ea", **kw)
    lrs = np.array([0.01, 0.05, 0.3, 1.0, 1.4])
    dense = np.array([_dense_radius(rule, model, lr) for lr in lrs])
    np.testing.assert_allclose(
        floquet_radius(rule, model, lrs), dense ** (1 / rule.period), rtol=1e-9
    )
    clear = np.abs(dense - 1) > 1e-6
    assert (floquet_stable(rule, model, lrs) == (dense < 1))[clear].all()
    assert (dense < 1).any() and (dense > 1).any()  # the lrs straddle the threshold


@pytest.mark.parametrize(
    "kw", [{"tau": 20}, {"tau": 100, "replicas": 7}, {"tau": 60, "replicas": 8, "sync_period": 2}]
)
def test_round_robin_max_lr_is_certified_by_dense_eigenvalues(kw):
    """The structured max lr (O(τ) per lr) sits on the dense threshold: ρ(M) < 1 just below,
    ≥ 1 just above (relative 1e-7)."""
    rule, model = build_rule("ea", **kw)
    found = max_lr(rule, model).max_lr
    assert _dense_radius(rule, model, found * (1 - 1e-7)) < 1.0
    assert _dense_radius(rule, model, found * (1 + 1e-7)) >= 1.0


@pytest.mark.parametrize("lam", [1e-20, 1e-150, 1e20, 1e150])
def test_floquet_max_lr_scales_as_one_over_the_curvature(lam):
    """EA-Pipe's period map depends on lr only through lr·λ (App. A Remark 1: W − lr·λ·E), so
    max lr(λ) = max lr(1)/λ; with a grid absolute in lr, λ = 1e±20 answered 0.  The answer at
    λ is also certified by dense eigenvalues of the monodromy just below and above."""
    rule, model = build_rule("ea", tau=3, lam=lam)
    found = max_lr(rule, model).max_lr
    assert found * lam == pytest.approx(max_lr(*build_rule("ea", tau=3)).max_lr, rel=1e-12)
    assert _dense_radius(rule, model, found * (1 - 1e-7)) < 1.0
    assert _dense_radius(rule, model, found * (1 + 1e-7)) >= 1.0


def test_round_robin_size_limits_refuse_in_one_line(capsys):
    """Above the documented limits `max-lr ea` refuses up front naming the parameter."""
    assert main(["max-lr", "ea", "--tau", "100000"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "tau must be ≤ 5000" in err
    with pytest.raises(ValueError, match="^replicas must be"):
        max_lr(ElasticAveraging(tau=1000, replicas=10), QuadraticModel(1.0))
    with pytest.raises(ValueError, match="^sync_period must be"):
        max_lr(ElasticAveraging(tau=3, sync_period=10**4), QuadraticModel(1.0))
