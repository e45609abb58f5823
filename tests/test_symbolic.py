"""Symbolic and high-precision proofs of the papers' closed forms (pytest -m symbolic).

Every polynomial here is *derived* from the rule's step (stability.dynamics.linear /
stability.dynamics.symbolic) and then checked exactly:

* PipeMare Lemma 1: p(e^{iθ_n}) = 0 at α_n in exact cyclotomic arithmetic (τ = 1..8), and at
  50 digits for τ up to 1000, with the roots counted on either side of the threshold;
* the double root of App. B.1 (exact rationals);
* App. B.4: p(1), p'(1) free of Δ for every γ, p''(1) free of Δ iff γ = γ* (eq. 14);
* Kosson App. I eq. 44-47 as polynomial identities;
* Lemmas 2 and 3 as upper bounds over the sweeps of the issue (τ ≤ 40, Δ ∈ (0, 100],
  β ∈ (0, 1]), with the tightest points re-checked by dense eigenvalues.

Each exact identity is paired with a perturbed case that must *not* vanish, so the tests can fail.
"""

from __future__ import annotations

import math

import mpmath
import pytest
import sympy
from oracles import dense_max_lr, mp_newton, mp_roots_inside

from stability.analysis import closed_forms as bounds
from stability.claims import pipemare as pipemare_claims
from stability.dynamics.linear import characteristic_polynomial
from stability.dynamics.symbolic import LR, OMEGA, rule_polynomial
from stability.quadratic import QuadraticModel
from stability.rules.registry import build_rule, get_spec

pytestmark = pytest.mark.symbolic

LAM = sympy.Symbol("lam", positive=True)
XI = sympy.Symbol("xi")  # ξ = e^{iπ/(4τ+2)}, a primitive (8τ+4)-th root of unity


def derived(name: str, lam=LAM, delta=0, **params) -> sympy.Expr:
    """The rule's polynomial derived from its step, exact (engine constants made rational)."""
    spec = get_spec(name)
    values = {p.name: p.default for p in spec.params if p.name not in ("lam", "delta", "phi")}
    values = {k: sympy.nsimplify(v) if isinstance(v, float) else v for k, v in values.items()}
    values.update(params)
    rule = spec.builder(**values)
    model = QuadraticModel(lam, delta) if "delta" in spec.param_names else QuadraticModel(lam)
    return sympy.expand(sympy.nsimplify(rule_polynomial(rule, model, LR), rational=True))


def vanishes_at_root_of_unity(p: sympy.Expr, tau: int, omega_power: int, n: int) -> bool:
    """p(ω = ξ^e, lr = 2/λ·sin((1+4n)π/(4τ+2))) = 0 exactly, ξ = e^{iπ/(4τ+2)}, e = omega_power.

    sin(x) = (ξ^m − ξ^{−m})/(2i) with m = 1 + 4n and i = ξ^{2τ+1}: the value times ξ^M is a
    polynomial in ξ with rational coefficients; it vanishes at ξ iff the cyclotomic polynomial
    Φ_{8τ+4} (ξ's minimal polynomial) divides it.
    """
    m, i = 1 + 4 * n, XI ** (2 * tau + 1)
    lr = (XI**m - XI ** (-m)) / (i * LAM)
    shift = m + 2 * tau + 1 + abs(omega_power) * sympy.degree(p, OMEGA)
    value = sympy.expand(sympy.cancel(p.subs({OMEGA: XI**omega_power, LR: lr}) * XI**shift))
    return sympy.rem(value, sympy.cyclotomic_poly(8 * tau + 4, XI), XI) == 0


# -- PipeMare Lemma 1 (App. B.1), exactly ----------------------------------------------------------


