"""Core numerics against independent computations: polynomials, roots, radius, max lr.

Independent references: numpy.polymul / numpy.linalg.det, mpmath.polyroots at 50 digits,
PipeMare Lemma 1 and its double-root step (exact closed forms), dense companion eigenvalues
scanned over lr (the plain bisection beside every fast path, docs/contributing.md).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import rule_points

from stability.analysis.boundary import max_lr, max_lr_grid
from stability.dynamics.linear import characteristic_polynomial, linearize
from stability.polynomial import SparsePoly, polynomial_determinant
from stability.quadratic import QuadraticModel
from stability.rules.random_delay import kernel_polynomial, random_delay
from stability.rules.registry import RULES, build_rule
from stability.spectrum import (
    _mp_eval,
    dominant_root,
    dominant_root_at,
    half_life,
    roots,
    spectral_radius,
)
from stability.winding import (
    FFT_MIN_TERMS,
    HalfCircleGrid,
    SparseColumns,
    largest_root,
    roots_inside,
)

coeff = st.floats(-3, 3, allow_nan=False)


# -- sparse polynomials ----------------------------------------------------------------------


@pytest.mark.parametrize("tau", [20, 100, 300])
def test_largest_root_of_a_many_term_kernel_equals_numpy_roots(tau):
    """The uniform random-delay kernel has τ + 2 terms (the FFT path of `HalfCircleGrid`); its
    sample at θ = π is real with a signed zero −0.0, which `winding_turns` once counted a whole
    turn off (radii wrong by 0.006-0.13)."""
    rule = random_delay(tau=tau, delay_rate=0.0, momentum=0.0)
    lam = np.array([0.5, 2.0, 5.0])  # stable, stable, unstable at lr = 1/τ
    poly = kernel_polynomial(rule, QuadraticModel(lam=lam), 1.0 / tau).normalized()
    exps = np.array(poly.exponents)
    coeffs = np.stack([np.broadcast_to(poly.terms[k], lam.shape) for k in exps])
    radius = largest_root(SparseColumns(exps, coeffs)).radius
    for m in range(lam.size):
        dense = np.zeros(exps.max() + 1)
        dense[exps.max() - exps] = coeffs[:, m]
        assert radius[m] == pytest.approx(np.max(np.abs(np.roots(dense))), abs=1e-12)


@pytest.mark.parametrize("terms", [3, FFT_MIN_TERMS, FFT_MIN_TERMS + 1, 750])
def test_half_circle_grid_equals_direct_evaluation(terms):
    """Both paths (tables for few terms, one real FFT for many) against Σ c_k e^{ikθ} summed
    term by term in extended precision (kθ rounded at ~1e-19·k), exponents beyond the period
    included."""
    rng = np.random.default_rng(terms)
    n = 257
    exps = np.sort(rng.choice(3 * n, size=terms, replace=False))
    coeffs = rng.normal(size=(terms, 3))
    grid = HalfCircleGrid(n, exps)
    pi = np.longdouble("3.14159265358979323846264338327950288")
    angle = np.multiply.outer(pi * np.arange(n, dtype=np.longdouble) / (n - 1), exps)
    direct = np.cos(angle) @ coeffs.astype(np.longdouble) + 1j * (
        np.sin(angle) @ coeffs.astype(np.longdouble)
    )
    scale = np.abs(coeffs).sum(axis=0)
    assert np.max(np.abs(grid(coeffs) - direct.astype(complex)) / scale) < 1e-14


@settings(max_examples=200)
@given(a=st.lists(coeff, min_size=1, max_size=6), b=st.lists(coeff, min_size=1, max_size=6))
def test_sparse_product_equals_numpy_polymul(a, b):
    prod = SparsePoly.from_dense(a) * SparsePoly.from_dense(b)
    expected = np.polymul(a, b)
    got = np.zeros_like(expected)
    for k, c in prod.cleaned().terms.items():
        got[len(expected) - 1 - k] = c
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_determinant_of_polynomial_matrix_matches_numpy_at_points():
    rng = np.random.default_rng(1)
    mats = [[SparsePoly.from_dense(rng.normal(size=3)) for _ in range(3)] for _ in range(3)]
    det = polynomial_determinant(mats)
    for z in (0.3, -1.7, 2.2):
        numeric = np.linalg.det(np.array([[p(z) for p in row] for row in mats]))
        assert det(z) == pytest.approx(numeric, rel=1e-10)


def test_cleaning_removes_rounding_but_keeps_small_true_coefficients():
    noisy = SparsePoly.monomial(0, 0.1 * 3) - SparsePoly.monomial(0, 0.3)  # 5.6e-17, not 0
    assert noisy.terms[0] != 0 and not noisy.cleaned().terms
    tiny = SparsePoly.monomial(1, 1.0) + SparsePoly.monomial(0, 1e-200)
    assert tiny.cleaned().terms[0] == 1e-200


def test_exact_fraction_polynomials_stay_exact():
    rule, model = build_rule("momentum", tau=2, momentum=Fraction(9, 10), lam=Fraction(1))
    p = linearize(rule, model, Fraction(1, 10)).polynomial()
    assert all(isinstance(c, (int, Fraction)) for c in p.terms.values())
    # ω^3 − (1+m)ω^2 + mω + lr·λ with m = 9/10, lr·λ = 1/10 (PipeMare eq. 13)
    assert p.terms == {3: 1, 2: Fraction(-19, 10), 1: Fraction(9, 10), 0: Fraction(1, 10)}


# -- roots and spectral radius -------------------------------------------------------------


def mp_radius(coeffs, dps=50):
    with mpmath.workdps(dps):
        rs = mpmath.polyroots([mpmath.mpf(float(c)) for c in coeffs], maxsteps=400, extraprec=400)
        return float(max(abs(r) for r in rs))


@settings(max_examples=300)
@given(c=st.lists(coeff, min_size=2, max_size=9))
def test_dominant_root_matches_mpmath_to_1e10(c):
    c = [1.0, *c]
    if abs(c[-1]) < 1e-3:
        c[-1] = 0.5
    got = dominant_root(SparsePoly.from_dense(c))
    assert got.radius == pytest.approx(mp_radius(c), rel=1e-10, abs=1e-12)
    assert abs(np.polyval(c, got.root)) <= 1e-9 * max(1.0, got.radius) ** len(c)


@pytest.mark.parametrize("exps", [range(41), (0, 3, 400, 401), (1, 2000)])
def test_refinement_evaluates_p_and_its_derivative_as_mpmath_polyval(exps):
    """The sparse Horner evaluation the root refinement uses (dense, sparse, no constant term)
    equals mpmath's polyval of the dense coefficients, value and first derivative, at 50 digits."""
    exps = np.asarray(exps)
    coeffs = np.random.default_rng(int(exps.sum())).standard_normal(exps.size)
    dense = np.zeros(exps.max() + 1)
    dense[exps.max() - exps] = coeffs
    with mpmath.workdps(50):
        z = mpmath.mpc("0.97", "0.21")
        value, slope = mpmath.polyval([mpmath.mpf(float(c)) for c in dense], z, derivative=True)
        for got, want in (
            (_mp_eval(exps, coeffs, z), value),
            (_mp_eval(exps, coeffs, z, 1), slope),
        ):
            assert abs(got - want) <= mpmath.mpf(10) ** -40 * max(1, abs(want))


