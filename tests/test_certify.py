"""Exact stability verdicts (`analysis.certify`): the Schur-Cohn test and `radius --certify`.

The Schur-Cohn test is checked on polynomials built from known roots (exact verdicts, roots on
the circle included) and against mpmath roots; `certify` against Lemma 1's threshold evaluated
in mpmath at 60 digits, 1e-12 (relative) on either side of it, for τ ≤ 50.
"""

from __future__ import annotations

import json
from fractions import Fraction as F

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import rule_points

from stability.analysis.certify import (
    NotCertifiable,
    certify,
    exact_build,
    exact_rational,
    exact_root,
    schur_cohn,
)
from stability.cli.main import main
from stability.rules.registry import RULES, get_spec
from stability.spectrum import dominant_root_at


def poly_from_roots(real_roots=(), pairs=()) -> list[F]:
    """Coefficients (highest first) of Π(z − r) Π(z² − 2·re·z + |c|²) for pairs (re, |c|²)."""
    coeffs = [F(1)]
    factors = [[F(1), -F(r)] for r in real_roots]
    factors += [[F(1), -2 * F(re), F(mod2)] for re, mod2 in pairs]
    for f in factors:
        out = [F(0)] * (len(coeffs) + len(f) - 1)
        for i, a in enumerate(coeffs):
            for j, b in enumerate(f):
                out[i + j] += a * b
        coeffs = out
    return coeffs


# -- the Schur-Cohn test itself -------------------------------------------------------------------

RATIONAL = st.fractions(min_value=-3, max_value=3, max_denominator=50)


@st.composite
def root_sets(draw):
    """Real roots and conjugate pairs (re, |c|²) with |c|² ≥ re² (a genuine complex pair)."""
    reals = draw(st.lists(RATIONAL, max_size=5))
    pairs = []
    for _ in range(draw(st.integers(0, 3))):
        re = draw(st.fractions(min_value=-1, max_value=1, max_denominator=20))
        extra = draw(st.fractions(min_value=0, max_value=2, max_denominator=20))
        pairs.append((re, re * re + extra))
    return reals, pairs


@settings(max_examples=120)
@given(roots=root_sets())
def test_schur_cohn_matches_known_roots(roots):
    reals, pairs = roots
    coeffs = poly_from_roots(reals, pairs)
    expected = all(abs(r) < 1 for r in reals) and all(mod2 < 1 for _, mod2 in pairs)
    assert schur_cohn(coeffs).stable is expected


@pytest.mark.parametrize(
    "reals, pairs, why",
    [
        ([1], [], "root at +1"),
        ([-1, F(1, 2)], [], "root at −1"),
        ([], [(F(3, 5), 1)], "pair 3/5 ± 4/5 i on the circle"),
        ([], [(0, 1)], "z² + 1"),
        ([F(1, 2), 2], [], "reciprocal pair 1/2, 2: a reduced polynomial vanishes"),
        ([F(1, 3), 3, F(1, 5)], [(F(1, 10), 1)], "reciprocal pair and a circle pair"),
        ([F(999_999, 1_000_000)], [(F(1, 2), F(999_999, 1_000_000))], "just inside: stable"),
        ([0, 0, F(1, 2)], [], "zero roots: stable"),
    ],
)
def test_schur_cohn_degenerate_cases(reals, pairs, why):
    expected = all(abs(r) < 1 for r in reals) and all(m < 1 for _, m in pairs)
    assert schur_cohn(poly_from_roots(reals, pairs)).stable is expected, why


def test_schur_cohn_small_cases_and_bad_input():
    assert schur_cohn([5]).stable  # a constant has no roots
    assert schur_cohn([2, 1]).stable and not schur_cohn([1, 2]).stable  # roots −1/2, −2
    assert schur_cohn(["1", "-0.5"]).stable  # decimal text read exactly
    with pytest.raises(ValueError, match="leading coefficient"):
        schur_cohn([0, 1, 2])
    with pytest.raises(ValueError, match="leading coefficient"):
        schur_cohn([])


@settings(max_examples=60)
@given(st.lists(st.integers(-20, 20), min_size=2, max_size=12).filter(lambda c: c[0] != 0))
def test_schur_cohn_matches_mpmath_roots(coeffs):
    with mpmath.workdps(40):
        roots = mpmath.polyroots(coeffs, maxsteps=300, extraprec=300)
        rho = max(abs(r) for r in roots)
    if abs(rho - 1) > mpmath.mpf(10) ** -30:  # integer polynomials: roots on the circle are exact
        assert schur_cohn(coeffs).stable is bool(rho < 1)
    else:
        assert not schur_cohn(coeffs).stable


