"""The batched engine runs the rules' own step: trajectories equal `stability.rules.base.step`
on a History exactly, per-run and per-stage delays read the right taps, diverging runs are
frozen without touching the others, T1 and warm-up phases do what PipeMare describes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from stability.pipeline import t1_factor
from stability.rules.base import History, step
from stability.rules.random_delay import random_delay
from stability.rules.registry import build_rule
from stability.trainer.data import synthetic_regression
from stability.trainer.engine import BatchStream, Phase, RingHistory, train
from stability.trainer.linreg import LinearRegression
from stability.trainer.mlp import MLP
from stability.trainer.schedules import T1


class Diagonal:
    """f(w) = Σ λ_j (w_j − c_j)²/2: an elementwise oracle, so batched and per-run arithmetic
    agree bit for bit (no BLAS reductions)."""

    def __init__(self, lam, c):
        self.lam, self.minimizer = np.asarray(lam, float), np.asarray(c, float)
        self.dim, self.samples = self.lam.size, 1

    def initial_weights(self, seed=0):
        return np.zeros(self.dim)

    def oracle(self, u_f, u_b=None, u_r=None):
        return self.lam * (u_f - self.minimizer)

    def loss(self, w):
        e = np.asarray(w) - self.minimizer
        return 0.5 * np.sum(self.lam * e * e, axis=-1)


@pytest.fixture(scope="module")
def linreg():
    return LinearRegression.from_dataset(synthetic_regression([2.0, 1.0, 0.5, 0.1], seed=4))


RULES = [
    ("sgd", {"tau": 3}),
    ("momentum", {"tau": 2, "momentum": 0.8}),
    ("nesterov", {"tau": 1, "momentum": 0.9}),
    ("lwp-v+sc", {"tau": 2, "momentum": 0.7}),
    ("t2", {"tau_fwd": 4, "tau_bkwd": 1, "momentum": 0.5}),
    ("recompute", {"tau_fwd": 3, "tau_bkwd": 0, "tau_recomp": 2, "decay": 0.2}),
]


@pytest.mark.parametrize("name, params", RULES)
def test_trajectory_equals_history_step_exactly(linreg, name, params):
    rule, _ = build_rule(name, **params)
    lr = np.array([0.01, 0.03, 0.05])
    hist = History.constant(rule, np.zeros((3, linreg.dim)))
    for steps in range(1, 10):
        hist = step(rule, hist, lambda f, b, r: linreg.gradient(f), lr[:, None])
        res = train(linreg, rule, lr, steps=steps, check_every=1)
        np.testing.assert_array_equal(res.final_weights, hist.weights)


def test_delays_beyond_the_run_read_the_start_without_storing_them(linreg):
    """The ring keeps min(1 + largest lag, steps + 1) values and reads a lag beyond the steps
    taken as the start: the same trajectory as the full history (a stage delay of 10⁵ in a
    2,000-step `validate` run allocated and copied 10⁵ values per run: 25 s)."""
    rule, _ = build_rule("discrepancy", tau_fwd=100_000, tau_bkwd=3, momentum=0.5)
    lr = np.array([0.01, 0.04])
    hist = History.constant(rule, np.zeros((2, linreg.dim)))
    for steps in range(1, 13):
        hist = step(rule, hist, lambda f, b, r: linreg.gradient(f), lr[:, None])
        res = train(linreg, rule, lr, steps=steps, check_every=1)
        np.testing.assert_array_equal(res.final_weights, hist.weights)


def test_mlp_inconsistent_trajectory_equals_history_step_exactly():
    rng = np.random.default_rng(0)
    mlp = MLP(rng.standard_normal((20, 3)), rng.standard_normal(20), hidden=(4, 3))
    rule, _ = build_rule("discrepancy", tau_fwd=3, tau_bkwd=1, momentum=0.5)
    lr = np.array([0.02, 0.05])
    w0 = mlp.initial_weights(1)
    hist = History.constant(rule, np.tile(w0, (2, 1)))
    for _ in range(6):
        hist = step(rule, hist, lambda f, b, r: mlp.oracle(f, b, None), lr[:, None])
    res = train(mlp, rule, lr, steps=6, w0=w0, check_every=1)
    np.testing.assert_array_equal(res.final_weights, hist.weights)


def test_per_run_delays_equal_separate_runs():
    prob = Diagonal([1.0, 3.0, 0.2], [1.0, -2.0, 0.5])
    taus = np.array([[0], [2], [5]])
    rule, _ = build_rule("momentum", tau=taus, momentum=0.6)
    lr = np.array([0.1, 0.05, 0.02])
    res = train(prob, rule, lr, steps=40)
    for r in range(3):
        single, _ = build_rule("momentum", tau=int(taus[r, 0]), momentum=0.6)
        hist = History.constant(single, np.zeros(3))
        for _ in range(40):
            hist = step(single, hist, prob.oracle, lr[r])
        np.testing.assert_array_equal(res.final_weights[r], hist.weights)


def test_per_stage_delays_read_each_parameter_at_its_lag():
    prob = Diagonal([1.0, 2.0, 0.5, 1.5], [1.0, 1.0, -1.0, 2.0])
    taus = np.array([4, 4, 1, 0])  # two stages of two parameters, and a third
    rule, _ = build_rule("sgd", tau=taus)
    res = train(prob, rule, [0.1], steps=30)
    for j in range(4):  # the oracle is elementwise: coordinate j is a scalar run with τ_j
        single, _ = build_rule("sgd", tau=int(taus[j]))
        hist = History.constant(single, 0.0)
        for _ in range(30):
            hist = step(
                single, hist, lambda f, b, r, j=j: prob.lam[j] * (f - prob.minimizer[j]), 0.1
            )
        assert res.final_weights[0, j] == hist.weights


def test_ring_history_taps():
    x = RingHistory(("w",), depth=4, initial={"w": np.zeros((2, 3))})
    for k in range(1, 7):
        x.push({"w": np.full((2, 3), float(k))})
    assert x.t == 6
    assert x("w")[0, 0] == 6 and x("w", 3)[1, 2] == 3
    np.testing.assert_array_equal(x("w", np.array([0, 1, 3])), [[6, 5, 3], [6, 5, 3]])
    np.testing.assert_array_equal(x("w", np.array([[2], [0]])), [[4, 4, 4], [6, 6, 6]])
    np.testing.assert_array_equal(x("w", np.array([[0, 1, 2], [3, 2, 1]])), [[6, 5, 4], [3, 4, 5]])
    y = RingHistory(("w", "delta"), depth=3, initial={"w": np.ones((1, 2))})
    y.push({"w": np.full((1, 2), 2.0)})  # a phase without δ holds it
    np.testing.assert_array_equal(y("delta"), 0.0)
    y.push({"w": np.full((1, 2), 3.0), "delta": np.full((1, 2), 7.0)})
    assert y("delta")[0, 0] == 7 and y("delta", 1)[0, 0] == 0


@pytest.mark.parametrize("delay_rate, steps", [(-1.0, 1200), (0.0, 1200), (0.0, 100_500)])
def test_long_delay_kernels_are_summed_in_one_gather(delay_rate, steps):
    """Random delays at τmax = 10⁵ keep ~750 (β = −1) or 10⁵ (uniform) lags; the trainer reads
    them in one gather per step (`RingHistory.weighted`), lags beyond the steps taken as one
    term of the initial value, not tap by tap (a 25 s `train` call found by the outsider
    fuzzer), and gets the plain sum of the taps: before and after the history fills."""
    rule = random_delay(tau=100_000, delay_rate=delay_rate, momentum=0.0)
    lags, weights = rule._kernel
    x = RingHistory(("w", "v"), depth=100_001, initial={"w": np.full((2, 3), 7.0)})
    for k in range(1, steps):
        x.push({"w": np.full((2, 3), float(k)) + np.arange(3)})
    plain = sum(c * x("w", k) for k, c in zip(lags.tolist(), weights.tolist(), strict=True))
    reads = []
    counted = type("Counted", (RingHistory,), {"__call__": lambda s, *a: reads.append(a) or 0})
    x.__class__ = counted
    fast = rule.passes(x, 0.1).forward
    np.testing.assert_allclose(fast, plain, rtol=1e-10)  # the plain sum of 10⁵ terms: ~1e-11
    assert reads == []


def test_diverging_runs_are_frozen_and_leave_the_others_untouched():
    prob = Diagonal([1.0, 2.0], [1.0, -1.0])
    rule, _ = build_rule("sgd", tau=2)
    lr = np.array([0.05, 5.0, 0.2, 50.0])  # runs 1 and 3 diverge
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow / invalid-value warnings escape
        res = train(prob, rule, lr, steps=300, check_every=5, record_every=5)
        alone = train(prob, rule, lr[[0, 2]], steps=300, check_every=5)
    assert res.diverged.tolist() == [False, True, False, True]
    assert res.diverged_step[1] > 0 and res.diverged_step[3] <= res.diverged_step[1]
    assert res.diverged_loss[1] > 1e6 * res.initial_loss[1]
    np.testing.assert_array_equal(res.final_weights[[0, 2]], alone.final_weights)
    assert np.all(np.isnan(res.final_loss[[1, 3]])) and np.all(np.isfinite(res.final_loss[[0, 2]]))
    after = res.curve_steps > res.diverged_step[1]
    assert np.all(np.isnan(res.curve[1, after])) and np.all(np.isfinite(res.curve[0]))


def test_compaction_selects_per_run_fields_only():
    from stability.trainer.engine import take_runs

    prob = Diagonal([1.0, 2.0], [1.0, -1.0])
    taus = np.array([[1], [0], [3]])
    rule, _ = build_rule("sc", tau=taus, momentum=0.5)  # sc_a, sc_b are (R, 1) too
    lr = np.array([0.1, 9.0, 0.05])  # the middle run diverges and is removed
    res = train(prob, [Phase(rule, None, T1(np.array([[2, 1]]), 50))], lr, steps=200)
    kept = take_runs(rule, np.array([0, 2]), 3)
    assert kept.tau_fwd.tolist() == [[1], [3]] and kept.sc_a.shape == (2, 1)
    assert take_runs(np.ones((1, 2)), np.array([0, 2]), 3).shape == (1, 2)  # broadcast: shared
    for r in (0, 2):
        single, _ = build_rule("sc", tau=int(taus[r, 0]), momentum=0.5)
        alone = train(prob, [Phase(single, None, T1(np.array([[2, 1]]), 50))], lr[[r]], steps=200)
        np.testing.assert_array_equal(res.final_weights[r], alone.final_weights[0])
    assert res.diverged.tolist() == [False, True, False]


def test_all_runs_diverging_is_a_result():
    prob = Diagonal([1.0], [1.0])
    rule, _ = build_rule("sgd", tau=0)
    res = train(prob, rule, [3.0, 4.0], steps=100)
    assert res.diverged.all() and np.all(np.isnan(res.final_weights))


def test_same_seed_same_minibatches_and_results(linreg):
    rule, _ = build_rule("momentum", tau=2, momentum=0.9)
    a = train(linreg, rule, [0.01, 0.02], steps=200, batch=8, seed=3)
    b = train(linreg, rule, [0.01, 0.02], steps=200, batch=8, seed=3)
    c = train(linreg, rule, [0.01, 0.02], steps=200, batch=8, seed=4)
    np.testing.assert_array_equal(a.final_weights, b.final_weights)
    np.testing.assert_array_equal(a.curve, b.curve)
    assert not np.array_equal(a.final_weights, c.final_weights)


def test_batch_stream_reshuffles_every_epoch():
    s = BatchStream(10, 3, seed=1)
    idx = s.take(9)  # 3 batches per epoch (the tenth sample is dropped each epoch)
    for e in range(3):
        epoch = idx[3 * e : 3 * e + 3].ravel()
        assert len(set(epoch)) == 9
    assert not np.array_equal(idx[:3], idx[3:6])
    np.testing.assert_array_equal(BatchStream(10, 3, seed=1).take(9), idx)
    with pytest.raises(ValueError, match="batch must be"):
        BatchStream(10, 11, seed=0)


def test_minibatch_full_data_equals_full_batch(linreg):
    rule, _ = build_rule("sgd", tau=1)
    full = train(linreg, rule, [0.1], steps=50)
    whole = train(linreg, rule, [0.1], steps=50, batch=linreg.samples)
    np.testing.assert_allclose(whole.final_weights, full.final_weights, rtol=1e-10)


def test_t1_steps_with_eq_4_per_parameter():
    prob = Diagonal([1.0, 1.0, 2.0], [1.0, 2.0, 3.0])
    tau = np.array([3, 3, 1])
    rule, _ = build_rule("sgd", tau=tau)
    K = 20
    res = train(prob, [Phase(rule, None, T1(tau, K))], [0.1], steps=40)
    for j in range(3):
        single, _ = build_rule("sgd", tau=int(tau[j]))
        hist = History.constant(single, 0.0)
        for k in range(40):
            lr_k = 0.1 * float(t1_factor(tau[j], k, K))
            hist = step(
                single, hist, lambda f, b, r, j=j: prob.lam[j] * (f - prob.minimizer[j]), lr_k
            )
        assert res.final_weights[0, j] == pytest.approx(hist.weights, rel=1e-14)


def test_warmup_phase_then_asynchronous_rule():
    prob = Diagonal([1.0, 0.5], [1.0, -1.0])
    async_rule, _ = build_rule("t2", tau_fwd=3, tau_bkwd=0, momentum=0.5)
    import dataclasses

    sync_rule = dataclasses.replace(async_rule, tau_fwd=0, tau_bkwd=0)
    res = train(prob, [Phase(sync_rule, 7), Phase(async_rule)], [0.1], steps=25)
    hist = History.constant(async_rule, np.zeros((1, 2)))
    for t in range(25):
        hist = step(sync_rule if t < 7 else async_rule, hist, prob.oracle, 0.1)
    np.testing.assert_array_equal(res.final_weights, hist.weights)


def test_bad_arguments():
    prob = Diagonal([1.0], [0.0])
    rule, _ = build_rule("sgd", tau=0)
    with pytest.raises(ValueError, match="lr must be"):
        train(prob, rule, [0.1, -1.0], steps=3)
    with pytest.raises(ValueError, match="steps must be"):
        train(prob, rule, [0.1], steps=0)
    with pytest.raises(ValueError, match="track entries"):
        train(prob, rule, [0.1], steps=3, track=("speed",))


def test_iid_batches_are_distinct_and_uniform_over_subsets():
    """Every B-subset of n = 7 equally likely (chi-square over the C(7,3) = 35 subsets)."""
    from math import comb

    from stability.trainer.engine import BatchStreams

    draws = BatchStreams(7, 3, 5, "iid", 2).take(35_000).reshape(-1, 3)
    assert np.all(np.diff(draws, axis=1) > 0)  # distinct (rows are sorted)
    codes = (1 << draws).sum(axis=1)
    counts = np.bincount(codes, minlength=128)[np.bincount(codes, minlength=128) > 0]
    assert counts.size == comb(7, 3)
    expected = draws.shape[0] / comb(7, 3)
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 70  # 34 degrees of freedom: P(χ² > 70) ≈ 3e-4
    big = BatchStreams(10, 5, 1, "iid", 1).take(2000).reshape(-1, 5)  # B² > n: random keys
    assert all(len(set(r)) == 5 for r in big)
    np.testing.assert_allclose(np.bincount(big.ravel(), minlength=10) / big.size, 0.1, atol=0.01)


@pytest.mark.parametrize("sampling", ["iid", "reshuffle"])
def test_runs_share_batches_exactly_when_they_share_a_stream(linreg, sampling):
    rule, _ = build_rule("momentum", tau=1, momentum=0.5)
    lr = [0.05, 0.05, 0.05, 0.05]
    res = train(linreg, rule, lr, steps=40, batch=8, sampling=sampling, streams=[0, 1, 0, 2])
    w = res.final_weights
    np.testing.assert_array_equal(w[0], w[2])
    assert not np.allclose(w[0], w[1]) and not np.allclose(w[1], w[3])
    alone = train(linreg, rule, [0.05, 0.05], steps=40, batch=8, sampling=sampling, streams=[0, 1])
    assert not np.allclose(alone.final_weights[0], alone.final_weights[1])
    shared = train(linreg, rule, lr, steps=40, batch=8, sampling=sampling)  # one stream
    assert np.all(shared.final_weights == shared.final_weights[0])


def test_per_run_batches_are_each_runs_own_minibatch_gradient(linreg):
    """A run's trajectory with its own stream equals the History reference fed that
    stream's batches (read back from `BatchStreams` with the same seed)."""
    from stability.trainer.engine import BatchStreams

    rule, _ = build_rule("sgd", tau=2)
    res = train(linreg, rule, [0.03, 0.03], steps=30, batch=5, seed=7, sampling="iid",
                streams=[1, 0])  # fmt: skip
    idx = BatchStreams(linreg.samples, 5, 7, "iid", 2).take(256)  # the engine's chunk
    for run, stream in enumerate([1, 0]):
        hist = History.constant(rule, np.zeros(linreg.dim))
        for t in range(30):
            H, b = linreg.batch_moments(idx[t, stream][None])
            hist = step(rule, hist, lambda u, *_, H=H[0], b=b[0]: H @ u - b, 0.03)
        np.testing.assert_allclose(res.final_weights[run], hist.weights, rtol=1e-12)


def test_stream_arguments_are_checked(linreg):
    rule, _ = build_rule("sgd", tau=0)
    with pytest.raises(ValueError, match="streams must be 2 integers"):
        train(linreg, rule, [0.1, 0.1], steps=2, batch=4, streams=[0])
    with pytest.raises(ValueError, match="sampling must be one of"):
        train(linreg, rule, [0.1], steps=2, batch=4, sampling="bootstrap")