@pytest.mark.parametrize("tau", [1, 2, 5, 13, 40])
def test_double_root_step_has_radius_tau_over_tau_plus_1(tau):
    """PipeMare App. B.1: at α = (τ/(τ+1))^τ/(λ(τ+1)) p has a double root τ/(τ+1) (fastest rate).

    α in float64 is off by ~1e-16, which splits the double root by ~1e-8 (the polynomial
    really has two roots there); float64 companion eigenvalues are off by as much again.  The
    refined radius must match mpmath on the same coefficients to 1e-12, and τ/(τ+1) to ~1e-7.
    """
    lam = 1.7
    lr = (tau / (tau + 1)) ** tau / (lam * (tau + 1))
    rule, model = build_rule("sgd", tau=tau, lam=lam)
    dom = dominant_root_at(rule, model, lr)
    coeffs = characteristic_polynomial(rule, model).at(lr).normalized().dense()
    assert dom.radius == pytest.approx(mp_radius(coeffs, dps=60), rel=1e-12)
    assert dom.radius == pytest.approx(tau / (tau + 1), rel=1e-7)


def test_large_degree_path_matches_dense_eigenvalues():
    rule, model = build_rule("momentum", tau=450, momentum=0.5, lam=1.0)
    cp = characteristic_polynomial(rule, model)
    p = cp.at(0.002)
    dom = dominant_root(p)
    assert dom.method.startswith("argument principle")
    dense = spectral_radius(p.normalized().dense())
    assert dom.radius == pytest.approx(float(dense), rel=1e-10)


