"""Kosson App. E eq. 33 batch-size scaling and its effect on the max stable lr.

Independent references: eq. 33 and τ = ⌈D/N⌉ typed here; the max stable lr of delayed heavy
ball from PipeMare eq. 13 typed here, ω^{τ+1} − (1+m)ω^τ + mω^{τ−1} + lr·λ, by numpy roots
and bisection; at τ = 1 in closed form (Jury: lr·λ < 1 − m).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracles import first_crossing, polynomial_radius

from stability.analysis.batch_scaling import scale_hyperparameters, scaling_table


def eq13(tau: int, m: float, lr_lam: float) -> np.ndarray:
    """PipeMare eq. 13 (τ ≥ 1), highest degree first."""
    c = np.zeros(tau + 2)
    c[0], c[1], c[2] = 1.0, -(1 + m), m
    c[-1] += lr_lam
    return c


def heavy_ball_max_lr(tau: int, m: float, lam: float) -> float:
    """First lr where a root of eq. 13 reaches the unit circle (scan + bisection)."""
    return first_crossing(
        lambda lr: polynomial_radius(eq13(tau, m, lr * lam)), lo=1e-9, hi=10.0, rtol=1e-12
    )


def eq33(lr_ref, m_ref, size_ref, size):
    """Kosson App. E eq. 33, typed: m = m_r^{N/N_r}, η = (1 − m)·N/((1 − m_r)·N_r)·η_r."""
    m = m_ref ** (size / size_ref)
    return (1 - m) * size / ((1 - m_ref) * size_ref) * lr_ref, m


def test_eq_33_keeps_the_momentum_decay_per_sample_and_scales_the_effective_step():
    lr, m = scale_hyperparameters(0.1, 0.9, 128, 1)
    assert m**128 == pytest.approx(0.9, rel=1e-12)  # decay per sample unchanged
    assert lr / (1 - m) == pytest.approx(0.1 / (1 - 0.9) / 128, rel=1e-12)  # ∝ N
    assert scale_hyperparameters(0.1, 0.9, 128, 128) == pytest.approx((0.1, 0.9))
    with pytest.raises(ValueError, match="momentum_ref must be"):
        scale_hyperparameters(0.1, 1.0, 128, 1)


def test_scaling_table_delays_and_thresholds():
    rows = scaling_table(
        [1, 8, 64], lr_ref=0.1, momentum_ref=0.9, size_ref=64, delay_samples=40, lam=2.0
    )
    assert [r.tau for r in rows] == [40, 5, 1]  # τ = ⌈D/N⌉ (PipeMare Table 1)
    for r, size in zip(rows, [1, 8, 64], strict=True):
        assert (r.lr, r.momentum) == pytest.approx(eq33(0.1, 0.9, 64, size), rel=1e-12)
        assert r.max_lr == pytest.approx(heavy_ball_max_lr(r.tau, r.momentum, 2.0), rel=1e-9)
        assert r.ratio == pytest.approx(r.lr / r.max_lr, rel=1e-12)
    # the reference point itself (N = N_r, τ = 1): Jury's test on ω² − (1+m)ω + m + lr·λ gives
    # max lr = (1 − m)/λ = 0.05, so lr = 0.1 is twice too large; eq. 33 carries the (lack of)
    # margin over to small updates with their longer delays
    assert rows[-1].max_lr == pytest.approx((1 - 0.9) / 2.0, rel=1e-12)
    assert rows[-1].lr == pytest.approx(0.1) and rows[-1].ratio == pytest.approx(2.0)
    assert not any(r.stable for r in rows)
    assert rows[0].ratio == pytest.approx(rows[1].ratio, rel=1e-3)


def test_fixed_sample_delay_keeps_the_stability_margin_nearly_constant():
    """With the delay fixed in samples, eq. 33 changes η/max_lr by < 1 % for N = 1 … 32
    (the continuous-time limit): the scaling rule transfers the stability margin too."""
    sizes = [1, 2, 8, 32]
    rows = scaling_table(sizes, lr_ref=0.1, momentum_ref=0.9, size_ref=128, delay_samples=64)
    ratios = [r.ratio for r in rows]
    assert max(ratios) / min(ratios) - 1 < 0.01
    for r, size in zip(rows, sizes, strict=True):
        lr, m = eq33(0.1, 0.9, 128, size)
        expected = lr / heavy_ball_max_lr(math.ceil(64 / size), m, 1.0)
        assert r.ratio == pytest.approx(expected, rel=1e-9)


def test_rules_without_momentum_are_refused():
    with pytest.raises(ValueError, match="has no momentum parameter"):
        scaling_table([1], lr_ref=0.1, momentum_ref=0.9, size_ref=8, delay_samples=4, rule="sgd")
