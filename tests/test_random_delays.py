"""Random delays (PipeMare App. E): first moment, mean square, almost sure; the trainer's
sampled delays on cpusmall."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stability.agreement.predict import predicted_max_lr
from stability.agreement.validate import Protocol, linreg_setup, measure_max_lr
from stability.analysis.boundary import max_lr
from stability.analysis.random_delays import (
    delay_matrices,
    lyapunov_exponent,
    mean_matrix,
    mean_square_radius,
    thresholds,
)
from stability.dynamics.linear import characteristic_polynomial
from stability.quadratic import QuadraticModel
from stability.rules.base import history_depth
from stability.rules.random_delay import (
    ExpectedDelay,
    SampledDelays,
    mean_delay,
    truncated_exponential,
)
from stability.spectrum import roots
from stability.trainer.data import load_regression
from stability.trainer.linreg import LinearRegression

CPUSMALL = "cpusmall"  # the shipped copy


def test_truncated_exponential():
    p = truncated_exponential(4, 0.5)
    assert sum(p) == pytest.approx(1.0, rel=1e-15)
    assert p[1] / p[0] == pytest.approx(math.exp(-0.5), rel=1e-14)
    assert truncated_exponential(3, 0.0) == pytest.approx((0.25,) * 4)
    assert mean_delay(truncated_exponential(16, -50.0)) == pytest.approx(16, abs=1e-12)
    with pytest.raises(ValueError, match="sum to 1"):
        ExpectedDelay((0.5, 0.6))


@pytest.mark.parametrize("momentum", [0.0, 0.6])
def test_mean_matrix_eigenvalues_are_the_kernel_polynomial_roots(momentum):
    p = truncated_exponential(5, -0.3)
    rule, model = ExpectedDelay(p, momentum), QuadraticModel(1.7)
    poly = characteristic_polynomial(rule, model).at(0.2).normalized()
    expected = np.sort_complex(roots(poly.dense()))
    eig = np.linalg.eigvals(mean_matrix(p, momentum, 1.7, 0.2))
    eig = np.sort_complex(eig[np.abs(eig) > 1e-12])
    np.testing.assert_allclose(eig, expected, atol=1e-10)


def test_a_fixed_delay_gives_lemma_1_by_every_notion():
    tau = 6
    p = (0.0,) * tau + (1.0,)
    lemma_1 = 2 * math.sin(math.pi / (4 * tau + 2))
    A = delay_matrices(p, 0.0, 1.0, 0.1)
    assert mean_square_radius(p, 0.0, 1.0, 0.1) == pytest.approx(
        max(abs(np.linalg.eigvals(A[tau]))) ** 2, rel=1e-10
    )
    th = thresholds(p, 0.0, 1.0, steps=3000, runs=8)
    assert th.first_moment == pytest.approx(lemma_1, rel=1e-3)
    assert th.mean_square == pytest.approx(lemma_1, rel=1e-3)
    assert th.almost_sure == pytest.approx(lemma_1, rel=0.02)


def test_the_first_moment_is_not_enough_for_spread_out_delays():
    """The docstring's example: β = 0.5 on {0..4}, λ = 1."""
    p = truncated_exponential(4, 0.5)
    th = thresholds(p, 0.0, 1.0, steps=4000, runs=16)
    assert th.first_moment == pytest.approx(6.927, rel=1e-3)
    assert th.mean_square == pytest.approx(1.00, rel=0.01)
    assert th.almost_sure == pytest.approx(1.45, rel=0.03)
    assert th.mean_square <= th.almost_sure <= th.first_moment / 4
    exact = max_lr(ExpectedDelay(p), QuadraticModel(1.0)).max_lr  # boundary locus
    assert th.first_moment == pytest.approx(exact, rel=1e-3)


def test_lyapunov_exponent_is_the_log_rate_of_a_fixed_delay():
    p = (0.0, 0.0, 1.0)
    gamma = lyapunov_exponent(p, 0.5, 1.0, [0.05, 0.2], steps=3000, runs=4)
    rho = [max(abs(np.linalg.eigvals(delay_matrices(p, 0.5, 1.0, a)[2]))) for a in (0.05, 0.2)]
    np.testing.assert_allclose(gamma, np.log(rho), atol=2e-3)


def test_sampled_delays_draw_the_distribution_and_read_every_lag():
    p = truncated_exponential(5, -0.4)
    rule = SampledDelays(p, stage_sizes=(2, 3), seed=3)
    assert history_depth(rule) == 6
    draws = np.array([rule.delays(t) for t in range(20_000)])
    freq = np.bincount(draws.ravel(), minlength=6) / draws.size
    np.testing.assert_allclose(freq, p, atol=0.01)
    assert np.array_equal(rule.delays(7), rule.delays(7))  # a pure function of (seed, t)


@pytest.mark.slow
@pytest.mark.parametrize("tau, beta, within", [(16, 0.0, 0.10)])
def test_first_moment_predicts_the_trainer_on_cpusmall(tau, beta, within):
    """Acceptance: first-moment max lr vs the trainer's measured one (cpusmall, full batch,
    every parameter drawing the same delay), within 10 % where the first moment applies
    (uniform delays on {0..16}; benchmarks/bench_seed.py --validate runs more cases)."""
    problem = LinearRegression.from_dataset(load_regression(CPUSMALL))
    setup = linreg_setup(problem)
    p = truncated_exponential(tau, beta)
    predicted = predicted_max_lr(ExpectedDelay(p), setup.modes_for(None))
    rule = SampledDelays(p, stage_sizes=(problem.dim,), seed=0)
    protocol = Protocol(steps=6000, per_round=8, rel_tol=5e-3)
    measured = measure_max_lr(setup, rule, predicted, protocol, None)
    assert measured.max_lr == pytest.approx(predicted, rel=within)