@pytest.mark.parametrize("tau", [1000, 10_000])
def test_radius_at_large_delays_against_lemma_1_crossing(tau):
    """Just below Lemma 1's threshold ρ < 1, just above ρ > 1 (delays up to 10⁴ work)."""
    rule, model = build_rule("sgd", tau=tau, lam=1.0)
    alpha = 2 * math.sin(math.pi / (4 * tau + 2))
    below = dominant_root_at(rule, model, alpha * (1 - 1e-6)).radius
    above = dominant_root_at(rule, model, alpha * (1 + 1e-6)).radius
    assert below < 1 < above
    assert 1 - below < 1e-6 and above - 1 < 1e-6


def test_roots_inside_counts_near_the_circle():
    tau = 200
    alpha = 2 * math.sin(math.pi / (4 * tau + 2))
    exps = np.array([tau + 1, tau, 0])
    for factor, inside in ((0.5, tau + 1), (1 - 1e-9, tau + 1), (1 + 1e-9, tau - 1)):
        assert roots_inside(exps, np.array([1.0, -1.0, alpha * factor]), 1.0) == inside


def test_batched_roots_equal_numpy_roots():
    rng = np.random.default_rng(0)
    c = rng.normal(size=(6, 4, 5))
    r = roots(c)
    for i in range(4):
        for j in range(5):
            np.testing.assert_allclose(
                np.sort_complex(r[i, j]), np.sort_complex(np.roots(c[:, i, j])), atol=1e-10
            )


def test_half_life():
    assert half_life(0.5) == pytest.approx(1.0)
    assert half_life(1.0) is None and half_life(1.5) is None and half_life(0.0) == 0.0
    np.testing.assert_array_equal(half_life(np.array([0.5, 1.0])), [1.0, np.inf])


# -- maximal stable step size -----------------------------------------------------------


@pytest.mark.parametrize("tau", [*range(0, 41), 99, 500, 2000, 10_000])
def test_max_lr_sgd_is_lemma_1(tau):
    lam = 0.37 + tau % 7
    rule, model = build_rule("sgd", tau=tau, lam=lam)
    r = max_lr(rule, model)
    assert r.max_lr == pytest.approx(2 / lam * math.sin(math.pi / (4 * tau + 2)), rel=1e-11)
    assert r.crossing_angle == pytest.approx(math.pi / (2 * tau + 1), rel=1e-10)


def _dense_radii(cp, lrs):
    return spectral_radius(cp.at(np.asarray(lrs)).normalized().dense())


def _answered(rule, model, cp):
    """`max_lr`, or None where it is refused because the root ω = 1 moves off the circle by
    less than float64 resolves (e.g. a Spike Compensation a ~ 1e-252 beside b = 0): checked
    independently, the dense radius is then within 1e-9 of 1 for every small lr."""
    try:
        return max_lr(rule, model)
    except ValueError as refusal:
        assert "less than float64 resolves" in str(refusal)
        radii = _dense_radii(cp, np.logspace(-14, -10, 5) / float(model.lam))
        assert np.all(np.abs(radii - 1) < 1e-9)
        return None


@settings(max_examples=1000)
@given(point=rule_points(max_delay=8))
def test_max_lr_is_the_first_loss_of_stability(point):
    """Independent check by dense eigenvalues: stable on a grid of (0, lr*), unstable just above."""
    name, params = point
    rule, model = RULES[name].build(**params)
    cp = characteristic_polynomial(rule, model)
    r = _answered(rule, model, cp)
    if r is None:
        return
    if r.max_lr is None:
        assert np.all(_dense_radii(cp, np.logspace(-4, 4, 60)) < 1)
        return
    if r.max_lr == 0.0:
        assert np.all(_dense_radii(cp, np.logspace(-6, -2, 5)) >= 1 - 1e-9)
        return
    grid = r.max_lr * np.concatenate([np.logspace(-4, -0.01, 40), [1 - 1e-6]])
    assert np.all(_dense_radii(cp, grid) < 1)
    assert _dense_radii(cp, [r.max_lr * (1 + 1e-5)])[0] > 1
    # the root on the circle sits at the reported angle
    w = np.exp(1j * r.crossing_angle)
    p = cp.at(r.max_lr)
    scale = sum(abs(c) for c in p.terms.values())
    assert abs(p(w)) <= 1e-9 * scale


