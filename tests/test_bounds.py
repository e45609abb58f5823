"""Closed forms of `analysis.bounds` against independent computations, and `stability bounds`.

References: dense state-matrix eigenvalue bisection (tests/oracles.py), mpmath evaluation of
the polynomial typed from the paper, exact Fractions.  The sympy proofs are in
tests/test_symbolic.py.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction as F

import mpmath
import numpy as np
import pytest
from oracles import dense_max_lr, mp_poly, sgd_terms

from stability.analysis import closed_forms as bounds
from stability.analysis.boundary import max_lr
from stability.cli.main import main
from stability.dynamics.linear import characteristic_polynomial
from stability.rules.discrepancy import gamma_from_decay, optimal_gamma
from stability.rules.lwp_sc import spike_coefficients
from stability.rules.registry import build_rule
from stability.spectrum import dominant_root_at, spectral_radius

# -- Lemma 1 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tau, lam", [(0, 1.0), (1, 1.0), (2, 0.3), (7, 2.5), (20, 1.0), (40, 7.0)])
def test_lemma1_threshold_is_the_exact_max_lr(tau, lam):
    rule, model = build_rule("sgd", tau=tau, lam=lam)
    expected = 2 / lam * math.sin(math.pi / (4 * tau + 2))
    assert bounds.lemma1_threshold(tau, lam) == pytest.approx(expected, rel=1e-15)
    assert dense_max_lr(rule, model, lo=1e-4 / lam, hi=2.5 / lam) == pytest.approx(
        bounds.lemma1_threshold(tau, lam), rel=1e-9
    )
    report = bounds.bound_report("sgd", tau=tau, lam=lam)
    assert report.lemma == "1" and report.ratio == 1.0  # both rounded once from 40 digits


def test_lemma1_threshold_vectorised_equals_scalar():
    taus, lams = np.arange(0, 50), np.linspace(0.1, 10, 50)
    grid = bounds.lemma1_threshold(taus, lams)
    scalar = [bounds.lemma1_threshold(int(t), float(v)) for t, v in zip(taus, lams, strict=True)]
    np.testing.assert_allclose(grid, scalar, rtol=1e-14)


@pytest.mark.parametrize("tau", [0, 1, 2, 3, 4, 7, 10, 11])
@pytest.mark.parametrize("lam", [1.0, 0.4])
def test_lemma1_crossings_are_roots_on_the_circle(tau, lam):
    """p(e^{iθ_n}) = 0 at α_n (mpmath, 40 digits); the printed half angle is not a root."""
    crossings = bounds.lemma1_crossings(tau, lam)
    assert sum(c.roots for c in crossings) == tau + 1  # every root crosses once (App. B.1)
    assert [c.lr for c in crossings] == sorted(c.lr for c in crossings)
    with mpmath.workdps(40):
        for c in crossings:
            alpha_n = 2 / mpmath.mpf(lam) * mpmath.sin((1 + 4 * c.n) * mpmath.pi / (4 * tau + 2))
            p = mp_poly(sgd_terms(tau, alpha_n * lam))
            theta = (1 + 4 * c.n) * mpmath.pi / (2 * tau + 1)
            assert abs(p(mpmath.expj(theta))) < 1e-35
            assert abs(p(mpmath.expj(-theta))) < 1e-35
            if 0 < theta < mpmath.pi:  # PipeMare's printed Arg(ω) is half of it: not a root
                assert abs(p(mpmath.expj(theta / 2))) > 1e-3
            assert c.lr == pytest.approx(float(alpha_n), rel=1e-15)
            assert c.angle == pytest.approx(float(theta), rel=1e-15)
            assert (c.roots == 1) == (c.angle == pytest.approx(math.pi))


@pytest.mark.parametrize("tau", [1, 2, 5, 10, 33])
def test_first_crossing_angle_is_boundary_crossing_angle(tau):
    rule, model = build_rule("sgd", tau=tau)
    assert max_lr(rule, model).crossing_angle == pytest.approx(
        bounds.lemma1_crossings(tau)[0].angle, rel=1e-12
    )
    assert bounds.lemma1_crossings(tau)[0].angle == pytest.approx(math.pi / (2 * tau + 1))


@pytest.mark.parametrize("tau", [0, 1, 2, 3, 5, 8, 13, 30])
def test_double_root_step_gives_the_fastest_rate(tau):
    """At α_dbl the spectral radius is τ/(τ+1), and no other step size does better."""
    lam = 1.7
    d = bounds.lemma1_double_root(tau, lam)
    assert d.root == pytest.approx(tau / (tau + 1), abs=1e-16)
    rule, model = build_rule("sgd", tau=tau, lam=lam)
    # a double root moves by ~sqrt(rounding of α) ≈ 1e-8 when α is rounded to float64
    assert dominant_root_at(rule, model, d.lr).radius == pytest.approx(d.root, abs=1e-7)
    lrs = np.linspace(d.lr * 0.5, min(d.lr * 1.5, bounds.lemma1_threshold(tau, lam)), 2001)
    radii = spectral_radius(characteristic_polynomial(rule, model).at(lrs).normalized().dense())
    # float eigenvalues of a double root are accurate to ~sqrt(eps): compare to 1e-7
    assert radii.min() >= d.root - 1e-7
    assert abs(lrs[np.argmin(radii)] - d.lr) <= 2e-3 * d.lr + 1e-12


# -- Lemmas 2 and 3 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tf, tb, delta, lam",
    [
        (10, 6, 5.0, 1.0),
        (1, 0, 100.0, 1.0),
        (40, 10, 0.5, 1.0),
        (7, 3, 2.0, 0.25),
        (25, 0, 30.0, 2.0),
    ],
)
def test_lemma2_bound_formula_and_validity(tf, tb, delta, lam):
    expected = min(2 / (delta * (tf - tb)), 2 / lam * math.sin(math.pi / (4 * tf + 2)))
    report = bounds.bound_report("discrepancy", tau_fwd=tf, tau_bkwd=tb, delta=delta, lam=lam)
    assert report.lemma == "2"
    assert report.bound == pytest.approx(expected, rel=1e-15)
    rule, model = build_rule("discrepancy", tau_fwd=tf, tau_bkwd=tb, delta=delta, lam=lam)
    exact = dense_max_lr(rule, model, lo=1e-7, hi=3.0 / lam)
    assert report.max_lr == pytest.approx(exact, rel=1e-8)
    assert report.ratio == pytest.approx(exact / expected, rel=1e-8) and report.ratio <= 1


@pytest.mark.parametrize(
    "tau, m, lam", [(0, 0.5, 1.0), (1, 0.9, 1.0), (5, 0.1, 3.0), (10, 0.5, 1.0), (30, 0.99, 0.5)]
)
def test_lemma3_bound_formula_and_validity(tau, m, lam):
    report = bounds.bound_report("momentum", tau=tau, momentum=m, lam=lam)
    assert report.lemma == "3"
    assert report.bound == pytest.approx(4 / lam * math.sin(math.pi / (4 * tau + 2)), rel=1e-15)
    rule, model = build_rule("momentum", tau=tau, momentum=m, lam=lam)
    exact = dense_max_lr(rule, model, lo=1e-7, hi=5.0 / lam)
    assert report.max_lr == pytest.approx(exact, rel=1e-8) and report.ratio <= 1


def test_lemma3_at_momentum_one_nothing_is_stable():
    report = bounds.bound_report("momentum", tau=4, momentum=1.0)
    assert report.max_lr == 0.0 and report.ratio == 0.0
    rule, model = build_rule("momentum", tau=4, momentum=1.0)
    for lr in (1e-6, 1e-3, 0.1):  # the double root at 1 splits outward: |ω|² ≈ 1 + lr·λ
        assert dominant_root_at(rule, model, lr).radius > 1


def test_applicable_lemma_dispatch_and_errors():
    assert bounds.bound_report("momentum", tau=3, momentum=0.0).lemma == "1"
    same = bounds.bound_report("discrepancy", tau_fwd=6, tau_bkwd=6, delta=5.0)
    assert same.lemma == "1" and same.ratio == pytest.approx(1, rel=1e-14)
    assert bounds.bound_report("discrepancy", tau_fwd=6, tau_bkwd=2, delta=0.0).ratio == 1.0
    assert bounds.bound_report("discrepancy", tau_fwd=6, tau_bkwd=6, momentum=0.5).lemma == "3"
    with pytest.raises(ValueError, match="delta < 0"):
        bounds.bound_report("discrepancy", tau_fwd=6, tau_bkwd=2, delta=-1.0)
    with pytest.raises(ValueError, match="momentum > 0"):
        bounds.bound_report("discrepancy", tau_fwd=6, tau_bkwd=2, delta=1.0, momentum=0.5)
    with pytest.raises(ValueError, match="bounds covers sgd, momentum and discrepancy"):
        bounds.bound_report("t2")
    with pytest.raises(ValueError, match="Lemma 2 needs delta > 0"):
        bounds.lemma2_bound(3, 3, 1.0)


# -- the T2 decay (eq. 14) and Lemma 4 -------------------------------------------------------------


@pytest.mark.parametrize("tf, tb", [(1, 0), (2, 0), (10, 6), (40, 10), (100, 1)])
def test_t2_optimal_gamma_and_decay(tf, tb):
    k = tf - tb
    gamma = bounds.t2_optimal_gamma(tf, tb)
    assert gamma == 1 - F(2, k + 1) and float(gamma) == pytest.approx(optimal_gamma(tf, tb))
    assert bounds.t2_second_derivative_delta_coefficient(tf, tb, gamma) == 0
    decay = bounds.t2_optimal_decay(tf, tb)
    assert gamma_from_decay(float(decay), tf, tb) == pytest.approx(float(gamma), rel=1e-12)


def test_t2_optimal_decay_tends_to_exp_minus_two():
    ks = [1, 2, 5, 10, 100, 1000, 10_000]
    errors = [abs(float(bounds.t2_optimal_decay(k, 0)) - bounds.T2_DECAY_LIMIT) for k in ks[1:]]
    assert errors == sorted(errors, reverse=True)
    for k, err in zip(ks[1:], errors, strict=True):
        assert err <= 0.7 / k**2  # k·ln(1 − 2/(k+1)) = −2 + O(1/k²)
    assert bounds.T2_DECAY_LIMIT == pytest.approx(0.1353352832366127, rel=1e-15)


@pytest.mark.parametrize(
    "name, params",
    [
        ("sgd", {"lam": 2.0}),
        ("momentum", {"momentum": 0.5}),
        ("momentum", {"momentum": 0.9, "lam": 0.5}),
        ("discrepancy", {"tau_bkwd": 2, "delta": 3.0}),
    ],
)
def test_lemma4_crossings_approach_one(name, params):
    taus = [4, 16, 64, 256, 1000]
    check = bounds.lemma4_check(name, taus, **params)
    for lr, dist in zip(check.max_lr, check.distance, strict=True):
        assert dist <= check.constant * lr * (1 + 1e-9)  # |ω − 1| ≤ C·α (the lemma's proof)
    assert list(check.distance) == sorted(check.distance, reverse=True)
    assert check.distance[-1] < 0.02 and check.max_lr[-1] < 0.01
    if name == "sgd":  # C is attained: |e^{iπ/(2τ+1)} − 1| = 2 sin(π/(4τ+2)) = λ·α*
        np.testing.assert_allclose(check.distance, check.constant * np.array(check.max_lr))


# -- Kosson App. I ---------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [F(1, 10), F(1, 2), F(9, 10), F(99, 100)])
@pytest.mark.parametrize("delay", [1, 2, 5])
def test_kosson_equivalence_conditions_exact(m, delay):
    a, b = spike_coefficients(m, delay)  # SC_D, eq. 7
    T = bounds.lwp_horizon_for_sc(m, delay)  # eq. 46
    assert bounds.gsc_lwp_residuals(a, b, T, m) == (0, 0)  # eq. 44-45
    assert bounds.gsc_for_lwp_horizon(T, m) == (a, b)  # eq. 47 inverts eq. 44-45
    horizon = F(delay)  # LWP_D: its GSC twin is not SC_D
    assert bounds.gsc_lwp_residuals(*bounds.gsc_for_lwp_horizon(horizon, m), horizon, m) == (0, 0)
    assert bounds.gsc_for_lwp_horizon(horizon, m) != (a, b)
    with pytest.raises(ValueError, match="momentum ≠ 0"):
        bounds.gsc_for_lwp_horizon(horizon, 0)


@pytest.mark.parametrize("delay, m", [(1, 0.5), (2, 0.9), (4, 0.7)])
def test_lwp_with_eq46_horizon_has_sc_dynamics(delay, m):
    sc_rule, sc_model = build_rule("sc", tau=delay, momentum=m)
    T = bounds.lwp_horizon_for_sc(m, delay)
    lwp_rule, lwp_model = build_rule("lwp", tau=delay, momentum=m, horizon=T)
    for lr in (0.01, 0.1, 0.3):
        a = np.sort_complex(np.linalg.eigvals(_state(sc_rule, sc_model, lr)))
        b = np.sort_complex(np.linalg.eigvals(_state(lwp_rule, lwp_model, lr)))
        nonzero = lambda e: np.sort(np.abs(e[np.abs(e) > 1e-9]))  # noqa: E731
        np.testing.assert_allclose(nonzero(a), nonzero(b), rtol=1e-8, atol=1e-10)
    assert max_lr(sc_rule, sc_model).max_lr == pytest.approx(
        max_lr(lwp_rule, lwp_model).max_lr, rel=1e-10
    )


def _state(rule, model, lr):
    from stability.dynamics.linear import linearize

    return linearize(rule, model, lr).state_matrix()


# -- the CLI ---------------------------------------------------------------------------------------


def _bounds_json(capsys, *argv):
    code = main(["bounds", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.count("\n") == 1
    return json.loads(out)


def test_bounds_cli_keys_and_values(capsys):
    sgd = _bounds_json(capsys, "sgd", "--tau", "7", "--lam", "2.5")
    assert {"max_lr", "bound", "lemma", "ratio"} <= set(sgd)
    assert sgd["lemma"] == "1" and sgd["ratio"] == 1.0
    assert sgd["max_lr"] == pytest.approx(2 / 2.5 * math.sin(math.pi / 30), rel=1e-14)
    mom = _bounds_json(capsys, "momentum", "--tau", "12", "--momentum", "0.5", "--lam", "2")
    assert mom["lemma"] == "3" and mom["bound"] == pytest.approx(2 * math.sin(math.pi / 50))
    assert 0 < mom["ratio"] < 1
    disc = _bounds_json(
        capsys, "discrepancy", "--tau-fwd", "9", "--tau-bkwd", "4", "--delta", "2.5"
    )
    assert disc["lemma"] == "2"
    assert disc["bound"] == pytest.approx(min(2 / 12.5, 2 * math.sin(math.pi / 38)), rel=1e-15)
    assert disc["ratio"] == pytest.approx(disc["max_lr"] / disc["bound"], rel=1e-15)
    assert disc["ratio"] <= 1


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["bounds", "t2"], "bounds covers sgd, momentum and discrepancy"),
        (["bounds", "discrepancy", "--tau-fwd", "4", "--delta", "-2"], "delta < 0"),
        (["bounds", "momentum", "--momentum", "1.5"], "momentum must be a finite real number in"),
        # a subnormal λ made 2/λ overflow: bounds ended in an internal error, max-lr in null
        (["bounds", "sgd", "--tau", "3", "--lam=1e-320"], "--lam must be a finite real number in"),
        (["max-lr", "momentum", "--lam=1e-320"], "--lam must be a finite real number in [1e-150"),
        (["max-lr", "spectrain", "--lam=1e297"], "--lam must be a finite real number in [1e-150"),
    ],
)
def test_bounds_cli_errors_are_one_line(capsys, argv, needle):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err


@pytest.mark.parametrize(
    "name, params",
    [
        ("momentum", {"tau": 300, "momentum": 0.9}),
        ("discrepancy", {"tau_fwd": 200, "tau_bkwd": 40, "delta": 3.0}),
    ],
)
def test_bounds_max_lr_at_long_delays_bracketed_by_mpmath_winding(name, params):
    """Beyond dense eigenvalues: all roots inside at max_lr·(1 − 1e-7), two outside above."""
    from oracles import mp_roots_inside

    report = bounds.bound_report(name, **params)
    cp = characteristic_polynomial(*build_rule(name, **params))
    inside = [
        mp_roots_inside(cp.at(report.max_lr * f).normalized().terms, digits=30)
        for f in (1 - 1e-7, 1 + 1e-7)
    ]
    assert inside == [cp.degree, cp.degree - 2] and report.ratio < 1