# -- exact parameters -----------------------------------------------------------------------------


def test_exact_rational_reads_text_exactly():
    assert exact_rational("0.4450418679126288000000123", "lr") == F(
        4450418679126288000000123, 10**25
    )
    assert exact_rational(0.1, "x") == F(1, 10)  # a float as the decimal it prints as
    assert exact_rational("3/7", "x") == F(3, 7)
    assert exact_rational(2, "x") == 2
    with pytest.raises(ValueError, match="lr must be a rational"):
        exact_rational("abc", "lr")
    with pytest.raises(NotCertifiable):
        exact_rational(np.float32(0.5) * 1j, "x")


@pytest.mark.parametrize(
    "x, k, root",
    [(F(1, 8), 3, F(1, 2)), (F(81, 16), 4, F(3, 2)), (F(2), 2, None), (F(-1), 3, None)],
)
def test_exact_root(x, k, root):
    assert exact_root(x, k) == root
    big = F(3**400, 7**400)
    assert exact_root(big, 400) == F(3, 7) and exact_root(big + 1, 400) is None
    huge = F(10**400 + 7, 3)  # beyond float range: integer Newton roots
    assert exact_root(huge**2, 2) == huge and exact_root(huge**2 + 1, 2) is None
    assert exact_root(F(0), 5) == 0


def test_exact_build_t2_gamma_exactly():
    spec = get_spec("t2")
    rule, model = exact_build(spec, tau_fwd=40, tau_bkwd=10, delta="5")
    assert rule.gamma == F(29, 31) and model.delta == 5 and isinstance(model.lam, F)
    rule, _ = exact_build(spec, tau_fwd=5, tau_bkwd=2, decay="0.125")  # γ = 0.125^(1/3)
    assert rule.gamma == F(1, 2)
    with pytest.raises(NotCertifiable, match=r"decay\^\(1/3\).*irrational"):
        exact_build(spec, tau_fwd=5, tau_bkwd=2, decay="0.1")
    with pytest.raises(NotCertifiable, match="array"):
        exact_build(get_spec("momentum"), momentum=np.array([0.5, 0.9]))
    with pytest.raises(NotCertifiable, match="periodic"):
        certify(get_spec("ea"), "0.01")
    with pytest.raises(NotCertifiable, match="sc_a = 0.707.* computed in floating point"):
        certify(get_spec("sc"), "0.01", tau=1, momentum="0.5", sc_scale="0.5")  # a = m^{1/2}
    assert certify(get_spec("sc"), "0.01", tau=3, momentum="0.5", sc_scale="2").stable


# -- certified verdicts at Lemma 1's threshold -----------------------------------------------------


def _threshold(tau: int) -> mpmath.mpf:
    return 2 * mpmath.sin(mpmath.pi / (4 * tau + 2))


@pytest.mark.parametrize("tau", [1, 2, 3, 5, 8, 13, 21, 34, 50])
@pytest.mark.parametrize("side", [-1, 1])
def test_certify_sgd_at_threshold_one_plus_minus_1e12(tau, side):
    with mpmath.workdps(60):
        lr = F(mpmath.nstr(_threshold(tau) * (1 + side * mpmath.mpf("1e-12")), 45))
        expected = lr < F(mpmath.nstr(_threshold(tau), 58))  # Lemma 1: stable iff lr < α*
    cert = certify(get_spec("sgd"), lr, tau=tau)
    assert cert.stable is expected is (side < 0)
    assert cert.degree == tau + 1 and cert.lr == lr


def test_certify_where_float_cannot_decide():
    """τ = 1: α* = 1 exactly; float64 cannot see 1 ± 1e-30 or a λ that rounds to 4."""
    sgd = get_spec("sgd")
    assert not certify(sgd, 1, tau=1).stable  # roots e^{±iπ/3} on the circle
    assert certify(sgd, F(1) - F(1, 10**30), tau=1).stable
    assert not certify(sgd, F(1) + F(1, 10**30), tau=1).stable
    assert certify(sgd, "0.25", tau=1, lam="3.9999999999999999999").stable
    rule, model = sgd.build(tau=1, lam=3.9999999999999999999)
    assert dominant_root_at(rule, model, 0.25).radius >= 1  # float64 says unstable


