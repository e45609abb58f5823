"""One battery over the whole rule registry (STYLE habit 10).

For every registered rule, at ≥ 1000 hypothesis parameter points per property:

* the characteristic polynomial derived from the rule's step equals each closed form the
  papers print (up to ω^k), and for PipeMare's rules (SGD, momentum, discrepancy, T2,
  recompute) the polynomial derived independently with sympy from the paper's recurrences
  (tests/pipemare_reference.py) at *every* point, momentum included: every point compares
  the derived polynomial with at least one independent one;
* the spectral radius of the state matrix equals the growth rate of a direct simulation of
  the rule's step (the simulations of all points run batched, tests/battery.py);
* τ = 0 reduces to the undelayed method (textbook GD, heavy ball, Nesterov polynomials);
* grid (vectorised) evaluation equals point-by-point evaluation.

Periodic rules (``period`` > 1, e.g. EA-Pipe) have no characteristic polynomial: the same
checks run on their Floquet monodromy matrix (`stability.dynamics.monodromy`): its multipliers
equal those of EA-Pipe's Alg. 1 written out step by step (tests/eapipe_reference.py) at every
point and its characteristic polynomial the App. A closed form where that applies,
ρ(M)^{1/P} equals the simulated growth per step, and the batched evaluation equals the
pointwise one.

The mutation tests at the end show that the battery catches the two conventions that are
easy to get wrong: T2 reading its accumulator at δ_t instead of δ_{t−τb}, and recompute
without its Φ term.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from battery import draw_examples, simulated_log_rates
from eapipe_reference import monodromy as alg1_monodromy
from hypothesis import given, settings
from hypothesis import strategies as st
from pipemare_reference import PIPEMARE_RULES, reference_coefficients
from polytools import assert_same_up_to_omega
from strategies import PERIODIC, rule_points

from stability.dynamics.linear import characteristic_polynomial, linearize
from stability.dynamics.monodromy import monodromy_polynomial
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.registry import RULES
from stability.spectrum import floquet_multipliers, floquet_radius, spectral_radius

LR = st.floats(1e-3, 2.0)


def test_every_rule_has_sources_and_a_closed_form():
    for spec in RULES.values():
        assert spec.sources, spec.name
        assert spec.closed_forms, spec.name


def check_polynomial(name: str, params: dict, lr: float) -> int:
    """Derived polynomial = every applicable closed form and, for PipeMare's rules, the sympy
    derivation from the recurrences; returns how many independent polynomials were compared."""
    spec = RULES[name]
    rule, model = spec.build(**params)
    derived = characteristic_polynomial(rule, model).at(lr)
    checked = 0
    for form in spec.closed_forms:
        if form.applies(rule):
            assert_same_up_to_omega(derived, form.polynomial(rule, model, lr))
            checked += 1
    if name in PIPEMARE_RULES:
        defaults = {p.name: p.default for p in spec.params}
        assert_same_up_to_omega(derived, reference_coefficients(name, params, lr, defaults))
        checked += 1
    return checked


@settings(max_examples=1000)
@given(point=rule_points(), lr=LR)
def test_derived_polynomial_equals_closed_forms(point, lr):
    assert check_polynomial(*point, lr) >= 1  # every point meets an independent polynomial


WITH_MOMENTUM = rule_points(names=["discrepancy", "t2", "recompute"]).filter(
    lambda point: point[1]["momentum"] > 0
)


@settings(max_examples=300)
@given(point=WITH_MOMENTUM, lr=LR)
def test_pipemare_rules_with_momentum_equal_the_recurrence_derivation(point, lr):
    """Momentum ≠ 0, where PipeMare prints no closed form: only the sympy derivation checks."""
    assert check_polynomial(*point, lr) == 1


def check_growth(moduli: np.ndarray, measured: float, period: int = 1) -> None:
    """The measured log growth per step of a simulation is log ρ, ρ the largest of the
    per-step ``moduli`` of the eigenvalues (state matrix, or Floquet multipliers^{1/P})."""
    mods = np.sort(moduli)[::-1]
    rho = mods[0]
    if rho < 1e-3:
        # nilpotent-like: rounding (relative eps per step) sets the measured rate, at most
        # what a nilpotent map of this size (x_{t+S·P} = 0) leaves of eps: log(eps)/(S·P)
        rounding = math.log(np.finfo(float).eps) / (mods.size * period)
        assert measured <= max(math.log(1e-3), rounding) + 0.01, (measured, rho)
        return
    # tolerance follows the conditioning: the gap to the next distinct modulus sets how fast
    # the dominant mode takes over; oscillation of a complex pair adds O(1/window)
    distinct = mods[np.abs(mods - rho) > 1e-6 * rho]
    gap = math.log(rho) - math.log(distinct[0]) if distinct.size and distinct[0] > 0 else math.inf
    tol = 0.01 + (0.05 if gap < 0.02 else 0.0)
    assert abs(measured - math.log(rho)) <= tol, (measured, math.log(rho), gap)


def failures_of(check, cases) -> list:
    """The cases (argument tuples) for which ``check(*case)`` fails, with the message."""
    failed = []
    for case in cases:
        try:
            check(*case)
        except AssertionError as err:
            failed.append((*case, str(err)))
    return failed


def _state_growth(point, lr, measured):
    rule, model = RULES[point[0]].build(**point[1])
    check_growth(np.abs(np.linalg.eigvals(linearize(rule, model, lr).state_matrix())), measured)


def test_state_matrix_radius_equals_simulated_growth():
    """1000 points of every time-invariant rule; their simulations run batched."""
    points = draw_examples(st.tuples(rule_points(max_delay=4), LR), 1000)
    assert len(points) == 1000
    rates = simulated_log_rates(points)
    failed = failures_of(_state_growth, [(*p, r) for p, r in zip(points, rates, strict=True)])
    assert not failed, f"{len(failed)} of {len(points)} points: {failed[:5]}"


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


def assert_same_multipliers(mu: np.ndarray, reference: np.ndarray) -> None:
    """The multipliers with |μ| > 1e-6·ρ agree one to one, to 1e-9·max(ρ, 1)."""
    rho = float(np.max(np.abs(reference)))
    assert float(np.max(np.abs(mu))) == pytest.approx(rho, rel=1e-10)
    left = list(reference[np.abs(reference) > 1e-6 * rho])
    ours = mu[np.abs(mu) > 1e-6 * rho]
    assert len(ours) == len(left), (mu, reference)
    for z in ours:  # nearest unmatched reference multiplier
        j = int(np.argmin(np.abs(np.array(left) - z)))
        assert abs(left.pop(j) - z) <= 1e-9 * max(rho, 1.0), (mu, reference)


@settings(max_examples=300)
@given(point=rule_points(names=sorted(PERIODIC), max_delay=4), lr=LR)
def test_periodic_monodromy_equals_alg_1_and_closed_forms(point, lr):
    """The derived monodromy's multipliers equal those of EA-Pipe Alg. 1 written out step by
    step (every point, stale or not), and det(μI − M) each closed form (EA-Pipe App. A)."""
    name, params = point
    spec = RULES[name]
    rule, model = spec.build(**params)
    mu = floquet_multipliers(rule, model, lr)
    alg1 = alg1_monodromy(
        rule.replicas, rule.tau, rule.elastic, rule.sync_period, float(model.lam), lr
    )
    assert_same_multipliers(mu, np.linalg.eigvals(alg1))
    derived = monodromy_polynomial(rule, model, lr).dense()
    # coefficient k is ±e_k(μ); its rounding follows e_k(|μ|) (coefficients from eigenvalues)
    scale = np.poly(-np.abs(mu))
    for form in spec.closed_forms:
        if form.applies(rule):
            closed = form.polynomial(rule, model, lr).dense()
            tol = 1e-9 * scale + 1e-14 * np.max(scale)
            assert np.all(np.abs(derived - closed) <= tol), (derived, closed)


def _periodic_growth(point, lr, measured):
    rule, model = RULES[point[0]].build(**point[1])
    mu = np.abs(floquet_multipliers(rule, model, lr))
    check_growth(mu ** (1 / rule.period), measured, rule.period)


def test_periodic_step_radius_equals_simulated_growth():
    """ρ(M)^{1/P} equals the growth rate per step of a direct simulation of the rule's step
    (300 points, simulations batched, windows of whole periods)."""
    points = draw_examples(st.tuples(rule_points(names=sorted(PERIODIC), max_delay=4), LR), 300)
    assert len(points) == 300
    rates = simulated_log_rates(points, window=600)
    failed = failures_of(_periodic_growth, [(*p, r) for p, r in zip(points, rates, strict=True)])
    assert not failed, f"{len(failed)} of {len(points)} points: {failed[:5]}"


@settings(max_examples=50)
@given(
    point=rule_points(names=sorted(PERIODIC), max_delay=4), lrs=st.lists(LR, min_size=3, max_size=3)
)
def test_periodic_grid_evaluation_equals_pointwise(point, lrs):
    name, params = point
    rule, model = RULES[name].build(**params)
    grid = floquet_radius(rule, model, np.array(lrs))
    single = [floquet_radius(rule, model, lr) for lr in lrs]
    np.testing.assert_allclose(grid, single, rtol=1e-12, atol=1e-14)


# -- mutations: the battery fails on the conventions that are easy to get wrong ----------------


def _t2_reads_delta_now(self, x, lag, correct):
    """The mutation: u = w_{t−lag} − (τf − lag)·δ_t (δ read now, not at the pass)."""
    w = x("w", lag)
    if self.gamma is None or not correct:
        return w
    return w - (self.tau_fwd - lag) * x("delta")


def _gradient_without_recompute(self, u_fwd, u_bkwd, u_recomp):
    """The mutation: App. D.1's gradient with its recompute term −Φ·u_recomp dropped."""
    return (self.lam + self.delta) * u_fwd - (self.delta - self.phi) * u_bkwd


