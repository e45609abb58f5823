"""Predictions from a Hessian, checked against independent per-eigenvalue computations and
PipeMare's closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stability.analysis.boundary import max_lr
from stability.analysis.modes import (
    modes_from_hessian,
    modes_from_passes,
    modes_log_rate,
    predicted_max_lr,
    stage_blocks,
)
from stability.quadratic import QuadraticModel
from stability.rules.registry import build_rule
from stability.spectrum import dominant_root_at

LAM = np.array([0.05, 0.3, 1.7, 4.0])


def rotated(diag, seed=0):
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((len(diag), len(diag))))
    return Q @ np.diag(diag) @ Q.T


@pytest.mark.parametrize("tau", [0, 1, 5, 12])
def test_sgd_prediction_is_lemma_1_at_the_top_eigenvalue(tau):
    rule, _ = build_rule("sgd", tau=tau)
    got = predicted_max_lr(rule, modes_from_hessian(rotated(LAM)))
    assert got == pytest.approx(2 / LAM.max() * math.sin(math.pi / (4 * tau + 2)), rel=1e-11)


@pytest.mark.parametrize(
    "name, params",
    [
        ("momentum", {"tau": 3, "momentum": 0.9}),
        ("lwp+sc", {"tau": 2, "momentum": 0.8}),
        ("nesterov", {"tau": 1, "momentum": 0.5}),
    ],
)
def test_prediction_is_min_over_eigenvalues_of_scalar_max_lr(name, params):
    rule, _ = build_rule(name, **params)
    scalar = [max_lr(rule, QuadraticModel(lam=float(x))).max_lr for x in LAM]
    got = predicted_max_lr(rule, modes_from_hessian(rotated(LAM, seed=1)))
    assert got == pytest.approx(min(scalar), rel=1e-10)
    lr = 0.6 * got
    want = max(
        math.log(dominant_root_at(rule, QuadraticModel(lam=float(x)), lr).radius) for x in LAM
    )
    assert modes_log_rate(rule, modes_from_hessian(rotated(LAM)), lr) == pytest.approx(
        want, rel=1e-12
    )


@pytest.mark.parametrize(
    "name, params",
    [("discrepancy", {"tau_fwd": 6, "tau_bkwd": 2}), ("dc", {"tau": 5, "dc_lambda": 0.5})],
)
def test_modes_with_delta_are_each_mode_verified_to_its_own_max_lr(name, params):
    """With Δ, Φ ≠ 0 every mode has its own locus; the prediction (each mode checked only
    below the least crossing, `min_max_lr_grid`) is the least of the per-mode `max_lr`."""
    from stability.analysis.modes import Modes

    rule, _ = build_rule(name, **params)
    rng = np.random.default_rng(4)
    lam = np.sort(rng.uniform(0.05, 4.0, 9))
    modes = Modes(lam, 0.2 * lam * rng.uniform(-1, 1, 9), 0.1 * lam * rng.uniform(0, 1, 9))
    scalar = [
        max_lr(rule, QuadraticModel(float(a), float(b), float(c))).max_lr
        for a, b, c in zip(modes.lam, modes.delta, modes.phi, strict=True)
    ]
    assert predicted_max_lr(rule, modes) == pytest.approx(min(scalar), rel=1e-12)


def test_max_lr_prediction_on_modes_with_delta_is_left_out_above_its_work_limit():
    """77 modes × degree > 2e6 (τ = 30,000): a note at once, no internal error; the limit is
    the documented one."""
    from stability.analysis.modes import Modes, predict_modes
    from stability.limits import MODES_MAX_LR_MAX_WORK

    rule, _ = build_rule("dc", tau=30_000)
    lam = np.linspace(0.1, 1.0, 77)
    out = predict_modes(rule, Modes(lam, 0.01 * lam, 0.0 * lam), lr=0.01)
    assert out.max_lr is None and out.log_rate is None
    assert f"{MODES_MAX_LR_MAX_WORK:,}" in out.note and "77 × 3000" in out.note


def test_flat_directions_are_dropped_and_counted():
    modes = modes_from_hessian(np.diag([0.0, 1e-20, 2.0]))
    assert modes.lam.tolist() == [2.0] and modes.dropped == 2


def test_modes_from_commuting_passes_recover_delta_and_phi():
    Q, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((3, 3)))
    lam, delta, phi = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0]), np.array([0.2, 0, 1])
    Hf = Q @ np.diag(lam + delta) @ Q.T
    Hb = Q @ np.diag(phi - delta) @ Q.T  # the coefficients of PipeMare App. D.1
    Hr = Q @ np.diag(-phi) @ Q.T
    m = modes_from_passes(Hf, Hb, Hr)
    np.testing.assert_allclose(m.lam, lam, rtol=1e-12)
    np.testing.assert_allclose(m.delta, delta, atol=1e-12)
    np.testing.assert_allclose(m.phi, phi, atol=1e-12)
    assert m.offdiagonal < 1e-12
    # a discrepancy rule then predicts min over modes of the scalar model with its Δ_k
    rule, _ = build_rule("discrepancy", tau_fwd=4, tau_bkwd=1)
    scalar = [
        max_lr(rule, QuadraticModel(lam=float(a), delta=float(d), phi=float(p))).max_lr
        for a, d, p in zip(lam, delta, phi, strict=True)
    ]
    assert predicted_max_lr(rule, m) == pytest.approx(min(scalar), rel=1e-10)


def test_non_commuting_passes_report_their_offdiagonal_share():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((4, 4))
    m = modes_from_passes(rotated(LAM) + 0.3 * A, -0.3 * A, np.zeros((4, 4)))
    assert 0 < m.offdiagonal < 1


def test_stage_blocks():
    H = np.arange(25.0).reshape(5, 5)
    blocks = stage_blocks(H, [2, 3])
    np.testing.assert_array_equal(blocks[0], H[:2, :2])
    np.testing.assert_array_equal(blocks[1], H[2:, 2:])


def test_an_unresolved_crossing_is_a_note_not_an_internal_error(monkeypatch):
    """The locus raises ArithmeticError when a crossing stays unresolved after 16× resampling
    (dc at τ ≈ 2e4 on an MLP's modes): the run still happens, the prediction says why."""
    from stability.analysis import modes as modes_module

    def unresolved(rule, model):
        raise ArithmeticError("max lr: a crossing could not be resolved on the circle")

    monkeypatch.setattr(modes_module, "min_max_lr_grid", unresolved)
    rule, _ = build_rule("dc", tau=3)
    lam = np.array([0.5, 1.0])
    out = modes_module.predict_modes(rule, modes_module.Modes(lam, 0.1 * lam, 0.0 * lam), lr=0.1)
    assert out.max_lr is None and out.note.endswith("could not be resolved on the circle")


def test_ea_modes_with_delta_take_one_floquet_solve(monkeypatch):
    """EA-Pipe with N = τ + 1 replicas reads one weight in all passes, so Δ and Φ do not
    enter: the prediction is x_max/λ_max from one Floquet solve, equal to the least of the
    per-mode Floquet bisections (the outsider fuzz's ``train --rule ea --tau 26 --problem mlp``
    ran 77 of them: 25 s of CPU).  With N < τ + 1 replicas the passes differ, and they are
    still solved mode by mode."""
    from stability.analysis.modes import Modes
    from stability.rules.base import consistent_passes

    rule, _ = build_rule("ea", tau=3, elastic=0.3, sync_period=2)
    lam = np.array([0.2, 1.1, 2.5])
    modes = Modes(lam, np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.0, 0.4]))
    scalar = [
        max_lr(rule, QuadraticModel(float(a), float(b), float(c))).max_lr
        for a, b, c in zip(modes.lam, modes.delta, modes.phi, strict=True)
    ]
    assert consistent_passes(rule)
    import stability.analysis.modes as modes_module

    solved = []
    monkeypatch.setattr(modes_module, "max_lr", lambda r, m: solved.append(m) or max_lr(r, m))
    assert predicted_max_lr(rule, modes) == pytest.approx(min(scalar), rel=1e-9)
    assert solved == [QuadraticModel(1.0)]  # one solve, at λ = 1
    few, _ = build_rule("ea", tau=3, replicas=2, elastic=0.3, sync_period=2)
    assert not consistent_passes(few)
    assert consistent_passes(build_rule("sgd", tau=4)[0])
    assert not consistent_passes(build_rule("discrepancy", tau_fwd=3, tau_bkwd=1)[0])