@pytest.mark.parametrize("tau", range(1, 9))
def test_lemma1_threshold_root_exact(tau):
    """p(e^{iπ/(2τ+1)}) = 0 at α* = 2/λ·sin(π/(4τ+2)); a 10 % larger α leaves a remainder."""
    p = derived("sgd", tau=tau)
    assert vanishes_at_root_of_unity(p, tau, 2, n=0)  # ω = ξ² = e^{iπ/(2τ+1)}
    assert vanishes_at_root_of_unity(p, tau, -2, n=0)  # the conjugate root
    perturbed = p.subs(LR, LR * sympy.Rational(11, 10))
    assert not vanishes_at_root_of_unity(perturbed, tau, 2, n=0)
    assert not vanishes_at_root_of_unity(p, tau, 1, n=0)  # PipeMare's printed Arg(ω): not a root


@pytest.mark.parametrize("tau", [2, 3, 4, 5, 6])
def test_lemma1_every_crossing_exact(tau):
    """All τ + 1 crossings: p(e^{±i(1+4n)π/(2τ+1)}) = 0 at α_n (App. B.1, angles derived here)."""
    p = derived("sgd", tau=tau)
    crossings = bounds.lemma1_crossings(tau)
    for i, c in enumerate(crossings):
        e = 2 * (1 + 4 * c.n)  # ω = e^{i(1+4n)π/(2τ+1)} = ξ^e
        assert vanishes_at_root_of_unity(p, tau, e, n=c.n)
        assert vanishes_at_root_of_unity(p, tau, -e, n=c.n)
        other = crossings[(i + 1) % len(crossings)].n  # another crossing's α: not a root here
        assert not vanishes_at_root_of_unity(p, tau, e, n=other)


@pytest.mark.parametrize("tau", range(1, 9))
def test_lemma1_double_root_exact(tau):
    """At α = (τ/(τ+1))^τ/(λ(τ+1)), ω = τ/(τ+1) is a root of p and p' but not of p''."""
    p = derived("sgd", tau=tau)
    r = sympy.Rational(tau, tau + 1)
    alpha = r**tau / (LAM * (tau + 1))
    at = {OMEGA: r, LR: alpha}
    assert sympy.simplify(p.subs(at)) == 0
    assert sympy.simplify(sympy.diff(p, OMEGA).subs(at)) == 0
    assert sympy.simplify(sympy.diff(p, OMEGA, 2).subs(at)) != 0
    assert sympy.simplify(p.subs({OMEGA: r, LR: alpha * sympy.Rational(101, 100)})) != 0
    d = bounds.lemma1_double_root(tau, 1.0)
    assert d.lr == pytest.approx(float(alpha.subs(LAM, 1)), rel=1e-15)


# -- PipeMare Lemma 1 at 50 digits, τ up to 1000 ---------------------------------------------------


@pytest.mark.parametrize("tau", [1, 4, 17, 60, 250, pytest.param(1000, marks=pytest.mark.slow)])
def test_lemma1_threshold_high_precision(tau):
    cp = characteristic_polynomial(*build_rule("sgd", tau=tau))
    A, B = cp.parts  # derived p = A + lr·B, integer coefficients for λ = 1
    with mpmath.workdps(50):
        alpha = 2 * mpmath.sin(mpmath.pi / (4 * tau + 2))

        def terms(lr):
            out = {k: mpmath.mpf(int(c)) for k, c in A.terms.items()}
            for k, c in B.terms.items():
                out[k] = out.get(k, 0) + lr * int(c)
            return out

        def p(lr, z):
            return mpmath.fsum(c * z**k for k, c in terms(lr).items())

        zeta = mpmath.expj(mpmath.pi / (2 * tau + 1))
        assert abs(p(alpha, zeta)) < mpmath.mpf(10) ** -40
        eps = mpmath.mpf(10) ** -25
        assert mp_roots_inside(terms(alpha * (1 - eps))) == tau + 1  # all inside just below
        assert mp_roots_inside(terms(alpha * (1 + eps))) == tau - 1  # a pair outside just above
        z = mp_newton(terms(alpha * (1 + eps)), zeta)
        assert abs(p(alpha * (1 + eps), z)) < mpmath.mpf(10) ** -40
        assert 1 < abs(z) < 1 + mpmath.mpf(10) ** -20


