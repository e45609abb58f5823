"""Kosson App. E eq. 33 batch-size scaling and its effect on the max stable lr."""

from __future__ import annotations

import math

import pytest

from stability.analysis.batch_scaling import scale_hyperparameters, scaling_table
from stability.analysis.boundary import max_lr
from stability.rules.registry import build_rule


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
    for r in rows:
        rule, model = build_rule("momentum", tau=r.tau, momentum=r.momentum, lam=2.0)
        assert r.max_lr == pytest.approx(max_lr(rule, model).max_lr, rel=1e-12)
        assert r.ratio == pytest.approx(r.lr / r.max_lr, rel=1e-12)
    # the reference point itself (N = N_r, τ = 1) is unstable for λ = 2 (ratio 2), and eq. 33
    # carries the (lack of) margin over to small updates with their longer delays
    assert rows[-1].lr == pytest.approx(0.1) and rows[-1].ratio == pytest.approx(2.0)
    assert not any(r.stable for r in rows)
    assert rows[0].ratio == pytest.approx(rows[1].ratio, rel=1e-3)


def test_fixed_sample_delay_keeps_the_stability_margin_nearly_constant():
    """With the delay fixed in samples, eq. 33 changes η/max_lr by < 1 % for N = 1 … 32
    (the continuous-time limit): the scaling rule transfers the stability margin too."""
    rows = scaling_table(
        [1, 2, 8, 32], lr_ref=0.1, momentum_ref=0.9, size_ref=128, delay_samples=64
    )
    ratios = [r.ratio for r in rows]
    assert max(ratios) / min(ratios) - 1 < 0.01
    assert math.isclose(ratios[0], 0.4957, rel_tol=1e-3)


def test_rules_without_momentum_are_refused():
    with pytest.raises(ValueError, match="has no momentum parameter"):
        scaling_table([1], lr_ref=0.1, momentum_ref=0.9, size_ref=8, delay_samples=4, rule="sgd")
