"""Random delays (PipeMare App. E): first moment, mean square, almost sure; the trainer's
sampled delays on cpusmall.

Independent references, written here from the recurrence w_{t+1} = w_t − αλ·w_{t−τ_t}
(τ_t drawn from P at every step, momentum 0), never from `stability.analysis.random_delays`:

* first moment: E w_{t+1} = E w_t − αλ·Σ_k P(k)·E w_{t−k}, its polynomial typed and its roots
  found by numpy, bisected on lr;
* mean square: the step matrices A_k typed entry by entry, S ↦ Σ_k P(k)·A_k S A_kᵀ as the
  Kronecker sum (dense eigenvalues), bisected on lr;
* almost sure: Monte Carlo — many runs of the scalar recurrence (other seeds, more runs than
  the package's estimate), the log growth rate bisected on lr with common random numbers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracles import first_crossing, polynomial_radius

from stability.agreement.comparison import Protocol, measure_max_lr
from stability.analysis.boundary import max_lr
from stability.analysis.modes import modes_of, predicted_max_lr
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
from stability.trainer.linearize import linreg_linearization
from stability.trainer.linreg import LinearRegression


def first_moment_polynomial(p, lam: float, lr: float) -> np.ndarray:
    """ω^{K+1} − ω^K + αλ·Σ_k P(k)·ω^{K−k} (highest degree first), K = τ_max."""
    c = np.zeros(len(p) + 1)
    c[0], c[1] = 1.0, -1.0
    c[1:] += lr * lam * np.asarray(p)  # P(k) multiplies ω^{K−k}, index k + 1
    return c


def step_matrices(p, lam: float, lr: float) -> np.ndarray:
    """A_k on (w_t, …, w_{t−K}): w_{t+1} = w_t − αλ·w_{t−k}, the rest shifts down."""
    size = len(p)
    A = np.zeros((size, size, size))
    for k in range(size):
        A[k, 0, 0] = 1.0
        A[k, 0, k] -= lr * lam
        A[k, np.arange(1, size), np.arange(size - 1)] = 1.0
    return A


def second_moment_radius(p, lam: float, lr: float) -> float:
    """ρ(Σ_k P(k)·A_k ⊗ A_k): the growth per step of E[X Xᵀ]."""
    A = step_matrices(p, lam, lr)
    second = sum(pk * np.kron(a, a) for pk, a in zip(p, A, strict=True))
    return float(np.max(np.abs(np.linalg.eigvals(second))))


def monte_carlo_log_growth(p, lam: float, lrs, *, runs=256, steps=3000, seed=11) -> np.ndarray:
    """γ(lr) for each lr: the mean log growth per step of ``runs`` runs of the scalar
    recurrence, the same delays and starts for every lr (common random numbers)."""
    rng = np.random.default_rng(seed)
    size, lrs = len(p), np.asarray(lrs, dtype=float)
    delays = rng.choice(size, size=(steps, runs), p=np.asarray(p) / np.sum(p))
    # hist[(t − j) mod size] = w_{t−j}: a ring buffer of the last τ_max + 1 weights
    hist = np.repeat(rng.standard_normal((size, runs, 1)), lrs.size, axis=2)
    cols = np.arange(runs)
    burn, total = steps // 5, np.zeros((runs, lrs.size))
    for t in range(steps):
        now = t % size
        delayed = hist[(now - delays[t]) % size, cols]
        hist[(t + 1) % size] = hist[now] - lrs * lam * delayed
        if t % 8 == 7:
            norm = np.linalg.norm(hist, axis=0)
            collapsed = norm == 0  # an exactly nilpotent product: the run stays 0
            hist /= np.where(collapsed, 1.0, norm)
            if t >= burn:
                total += np.where(collapsed, -np.inf, np.log(np.where(collapsed, 1.0, norm)))
        if t == burn - 1:
            total[:] = 0.0
    return total.mean(axis=0) / (steps - burn)


def monte_carlo_threshold(p, lam: float, lrs) -> float:
    """The lr where the Monte Carlo γ(lr) crosses 0, interpolated on the grid ``lrs``."""
    gamma = monte_carlo_log_growth(p, lam, lrs)
    i = int(np.flatnonzero(gamma >= 0)[0])
    assert i > 0, "unstable at the first grid point"
    return float(np.interp(0.0, gamma[i - 1 : i + 1], lrs[i - 1 : i + 1]))


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
    if momentum == 0.0:  # the first-moment recurrence typed here
        typed = np.sort_complex(np.roots(first_moment_polynomial(p, 1.7, 0.2)))
        np.testing.assert_allclose(eig, typed[np.abs(typed) > 1e-12], atol=1e-10)


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
    """The docstring's example: β = 0.5 on {0..4}, λ = 1; each threshold against its
    independent computation (module doc), and their order."""
    p = truncated_exponential(4, 0.5)
    th = thresholds(p, 0.0, 1.0, steps=4000, runs=16)
    first = first_crossing(
        lambda lr: polynomial_radius(first_moment_polynomial(p, 1.0, lr)), lo=1e-3, hi=50.0
    )
    mean_square = first_crossing(
        lambda lr: second_moment_radius(p, 1.0, lr), lo=1e-3, hi=50.0, rtol=1e-9
    )
    almost_sure = monte_carlo_threshold(p, 1.0, np.linspace(0.3, 3.0, 55))
    assert th.first_moment == pytest.approx(first, rel=1e-3)
    assert th.mean_square == pytest.approx(mean_square, rel=1e-3)
    assert th.almost_sure == pytest.approx(almost_sure, rel=0.02)
    assert th.mean_square <= th.almost_sure <= th.first_moment / 4
    exact = max_lr(ExpectedDelay(p), QuadraticModel(1.0)).max_lr  # boundary locus
    assert first == pytest.approx(exact, rel=1e-9)


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
def test_first_moment_predicts_the_trainer_on_cpusmall(tau, beta, within, cpusmall_csv):
    """Acceptance: first-moment max lr vs the trainer's measured one (cpusmall, full batch,
    every parameter drawing the same delay), within 10 % where the first moment applies
    (uniform delays on {0..16}; benchmarks/bench_seed.py --validate runs more cases)."""
    problem = LinearRegression.from_dataset(load_regression(cpusmall_csv))
    setup = linreg_linearization(problem)
    p = truncated_exponential(tau, beta)
    predicted = predicted_max_lr(ExpectedDelay(p), modes_of(setup.jacobians_for(None)))
    rule = SampledDelays(p, stage_sizes=(problem.dim,), seed=0)
    protocol = Protocol(steps=6000, per_round=8, rel_tol=5e-3)
    measured = measure_max_lr(setup, rule, predicted, protocol, None)
    assert measured.max_lr == pytest.approx(predicted, rel=within)