# -- PipeMare App. B.4: the T2 polynomial at ω = 1 -------------------------------------------------


GAMMA, DELTA, ALPHA = sympy.symbols("gamma delta alpha")


@pytest.mark.parametrize("tf, tb", [(1, 0), (2, 1), (5, 2), (10, 6), (40, 10)])
def test_t2_p_and_dp_at_one_are_free_of_delta(tf, tb):
    p = derived("t2", delta=DELTA, tau_fwd=tf, tau_bkwd=tb, gamma=GAMMA, momentum=0).subs(LR, ALPHA)
    p1 = sympy.expand(p.subs(OMEGA, 1))
    dp1 = sympy.expand(sympy.diff(p, OMEGA).subs(OMEGA, 1))
    assert sympy.expand(p1 - ALPHA * LAM * (1 - GAMMA)) == 0  # App. B.4
    assert sympy.expand(dp1 - (ALPHA * LAM + 1 - GAMMA)) == 0  # App. B.4
    assert sympy.diff(p1, DELTA) == 0 and sympy.diff(dp1, DELTA) == 0


@pytest.mark.parametrize("tf, tb", [(2, 1), (3, 1), (5, 2), (10, 6), (40, 10)])
def test_t2_second_derivative_free_of_delta_iff_optimal_gamma(tf, tb):
    p = derived("t2", delta=DELTA, tau_fwd=tf, tau_bkwd=tb, gamma=GAMMA, momentum=0).subs(LR, ALPHA)
    d2p1 = sympy.expand(sympy.diff(p, OMEGA, 2).subs(OMEGA, 1))
    coefficient = sympy.expand(sympy.diff(d2p1, DELTA))
    k = tf - tb
    expected = ALPHA * bounds.t2_second_derivative_delta_coefficient(tf, tb, GAMMA)
    assert sympy.expand(coefficient - expected) == 0  # −αk(1 + γ − (1 − γ)k), App. B.4
    assert sympy.solve(coefficient, GAMMA) == [bounds.t2_optimal_gamma(tf, tb)]  # eq. 14 only
    assert bounds.t2_optimal_gamma(tf, tb) == 1 - sympy.Rational(2, k + 1)
    # the Δ-free part is PipeMare's 2τf(1 − γ) + 2
    assert sympy.expand(d2p1.subs(DELTA, 0) - (2 * tf * (1 - GAMMA) + 2)) == 0


# -- Kosson App. I: GSC ≡ LWP ≡ SC_D ---------------------------------------------------------------


M, T = sympy.symbols("m T", positive=True)


@pytest.mark.parametrize("delay", [0, 1, 2, 3, 4])
def test_kosson_gsc_equals_lwp_under_eq_44_45(delay):
    """GSC with (a, b) of eq. 47 and LWP^w with horizon T: the same derived polynomial."""
    a, b = bounds.gsc_for_lwp_horizon(T, M)
    assert [sympy.simplify(r) for r in bounds.gsc_lwp_residuals(a, b, T, M)] == [0, 0]
    gsc = derived("sc", tau=delay, momentum=M, sc_a=a, sc_b=b)
    lwp = derived("lwp", tau=delay, momentum=M, horizon=T)
    assert sympy.simplify(gsc - lwp) == 0
    off = derived("sc", tau=delay, momentum=M, sc_a=a + sympy.Rational(1, 10), sc_b=b)
    assert sympy.simplify(off - lwp) != 0


@pytest.mark.parametrize("delay", [1, 2, 3, 5])
def test_kosson_lwp_with_eq46_horizon_equals_sc_d(delay):
    sc_d = derived("sc", tau=delay, momentum=M)  # a = m^D, b = (1 − m^D)/(1 − m) (eq. 7)
    horizon = bounds.lwp_horizon_for_sc(M, delay)  # eq. 46
    assert sympy.simplify(derived("lwp", tau=delay, momentum=M, horizon=horizon) - sc_d) == 0
    lwp_d = derived("lwp", tau=delay, momentum=M, horizon=delay)  # LWP_D is not SC_D
    assert sympy.simplify(lwp_d - sc_d) != 0


