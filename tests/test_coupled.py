"""Coupled multi-stage analysis (issue 7): per-stage delays on a full Hessian.

Independent constructions checked against each other:

* the stage transfer functions (probed open loop) against each rule's characteristic polynomial
  (probed closed loop by `stability.dynamics.linear`), over the whole registry;
* the matrix polynomial det P(ω, lr) against det(ωI − T) of the block state matrix T (probed
  from the composed step), and their spectra;
* the frequency scan's max lr against the block-state-matrix search on random systems
  (rules, momenta, T2, recompute, non-symmetric H_b, T1), and against the scalar
  `stability.analysis.boundary.max_lr` for one stage and a diagonal Hessian (to 1e-10);
* the prediction against the trainer's measured max lr on cpusmall and a tiny MLP.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polytools import assert_same_up_to_omega
from strategies import rule_points

from stability.analysis.boundary import max_lr
from stability.coupled.scan import _hull_reach, scan_max_lr
from stability.coupled.stage_bounds import per_stage_bounds, scalar_bound
from stability.coupled.summary import analyze
from stability.coupled.system import (
    CoupledSystem,
    composed_step,
    coupled_system,
    dense_max_lr,
    matrix_polynomial,
    spectral_radius,
    stage_rules,
    state_matrix,
)
from stability.coupled.track import branches
from stability.coupled.transfer import stage_transfer
from stability.dynamics.linear import characteristic_polynomial
from stability.rules.registry import RULES, build_rule

# -- stage transfer functions ------------------------------------------------------------------


@settings(max_examples=300)
@given(point=rule_points(), lr=st.floats(1e-3, 2.0))
def test_stage_transfer_closes_to_the_rule_polynomial(point, lr):
    """d + lr·Σ κ·ñ (open loop, oracle cut) = the rule's closed-loop polynomial (up to ω^k)."""
    name, params = point
    rule, model = RULES[name].build(**params)
    cp = characteristic_polynomial(rule, model)
    try:
        transfer = stage_transfer(rule)
    except ValueError:
        assert not cp.is_affine  # only rules whose dynamics are not affine in lr are refused
        return
    gains = {
        "forward": model.lam + model.delta,
        "backward": -(model.delta - model.phi),
        "recompute": -model.phi,
    }
    assert_same_up_to_omega(transfer.closed_loop(lr, gains), cp.at(lr), rtol=1e-9)


def test_stage_transfer_of_delayed_sgd_is_pipemare_eq_3():
    """SGD with delay τ: d = ω^{2τ+1}(ω − 1), ñ_fwd = ω^{τ+1}, q = −ω^{2τ+1}: W = −lr·G/(ω − 1)."""
    rule, _ = build_rule("sgd", tau=3)
    t = stage_transfer(rule)
    assert t.denominator.terms == {8: 1.0, 7: -1.0}
    assert t.passes["forward"].terms == {4: 1.0}
    assert t.weights.terms == {7: -1.0}
    assert t.integrator_roots() == 1


def test_periodic_rules_are_refused():
    rule, _ = RULES["ea"].build()
    with pytest.raises(ValueError, match="time-invariant"):
        stage_transfer(rule)


# -- two constructions of the same dynamics ------------------------------------------------------


