"""One battery over the whole rule registry (STYLE habit 10).

For every registered rule, at ≥ 1000 hypothesis parameter points per property:

* the characteristic polynomial derived from the rule's step equals each closed form the
  papers print (up to ω^k);
* the spectral radius of the state matrix equals the growth rate of a direct simulation of
  the rule's step;
* τ = 0 reduces to the undelayed method (textbook GD, heavy ball, Nesterov polynomials);
* grid (vectorised) evaluation equals point-by-point evaluation.

Periodic rules (``period`` > 1, e.g. EA-Pipe) have no characteristic polynomial: the same
checks run on their Floquet monodromy matrix (`stability.dynamics.monodromy`): its characteristic
polynomial equals the closed forms, ρ(M)^{1/P} equals the simulated growth per step, and the
batched evaluation equals the pointwise one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polytools import assert_same_up_to_omega, simulated_log_rate
from strategies import PERIODIC, rule_points

from stability.dynamics.linear import characteristic_polynomial, linearize
from stability.dynamics.monodromy import monodromy_polynomial
from stability.polynomial import SparsePoly
from stability.rules.registry import RULES
from stability.spectrum import floquet_multipliers, floquet_radius, spectral_radius

LR = st.floats(1e-3, 2.0)


def test_every_rule_has_sources_and_a_closed_form():
    for spec in RULES.values():
        assert spec.sources, spec.name
        assert spec.closed_forms, spec.name


@settings(max_examples=1000)
@given(point=rule_points(), lr=LR)
def test_derived_polynomial_equals_closed_forms(point, lr):
    name, params = point
    spec = RULES[name]
    rule, model = spec.build(**params)
    derived = characteristic_polynomial(rule, model).at(lr)
    checked = 0
    for form in spec.closed_forms:
        if form.applies(rule):
            assert_same_up_to_omega(derived, form.polynomial(rule, model, lr))
            checked += 1
    # the closed form of the momentum-free variants applies whenever momentum is 0
    if params.get("momentum", 0.0) == 0.0:
        assert checked >= 1


@settings(max_examples=1000)
@given(point=rule_points(max_delay=4), lr=LR)
def test_state_matrix_radius_equals_simulated_growth(point, lr):
    name, params = point
    rule, model = RULES[name].build(**params)
    eig = np.linalg.eigvals(linearize(rule, model, lr).state_matrix())
    mods = np.sort(np.abs(eig))[::-1]
    rho = mods[0]
    if rho < 1e-3:
        return  # nilpotent-like dynamics: nothing to measure
    measured = simulated_log_rate(rule, model, lr)
    # tolerance follows the conditioning: the gap to the next distinct modulus sets how fast
    # the dominant mode takes over; oscillation of a complex pair adds O(1/window)
    distinct = mods[np.abs(mods - rho) > 1e-6 * rho]
    gap = math.log(rho) - math.log(distinct[0]) if distinct.size and distinct[0] > 0 else math.inf
    tol = 0.01 + (0.05 if gap < 0.02 else 0.0)
    assert abs(measured - math.log(rho)) <= tol, (measured, math.log(rho), gap)


def _undelayed(name: str, m: float, el: float) -> SparsePoly:
    """Textbook polynomials of the undelayed methods (el = lr·λ)."""
    if name in ("sgd",):
        return SparsePoly.from_dense([1.0, el - 1.0])  # w ← w − lr·λw
    if name == "nesterov":  # Sutskever form: w' = w + m(w − w_) − lr∇f(w + m(w − w_))
        return SparsePoly.from_dense([1.0, -(1 + m) * (1 - el), m * (1 - el)])
    return SparsePoly.from_dense([1.0, -(1 + m - el), m])  # heavy ball (Polyak)


def _heavy_ball_view(rule) -> tuple[float, float]:
    """(momentum, step-size scale) of the seed rules that are a rescaled heavy ball at D = 0:
    Adam with a frozen preconditioner P steps lr·(1 − β1)·P, SGDM with dampening lr·(1 − d)."""
    optimizer = getattr(rule, "optimizer", "adam" if hasattr(rule, "precond") else None)
    if optimizer in ("adam", "adamw"):
        return rule.beta1, (1 - rule.beta1) * rule.precond
    return rule.momentum, 1 - getattr(rule, "dampening", 0.0)


SEED_SYSTEMS = frozenset(
    {"pipeoptim", "adam", "pipesgd", "dc", "wp", "stash", "gpipe", "spectrain", "shrink"}
    | {"random-delay"}
)


@settings(max_examples=1000)
@given(
    point=rule_points(names=[n for n in RULES if n != "t2" and n not in PERIODIC], max_delay=0),
    lr=LR,
)
def test_zero_delay_is_the_undelayed_method(point, lr):
    name, params = point
    for explicit in ("sc_a", "sc_b", "horizon", "decay", "gamma", "t2_recompute"):
        params.pop(explicit, None)  # default mitigations vanish at D = 0
    for explicit in ("tau_max", "weight_decay"):  # SpecTrain's common time; AdamW's decay
        params.pop(explicit, None)
    rule, model = RULES[name].build(**params)
    m = params.get("momentum", RULES[name].build()[0].momentum)
    lam_eff = model.lam  # with equal delays Δ and Φ cancel
    if name in SEED_SYSTEMS:
        m, scale = _heavy_ball_view(rule)
        lam_eff = lam_eff * scale
    derived = characteristic_polynomial(rule, model).at(lr)
    assert_same_up_to_omega(derived, _undelayed(name, m, lr * lam_eff))


@settings(max_examples=1000)
@given(point=rule_points(max_delay=4), lrs=st.lists(LR, min_size=3, max_size=3))
def test_grid_evaluation_equals_pointwise(point, lrs):
    name, params = point
    rule, model = RULES[name].build(**params)
    cp = characteristic_polynomial(rule, model)
    grid = spectral_radius(cp.at(np.array(lrs)).normalized().dense())
    single = [spectral_radius(cp.at(lr).normalized().dense()) for lr in lrs]
    np.testing.assert_allclose(grid, single, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(set(RULES) - PERIODIC))
def test_array_parameters_build_a_grid(name):
    """Momentum and λ as arrays give the same radii as scalars (one batched call)."""
    spec = RULES[name]
    lams = np.array([0.3, 1.0, 4.0])
    kw = {"momentum": np.array([0.0, 0.5, 0.9])} if "momentum" in spec.param_names else {}
    rule, model = spec.build(lam=lams, **kw)
    radii = spectral_radius(characteristic_polynomial(rule, model).at(0.05).normalized().dense())
    for i in range(3):
        kw_i = {k: float(v[i]) for k, v in kw.items()}
        r_i, m_i = spec.build(lam=float(lams[i]), **kw_i)
        one = spectral_radius(characteristic_polynomial(r_i, m_i).at(0.05).normalized().dense())
        assert radii[i] == pytest.approx(float(one), rel=1e-12)


# -- periodic rules (Floquet): the same checks on the monodromy matrix -------------------------


@settings(max_examples=300)
@given(point=rule_points(names=sorted(PERIODIC), max_delay=4), lr=LR)
def test_periodic_monodromy_equals_closed_forms(point, lr):
    """det(μI − M) of the derived monodromy equals each closed form (EA-Pipe App. A)."""
    name, params = point
    spec = RULES[name]
    rule, model = spec.build(**params)
    derived = monodromy_polynomial(rule, model, lr).dense()
    # coefficient k is ±e_k(μ); its rounding follows e_k(|μ|) (coefficients from eigenvalues)
    mu = floquet_multipliers(rule, model, lr)
    scale = np.poly(-np.abs(mu))
    for form in spec.closed_forms:
        if form.applies(rule):
            closed = form.polynomial(rule, model, lr).dense()
            tol = 1e-9 * scale + 1e-14 * np.max(scale)
            assert np.all(np.abs(derived - closed) <= tol), (derived, closed)


@settings(max_examples=300)
@given(point=rule_points(names=sorted(PERIODIC), max_delay=4), lr=LR)
def test_periodic_step_radius_equals_simulated_growth(point, lr):
    """ρ(M)^{1/P} equals the growth rate per step of a direct simulation of the rule's step."""
    name, params = point
    rule, model = RULES[name].build(**params)
    mods = np.sort(np.abs(floquet_multipliers(rule, model, lr)))[::-1] ** (1 / rule.period)
    rho = mods[0]
    if rho < 1e-3:
        return
    # a window of whole periods: the norm's swings within a period cancel
    window = rule.period * math.ceil(600 / rule.period)
    measured = simulated_log_rate(rule, model, lr, window=window)
    distinct = mods[np.abs(mods - rho) > 1e-6 * rho]
    gap = math.log(rho) - math.log(distinct[0]) if distinct.size and distinct[0] > 0 else math.inf
    tol = 0.01 + (0.05 if gap < 0.02 else 0.0)
    assert abs(measured - math.log(rho)) <= tol, (measured, math.log(rho), gap)


@settings(max_examples=300)
@given(
    point=rule_points(names=sorted(PERIODIC), max_delay=4), lrs=st.lists(LR, min_size=3, max_size=3)
)
def test_periodic_grid_evaluation_equals_pointwise(point, lrs):
    name, params = point
    rule, model = RULES[name].build(**params)
    grid = floquet_radius(rule, model, np.array(lrs))
    single = [floquet_radius(rule, model, lr) for lr in lrs]
    np.testing.assert_allclose(grid, single, rtol=1e-12, atol=1e-14)