def test_kosson_eq47_is_the_solution_of_eq44_45():
    a, b = sympy.symbols("a b")
    solution = sympy.solve(list(bounds.gsc_lwp_residuals(a, b, T, M)), [a, b], dict=True)
    expected = bounds.gsc_for_lwp_horizon(T, M)
    assert len(solution) == 1
    assert sympy.simplify(solution[0][a] - expected[0]) == 0
    assert sympy.simplify(solution[0][b] - expected[1]) == 0


@pytest.mark.parametrize("delay", [1, 2, 3])
def test_kosson_printed_eq21_eq22_agree_under_eq_44_45(delay):
    """The printed forms (Kosson eq. 21, 22) equal term by term when a + b = 1 + T, mb = T."""
    from stability.dynamics.symbolic import to_sympy
    from stability.rules.delayed_momentum import DelayedMomentum
    from stability.rules.lwp_sc import eq21, eq22

    a, b = bounds.gsc_for_lwp_horizon(T, M)
    gsc_rule = DelayedMomentum(tau_fwd=delay, momentum=M, sc_a=a, sc_b=b)
    lwp_rule = DelayedMomentum(tau_fwd=delay, momentum=M, horizon=T)
    model = QuadraticModel(LAM)
    p21 = to_sympy(eq21(gsc_rule, model, LR))
    p22 = to_sympy(eq22(lwp_rule, model, LR))
    assert sympy.simplify(p21 - p22) == 0


# -- Lemmas 2 and 3: valid upper bounds over the sweep, and how tight ------------------------------


@pytest.mark.slow
def test_lemma2_is_an_upper_bound_over_the_sweep():
    claim = pipemare_claims.lemma2_upper_bound()  # all 820 pairs τb < τf ≤ 40, Δ ∈ (0, 100]
    assert claim.holds and claim.numbers["points"] == 820 * len(pipemare_claims.POSITIVE_DELTAS)
    assert claim.numbers["max_ratio"] <= 1 and 0 < claim.numbers["min_ratio"] < 0.5
    for key in ("max_ratio", "min_ratio"):  # the extremes, re-checked by dense eigenvalues
        at = claim.numbers[key + "_at"]
        rule, model = build_rule("discrepancy", **at)
        exact = dense_max_lr(rule, model, lo=1e-7, hi=2.0)
        bound = bounds.lemma2_bound(at["tau_fwd"], at["tau_bkwd"], at["delta"])
        assert exact / bound == pytest.approx(claim.numbers[key], rel=1e-7)


def test_lemma3_is_an_upper_bound_over_the_sweep():
    claim = pipemare_claims.lemma3_upper_bound()  # τ = 0..40, β ∈ (0, 1]
    assert claim.holds and claim.numbers["max_lr_at_momentum_1"] == 0.0
    assert claim.numbers["max_ratio"] <= 1
    for key, at in (("max_ratio", "max_ratio_at"), ("min_ratio_below_momentum_1", "min_ratio_at")):
        point = claim.numbers[at]
        rule, model = build_rule("momentum", **point)
        exact = dense_max_lr(rule, model, lo=1e-8, hi=5.0)
        assert exact / bounds.lemma3_bound(point["tau"]) == pytest.approx(
            claim.numbers[key], rel=1e-7
        )
    # at τ = 0 the exact max lr is 2(1 + β)/λ: the ratio (1 + β)/2 < 1, → 1 as β → 1
    assert claim.numbers["max_ratio"] == pytest.approx((1 + 0.95) / 2, rel=1e-12)
    assert math.isclose(claim.numbers["max_ratio_at"]["momentum"], 0.95)