def _random_system(seed: int) -> CoupledSystem:
    """A small random coupled system: rules, delays, momenta, T2, recompute, H_b, H_r, T1."""
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 9))
    P = int(rng.integers(1, min(p, 5) + 1))
    cuts = np.sort(rng.choice(np.arange(1, p), P - 1, replace=False))
    sizes = np.diff(np.concatenate([[0], cuts, [p]]))
    lam = np.exp(rng.uniform(np.log(1e-2), 0, p))
    Q, _ = np.linalg.qr(rng.standard_normal((p, p)))
    H = (Q * lam) @ Q.T
    tf = rng.integers(1, 11, size=P)
    tb = np.array([rng.integers(0, t) for t in tf])
    choices = [
        ("sgd", {}),
        ("momentum", {"momentum": 0.9}),
        ("nesterov", {"momentum": 0.8}),
        ("lwp+sc", {"momentum": 0.9}),
        ("lwp-v+sc", {"momentum": 0.5}),
        ("discrepancy", {"momentum": 0.3}),
        ("t2", {"decay": 0.135}),
        ("recompute", {"decay": 0.1}),
    ]
    rule, params = choices[seed % len(choices)]
    H_b = H_r = None
    tr = None
    if rule in ("discrepancy", "t2", "recompute"):
        H_b = 0.3 * rng.standard_normal((p, p))  # not symmetric: a network's Jacobian
    if rule == "recompute":
        tr = np.array([rng.integers(b, f + 1) for f, b in zip(tf, tb, strict=True)])
        H_r = 0.2 * rng.standard_normal((p, p))
    H_f = H - (0 if H_b is None else H_b) - (0 if H_r is None else H_r)
    return coupled_system(
        H_f,
        H_b,
        H_r,
        stage_sizes=sizes,
        rule=rule,
        tau_fwd=tf,
        tau_bkwd=tb,
        tau_recomp=tr,
        t1_power=float(rng.choice([0.0, 0.5, 1.0])),
        **params,
    )


def _full_degree(system: CoupledSystem) -> int:
    """Degree of det P: Σ_j deg d_j (each stage's full companion, all lags of all variables)."""
    pairs = zip(system.transfers, system.stage_sizes, strict=True)
    return sum(t.denominator.degree * n for t, n in pairs)


@pytest.mark.parametrize("seed", range(6))
def test_matrix_polynomial_determinant_is_the_state_matrix_polynomial(seed):
    """det P(ω, lr) = ω^{D−N}·det(ωI − T): transfer functions vs the probed composed step."""
    system = _random_system(seed)
    lr = 0.05
    T = state_matrix(system, lr)
    N = T.shape[0]
    D = _full_degree(system)
    rng = np.random.default_rng(seed)
    for omega in rng.uniform(0.6, 1.2, 3) * np.exp(1j * rng.uniform(0, math.pi, 3)):
        P = matrix_polynomial(system, omega, lr)
        sign_p, log_p = np.linalg.slogdet(P)
        sign_t, log_t = np.linalg.slogdet(omega * np.eye(N) - T)
        ratio = sign_p / sign_t * np.exp(log_p - log_t) / omega ** (D - N)
        assert ratio == pytest.approx(1.0, rel=1e-8)


def test_spectrum_of_the_matrix_polynomial_equals_the_state_matrix():
    """Roots of det P (interpolated on the unit circle) = eigenvalues of T: same radius."""
    system = coupled_system(
        np.array([[2.0, 0.6, 0.1], [0.6, 1.0, 0.3], [0.1, 0.3, 0.5]]),
        stage_sizes=[2, 1],
        rule="momentum",
        tau_fwd=[4, 1],
        momentum=0.5,
    )
    lr = 0.07
    D = _full_degree(system)
    omega = np.exp(2j * math.pi * np.arange(D + 1) / (D + 1))
    values = np.linalg.det(matrix_polynomial(system, omega, lr))
    ascending = (np.fft.fft(values) / (D + 1)).real  # det P = Σ c_m ω^m, c_m = DFT(values)_m
    nonzero = np.flatnonzero(np.abs(ascending) > 1e-9 * np.max(np.abs(ascending)))
    coeffs = ascending[nonzero[0] : nonzero[-1] + 1][::-1]  # highest degree first
    rho_poly = np.max(np.abs(np.roots(coeffs)))
    assert rho_poly == pytest.approx(spectral_radius(system, lr), rel=1e-8)