def test_periodic_modes_are_bisected_only_where_they_bind(monkeypatch):
    """EA-Pipe with N < τ + 1 replicas (Δ, Φ enter): the least max lr over the modes equals
    the per-mode Floquet bisections', but a mode is bisected only when it is not stable below
    the least found so far (77 bisections on the MLP took 23 s of CPU)."""
    import stability.analysis.modes as modes_module
    from stability.analysis.boundary import floquet_stable_below
    from stability.analysis.modes import Modes
    from stability.rules.base import consistent_passes

    rule, _ = build_rule("ea", tau=5, replicas=2, elastic=0.4, sync_period=2)
    assert not consistent_passes(rule)
    rng = np.random.default_rng(7)
    lam = np.sort(rng.uniform(0.1, 3.0, 4))
    modes = Modes(lam, 0.3 * lam * rng.uniform(-1, 1, 4), 0.2 * lam * rng.uniform(0, 1, 4))
    models = [QuadraticModel(float(a), float(b), float(c)) for a, b, c in
              zip(modes.lam, modes.delta, modes.phi, strict=True)]  # fmt: skip
    scalar = [max_lr(rule, m).max_lr for m in models]
    solved = []
    monkeypatch.setattr(modes_module, "max_lr", lambda r, m: solved.append(m) or max_lr(r, m))
    assert predicted_max_lr(rule, modes) == min(scalar)
    assert 1 <= len(solved) < len(models)
    k = int(np.argmin(scalar))
    assert floquet_stable_below(rule, models[k], scalar[k] * (1 - 1e-6))
    assert not floquet_stable_below(rule, models[k], scalar[k] * (1 + 1e-6))