RATIONAL_FRIENDLY = sorted(
    name
    for name in RULES
    if name in ("sgd", "momentum", "discrepancy", "t2", "recompute")
    or name in ("nesterov", "sc", "lwp", "lwp-v", "lwp+sc", "lwp-v+sc")
)


@settings(max_examples=60)
@given(point=rule_points(names=RATIONAL_FRIENDLY, max_delay=6), lr=st.floats(1e-3, 1.5))
def test_certify_agrees_with_float_radius_away_from_the_circle(point, lr):
    name, params = point
    # irrational values are refused (tested above): D^{1/k} -> give γ; m^{αD} -> integer α
    if params.get("decay") is not None:
        params["gamma"], params["decay"] = params.pop("decay"), None
    for scale in ("sc_scale", "horizon_scale"):
        if params.get(scale) is not None:
            params[scale] = float(round(params[scale]))
    spec = RULES[name]
    rule, model = spec.build(**params)
    radius = dominant_root_at(rule, model, lr).radius
    assume(abs(radius - 1) > 1e-6)  # float64 decides only away from the circle
    cert = certify(spec, lr, **params)
    assert cert.stable is (radius < 1), (radius, cert)


# -- the CLI ---------------------------------------------------------------------------------------


def _radius_json(capsys, *argv):
    code = main(["radius", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_radius_certify_reads_lr_exactly(capsys):
    # 2·sin(π/14) = 0.44504186791262880857…: this lr is below it only in the 17th digit
    data = _radius_json(
        capsys, "sgd", "--tau", "3", "--lr", "0.4450418679126288000000123", "--certify"
    )
    assert data["certified"] is True and data["stable"] is True
    assert data["lr_exact"] == "4450418679126288000000123/10000000000000000000000000"
    above = _radius_json(capsys, "sgd", "--tau", "3", "--lr", "0.4450418679126288086", "--certify")
    assert above["certified"] is True and above["stable"] is False
    for key in ("spectral_radius", "half_life", "dominant_root", "method", "certificate"):
        assert key in data


def test_radius_certify_reads_rule_parameters_exactly(capsys):
    argv = ["sgd", "--tau", "1", "--lr", "0.25", "--lam", "3.9999999999999999999"]
    plain = _radius_json(capsys, *argv)
    assert plain["certified"] is None and plain["stable"] is False  # λ rounds to 4.0
    exact = _radius_json(capsys, *argv, "--certify")
    assert exact["certified"] is True and exact["stable"] is True


def test_radius_certify_irrational_parameter_is_reported(capsys):
    argv = ["t2", "--tau-fwd", "5", "--tau-bkwd", "2", "--delta", "3", "--lr", "0.05"]
    data = _radius_json(capsys, *argv, "--decay", "0.1", "--certify")
    assert data["certified"] is False and "irrational" in data["reason"]
    assert data["stable"] is True  # the float verdict is kept
    exact = _radius_json(capsys, *argv, "--gamma", "0.5", "--certify")
    assert exact["certified"] is True and exact["stable"] is True


@pytest.mark.parametrize("tau", [10, 50])
def test_radius_certify_t2_and_momentum_agree_with_float(capsys, tau):
    for argv in (
        ["t2", "--tau-fwd", str(tau), "--tau-bkwd", "3", "--delta", "2", "--lr", "0.001"],
        ["momentum", "--tau", str(tau), "--momentum", "0.9", "--lr", "0.001"],
        ["momentum", "--tau", str(tau), "--momentum", "0.9", "--lr", "0.1"],
    ):
        data = _radius_json(capsys, *argv, "--certify")
        assert data["certified"] is True
        assert data["stable"] is (data["spectral_radius"] < 1)


def test_certify_refuses_above_its_degree_bound_with_the_bound(capsys):
    """Defect: `radius sgd --tau 1000 --lr … --certify` ran for minutes with no bound."""
    with pytest.raises(NotCertifiable, match="limited to degree 300.*got a state of 1002 values"):
        certify(get_spec("sgd"), "0.0015700111598852986", tau=1000)
    argv = ["radius", "sgd", "--tau", "1000", "--lr", "0.0015700111598852986", "--certify"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["certified"] is False and "limited to degree 300" in out["reason"]


def test_schur_cohn_reports_progress_per_reduction():
    seen = []
    assert schur_cohn([1, 0, 0, "0.5"], lambda done, total: seen.append((done, total))).stable
    assert seen == [(1, 3), (2, 3), (3, 3)]