def test_state_matrix_radius_is_the_simulated_growth():
    """The composed step run from a random state grows like the state matrix's radius."""
    system = _random_system(3)
    lr = 1.3 * scan_max_lr(system).max_lr  # unstable: a clean growth to measure
    rho = spectral_radius(system, lr)
    rng = np.random.default_rng(0)
    hist = [
        {var: rng.standard_normal((depth, 1, n)) for var, (_, depth) in entry.items()}
        for entry, n in zip(system.state_layout, system.stage_sizes, strict=True)
    ]
    log_growth = 0.0
    for t in range(3000):
        hist = composed_step(system, hist, lr)
        norm = math.sqrt(sum(float(np.sum(h**2)) for stage in hist for h in stage.values()))
        hist = [{v: h / norm for v, h in stage.items()} for stage in hist]
        if t >= 1000:
            log_growth += math.log(norm)
    assert log_growth / 2000 == pytest.approx(math.log(rho), abs=2e-3)


# -- the frequency scan -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(16))
def test_scan_equals_the_block_state_matrix_bisection(seed):
    system = _random_system(seed)
    scan = scan_max_lr(system)
    dense = dense_max_lr(system)
    assert scan.max_lr == pytest.approx(dense.max_lr, rel=1e-7)
    assert scan.certified
    assert 1 <= scan.critical_stage <= system.stages
    assert sum(scan.stage_shares) == pytest.approx(1.0)
    # the crossing is on the unit circle: the state matrix has an eigenvalue e^{±iθ} there
    eig = np.linalg.eigvals(state_matrix(system, scan.max_lr))
    assert np.min(np.abs(eig - np.exp(1j * scan.crossing_angle))) < 1e-6


@pytest.mark.parametrize("seed", range(8))
def test_block_state_matrix_search_brackets_a_crossing_in_few_evaluations(seed):
    """The dense search's Brent step ends on a crossing of the spectral radius (stable just
    below, unstable just above) with ~30 diagonalisations in all; bisection to rtol 1e-11 took
    55-62 (the 4-per-decade grid walk, then ~36 halvings)."""
    system = _random_system(seed)
    found = dense_max_lr(system)
    assert found.max_lr and found.eigensolves <= 40
    assert spectral_radius(system, found.max_lr * (1 - 1e-8)) <= 1 + 1e-10
    assert spectral_radius(system, found.max_lr * (1 + 1e-8)) > 1 + 1e-10


SCALAR_RULES = [
    ("sgd", {}),
    ("momentum", {"momentum": 0.9}),
    ("nesterov", {"momentum": 0.9}),
    ("sc", {"momentum": 0.9}),
    ("lwp", {"momentum": 0.5}),
    ("lwp-v", {"momentum": 0.5}),
    ("lwp+sc", {"momentum": 0.9}),
    ("lwp-v+sc", {"momentum": 0.9}),
]


@pytest.mark.parametrize(("rule", "params"), SCALAR_RULES)
@pytest.mark.parametrize("tau", [0, 1, 7, 25])
def test_one_stage_diagonal_hessian_is_the_scalar_max_lr(rule, params, tau):
    """P = 1, H diagonal: the modes decouple, max lr = scalar max lr at λ_max (to 1e-10)."""
    lams = np.array([0.3, 2.5, 1.0, 0.01])
    system = coupled_system(np.diag(lams), stage_sizes=[4], rule=rule, tau_fwd=[tau], **params)
    scalar_rule, model = build_rule(rule, tau=tau, lam=float(lams.max()), **params)
    expected = max_lr(scalar_rule, model)
    got = scan_max_lr(system)
    assert got.max_lr == pytest.approx(expected.max_lr, rel=1e-10)
    assert got.crossing_angle == pytest.approx(expected.crossing_angle, rel=1e-8, abs=1e-12)


def test_one_stage_discrepancy_is_pipemare_eq_5_per_mode():
    """H_f = diag(λ + Δ), H_b = diag(−Δ): each mode is PipeMare's eq. 5 model (λ_k, Δ_k)."""
    lam, delta = np.array([1.0, 0.4]), np.array([3.0, -0.2])
    system = coupled_system(
        np.diag(lam + delta), np.diag(-delta), stage_sizes=[2], rule="t2",
        tau_fwd=[9], tau_bkwd=[2], decay=0.2,
    )  # fmt: skip
    scalar = []
    for la, de in zip(lam, delta, strict=True):
        rule, model = build_rule("t2", tau_fwd=9, tau_bkwd=2, decay=0.2, lam=la, delta=de)
        scalar.append(max_lr(rule, model).max_lr)
    assert scan_max_lr(system).max_lr == pytest.approx(min(scalar), rel=1e-10)


