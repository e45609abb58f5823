"""PipeOptim with AdamW's decay: the coupled max lr of dynamics quadratic in lr
(`stability.coupled.quadratic_lr`) against the block state matrix, a brute-force grid of its
spectral radius, and the scalar registry's certified bisection."""

import numpy as np
import pytest

from stability.analysis.boundary import max_lr
from stability.coupled.quadratic_lr import quadratic_max_lr
from stability.coupled.summary import analyze
from stability.coupled.system import (
    coupled_system,
    dense_max_lr,
    matrix_polynomial,
    spectral_radius,
    state_matrix,
)
from stability.coupled.transfer import stage_transfer
from stability.rules.registry import build_rule


def _adamw(H, sizes, taus, wd, **kw):
    return coupled_system(
        H,
        stage_sizes=sizes,
        rule="pipeoptim",
        tau_fwd=taus,
        tau_bkwd=taus,
        optimizer="adamw",
        weight_decay=wd,
        **kw,
    )


def test_adamw_prediction_is_quadratic_in_lr_and_closes_to_the_rule_polynomial():
    rule, model = build_rule("pipeoptim", tau=3, optimizer="adamw", weight_decay=0.5, lam=2.0)
    t = stage_transfer(rule)
    assert not t.is_affine and t.quadratic["forward"].terms
    from stability.rules.pipeoptim import adam_polynomial

    for lr in (0.05, 0.3, 1.1):
        closed = t.closed_loop(lr, {"forward": 2.0})
        ref = adam_polynomial(rule, model, lr)
        a, b = np.array(closed.dense(), float), np.array(ref.dense(), float)
        a, b = np.trim_zeros(a, "b"), np.trim_zeros(b, "b")  # up to a factor ω^k
        np.testing.assert_allclose(a / a[0], b / b[0], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("tau", "wd"), [(1, 3.0), (3, 0.1), (3, 3.0), (7, 10.0)])
def test_one_stage_one_eigenvalue_is_the_scalar_max_lr(tau, wd):
    """(τ, wd) = (3, 3) and (7, 10): the frozen-lr² candidate is not a crossing there and the
    answer comes from the bisection on the spectral radius."""
    system = _adamw(np.array([[2.0]]), (1,), (tau,), wd)
    got = quadratic_max_lr(system)
    ref = max_lr(*build_rule("pipeoptim", tau=tau, optimizer="adamw", weight_decay=wd, lam=2.0))
    assert got.certified
    assert got.max_lr == pytest.approx(ref.max_lr, rel=1e-8)


@pytest.mark.parametrize("wd", [0.1, 3.0, 10.0])
def test_four_stages_match_the_state_matrix_and_a_brute_force_grid(wd):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(8, 8))
    system = _adamw(A @ A.T / 8, (2, 2, 2, 2), (3, 2, 1, 0), wd)
    got = analyze(system)  # the command's path: scan → quadratic_lr
    assert got.certified and got.max_lr == pytest.approx(dense_max_lr(system).max_lr, rel=1e-8)
    grid = np.linspace(0.5, 1.5, 101) * got.max_lr
    radius = np.array([spectral_radius(system, lr) for lr in grid])
    first = grid[np.argmax(radius > 1 + 1e-10)]
    assert got.max_lr <= first < 1.03 * got.max_lr  # the grid step is 1 %
    assert np.all(radius[grid < got.max_lr] < 1 + 1e-10)


def test_matrix_polynomial_carries_the_lr_squared_terms():
    """det P(ω, lr) vanishes at the eigenvalues of the block state matrix (lr² terms included)."""
    rng = np.random.default_rng(1)
    A = rng.normal(size=(4, 4))
    system = _adamw(A @ A.T / 4, (2, 2), (2, 1), 4.0)
    lr = 0.3
    omega = np.linalg.eigvals(state_matrix(system, lr))
    omega = omega[np.abs(omega) > 1e-6]
    P = matrix_polynomial(system, omega, lr)
    scale = np.abs(np.linalg.det(matrix_polynomial(system, np.exp(1j * np.linspace(0, 3, 7)), lr)))
    assert np.max(np.abs(np.linalg.det(P))) < 1e-8 * np.max(scale)


def test_the_scan_alone_refuses_dynamics_quadratic_in_lr():
    """The lr² terms are not in the scan's couplings: it refuses rather than drop them."""
    from stability.coupled.scan import scan_max_lr

    system = _adamw(np.array([[2.0]]), (1,), (3,), 3.0)
    with pytest.raises(ValueError, match="quadratic_max_lr"):
        scan_max_lr(system)
    assert scan_max_lr(system.frozen_at(0.1)).max_lr > 0  # frozen: affine, scanned