MUTATIONS = {
    # name: (class, attribute, replacement, rule, size of the change at a point (0: none))
    "T2 reads δ_t": (
        DelayedMomentum,
        "_corrected",
        _t2_reads_delta_now,
        "t2",
        lambda p, lr: lr * abs(p.get("delta", 0.0)) * (p["tau_bkwd"] > 0),
    ),
    "recompute without Φ": (
        QuadraticModel,
        "__call__",
        _gradient_without_recompute,
        "recompute",
        lambda p, lr: lr * abs(p.get("phi", 0.0)),
    ),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_battery_fails_on_a_mutated_rule(monkeypatch, mutation):
    """Acceptance (issue 17): with the mutation the polynomial checks fail exactly at the
    points where it changes the dynamics (all of them where the change exceeds rounding),
    including points with momentum, where PipeMare prints no closed form; the battery's test
    bodies fail on them.  Without the mutation the same points pass."""
    owner, attr, wrong, name, size = MUTATIONS[mutation]
    points = draw_examples(st.tuples(rule_points(names=[name]), LR), 300)
    cases = [(name, params, lr) for (_, params), lr in points]
    assert failures_of(check_polynomial, cases) == []
    monkeypatch.setattr(owner, attr, wrong)
    failed = [case[:3] for case in failures_of(check_polynomial, cases)]
    changed = [c for c in cases if size(c[1], c[2]) > 0]
    clear = [c for c in changed if size(c[1], c[2]) > 1e-6]
    assert len(clear) >= 15
    assert all(c in changed for c in failed) and all(c in failed for c in clear)
    with_momentum = [c for c in failed if c[1]["momentum"] > 0]
    assert with_momentum
    for test, (_, params, lr) in (
        (test_derived_polynomial_equals_closed_forms, failed[0]),
        (test_pipemare_rules_with_momentum_equal_the_recurrence_derivation, with_momentum[0]),
    ):
        with pytest.raises(AssertionError):
            test.hypothesis.inner_test(point=(name, params), lr=lr)