def test_t1_divides_the_stage_step_by_its_delay():
    """T1 at p = 1 (PipeMare eq. 4): stage lr = lr/τ, so the base max lr is τ× the scalar."""
    system = coupled_system(np.diag([2.0, 1.0]), stage_sizes=[2], tau_fwd=[6], t1_power=1.0)
    rule, model = build_rule("sgd", tau=6, lam=2.0)
    assert scan_max_lr(system).max_lr == pytest.approx(6 * max_lr(rule, model).max_lr, rel=1e-10)


def test_equal_delays_on_any_hessian_are_the_scalar_bound():
    """Uniform delays decouple in H's eigenbasis: coupled = scalar at (λ_max, τ) exactly."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((12, 6))
    system = coupled_system(A.T @ A / 12, stage_sizes=[2, 3, 1], rule="momentum",
                            tau_fwd=[5, 5, 5], momentum=0.9)  # fmt: skip
    assert scan_max_lr(system).max_lr == pytest.approx(scalar_bound(system), rel=1e-10)


def test_a_crossing_the_scan_misses_is_found_by_the_block_state_matrix():
    """Heavy ball at momentum 0.995, τ = 2 on four stages: the frequency scan answered 1.03
    (its certificate failed, "NOT certified") where the exact max lr — uniform delays: the
    scalar bound — is 6.46e-4; `analyze` now takes the block state matrix bisection there."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((12, 6))
    system = coupled_system(A.T @ A / 12, stage_sizes=[2, 2, 1, 1], rule="momentum",
                            tau_fwd=[2, 2, 2, 2], momentum=0.995)  # fmt: skip
    a = analyze(system)
    assert a.certified and a.max_lr == pytest.approx(scalar_bound(system), rel=1e-6)


@pytest.mark.parametrize(
    ("rule", "params"),
    [("sgd", {}), ("momentum", {"momentum": 0.9}), ("lwp+sc", {"momentum": 0.9})],
)
@pytest.mark.parametrize("lam", [1.0, 3.0])
def test_a_multiple_eigenvalue_inside_a_stage_is_one_branch(rule, params, lam):
    """H = λ·I on stage 1's block (dead units under weight decay): M(e^{iθ}) has the eigenvalue
    λ·s_1(θ) eight times for every θ.  Counted as one branch of multiplicity 8 the scan needs
    2-11 eigen-decompositions; as eight branches no prediction could pair them and every
    interval around their crossing was bisected to the limit (51-64)."""
    rng = np.random.default_rng(0)
    sizes = [8, 10, 12]
    A = rng.standard_normal((60, 22))
    H = np.zeros((30, 30))
    H[:8, :8] = lam * np.eye(8)
    H[8:, 8:] = A.T @ A / 60
    system = coupled_system(H, stage_sizes=sizes, rule=rule, tau_fwd=[5, 3, 1], **params)
    scan = scan_max_lr(system)
    assert scan.max_lr == pytest.approx(dense_max_lr(system).max_lr, rel=1e-7)
    assert scan.certified
    assert scan.eigensolves <= 15


def test_branches_merge_equal_eigen_data_only():
    mu = np.array([-2.0 + 1j, 3.0, -2.0 + 1j, -2.0 + 1j * (1 + 1e-12), 3.0])
    dmu = np.array([1j, 1.0, 1j, 1j, -1.0])  # the two 3.0 merely touch: opposite derivatives
    got_mu, got_dmu, m = branches((mu, dmu))
    assert sorted(zip(got_mu.real, got_dmu.real, m, strict=True)) == [
        (-2.0, 0.0, 3),
        (3.0, -1.0, 1),
        (3.0, 1.0, 1),
    ]


