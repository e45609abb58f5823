"""Pipeline schedules: delays, utilization and memory against PipeMare Table 1 / App. A and
Kosson App. B, each checked by an independent computation (direct counting, closed forms)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stability.pipeline import (
    SCHEDULES,
    per_parameter,
    pipeline,
    split_evenly,
    t1_factor,
    warmup_utilization,
)


@given(P=st.integers(1, 200), N=st.integers(1, 64))
def test_pipemare_and_pipedream_forward_delays_are_table_1(P, N):
    expected = [math.ceil((2 * (P - i) + 1) / N) for i in range(1, P + 1)]
    for schedule in ("pipemare", "pipedream"):
        assert pipeline(schedule, P, N).tau_fwd.tolist() == expected


def test_backward_delays_per_schedule():
    assert pipeline("pipemare", 5, 2).tau_bkwd.tolist() == [0] * 5  # τ_bkwd = 0 (Table 1)
    stash = pipeline("pipedream", 5, 2)
    assert stash.tau_bkwd is None and stash.consistent  # weight stashing: τ_bkwd = τ_fwd
    assert stash.backward_delays.tolist() == stash.tau_fwd.tolist() == [5, 4, 3, 2, 1]
    sync = pipeline("gpipe", 5, 3)
    assert sync.tau_fwd.tolist() == [0] * 5 and sync.consistent
    assert not pipeline("pipemare", 5, 2).consistent


def test_pb_is_kosson_eq_31():
    # F_i = w^0_{i−2(S−1)} || w^1_{i−2(S−2)} || … || w^{S−1}_i, backward with W_i (eq. 30)
    p = pipeline("pb", 4)
    assert p.tau_fwd.tolist() == [6, 4, 2, 0]
    assert p.tau_bkwd.tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="microbatches must be 1"):
        pipeline("pb", 4, 2)


def test_uniform_needs_tau_and_is_consistent():
    p = pipeline("uniform", 3, tau=7)
    assert p.tau_fwd.tolist() == [7, 7, 7] and p.tau_bkwd is None
    with pytest.raises(ValueError, match="tau"):
        pipeline("uniform", 3)
    with pytest.raises(ValueError, match="tau"):
        pipeline("pipemare", 3, tau=2)


@given(P=st.integers(1, 100), N=st.integers(1, 100))
def test_utilization_is_table_1(P, N):
    assert pipeline("gpipe", P, N).utilization == pytest.approx(N / (N + P - 1), rel=1e-15)
    for schedule in ("pipemare", "pipedream"):
        assert pipeline(schedule, P, N).utilization == 1.0
    # GPipe fill and drain, simulated: microbatch j reaches stage i at slot i + j
    busy = {(i, i + j) for i in range(P) for j in range(N)}
    window = 1 + max(slot for _, slot in busy)
    assert pipeline("gpipe", P, N).utilization == pytest.approx(len(busy) / (P * window))


def test_weight_memory_is_table_1():
    sizes = [3, 5, 7, 11]
    stash = pipeline("pipedream", 4, 1)  # τ_fwd = 7, 5, 3, 1
    assert stash.weight_memory(sizes) == 3 * 7 + 5 * 5 + 7 * 3 + 11 * 1
    for schedule in ("pipemare", "gpipe"):
        assert pipeline(schedule, 4, 1).weight_memory(sizes) == sum(sizes)
    # many microbatches: every stage's delay is 1, PipeDream stores one copy too
    assert pipeline("pipedream", 4, 8).weight_memory(sizes) == sum(sizes)
    with pytest.raises(ValueError, match="stage_sizes"):
        stash.weight_memory([1, 2])


def test_activation_memory_counts_microbatches_in_flight():
    P, L, N = 6, 12, 3
    # direct count: stage i holds 2(P−i)+1 microbatches for each of its L/P operators
    direct = sum((2 * (P - i) + 1) * (L // P) for i in range(1, P + 1))
    assert pipeline("pipemare", P, N).activation_memory(L) == direct == L * P  # eq. 6
    assert pipeline("gpipe", P, N).activation_memory(L) == N * L  # eq. 7


def test_pipemare_recompute_matches_figure_9_and_eq_9():
    # Fig. 9: 16 stages in 4 segments starting at stages 1, 5, 9, 13: Σ (2(P−i) + S²)
    p = pipeline("pipemare", 16, 1)
    assert p.activation_memory(recompute_segment=4) == 2 * (15 + 11 + 7 + 3) + 4 * 16
    # eq. 9: at S = √P the memory is Θ(P^{3/2}) (ratio to P^{3/2} bounded, → 2)
    ratios = [
        pipeline("pipemare", P, 1).activation_memory(recompute_segment=math.isqrt(P)) / P**1.5
        for P in (16, 64, 256, 1024)
    ]
    assert all(1.5 < r < 2.5 for r in ratios)
    # eq. 10: GPipe with S = √N is Θ(P·√N)
    g = pipeline("gpipe", 64, 16).activation_memory(recompute_segment=4)
    assert g == (64 // 4) * (16 + 16)
    with pytest.raises(ValueError, match="one operator per stage"):
        p.activation_memory(32, recompute_segment=4)


def test_t1_factor_is_eq_4():
    K = 100
    assert t1_factor(4, 0, K) == pytest.approx(1 / 4)  # p_0 = 1: α/τ
    assert t1_factor(4, 50, K) == pytest.approx(4**-0.5)  # p = 1/2
    assert t1_factor(4, 100, K) == 1.0 and t1_factor(4, 1000, K) == 1.0  # base rate
    assert t1_factor(0, 0, K) == 1.0  # no delay, no rescaling
    got = t1_factor(np.array([1, 2, 8]), np.array([[0], [25]]), K)
    want = np.array([[1, 1 / 2, 1 / 8], [1, 2**-0.75, 8**-0.75]])
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_warmup_utilization_reproduces_table_2_iwslt():
    # 10 synchronous epochs at GPipe's 17 % and ≈ 25 asynchronous ones give 42 %
    assert warmup_utilization(25.4, 10, 0.17) == pytest.approx(0.42, abs=0.005)
    assert warmup_utilization(30, 0, 0.1) == 1.0


def test_stage_blocks():
    assert split_evenly(12, 5).tolist() == [3, 3, 2, 2, 2]
    assert per_parameter([4, 1], [2, 3]).tolist() == [4, 4, 1, 1, 1]
    with pytest.raises(ValueError, match="stages must be ≤"):
        split_evenly(3, 4)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: pipeline("zigzag", 4), "schedule must be one of"),
        (lambda: pipeline("pipemare", 0), "stages must be an integer ≥ 1"),
        (lambda: pipeline("gpipe", 4, 0), "microbatches must be an integer ≥ 1"),
        (lambda: pipeline("uniform", 4, tau=-1), "tau must be an integer"),
        (lambda: warmup_utilization(1, 1, 0), "sync_utilization"),
    ],
)
def test_bad_input_is_one_line_value_error(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


def test_every_schedule_describes_itself():
    for schedule in SCHEDULES:
        kw = {"tau": 2} if schedule == "uniform" else {}
        d = pipeline(schedule, 3, 1, **kw).describe([1, 1, 1])
        assert len(d["tau_fwd"]) == len(d["tau_bkwd"]) == 3
        assert 0 < d["utilization"] <= 1 and d["weight_memory"] >= 3
