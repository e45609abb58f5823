"""The one Lyapunov estimator, `stability.dynamics.random_products.Renormalised`, against exact
values.

For scalar products x_{t+1} = a_t·x_t the renormalised estimate is exact: γ̂ is the mean of
ln|a_t| over the counted steps, whatever the renormalisation does in between.  For a constant
diagonal matrix γ is ln of its largest |entry|.  Overflow and collapse are decided as the
module says (+∞ / −∞), and both systems that use it agree with a direct simulation.
"""

from __future__ import annotations

import numpy as np
import pytest

from stability.dynamics.random_products import Renormalised


def _run(factors: np.ndarray) -> np.ndarray:
    """γ̂ of x_{t+1} = factors[t]·x_t per run, factors of shape (steps, runs, *vector)."""
    estimator = Renormalised(factors.shape[1:2], factors.shape[0])
    x = np.ones(factors.shape[1:])
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(factors.shape[0]):
            x = estimator(t, factors[t] * x)
    return estimator.exponents()


@pytest.mark.parametrize("steps", [3000, 2011])
def test_scalar_products_are_exact(steps):
    """γ̂ = Σ ln|a_t| / (T − ⌊T/5⌋), the sum from the first step after the last renormalisation
    inside the burn-in (step 4·⌊burn/4⌋: 600 of 3,000, 400 of 2,011 where burn = 402)."""
    rng = np.random.default_rng(4)
    a = rng.choice([0.5, -3.0, 1.2], size=(steps, 3, 1))
    burn = steps // 5
    start = 4 * (burn // 4)
    exact = np.log(np.abs(a[start:, :, 0])).sum(axis=0) / (steps - burn)
    np.testing.assert_allclose(_run(a), exact, rtol=1e-12)


def test_constant_diagonal_gives_the_top_modulus():
    steps = 4000
    diagonal = np.array([[0.9, -1.1, 0.3], [0.2, 0.5, -0.4]])  # two runs, one vector each
    gamma = _run(np.broadcast_to(diagonal, (steps, *diagonal.shape)))
    np.testing.assert_allclose(gamma, np.log([1.1, 0.5]), rtol=1e-12)


def test_vectors_span_the_trailing_axes():
    steps = 2000
    block = np.full((steps, 2, 3, 4), 0.7)  # two runs of 3 × 4 vectors
    block[:, 1, 2, 3] = 1.3  # run 1 has one growing coordinate among 12
    gamma = _run(block)
    np.testing.assert_allclose(gamma, np.log([0.7, 1.3]), rtol=1e-9)


def test_overflow_is_plus_infinity_and_collapse_minus_infinity():
    steps = 400
    a = np.ones((steps, 3, 1))
    a[250, 0] = 1e308
    a[251, 0] = 1e308  # overflows after the burn-in
    a[300, 1] = 0.0  # collapses: a nilpotent product
    a[10, 2] = 1e308
    a[11, 2] = 1e308  # overflows in the burn-in: restarted, then measured afresh
    gamma = _run(a)
    assert gamma[0] == np.inf
    assert gamma[1] == -np.inf
    assert gamma[2] == pytest.approx(0.0, abs=1e-12)


def test_random_delay_exponent_matches_a_direct_product():
    """`lyapunov_exponent` of random delays against the full S × S matrices multiplied out."""
    from stability.analysis.random_delays import delay_matrices, lyapunov_exponent

    probs, momentum, lr, steps, runs = [0.3, 0.3, 0.4], 0.5, 0.6, 1200, 3
    gamma = lyapunov_exponent(probs, momentum, 1.0, [lr], steps=steps, runs=runs, seed=7)
    rng = np.random.default_rng(7)
    delays = rng.choice(3, size=(steps, runs), p=probs)
    x = rng.standard_normal((runs, 4))  # S = τmax + 2
    A = delay_matrices(probs, momentum, 1.0, lr)
    burn, logs = steps // 5, np.zeros(runs)
    for t in range(steps):
        x = np.einsum("rij,rj->ri", A[delays[t]], x)
        if t % 4 == 3 or t == steps - 1:
            norm = np.linalg.norm(x, axis=1)
            x /= norm[:, None]
            logs += np.log(norm) if t >= burn else 0.0
    np.testing.assert_allclose(gamma[0], logs.mean() / (steps - burn), rtol=1e-10)