def test_hull_reach_bounds_the_exact_reach():
    """The reach is an upper bound within 2 % of the exact one (it is in fact the exact one)."""
    rng = np.random.default_rng(0)
    pts = rng.standard_normal((200, 7)) + 1j * rng.standard_normal((200, 7))
    z = np.concatenate([np.zeros((200, 1)), pts], axis=1)
    exact = np.zeros(200)
    for n in range(200):
        for a in z[n][z[n].imag >= 0]:
            for b in z[n][z[n].imag <= 0]:
                dy = a.imag - b.imag
                x = min(a.real, b.real) if dy == 0 else a.real + a.imag / dy * (b.real - a.real)
                exact[n] = max(exact[n], -x)
    bound = _hull_reach(pts)
    assert np.all(bound >= exact * (1 - 1e-12))
    assert np.all(bound <= exact * 1.02 + 1e-12)


def test_hull_reach_is_the_linear_program_optimum():
    """max X s.t. −X = Σ λ_i p_i, Σ λ_i ≤ 1, λ ≥ 0 (scipy's HiGHS) on random points, points on
    the axis and rows with every point on one side: the reach equals it to 1e-9."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(3)
    pts = rng.standard_normal((60, 5)) + 1j * rng.standard_normal((60, 5))
    pts[:10, 2] = pts[:10, 2].real  # on the axis
    pts[10:20] = pts[10:20].real + 1j * np.abs(pts[10:20].imag)  # all above
    pts[20:25] = -np.abs(pts[20:25].real) - 1j * np.abs(pts[20:25].imag)  # all below
    got = _hull_reach(pts)
    for n, row in enumerate(pts):
        # variables (λ_1..λ_m, X): minimise −X; Re: Σλ Re p + X = 0; Im: Σλ Im p = 0
        eq = np.vstack([np.r_[row.real, 1.0], np.r_[row.imag, 0.0]])
        res = linprog(
            np.r_[np.zeros(row.size), -1.0],
            A_ub=[np.r_[np.ones(row.size), 0.0]],
            b_ub=[1.0],
            A_eq=eq,
            b_eq=[0.0, 0.0],
            bounds=[(0, None)] * (row.size + 1),
        )
        assert res.status == 0
        assert got[n] == pytest.approx(-res.fun, abs=1e-9, rel=1e-9), n
    assert np.all(got[10:25] == 0.0) and np.count_nonzero(got[25:]) > 20  # one side: 0 only


# -- building systems ---------------------------------------------------------------------------


def test_stage_rules_match_the_trainer_pipeline_rule():
    """Per-stage fields equal the trainer's per-parameter arrays (the same dynamics measured)."""
    from stability.pipeline import pipeline
    from stability.trainer.schedules import pipeline_rule

    pipe = pipeline("pipemare", 3, 1)
    sizes = [2, 3, 1]
    for name, params in (("lwp+sc", {"momentum": 0.9}), ("t2", {"decay": 0.1})):
        trainer = pipeline_rule(name, params, pipe, sizes)
        stages = stage_rules(name, pipe.tau_fwd, pipe.tau_bkwd, **params)
        start = 0
        for rule, n in zip(stages, sizes, strict=True):
            for field in ("tau_fwd", "tau_bkwd", "momentum", "sc_a", "sc_b", "horizon", "gamma"):
                mine, theirs = getattr(rule, field), getattr(trainer, field)
                if theirs is None:
                    assert mine is None
                    continue
                theirs = np.broadcast_to(theirs, (6,))[start : start + n]
                assert np.allclose(theirs, mine, rtol=1e-14), (name, field)
            start += n


def test_bad_input_is_one_line_value_error():
    H = np.eye(3)
    with pytest.raises(ValueError, match="belongs to the scalar model"):
        coupled_system(H, stage_sizes=[3], tau_fwd=[2], lam=1.0)
    with pytest.raises(ValueError, match="3×3"):
        coupled_system(np.eye(2), stage_sizes=[3], tau_fwd=[2])
    with pytest.raises(ValueError, match="one delay per stage"):
        coupled_system(H, stage_sizes=[2, 1], tau_fwd=[2, 1], tau_bkwd=[0])
    with pytest.raises(ValueError, match="no delay parameter"):
        coupled_system(H, stage_sizes=[3], rule="gpipe", tau_fwd=[2])
    with pytest.raises(ValueError, match="t1_power"):
        coupled_system(H, stage_sizes=[3], tau_fwd=[2], t1_power=2.0)


