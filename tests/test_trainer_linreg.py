"""Linear regression: gradient, Hessian and minimizer against independent computations."""

from __future__ import annotations

import numpy as np
import pytest

from stability.trainer.data import synthetic_regression
from stability.trainer.linreg import LinearRegression


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 5))
    y = X @ rng.standard_normal(5) + 0.3 * rng.standard_normal(40)
    return LinearRegression(X, y)


def direct_loss(p, w):
    r = p.X @ w - p.y
    return r @ r / (2 * p.samples)


def test_gradient_is_the_derivative_of_the_loss(problem):
    rng = np.random.default_rng(1)
    w = rng.standard_normal(5)
    h = 1e-6
    fd = [
        (direct_loss(problem, w + h * e) - direct_loss(problem, w - h * e)) / (2 * h)
        for e in np.eye(5)
    ]
    np.testing.assert_allclose(problem.gradient(w), fd, rtol=1e-7)
    np.testing.assert_allclose(
        problem.gradient(w), problem.X.T @ (problem.X @ w - problem.y) / 40, rtol=1e-13
    )


def test_loss_batched_matches_direct(problem):
    W = np.random.default_rng(2).standard_normal((3, 5))
    np.testing.assert_allclose(problem.loss(W), [direct_loss(problem, w) for w in W], rtol=1e-12)


def test_minimizer_zeroes_the_gradient_and_hessian_is_exact(problem):
    np.testing.assert_allclose(problem.gradient(problem.minimizer), 0, atol=1e-13)
    # the Hessian by finite differences of the gradient (exact for a quadratic)
    fd = np.array([problem.gradient(e) - problem.gradient(0 * e) for e in np.eye(5)])
    np.testing.assert_allclose(problem.hessian, fd, rtol=1e-12)
    assert problem.loss(problem.minimizer) == pytest.approx(problem.min_loss)


def test_minibatch_oracles_are_the_batch_gradients(problem):
    idx = np.array([[0, 3, 5, 7], [1, 1, 2, 39]])
    w = np.random.default_rng(3).standard_normal((2, 5))
    for c, oracle in enumerate(problem.batch_oracles(idx)):
        Xb, yb = problem.X[idx[c]], problem.y[idx[c]]
        want = (w @ Xb.T - yb) @ Xb / 4
        np.testing.assert_allclose(oracle(w, None, None), want, rtol=1e-12)


def test_synthetic_problem_spectrum_and_minimizer():
    data = synthetic_regression([3.0, 0.5, 0.1], seed=5)
    p = LinearRegression.from_dataset(data)
    np.testing.assert_allclose(p.hessian_eigenvalues(), [0.1, 0.5, 3.0], rtol=1e-12)
    assert p.min_loss == pytest.approx(0, abs=1e-25)
    assert p.stage_sizes(2).tolist() == [2, 1]