@settings(max_examples=150)
@given(point=rule_points(max_delay=5))
def test_boundary_locus_agrees_with_certified_bisection(point):
    name, params = point
    rule, model = RULES[name].build(**params)
    assume(characteristic_polynomial(rule, model).is_affine)  # the locus needs A + lr·B
    locus = max_lr(rule, model, method="locus")
    if locus.max_lr in (None, 0.0):
        return
    bisection = max_lr(rule, model, method="bisection")
    if bisection.max_lr is None:  # its log grid ends at the float range; the locus reports a
        assert locus.max_lr > 1e300  # crossing beyond it as the largest float (a B ≈ 0)
        return
    assert bisection.max_lr == pytest.approx(locus.max_lr, rel=1e-9)


@settings(max_examples=150)
@given(point=rule_points(max_delay=6))
def test_float64_refinement_agrees_with_mpmath_refinement(point):
    name, params = point
    rule, model = RULES[name].build(**params)
    fast = _answered(rule, model, characteristic_polynomial(rule, model))
    if fast is None:
        return
    precise = max_lr(rule, model, precise=True)
    if fast.max_lr in (None, 0.0):
        assert precise.max_lr == fast.max_lr
        return
    assert fast.max_lr == pytest.approx(precise.max_lr, rel=1e-11)


@pytest.mark.parametrize("name", ["sgd", "momentum", "discrepancy", "t2", "sc", "lwp-v+sc"])
def test_max_lr_grid_equals_pointwise(name):
    spec = RULES[name]
    lams = np.array([0.2, 1.0, 3.0, 11.0])
    rule, model = spec.build(lam=lams)
    grid, angles = max_lr_grid(rule, model)
    for i, lam in enumerate(lams):
        r = max_lr(*spec.build(lam=float(lam)))
        assert grid[i] == pytest.approx(r.max_lr, rel=1e-12)
        assert angles[i] == pytest.approx(r.crossing_angle, rel=1e-10)


def test_momentum_one_is_never_asymptotically_stable():
    """PipeMare Lemma 3 includes β = 1; the exact max lr there is 0."""
    for tau in (0, 1, 3):
        rule, model = build_rule("momentum", tau=tau, momentum=1.0)
        assert max_lr(rule, model).max_lr == 0.0


def test_the_zero_polynomial_has_sparse_arrays_zero():
    """A coupling whose terms all cancel (validate --stage-delays 0,100000 --rules lwp-v+sc
    ended in numpy's 'need at least one array to stack')."""
    from stability.polynomial import SparsePoly

    ks, coeffs = SparsePoly({}, None).sparse_arrays()
    assert ks.tolist() == [0] and coeffs.tolist() == [0.0]


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("sgd", {"tau": 3}),
        ("momentum", {"tau": 3}),
        ("discrepancy", {"tau_fwd": 4, "tau_bkwd": 1, "delta": 0.3}),
        ("t2", {"tau_fwd": 4, "tau_bkwd": 1, "delta": 0.3}),
        ("lwp+sc", {"tau": 3}),
        ("lwp-v+sc", {"tau": 3}),
    ],
)
def test_the_slope_at_one_is_b_at_one(name, params):
    """`LinearDynamics.lr_slope_at_one` (det(I − Σ A_k(ℓ)) at order ℓ, no polynomial formed)
    equals B(1), the sum of the derived polynomial's lr-coefficients."""
    rule, model = RULES[name].build(lam=1.7, **params)
    b = characteristic_polynomial(rule, model).parts[1]
    slope = linearize(rule, model).lr_slope_at_one()
    assert float(slope) == pytest.approx(sum(b.terms.values()), rel=1e-12, abs=1e-12)