def test_unstable_for_every_lr_is_zero():
    """A Hessian with a negative eigenvalue: the mode at ω = 1 leaves for any lr > 0."""
    system = coupled_system(np.diag([1.0, -0.1]), stage_sizes=[1, 1], tau_fwd=[2, 1])
    assert scan_max_lr(system).max_lr == 0.0
    assert dense_max_lr(system).max_lr == 0.0


# -- real problems --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpusmall(cpusmall_csv):
    from stability.trainer.linearize import linreg_linearization
    from stability.trainer.problems import ProblemOptions, build_problem

    problem, _ = build_problem(
        ProblemOptions(data=str(cpusmall_csv), standardize="none", bias=True)
    )
    return linreg_linearization(problem)


def test_cpusmall_coupled_is_1_89_times_lemma_1(cpusmall):
    """The issue's example: 13 parameters, 4 blocks, delays 7, 5, 3, 1: coupled/scalar ≈ 1.89."""
    from stability.agreement.coupled_runs import problem_system
    from stability.pipeline import pipeline

    built = problem_system(cpusmall, pipeline("pipemare", 4), "sgd", {})
    a = analyze(built.system)
    assert a.stage_sizes == (4, 3, 3, 3)
    assert a.stage_taus == (7, 5, 3, 1)
    assert a.max_lr / a.scalar_bound == pytest.approx(1.887, abs=5e-4)
    lam = np.linalg.eigvalsh(cpusmall.problem.hessian)[-1]
    assert a.scalar_bound == pytest.approx(2 / lam * math.sin(math.pi / 30), rel=1e-10)
    assert a.certified
    assert len(per_stage_bounds(built.system)) == 4


def test_cpusmall_uniform_delays_are_the_scalar_bound(cpusmall):
    from stability.agreement.coupled_runs import problem_system
    from stability.pipeline import pipeline

    built = problem_system(cpusmall, pipeline("uniform", 8, tau=15), "lwp+sc", {"momentum": 0.9})
    a = analyze(built.system)
    assert a.scalar_ratio == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize(
    ("schedule", "stages", "rule", "params"),
    [("pipemare", 4, "sgd", {}), ("pipemare", 8, "momentum", {"momentum": 0.9})],
)
def test_cpusmall_prediction_is_the_measured_max_lr(cpusmall, schedule, stages, rule, params):
    """The trainer's bisection (full batch, bracket 0.1 %) lands within 1 % of the coupled lr."""
    from stability.agreement.comparison import Protocol
    from stability.agreement.coupled_runs import measure, problem_system
    from stability.pipeline import pipeline

    built = problem_system(cpusmall, pipeline(schedule, stages), rule, params)
    predicted = scan_max_lr(built.system).max_lr
    measured = measure(built, cpusmall, predicted, Protocol(steps=10_000))
    assert measured.max_lr / predicted == pytest.approx(1.0, abs=0.01)


def test_other_regression_data_prediction_is_the_measured_max_lr():
    """Data the analysis was never tuned on: a synthetic design with a prescribed spectrum."""
    from stability.agreement.comparison import Protocol
    from stability.agreement.coupled_runs import measure, problem_system
    from stability.pipeline import pipeline
    from stability.trainer.data import synthetic_regression
    from stability.trainer.linearize import linreg_linearization
    from stability.trainer.linreg import LinearRegression

    data = synthetic_regression(np.geomspace(2.0, 0.02, 9), seed=3, residual=0.5)
    setup = linreg_linearization(LinearRegression.from_dataset(data))
    built = problem_system(setup, pipeline("pipemare", 3, 2), "lwp", {"momentum": 0.5})
    predicted = scan_max_lr(built.system).max_lr
    measured = measure(built, setup, predicted, Protocol(steps=10_000))
    assert measured.stable <= predicted <= measured.unstable


@pytest.mark.slow
def test_tiny_mlp_prediction_is_the_measured_max_lr(cpusmall_csv):
    """Per-layer stages of a tiny MLP: measured H_f, H_b; prediction within 25 % (issue)."""
    from stability.agreement.comparison import Protocol
    from stability.agreement.coupled_runs import measure, problem_system
    from stability.pipeline import pipeline
    from stability.trainer.linearize import mlp_linearization
    from stability.trainer.problems import ProblemOptions, build_problem

    mlp, _ = build_problem(
        ProblemOptions(
            problem="mlp", data=str(cpusmall_csv), samples=64, hidden=(3, 3), standardize="all"
        )
    )
    setup = mlp_linearization(mlp)
    built = problem_system(setup, pipeline("pipemare", 3), "sgd", {})
    H = built.system.hessians
    assert np.allclose(H["forward"] + H["backward"], mlp.hessian(setup.w_star), atol=1e-5)
    predicted = scan_max_lr(built.system).max_lr
    measured = measure(built, setup, predicted, Protocol(steps=3_000, rel_tol=1e-2))
    assert measured.max_lr / predicted == pytest.approx(1.0, abs=0.25)


# -- CLI ------------------------------------------------------------------------------------------


def _cli(capsys, *argv):
    from stability.cli.main import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_has_the_issue_keys(capsys, cpusmall_csv):
    code, out, err = _cli(
        capsys, "coupled", "--problem", "linreg", "--data", str(cpusmall_csv),
        "--standardize", "none", "--bias", "--stages", "4", "--schedule", "pipemare",
        "--rule", "sgd", "--json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    for key in (
        "max_lr", "scalar_bound", "scalar_ratio", "per_stage_bounds", "critical_stage",
        "crossing_angle", "hessian_shape", "stage_sizes", "stage_taus",
    ):  # fmt: skip
        assert key in data, key
    assert data["hessian_shape"] == [13, 13]
    assert data["stage_sizes"] == [4, 3, 3, 3]
    assert data["stage_taus"] == [7, 5, 3, 1]
    assert data["scalar_ratio"] == pytest.approx(1 / 1.887, rel=1e-3)
    assert data["measured_max_lr"] is None and data["protocol"] is None


@pytest.mark.parametrize(("stages", "microbatches"), [(4, 1), (3, 2)])
def test_uniform_is_pipemares_largest_delay_as_the_help_says(
    capsys, cpusmall_csv, stages, microbatches
):
    """``coupled --schedule uniform`` without ``--taus`` puts every stage at ⌈(2P−1)/N⌉ (it
    takes no ``--tau``); its ``--help`` said "the rule's delay", which other commands mean."""
    code, out, err = _cli(
        capsys, "coupled", "--data", str(cpusmall_csv), "--stages", str(stages),
        "--microbatches", str(microbatches), "--schedule", "uniform", "--rule", "sgd", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["stage_taus"] == [math.ceil((2 * stages - 1) / microbatches)] * stages
    helped = " ".join(_cli(capsys, "coupled", "--help")[1].split())  # argparse wraps lines
    assert "uniform: every stage at PipeMare's largest delay ⌈(2P−1)/N⌉ unless --taus" in helped


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rule", "sgd"], "--stages"),
        (["--rule", "sgd", "--stages", "2", "--lam", "2"], "scalar model"),
        (["--rule", "sgd", "--stages", "2", "--schedule", "bogus"], "schedule"),
        (["--rule", "nope", "--stages", "2"], "unknown rule"),
        (["--rule", "sgd", "--stages", "2", "--taus", "1,2,3"], "taus"),
    ],
)
def test_cli_errors_are_one_line_exit_2(capsys, argv, message, cpusmall_csv):
    code, out, err = _cli(capsys, "coupled", "--data", str(cpusmall_csv), *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and message in err
