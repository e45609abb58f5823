"""The causes behind issue 25's fuzz defects, each against an independent computation.

* EA-Pipe with a small elastic force: its Floquet multipliers cluster near 1, closer to the
  unit circle than the winding samples are apart, and the count aliased (9 zeros inside
  instead of 11: a spurious instability the bisection then could not certify).  Checked
  against dense eigenvalues of the monodromy matrix.
* A coupled system without delays: closed form ω = 1 − lr·κ against the block-state-matrix
  bisection (`dense_max_lr`).

The second fuzz (an outsider's, `benchmarks/fuzz_outsider.py`, issue 25 item 3): each defect's
call now ends in a result or in one stderr line naming a flag of the line, with no internal
message, and the cause is fixed (not only the message).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest

from stability.analysis.boundary import max_lr
from stability.cli.main import main
from stability.coupled.scan import check_scan_size, scan_max_lr
from stability.coupled.system import coupled_system, dense_max_lr, spectral_radius
from stability.dynamics.monodromy import monodromy
from stability.dynamics.round_robin import round_robin_function
from stability.quadratic import QuadraticModel
from stability.rules.eapipe import ElasticAveraging
from stability.spectrum import floquet_stable
from stability.winding import count_inside


@pytest.mark.parametrize("lr", [1e-4, 9.561577e-4, 1e-3, 1e-2])
def test_clustered_ea_multipliers_are_counted_inside(lr):
    rule, model = ElasticAveraging(tau=9, elastic=0.0024, sync_period=1), QuadraticModel(1.0)
    dense = np.linalg.eigvals(np.asarray(monodromy(rule, model, lr), dtype=float))
    assert np.max(np.abs(dense)) < 1 - 1e-5  # every multiplier inside, a cluster near 1
    f = round_robin_function(rule, model, np.array([lr]))
    assert count_inside(f, np.ones(1), np.arange(1))[0] == dense.size == 11


@pytest.mark.parametrize(
    "rule",
    [
        ElasticAveraging(tau=9, elastic=0.0024, sync_period=1),  # t1-audit line of the issue
        ElasticAveraging(tau=0, elastic=0.5, sync_period=4),  # train line: multipliers meet
        ElasticAveraging(tau=7, elastic=0.0024, sync_period=1),  # nearly double at −1
    ],
)
def test_ea_threshold_is_certified_and_matches_dense_monodromy(rule):
    model = QuadraticModel(1.0)
    found = max_lr(rule, model)
    assert found.max_lr is not None and found.method.startswith("Floquet bisection (certified")

    def radius(lr):
        return np.max(np.abs(np.linalg.eigvals(np.asarray(monodromy(rule, model, lr), float))))

    assert radius(found.max_lr * (1 - 1e-5)) < 1 < radius(found.max_lr * (1 + 1e-5))
    assert floquet_stable(rule, model, found.max_lr * 0.5)[0]


@pytest.mark.parametrize("tau", [1, 4, 16])
def test_an_ea_elastic_force_near_zero_is_refused_not_answered(tau):
    """`t1-audit ea --elastic 1e-12 --taus 1,4,16 …` (seed 9702: "internal error:
    ArithmeticError: Floquet bisection could not certify"); at α = 1e-9 the scan answered a
    "certified" max lr of 2.5e-9 and at 3e-9 answered 0, where the max lr is ~2/λ: the
    slow multipliers, ~4e-9 apart near 1 − 1e-8, are within float64's rounding of each other
    and of the circle at small lr.  Refused naming the elastic force; at α = 1e-8 the answer
    stands, bracketed by the dense monodromy."""
    for alpha in (1e-12, 1e-9, 3e-9):
        with pytest.raises(ValueError, match=f"elastic={alpha:g}.*float64's rounding"):
            max_lr(ElasticAveraging(tau=tau, elastic=alpha, sync_period=1), QuadraticModel(4.0))
    rule, model = ElasticAveraging(tau=tau, elastic=1e-8, sync_period=1), QuadraticModel(4.0)
    found = max_lr(rule, model).max_lr
    assert found == pytest.approx(0.5, rel=1e-8)

    def radius(lr):
        return np.max(np.abs(np.linalg.eigvals(np.asarray(monodromy(rule, model, lr), float))))

    assert radius(found * (1 - 1e-4)) < 1 < radius(found * (1 + 1e-4))


def test_an_ea_elastic_force_near_zero_is_refused_by_the_command_line():
    """The seed-9702 line itself (all three delays at once): one line naming the elastic force
    (it ran in each of the three cases above, the same 1.1 s call each time)."""
    argv = "t1-audit ea --lam 4 --lr-schedule constant:0.1 --taus 1,4,16 --elastic 1e-12".split()
    argv += ["--steps", "1910", "--anneal-steps", "403"]
    assert "float64" in _refused_naming(argv, "elastic=1e-12")


def test_coupled_without_delay_is_the_closed_form():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((9, 9))
    H_f = A @ A.T / 9
    H_b = 0.3 * (lambda B: B @ B.T / 9)(rng.standard_normal((9, 9)))
    system = coupled_system(H_f, H_b, stage_sizes=(3, 2, 4), rule="sgd", tau_fwd=(0, 0, 0))
    fast = scan_max_lr(system)
    assert "no delay" in fast.method and fast.certified
    reference = dense_max_lr(system).max_lr
    assert fast.max_lr == pytest.approx(reference, rel=1e-9)
    kappa = np.linalg.eigvals(H_f + H_b)  # gradient H_f·w_f + H_b·w_b at w_f = w_b
    assert fast.max_lr == pytest.approx(np.min(2 * kappa.real / np.abs(kappa) ** 2), rel=1e-9)
    assert spectral_radius(system, fast.max_lr * 0.999) < 1


def test_api_results_carry_the_warnings_the_cli_prints():
    import warnings

    import stability as st
    from stability.result import warning_lines

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing escapes: it is on the result
        r = st.heatmap("sgd", x="lr:1e-3:1e300:5", y="tau:0:3:4", lam=1e150)
    assert r.warnings and all("lost accuracy" in w for w in r.warnings)
    assert r.to_json()["warnings"] == list(r.warnings)
    assert st.max_lr("sgd", tau=3).warnings == ()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("`torch.jit.script` is deprecated", DeprecationWarning, stacklevel=1)
        warnings.warn("overflow encountered in exp", RuntimeWarning, stacklevel=1)
    [line] = warning_lines(caught)
    assert line.startswith("RuntimeWarning: overflow") and "lost accuracy" in line


def _call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _refused_naming(argv: list[str], flag: str) -> str:
    code, out, err = _call(argv)
    assert code == 2, (code, out, err)
    assert len(err.strip().splitlines()) == 1 and flag in err, err
    assert "internal error" not in err
    return err


NOISE = ["noise", "lwp+sc", "--momentum", "0.5", "--batch", "8", "--lr", "0.01", "--samples", "64"]


def test_noise_per_stage_work_beyond_the_documented_limit_is_refused_naming_stages():
    """`noise --schedule pipemare` took 35 s (P = 4) to 93 s (P = 6) of CPU in the per-stage
    Gramians: now the Stein solves keep only the slots the stages read (`tests/test_noise.py`
    checks them against the time-domain sums) and a cost beyond the documented limit is
    refused up front, naming --stages."""
    err = _refused_naming([*NOISE, "--schedule", "pipemare", "--stages", "8"], "--stages")
    assert "docs/limits.md" in err and "148³" in err


def test_noise_help_states_the_limits_the_code_enforces():
    """`noise --help` said "a state of 4000 entries" where the limit is 400."""
    from stability.limits import NOISE_MAX_STAGED_WORK, NOISE_MAX_STATE

    code, out, _ = _call(["noise", "--help"])
    text = " ".join(out.split())
    assert code == 0 and f"state of {NOISE_MAX_STATE} entries" in text
    assert "4000 entries" not in text
    assert f"{NOISE_MAX_STAGED_WORK:.1e}" in text


def test_stein_loop_drops_only_the_slots_nothing_reads():
    """The kept slots of a two-stage sgd state (delays 3 and 1): the first stage's parameter
    keeps w_t … w_{t−3}, the second's w_t, w_{t−1}: 4 + 2·2 of the union's 3 × 5 slots (the
    rule's velocity v, which sgd does not read, is dropped too)."""
    from stability.noise.modal import staged_work
    from stability.noise.state import state_space
    from stability.rules.registry import build_rule

    rules = [build_rule("sgd", tau=3)[0], build_rule("sgd", tau=1)[0]]
    st = state_space(rules, 0.1, [1, 2])
    H = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 0.5]])
    n, work = staged_work(st, H)
    assert (st.dim * st.size, n) == (15, 8) and work == pytest.approx(6 * 8**3)


@pytest.mark.parametrize("lam", [1.0, 10.0])
def test_smith_doubling_of_a_diverging_mode_gives_up_before_overflowing(lam):
    """`noise momentum --tau 31 --lr 0.01` printed "RuntimeWarning: invalid value encountered
    in matmul (modal.py)": a mode with ρ(A) ≈ 1.015 whose squarings stayed below the 1e150
    guard while the partial sum overflowed to inf·0.  Now the sum is guarded too: no warning,
    and the mode counts as unstable (its ρ(A_k) from dense eigenvalues is > 1)."""
    import warnings

    from stability.noise.modal import modal_weights
    from stability.noise.state import uniform_state
    from stability.rules.registry import build_rule

    rule = build_rule("momentum", tau=31, momentum=0.9)[0]
    st = uniform_state(rule, 0.01, 2)
    assert np.max(np.abs(np.linalg.eigvals(st.mode_matrices(np.array([lam]))[0]))) > 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert modal_weights(st, np.diag([lam, 0.06]), 1.0) is None


@pytest.mark.parametrize(
    "schedule, text",
    [("step:0.1:2:5", "factor"), ("cosine:0.1", "written"), ("warmup:0.1:0", "length"),
     ("step:0.1:0.5:a", "boundary")],
)  # fmt: skip
def test_a_bad_part_of_the_lr_schedule_is_refused_naming_the_flag(schedule, text):
    """`t1-audit … --lr-schedule step:0.1:2:5` said "factor must be … in [0, 1]" without
    naming --lr-schedule (factor is no flag)."""
    argv = ["t1-audit", "sgd", "--lam", "4", "--anneal-steps", "10", "--steps", "20",
            "--taus", "1,2", "--lr-schedule", schedule]  # fmt: skip
    assert text in _refused_naming(argv, "--lr-schedule")


NET_FILE = """
import torch
def _data():
    x = torch.linspace(-1, 1, 24, dtype=torch.float64).reshape(8, 3)
    return x, x[:, :1]
def nan_inputs():
    x, y = _data()
    x[2, 1] = float("nan")
    return {"model": torch.nn.Linear(3, 1).double(), "inputs": x, "targets": y,
            "loss": lambda o, t: ((o - t) ** 2).mean()}
def no_parameters():
    x, y = _data()
    return {"model": torch.nn.Identity(), "inputs": x, "targets": y,
            "loss": lambda o, t: ((o[:, :1] - t) ** 2).mean()}
def targets_not_a_tensor():
    x, y = _data()
    return {"model": torch.nn.Linear(3, 1).double(), "inputs": x, "targets": [1.0],
            "loss": lambda o, t: ((o - t) ** 2).mean()}
"""


@pytest.mark.parametrize(
    "func, text",
    [("nan_inputs", "not finite"), ("no_parameters", "no trainable parameters"),
     ("targets_not_a_tensor", "targets must be a torch.Tensor")],
)  # fmt: skip
def test_what_is_wrong_with_a_net_problem_is_refused_naming_problem(tmp_path, func, text):
    """`net curvature --problem FILE:nan_inputs` said "the loss at the model's weights is not
    finite (nan)" naming no flag; every check of the problem's dict now names --problem."""
    pytest.importorskip("torch")
    path = tmp_path / "problems.py"
    path.write_text(NET_FILE)
    err = _refused_naming(["net", "curvature", "--problem", f"{path}:{func}", "--k", "2"],
                          "--problem")  # fmt: skip
    assert text in err


def test_a_device_without_values_is_refused_naming_device():
    """`net curvature … --device meta` ended in "internal error: RuntimeError: Tensor.item()
    cannot be called on meta tensors"."""
    pytest.importorskip("torch")
    problem = f"{Path(__file__).resolve().parents[1] / 'examples' / 'diabetes_linear.py'}:problem"
    _refused_naming(["net", "curvature", "--problem", problem, "--device", "meta"], "--device")


def test_minibatch_state_limit_is_refused_before_the_state_is_probed(monkeypatch):
    """``noise wp ... --tau 5000`` (the outsider fuzz, seed 9102) probed the 10⁴ slots' state
    matrices, 12-26 s of CPU, only to refuse the state size: the refusal now comes from the
    rule's slots, before any probe (here made to fail), also for tradeoff."""
    from stability.noise import state

    def no_probe(*args):
        raise AssertionError("probed before the state limit was checked")

    monkeypatch.setattr(state, "probe", no_probe)
    err = _refused_naming(
        [*NOISE[:1], "wp", *NOISE[2:], "--hessian-estimate", "0", "--tau", "5000", "--bias"],
        "--tau",
    )
    assert "must be ≤ 400 (docs/limits.md), got 13 × 10004 = 130052" in err
    err = _refused_naming(["tradeoff", "--batch", "8", "--rules", "wp", "--tau", "5000"], "--tau")
    assert "got 12 × 10004 = 120048" in err


TRADEOFF = ["tradeoff", "--batch", "8", "--samples", "32"]


def test_tradeoff_enforces_the_documented_state_limit_and_its_own_cost_limit():
    """`tradeoff --rules sgd --tau 64` ran 24 s of CPU although docs/limits.md gives
    parameters × state size ≤ 400 for noise/tradeoff (it was enforced by noise only), and the
    default three rules at τ = 30 took 52 s: both are refused up front, naming --tau."""
    err = _refused_naming([*TRADEOFF, "--rules", "sgd", "--tau", "64"], "--tau")
    assert "≤ 400" in err
    err = _refused_naming([*TRADEOFF, "--tau", "30"], "--tau")
    assert "docs/limits.md" in err and "Σ points" in err


def test_tradeoff_work_counts_the_fixed_cost_of_many_small_points(tmp_path):
    """`tradeoff --tau 5 --rules wp,lwp,lwp-v --samples 46` took 23 s at 3.4e6 of the old
    measure Σ points × d(d+1)/2 × s³ ≤ 1e7, which missed the cost every pair and point has
    whatever s (0.003 s and 0.1 s, measured): on one feature it allowed any number of points.
    Now 200 momenta of delayed heavy ball on one feature (old measure 200 × 5³) are refused
    naming tau, 20 are not; a rule listed twice is scanned (and counted) once."""
    import stability as st
    from stability.noise.minibatch import _problem
    from stability.noise.tradeoff import MOMENTA, check_work

    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    one = tmp_path / "one.csv"
    np.savetxt(one, np.c_[x, 2 * x + rng.normal(size=40)], delimiter=",")
    problem = _problem(str(one), {})
    assert problem.dim == 1
    check_work(["momentum"], 4, problem, np.linspace(0, 0.99, 20))
    with pytest.raises(ValueError, match=r"^tau: .*80,000"):
        st.tradeoff(batch=8, tau=4, rules=["momentum"], data=str(one),
                    momenta=np.linspace(0, 0.99, 200))  # fmt: skip
    twice = st.tradeoff(batch=8, tau=1, rules=["sgd", "sgd"], data=str(one), momenta=MOMENTA)
    assert twice.rules == ["sgd"]


def test_tradeoff_fastest_breaks_a_rounding_tie_by_the_order_of_rules():
    """lwp and lwp-v scan the same dynamics here: their steps to the target agree to 1e-13, and
    `fastest` named whichever rounding favoured (fuzz seed 9710 vs a later run).  A tie within
    `TIE` goes to the rule listed first, in either order."""
    import stability as st
    from stability.noise.tradeoff import TIE

    for rules in (["lwp", "lwp-v"], ["lwp-v", "lwp"]):
        run = st.tradeoff(batch=8, tau=1, rules=rules, samples=32, target=1.0,
                          momenta=(0.9,), fractions=(0.5, 0.9))  # fmt: skip
        a, b = run.steps_to_target.values()
        assert a == pytest.approx(b, rel=TIE) and run.fastest == rules[0]


def test_minibatch_commands_refuse_too_many_parameters_naming_data(tmp_path):
    """A 40-feature file: `noise` said "the data have 40 parameters" naming no flag, and
    `tradeoff` (no check at all) ran and ended in a matplotlib error ("Data cannot be
    log-scaled")."""
    wide = tmp_path / "wide.csv"
    rng = np.random.default_rng(5)
    np.savetxt(wide, np.c_[rng.normal(size=48), rng.normal(size=(48, 40))], delimiter=",")
    for argv in (["noise", "sgd", "--batch", "8", "--lr", "0.01"],
                 ["tradeoff", "--batch", "8", "--tau", "1", "--rules", "sgd"]):  # fmt: skip
        assert "40 parameters" in _refused_naming([*argv, "--data", str(wide)], "--data")


@pytest.mark.parametrize(
    "flags, flag, text",
    [(["--rate-steps", "10000001"], "--rate-steps", "[10, 1000000]"),
     (["--rate-steps", "100000", "--rate-doublings", "5"], "--rate-steps", "3200000 steps"),
     (["--rate-doublings", "21"], "--rate-doublings", "[0, 20]")],
)  # fmt: skip
def test_validate_rate_runs_keep_the_documented_steps_limit(flags, flag, text):
    """`validate … --rate-steps 10000001` was accepted (a 10⁷-step run; the documented limit
    is 10⁶ steps per run), and so was a doubling past it."""
    argv = ["validate", "--rules", "sgd", "--taus", "0", "--steps", "200", *flags]
    assert text in _refused_naming(argv, flag)


def test_t1_audit_steps_are_limited_by_their_product_with_the_stages():
    """The two step flags without a limit of their own (`tests/test_fuzz_cli.py`): --steps is
    refused past steps × stages ≤ 4e6, and an anneal length of 1e11 is only a parameter."""
    base = ["t1-audit", "sgd", "--lam", "4", "--lr-schedule", "constant:0.1", "--taus", "1"]
    _refused_naming([*base, "--anneal-steps", "10", "--steps", "4000001"], "--steps")
    code, out, err = _call([*base, "--anneal-steps", "100000000000", "--steps", "40"])
    assert code == 0 and "SAFE" in out, err


def test_minibatch_commands_refuse_a_singular_hessian_naming_data():
    """`noise sgd … --samples 12` (12 parameters, 12 rows centred: rank 11) ended in numpy's
    "Geometric sequence cannot include zero": the flat direction is a marginal mode, so no lr
    was mean-square stable (ms_max_lr 0) and the almost-sure search started at 0.  A singular
    Hessian is now refused naming --data (14 rows give a result)."""
    argv = ["noise", "sgd", "--tau", "2", "--batch", "8", "--lr", "0.05", "--steps", "50",
            "--lyapunov-steps", "100", "--lyapunov-runs", "2", "--samples"]  # fmt: skip
    assert "singular (rank 11 < 12" in _refused_naming([*argv, "12"], "--data")
    code, out, err = _call([*argv, "14"])
    assert code == 0, err
    assert "Geometric" not in _refused_naming(
        ["tradeoff", "--batch", "8", "--tau", "1", "--rules", "sgd", "--samples", "12"], "--data"
    )


def test_validate_with_long_stage_delays_takes_the_frequency_scan():
    """`validate … --schedule pipemare --stage-delays 100000` said "the block state matrix
    would have 1200024 rows (> 4000); use the frequency scan" (an API hint, no flag): the
    coupled prediction now takes that scan where the block state matrix is too large; the
    scan equals the dense bisection where both apply (delays 3, 1)."""
    from stability.agreement.comparison import coupled_max_lr
    from stability.coupled.scan import scan_max_lr
    from stability.coupled.system import coupled_system, dense_max_lr
    from stability.pipeline import Pipeline
    from stability.trainer.linearize import linreg_linearization
    from stability.trainer.linreg import LinearRegression

    rng = np.random.default_rng(4)
    X = rng.standard_normal((20, 3))
    setup = linreg_linearization(LinearRegression(X, X @ [1.0, -1.0, 0.5]))
    pipe = Pipeline.from_options(
        schedule="pipemare", stages=3, stage_delays=[1500]
    )  # > 4000 states
    assert coupled_max_lr(setup, "sgd", {}, pipe, [1, 1, 1]) > 0
    system = coupled_system(setup.problem.hessian, stage_sizes=[2, 1], rule="sgd",
                            tau_fwd=[3, 1])  # fmt: skip
    assert scan_max_lr(system).max_lr == pytest.approx(dense_max_lr(system).max_lr, rel=1e-6)


PIPEOPTIM_ADAMW = {"optimizer": "adamw", "weight_decay": 0.5, "precond": 2.0}


@pytest.mark.parametrize("name, values", [("sgd", {}), ("t2", {"momentum": 0.5}),
                                          ("pipeoptim", PIPEOPTIM_ADAMW)])  # fmt: skip
def test_validate_coupled_row_is_the_coupled_commands_answer(monkeypatch, name, values):
    """`validate --stages 16 --schedule pipemare` on 40 features took 20 s: its exact coupled
    row diagonalised a 784-row block state matrix ~35 times (0.5 s each).  Above
    `DENSE_ROW_MAX_STATES` rows it now takes `coupled`'s own answer (the frequency scan,
    certified on the block state matrix), which equals the dense search to 1e-8 — here on a
    small system, the threshold lowered — for affine rules and for PipeOptim-AdamW, whose lr²
    terms the plain scan used above 900 rows refused ("needs dynamics affine in lr")."""
    from stability.agreement import comparison
    from stability.coupled import system as coupled
    from stability.pipeline import Pipeline
    from stability.trainer.linearize import linreg_linearization
    from stability.trainer.linreg import LinearRegression

    rng = np.random.default_rng(6)
    X = rng.standard_normal((30, 4))
    setup = linreg_linearization(LinearRegression(X, X @ [1.0, -1.0, 0.5, 2.0]))
    pipe = {
        "sgd": Pipeline.from_options(schedule="pipemare", stages=4),
        "t2": Pipeline.from_options(schedule="pipemare", stages=4, backward="current"),
        "pipeoptim": Pipeline.from_options(schedule="pipedream", stages=4),
    }[name]
    dense = comparison.coupled_max_lr(setup, name, values, pipe, [1, 1, 1, 1])
    monkeypatch.setattr(comparison, "DENSE_ROW_MAX_STATES", 0)
    calls = []
    monkeypatch.setattr(coupled, "dense_max_lr", lambda *a, **k: calls.append(1))
    scanned = comparison.coupled_max_lr(setup, name, values, pipe, [1, 1, 1, 1])
    assert not calls and scanned == pytest.approx(dense, rel=1e-8) and dense > 0


def test_a_rule_not_affine_in_lr_beyond_its_search_degree_is_refused_naming_the_delay():
    """`max-lr pipeoptim --optimizer adamw --weight-decay 0.5 --tau 500` said "bisection needs
    dense eigenvalues; degree 502 > 400" (no flag), and τ = 398 took 31 s; `validate` with
    `--stage-delays 400` said the same.  Above `BISECTION_MAX_DEGREE` both are refused naming
    the flag the user typed (validate by its per-mode work limit, which binds first); below it
    the answer is the one certified on the spectral radius (stable just below, unstable just
    above, by dense eigenvalues here)."""
    from stability.dynamics.linear import characteristic_polynomial
    from stability.limits import BISECTION_MAX_DEGREE
    from stability.rules.registry import build_rule
    from stability.spectrum import spectral_radius

    adamw = ["--optimizer", "adamw", "--weight-decay", "0.5"]
    tau = BISECTION_MAX_DEGREE - 1  # degree τ + 2
    err = _refused_naming(["max-lr", "pipeoptim", *adamw, "--tau", str(tau)], "--tau")
    assert f"at most {BISECTION_MAX_DEGREE}" in err
    validate = ["validate", "--rules", "pipeoptim", *adamw, "--steps", "200", "--stages", "3",
                "--schedule", "pipedream", "--stage-delays", str(tau)]  # fmt: skip
    assert "(docs/limits.md)" in _refused_naming(validate, "--stage-delays")  # the modes first
    rule, model = build_rule("pipeoptim", tau=30, optimizer="adamw", weight_decay=0.5)
    found = max_lr(rule, model)
    assert found.method == "bisection (certified)"
    cp = characteristic_polynomial(rule, model)
    below, above = (spectral_radius(cp.at(found.max_lr * f).normalized().dense())
                    for f in (1 - 1e-7, 1 + 1e-7))  # fmt: skip
    assert below < 1 <= above


def test_coupled_with_a_rule_not_affine_in_lr_counts_its_scalar_searches():
    """`coupled --rule pipeoptim --optimizer adamw --weight-decay 0.5 --stages 4 --taus 298`
    took 136 s: P + 2 scalar searches on dense eigenvalues of degree 300, the scan's first
    guess repeated in every scan of the fixed-point iteration.  The scans now share L(0) as
    their first guess (same answer), and (P + 2)·(τ + 2)³ beyond the documented work is refused
    naming --taus before anything is computed."""
    from stability.limits import NONAFFINE_SEARCH_MAX_WORK

    adamw = ["coupled", "--rule", "pipeoptim", "--optimizer", "adamw", "--weight-decay", "0.5",
             "--schedule", "pipedream", "--stages", "4", "--samples", "64"]  # fmt: skip
    err = _refused_naming([*adamw, "--taus", "298"], "--taus")
    assert f"6 × 300³ = 1.62e+08, at most {NONAFFINE_SEARCH_MAX_WORK:.1e}" in err


def test_predictions_of_a_rule_not_affine_in_lr_count_one_search_per_mode(capsys):
    """`train --rule pipeoptim --optimizer adamw --weight-decay 0.5 --tau 298` spent 137 s
    predicting its max lr: one dense-eigenvalue search per Hessian mode (12).  Beyond
    modes × degree³ ≤ `NONAFFINE_SEARCH_MAX_WORK` the train runs with a note instead of the
    prediction, and validate (whose rows are predictions) refuses naming the delay flag."""
    from stability.limits import NONAFFINE_SEARCH_MAX_WORK

    adamw = ["--rule", "pipeoptim", "--optimizer", "adamw", "--weight-decay", "0.5"]
    code = main(["train", *adamw, "--tau", "298", "--lr", "0.001", "--steps", "50",
                 "--samples", "32", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["predicted_max_lr"] is None
    assert (
        f"12 × 300³ = 3.24e+08, at most {NONAFFINE_SEARCH_MAX_WORK:.1e}" in out["prediction_note"]
    )
    validate = ["validate", "--rules", "pipeoptim", *adamw[2:], "--steps", "200", "--stages",
                "3", "--schedule", "pipedream", "--stage-delays", "200"]  # fmt: skip
    assert "12 × 202³" in _refused_naming(validate, "--stage-delays")


def test_minibatch_commands_refuse_an_overflowing_lr_naming_lr():
    """`net noise --rule pipesgd … --lr 1e308` (and `noise`) ended in numpy's "Array must not
    contain infs or NaNs": lr·λ overflowed float64 in the state matrix.  Such an lr is refused
    naming --lr with its bound; a large but representable one still gives a result."""
    argv = ["noise", "sgd", "--tau", "2", "--batch", "8", "--steps", "50", "--samples", "64",
            "--lyapunov-steps", "100", "--lyapunov-runs", "2", "--lr"]  # fmt: skip
    assert "at most 1e+150" in _refused_naming([*argv, "1e308"], "--lr")
    code, out, err = _call([*argv, "1e100"])
    assert code == 0, err
    net = ["net", "noise", "--problem", "examples/diabetes_linear.py:problem", "--rule", "sgd",
           "--tau", "1", "--batch", "16", "--k", "4", "--steps", "50", "--lyapunov-steps", "100",
           "--lyapunov-runs", "2", "--lr", "1e308"]  # fmt: skip
    assert "overflow" in _refused_naming(net, "--lr")


def test_data_whose_squares_overflow_are_refused_naming_data(tmp_path):
    """`validate … --data huge.csv` (values ~1e200) ended in numpy's "zero-size array to
    reduction operation maximum which has no identity" (every mode lost to overflow)."""
    huge = tmp_path / "huge.csv"
    rng = np.random.default_rng(5)
    np.savetxt(huge, rng.normal(size=(48, 4)) * 1e200, delimiter=",")
    argv = ["validate", "--rules", "sgd", "--schedule", "pipemare", "--stages", "3",
            "--steps", "200", "--data", str(huge)]  # fmt: skip
    assert "overflows" in _refused_naming(argv, "--data")


def test_validate_on_an_mlp_is_refused_above_its_work_limit():
    """`validate --rules sgd --problem mlp --task classification` (cpusmall's target as 99
    classes: 567 parameters) took 56-65 s of CPU; it is refused in one line naming --steps by
    the documented cost model, which admits the default regression MLP (13.6 s) and one τ of
    the classification at 3,500 steps (its units count 1.5 times: at the default 5,000 steps
    one τ took 22.9 s, 26.8 s with three PipeMare stages, in a busy hour)."""
    from stability.agreement.comparison import check_mlp_work as _check_mlp_work
    from stability.limits import VALIDATE_MLP_MAX_WORK
    from stability.trainer.mlp import MLP

    argv = ["validate", "--rules", "sgd", "--problem", "mlp", "--task", "classification"]
    err = _refused_naming(argv, "--steps")
    assert "4 rows" in err and "128 samples × 567 parameters" in err and "4.5e+08" in err
    protocol = type("P", (), {"steps": 5000, "seeds": (0, 1, 2), "rel_tol": 0.01})
    X = np.zeros((128, 12))
    regression = MLP(X, np.zeros(128), hidden=(4, 4))
    classes = MLP(X, np.arange(128) % 99, hidden=(4, 4), task="classification")
    assert (regression.dim, classes.dim) == (77, 567)
    _check_mlp_work(regression, 4, protocol, None)  # 4 × 5000 × (128·77 + 10⁴) = 4.0e8
    with pytest.raises(ValueError, match=r"× 1.5 \(classification\) = 6.2e\+08 exceeds"):
        _check_mlp_work(classes, 1, protocol, None)  # 1.5 × 4.1e8
    shorter = type("P", (), {"steps": 3500, "seeds": (0,), "rel_tol": 0.01})
    _check_mlp_work(classes, 1, shorter, None)  # 1.5 × 2.9e8
    with pytest.raises(ValueError, match="steps: .* × 3 seeds"):  # 3 × 4 × 5000 × (64·77 + 10⁴)
        _check_mlp_work(regression, 4, protocol, 64)
    assert 4 * 5000 * (128 * 77 + 10_000) < VALIDATE_MLP_MAX_WORK


@pytest.mark.parametrize("rel_tol, rounds", [(0.3, 1), (0.019, 2), (0.01, 3), (2e-5, 5)])
def test_verdict_rounds_count_the_rounds_of_the_bisection(rel_tol, rounds):
    """The cost model's round count equals the rounds `bisect_max_lr` takes on a threshold
    inside its first grid (a synthetic verdict: unstable above 1)."""
    from stability.trainer.measure import bisect_max_lr, verdict_rounds

    for guess in (0.8, 1.0, 1.3):
        found = bisect_max_lr(lambda grid: np.asarray(grid) > 1.0, guess, rel_tol=rel_tol)
        assert found.stable <= 1.0 < found.unstable
        assert len(found.rounds) == verdict_rounds(rel_tol) == rounds


def test_coupled_measure_on_an_mlp_counts_its_rounds_and_leaves_room_for_the_prediction():
    """Seed 9505: `coupled --rule momentum --task classification --problem mlp --measure
    --steps 2000 --rel-tol 2.17574e-05` took 25 s (5 verdict rounds where the cost model
    counted the default 3, and the prediction's 8 s beside it): refused naming --steps and
    --rel-tol before the prediction runs."""
    argv = ["coupled", "--rule", "momentum", "--momentum", "0.5", "--stages", "3", "--schedule",
            "pipedream", "--measure", "--steps", "2000", "--task", "classification",
            "--rel-tol", "2.17574e-05", "--problem", "mlp"]  # fmt: skip
    err = _refused_naming(argv, "--steps")
    assert "× 5/3 verdict rounds for --rel-tol 2.17574e-05 × 1.5 (classification)" in err
    assert "5.4e+07" in err


def test_coupled_measure_leaves_room_for_the_scan_by_its_cubic_cost():
    """Seed 9901: `coupled --rule momentum --momentum 0.5 --stages 3 --measure --steps 2000
    --task classification --method scan --schedule uniform --problem mlp` took 25 s (the
    scan's prediction 12.6-14 s with its start-up at p = 567, the measurement 6.5-11 s): the
    scan counts 0.45·(p/600)³ of the limit, so that 2,000 steps are refused naming --steps,
    430 are admitted (the classification's units count 1.5 times), and the dense method or a
    small MLP keep the whole half."""
    from stability.agreement.comparison import check_mlp_work
    from stability.api.coupled import measurement_share
    from stability.limits import COUPLED_MLP_WORK_SHARE
    from stability.trainer.mlp import MLP

    argv = ("coupled --rule momentum --momentum 0.5 --stages 3 --measure --steps 2000 --task "
            "classification --method scan --schedule uniform --problem mlp").split()  # fmt: skip
    err = _refused_naming(argv, "--steps")
    assert "× 1.5 (classification) = 2.5e+08 exceeds 5.4e+07" in err
    assert measurement_share(567, "scan") == pytest.approx(0.5 - 0.45 * (567 / 600) ** 3)
    assert measurement_share(567, "dense") == COUPLED_MLP_WORK_SHARE
    assert measurement_share(77, "scan") == pytest.approx(0.5 - 0.45 * (77 / 600) ** 3)
    classes = MLP(np.zeros((128, 12)), np.arange(128) % 99, hidden=(4, 4), task="classification")
    short = type("P", (), {"steps": 430, "seeds": (0,), "rel_tol": 0.01})
    check_mlp_work(classes, 1, short, None, share=measurement_share(classes.dim, "scan"))


@pytest.mark.parametrize("sync_period", [1, 5, 35])
def test_ea_without_elastic_force_is_stable_for_no_lr(sync_period):
    """EA-Pipe with α = 0 (the outsider's fuzz, seed 25302: `t1-audit ea --elastic 0
    --sync-period 35 …` ended in "Floquet bisection could not certify"): the master never
    moves, so the dense monodromy has a multiplier at 1 at every lr, and the answer is 0."""
    rule = ElasticAveraging(tau=2, elastic=0.0, sync_period=sync_period)
    model = QuadraticModel(3.26934)
    for lr in (1e-6, 1e-2, 0.3):
        mu = np.linalg.eigvals(np.asarray(monodromy(rule, model, lr), dtype=float))
        assert np.min(np.abs(mu - 1.0)) < 1e-12
    result = max_lr(rule, model)
    assert result.max_lr == 0.0 and "multiplier at 1" in result.method


def test_coupled_measure_on_an_mlp_is_refused_above_the_same_limit():
    """`coupled … --measure --problem mlp --steps 20000 --samples 400` (the outsider's fuzz,
    seed 25302: 20.2 s of CPU) is one bisection row of the same cost model: refused."""
    argv = ("coupled --rule momentum --momentum 0.5 --stages 3 --schedule pipedream --measure "
            "--problem mlp --steps 20000 --samples 400").split()  # fmt: skip
    err = _refused_naming(argv, "--steps")
    assert "1 rows" in err and "400 samples × 77 parameters" in err


def test_long_random_delay_kernels_train_and_predict_up_to_the_taps_limit():
    """`train --rule random-delay --tau 100000 …` (the outsider's fuzz, seed 9302: 25 s) runs;
    its predictions are derived while the kernel reads ≤ `PREDICTION_MAX_TAPS` past values and
    left out with a note above.  Below the limit the dynamics depend on lr·λ only, so the
    predicted max lr scales between two delays as the scalar max lr at λ = 1 does: τ = 300
    (the dominant root from companion eigenvalues) and τ = 1000 (past `DENSE_MAX_DEGREE`: the
    argument principle; 1.3 s where τ = 3000 took 4.2 s)."""
    import stability as st
    from stability.limits import PREDICTION_MAX_TAPS
    from stability.rules.random_delay import random_delay

    flags = dict(rule="random-delay", lr=1e-4, steps=20, task="regression", samples=20)
    above = st.train(**flags, tau=PREDICTION_MAX_TAPS, delay_rate=0.0)
    assert above.predicted_max_lr is None and "past values" in above.prediction_note
    taus = (300, 1000)
    predicted = [st.train(**flags, tau=t, delay_rate=0.0).predicted_max_lr for t in taus]
    scalar = [
        max_lr(random_delay(tau=t, delay_rate=0.0, momentum=0.0), QuadraticModel(1.0)).max_lr
        for t in taus
    ]
    assert predicted[1] / predicted[0] == pytest.approx(scalar[1] / scalar[0], rel=1e-9)


def test_an_overflowing_polynomial_is_refused_naming_lam():
    """`max-lr lwp-v --horizon 1e12 --lam 1e150 …` (the outsider's fuzz, seed 9401) ended in
    numpy's "Array must not contain infs or NaNs": LWP-v's lr² coefficient ~λ²·T is NaN.  At
    λ = 1 with T = 10⁹ the same rule has an answer (at T = 10¹² float64 no longer resolves
    it: `test_a_huge_lwp_horizon_is_refused_not_answered_zero`), and at λ = 1e150 with T = 1
    too."""
    argv = "max-lr lwp-v --momentum 0.9 --horizon 1000000000000 --lam 1e+150 --tau 16".split()
    assert "overflows float64" in _refused_naming(argv, "--lam")
    assert _call([*argv[:4], "--horizon", "1e9", "--lam", "1", "--tau", "16"])[0] == 0
    assert _call([*argv[:4], "--horizon", "1", "--lam", "1e+150", "--tau", "16"])[0] == 0


def test_symbolic_polynomials_stop_at_the_documented_degree():
    """`poly wp --tau 5000 --symbolic …` (seed 9402) ran for minutes: the exact coefficients
    grow with τ (7 s at τ = 150, 29 s at 400); above degree 200 it is refused naming
    --symbolic, below it answers (sgd at τ = 10: λ·lr + ω¹¹ − ω¹⁰)."""
    from stability.limits import SYMBOLIC_MAX_DEGREE

    argv = "poly wp --momentum 0.9 --workers 6 --tau 5000 --symbolic --lr 1e-5".split()
    assert f"degree {SYMBOLIC_MAX_DEGREE}" in _refused_naming(argv, "--symbolic")
    code, out, _ = _call("poly sgd --tau 10 --symbolic --lr 0.01".split())
    assert code == 0 and "lam*lr + omega**11 - omega**10" in out


def test_an_unresolved_crossing_is_refused_naming_the_delay():
    """`t1-audit dc … --taus 100000` (seed 9404: 26 s, then "internal error: ArithmeticError:
    max lr: a crossing could not be resolved"): roots crowd the unit circle at τ = 10⁵.  The
    locus stops resampling at `LOCUS_MAX_SAMPLES` and the call is refused naming the delay;
    at τ = 1000 the same rule answers 2/λ."""
    flags = "--dc-lambda 2.96747 --quality 0.5 --lam 1".split()
    err = _refused_naming(["max-lr", "dc", *flags, "--tau", "100000"], "--tau")
    assert "could not be resolved" in err
    code, out, _ = _call(["max-lr", "dc", *flags, "--tau", "1000", "--json"])
    assert code == 0 and json.loads(out)["max_lr"] == pytest.approx(2.0, rel=1e-12)


def test_roots_at_rounding_distance_from_the_circle_are_refused_naming_the_parameters():
    """`halflife pipeoptim --tau 1 --optimize-momentum --horizon 1e12 …` (seed 9604: "internal
    error: ArithmeticError"): at momentum 0.9993 the polynomial ω(ω − 1)(ω − m) + lr·((s + 1)ω
    − s), s = 10¹², keeps its roots within ~10⁻¹² of |ω| = 1 for every lr up to 1e-12 (numpy's
    roots below, either side of 1 from one lr to the next): float64 certifies neither stable
    nor unstable.  Both calls are refused naming what is extreme, not the delay."""
    m, s = 0.9993014120253215, 1e12
    radii = [
        np.max(np.abs(np.roots([1.0, -(1 + m), m + lr * (s + 1), -lr * s])))
        for lr in np.geomspace(1e-16, 1e-12, 9)
    ]
    assert np.max(np.abs(np.array(radii) - 1)) < 1e-11
    point = ["--tau", "1", "--horizon", "1e12"]
    err = _refused_naming(["max-lr", "pipeoptim", *point, "--momentum", str(m)], "momentum=")
    assert "horizon=1e+12" in err and "tau:" not in err
    err = _refused_naming(["halflife", "pipeoptim", *point, "--optimize-momentum",
                           "--kappa", "478.672"], "momentum")  # fmt: skip
    assert "horizon=" in err and "float64's rounding of |ω| = 1" in err


def test_an_unresolved_crossing_names_the_point_in_the_registry_s_parameters():
    """`max-lr discrepancy --delta 1e308` listed the rule value's fields (``horizon=0,
    prediction=weight, gamma=None, …``) but not Δ, the one extreme value; the refusal names the
    registry's parameters as given."""
    err = _refused_naming(["max-lr", "discrepancy", "--delta", "1e308"], "delta=1e+308")
    assert "discrepancy at" in err and "prediction=" not in err and "None" not in err


def test_a_stage_shrunk_beyond_float64_does_not_stall_the_scan():
    """`coupled --rule shrink --shrink-factor 1e-12 --stages 4 --schedule pipemare` (seed 9604:
    over 100 s): the first guess came from stage 1, whose gradient is scaled by s⁷ = 1e-84, so
    the search began at a radius 10⁻⁵⁸, far below eig's rounding of M (~1e-16·max|ν|), and
    every count was ambiguous.  The search now starts no closer than 1e-9·max|ν|; the answer is
    stage 4's, checked on the block state matrix's spectral radius either side."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((24, 12))

    def system(factor):
        delays = {"tau_fwd": [7, 5, 3, 1], "tau_bkwd": [0] * 4}
        return coupled_system(A.T @ A / 24, stage_sizes=[3] * 4, rule="shrink", **delays,
                              shrink_factor=factor)  # fmt: skip

    found = scan_max_lr(system(1e-12))
    assert found.critical_stage == 4 and found.eigensolves <= 5
    radius = [spectral_radius(system(1e-12), found.max_lr * (1 + d)) for d in (-1e-6, 1e-6)]
    assert radius[0] < 1 + 1e-10 < radius[1]  # as `_finish` certifies: 1 + 2e-15 below
    moderate = system(1e-3)
    assert scan_max_lr(moderate).max_lr == pytest.approx(dense_max_lr(moderate).max_lr, rel=1e-7)


def test_a_problem_beyond_the_scan_limit_is_refused_before_it_is_fitted(monkeypatch):
    """`coupled --problem mlp --hidden 64,64` (4,929 parameters, found while timing the fuzz's
    slow calls) had not finished after 10 minutes: one 4,929 × 4,929 eigen-decomposition per
    angle.  Above `SCAN_MAX_PARAMETERS` the call is refused naming the flag that sizes the
    problem, before the fit (which would fail here); the limit itself is allowed."""
    from stability.limits import SCAN_MAX_PARAMETERS
    from stability.trainer import problems

    def no_fit(problem, seed):
        raise AssertionError("fitted before the size check")

    monkeypatch.setitem(problems.KINDS, "mlp", dataclasses.replace(problems.KINDS["mlp"],
                                                                  linearizer=no_fit))  # fmt: skip
    base = ["coupled", "--rule", "sgd", "--problem", "mlp", "--stages", "3"]
    err = _refused_naming([*base, "--hidden", "20,20"], "--hidden")
    assert f"at most {SCAN_MAX_PARAMETERS} parameters" in err and "has 701" in err
    with pytest.raises(ValueError, match="^data: .* has 601"):
        check_scan_size(SCAN_MAX_PARAMETERS + 1, "data")
    check_scan_size(SCAN_MAX_PARAMETERS, "data")


def test_an_overflowing_polynomial_in_a_noise_prediction_is_refused_naming_it():
    """`noise lwp+sc … --horizon-scale 1e308` (seed 9606: "Array must not contain infs or
    NaNs", a refusal naming nothing of the line): λ·T overflows to inf in the linearisation, and
    the full-batch prediction (`min_max_lr_grid`) handed it to eig.  It is now refused as
    `max-lr` refuses it, naming lam and the rule's parameters (the horizon among them)."""
    argv = ["noise", "lwp+sc", "--tau", "1", "--momentum", "0.5", "--lr", "0.02", "--samples",
            "64", "--batch", "14", "--horizon-scale", "1e308"]  # fmt: skip
    err = _refused_naming(argv, "momentum=0.5")
    assert "overflows float64" in err and "horizon=1e+308" in err


def test_an_overflowing_heatmap_is_refused_naming_lam_and_the_axis_ranges(tmp_path):
    """`heatmap lwp+sc … --horizon 1e308 --lam 7.7e149` (seed 9606: numpy's "Array must not
    contain infs or NaNs"): the grid's polynomials overflow; refused as `max-lr` refuses, the
    axes shown as ranges, and no figure is left behind."""
    out = tmp_path / "f.png"
    argv = ["heatmap", "lwp+sc", "--tau", "1", "--x", "lr:1e-3:10:8:log", "--y",
            "momentum:0:0.999:8", "--out", str(out), "--horizon", "1e308", "--lam", "7.7e149",
            "--no-max-lr"]  # fmt: skip
    err = _refused_naming(argv, "--lam")
    assert "momentum=0…0.999" in err and "horizon=1e+308" in err and not out.exists()


def test_a_huge_lwp_horizon_is_refused_not_answered_zero():
    """`max-lr lwp+sc --horizon-scale 1e100` (up to 1e307) answered max lr 0, "not stable for
    small lr > 0".  In exact arithmetic it is stable below ~0.6261/α (Schur-Cohn on either
    side at α = 10¹¹, below); from α ~ 10¹² on, the root ω = 1 moves off the circle by less
    than the radius check resolves, and from ~10¹⁶ B(1) = λ is lost to cancellation between
    coefficients ~α·λ.  Refused naming the horizon; a structural B(1) = 0 (LWP^v without
    Spike Compensation: a = b = 0) is still "not stable", as the exact slope says."""
    from fractions import Fraction

    import stability as st
    from stability.analysis.boundary import _exact_slope_at_one
    from stability.dynamics.linear import characteristic_polynomial
    from stability.rules.registry import RULES

    for alpha in ("1e12", "1e20", "1e307"):
        err = _refused_naming(
            ["max-lr", "lwp+sc", "--horizon-scale", alpha], f"scale={float(alpha):g}"
        )
        assert "less than float64 resolves" in err
    found = st.max_lr("lwp+sc", horizon_scale=1e11).max_lr
    assert found * 1e11 == pytest.approx(0.626114266, rel=1e-8)
    for factor, stable in ((0.999, True), (1.001, False)):
        exact = st.radius("lwp+sc", horizon_scale=1e11, lr=found * factor, certify=True)
        assert exact.certified and exact.stable is stable
    assert st.max_lr("lwp-v+sc", momentum=0.0, sc_a=0.0, sc_b=0.0).max_lr == 0.0
    rule, model = RULES["lwp+sc"].build(horizon_scale=1e20)  # float64 sums B(1) to 0
    assert sum(characteristic_polynomial(rule, model).parts[1].terms.values()) == 0.0
    assert _exact_slope_at_one(rule, model, (1,))(0) == Fraction(1)


def test_a_heatmap_draws_the_max_lr_curve_where_the_locus_answers():
    """The same refusal inside a heatmap's max-lr overlay: the curve is left out (NaN) at the
    points float64 cannot resolve, with a warning naming them, and drawn at the others."""
    from stability.analysis.radius_grid import heatmap, max_lr_curve
    from stability.api.heatmap import parse_axis

    x, y = parse_axis("lr:1e-25:1:5:log", "x"), parse_axis("horizon_scale:1:1e20:4:log", "y")
    with pytest.warns(UserWarning, match="max-lr curve not drawn at horizon_scale = ") as told:
        curve = max_lr_curve(heatmap("lwp+sc", x, y))
    where = [str(w.message).split(":")[0].split(" = ")[1] for w in told]
    assert where == ["2.15443e+13", "1e+20"]
    assert curve.step[0] == pytest.approx(0.34497244012656, rel=1e-12)  # α = 1
    assert curve.step[1] * 4641588.833612782 == pytest.approx(0.6261, rel=1e-3)
    assert np.isnan(curve.step[2:]).all()


def test_coefficients_spanning_150_decades_keep_their_top_roots():
    """`heatmap wp --tau 35 --lam 9.555e146 …` (seed 9702: 25 s, then killed; 127 s alone)
    refined every point in mpmath, from the wrong roots: the companion eigenvalues of
    ω³⁸ − 1.93ω³⁷ + 0.93ω³⁶ + 3.3e150·(ω² − 1.89ω + 0.90) put the largest root at 0.948,
    where mpmath's Newton stayed, so `radius` said "stable" at lr = 10, λ = 1e147 (exact
    Schur-Cohn: not stable).  Solved in u = z/2¹⁴ (`stability.spectrum.root_scaled`), the
    radius is 15172.40594831143, as mpmath's polyroots gives at 60 digits (9 s: not run
    here); checked by Newton in mpmath from the root found, and by the argument principle:
    every root inside ρ·(1 + 1e-9), not every root inside ρ·(1 − 1e-9)."""
    import mpmath

    import stability as st
    from stability.dynamics.linear import characteristic_polynomial
    from stability.rules.registry import RULES
    from stability.winding import SparseColumns

    params = {"tau": 35, "lam": 9.555e146, "momentum": 0.9324}
    rule, model = RULES["wp"].build(**params)
    p = characteristic_polynomial(rule, model).at(10.0).normalized()
    found = st.radius("wp", lr=10.0, **params)
    assert found.spectral_radius == pytest.approx(15172.40594831143, rel=1e-12)
    assert not found.stable
    assert not st.radius("wp", lr=10.0, certify=True, **params).stable  # exact Schur-Cohn
    dense = p.dense()
    with mpmath.workdps(60):
        c = [mpmath.mpf(float(x)) for x in dense]
        dc = [x * (len(c) - 1 - k) for k, x in enumerate(c[:-1])]
        z = mpmath.mpc(found.dominant_root)
        for _ in range(20):
            z -= mpmath.polyval(c, z) / mpmath.polyval(dc, z)
        assert float(abs(z)) == pytest.approx(found.spectral_radius, rel=1e-13)
    exps, coeffs = p.sparse_arrays()
    rho = found.spectral_radius
    columns = SparseColumns(exps, np.stack([coeffs, coeffs], axis=1).astype(float))
    counts = count_inside(columns, np.array([rho * (1 + 1e-9), rho * (1 - 1e-9)]), np.arange(2))
    assert counts[0] == p.degree and counts[1] < p.degree


def test_an_l2_beyond_the_curvature_range_is_refused_naming_it():
    """`validate … --problem mlp --l2 1e308` (seed 9703) ended in numpy's "Eigenvalues did not
    converge", a refusal naming nothing; at 1e200 the answer came with overflow warnings (the
    curvature l2 is squared in the moments).  --l2 has the curvature range of --lam, [0,
    1e150], and 1e150 answers without a warning."""
    argv = "validate --rules sgd --taus 0,2 --steps 200 --problem mlp --batch 6 --json".split()
    assert "[0, 1e+150]" in _refused_naming([*argv, "--l2", "1e308"], "--l2")
    code, out, _ = _call([*argv, "--l2", "1e150"])
    assert code == 0 and json.loads(out)["warnings"] == []


def test_an_mlp_measurement_beyond_the_work_limit_is_refused_before_the_fit(monkeypatch):
    """`validate … --task classification --hidden 40` (4,579 parameters) was refused by the
    work limit only after the minimum was fitted, which took 47 s; the limits that need only
    the problem's size (the work model, the frequency scan's) now run before the fit."""
    from stability.trainer.mlp import MLP

    monkeypatch.setattr(MLP, "fit", lambda *a, **k: pytest.fail("fitted before refusing"))
    argv = ["validate", "--rules", "sgd", "--taus", "0,2", "--steps", "2000", "--problem",
            "mlp", "--task", "classification", "--hidden", "40"]  # fmt: skip
    assert "4579 parameters" in _refused_naming(argv, "--steps")
    argv = ["coupled", "--rule", "sgd", "--stages", "2", "--schedule", "gpipe", "--measure",
            "--problem", "mlp", "--task", "classification", "--hidden", "40"]  # fmt: skip
    assert "this problem has 4579" in _refused_naming(argv, "--hidden")  # the scan's limit
    err = _refused_naming([*argv, "--method", "dense"], "--steps")  # the measurement's
    assert "4579 parameters" in err


def test_a_defective_frequency_response_is_decomposed_not_an_error():
    """Fuzz seed 9913: ``coupled --rule sgd --stages 4 --taus 11,4,5,3 --schedule pipedream
    --samples 2`` said "Singular matrix": a rank-one Hessian (two standardized rows) makes
    M(e^{iθ}) a Jordan block at 0 where numpy's eigenvectors are exactly dependent.  The scan
    now answers the block-state-matrix bisection's max lr (checked on a rank-one H with
    those delays, and on the call itself against its own ``--method dense`` and ``--measure``
    runs, 0.0325944 in [0.0325772, 0.0325980])."""
    from stability.coupled.track import decompose

    J = np.array([[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, -2.0]]])
    dJ = np.array([[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])
    mu, dmu = decompose(J, dJ)
    assert np.all(np.isfinite(mu)) and np.all(np.isfinite(dmu))
    simple = np.argmin(np.abs(mu[0] + 2.0))
    assert dmu[0, simple] == pytest.approx(1.0)  # d(−2 + θ)/dθ of the simple eigenvalue
    rng = np.random.default_rng(5)
    u = rng.standard_normal(12)
    system = coupled_system(
        np.outer(u, u), stage_sizes=(3, 3, 3, 3), rule="sgd", tau_fwd=(11, 4, 5, 3)
    )
    assert scan_max_lr(system).max_lr == pytest.approx(dense_max_lr(system).max_lr, rel=1e-7)
    assert main(["coupled", "--rule", "sgd", "--stages", "4", "--taus", "11,4,5,3",
                 "--schedule", "pipedream", "--samples", "2"]) == 0  # fmt: skip


def test_the_offdiagonal_share_of_commuting_passes_is_zero_not_a_domain_error():
    """Fuzz seed 9931: ``train --rule shrink --tau 4 --problem mlp --data tall.csv`` said "math
    domain error": the off-diagonal share was Σ T² − Σ diag(T)², which rounds below 0 when
    the pass Jacobians commute with H (here 36 of 200 random commuting triples).  Now the
    off-diagonal entries' own squares, scaled first: against the norms computed directly."""
    from stability.analysis.modes import modes_from_passes

    for seed in (1, 3, 16, 31):  # each negative under the old formula
        A = np.random.default_rng(seed).normal(size=(6, 6))
        H = A @ A.T
        assert modes_from_passes(0.7 * H, 0.2 * H, 0.1 * H).offdiagonal < 1e-14
    rng = np.random.default_rng(7)
    Hf, Hb, Hr = (M @ M.T for M in rng.normal(size=(3, 5, 5)))
    _, V = np.linalg.eigh(Hf + Hb + Hr)
    blocks = [V.T @ M @ V for M in (Hf, Hb, Hr)]
    off = np.sqrt(sum(np.linalg.norm(T - np.diag(np.diag(T))) ** 2 for T in blocks))
    direct = off / np.sqrt(sum(np.linalg.norm(T) ** 2 for T in blocks))
    assert modes_from_passes(Hf, Hb, Hr).offdiagonal == pytest.approx(direct, rel=1e-12)
    huge = modes_from_passes(1e200 * Hf, 1e200 * Hb, 1e200 * Hr).offdiagonal  # squares overflow
    assert huge == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["train", "--rule", "sgd", "--tau", "1", "--lr", "0.01", "--lam", "3"], "--lam"),
        (["validate", "--rules", "discrepancy", "--taus", "1", "--delta", "0.2"], "--delta"),
    ],
)
def test_a_trainer_command_refuses_the_scalar_models_parameters(argv, flag):
    """Fuzz seed 9931's line also gave ``--lam 4.9e149``, which ``train`` and ``validate``
    accepted and ignored (their curvature, Δ and Φ come from the problem), where ``coupled``
    and ``noise`` refused it; the network functions ignored ``lam=`` too."""
    assert "belongs to the scalar model" in _refused_naming(argv, flag)


def test_the_network_functions_refuse_the_scalar_models_parameters():
    import stability as st

    net = "examples/diabetes_linear.py:problem"
    with pytest.raises(ValueError, match="lam belongs to the scalar model"):
        st.net_max_lr(str(Path(__file__).parents[1] / net), "sgd", tau=1, k=2, lam=3.0)


@pytest.mark.parametrize(
    "name, params",
    [
        ("lwp+sc", {"tau": 3, "momentum": 1.0}),
        ("lwp+sc", {"tau": 4, "momentum": 1.0}),
        ("lwp+sc", {"tau": 10, "momentum": 1.0, "sc_scale": 2.0}),
        ("lwp-v+sc", {"tau": 4, "momentum": 1.0}),
        ("momentum", {"tau": 3, "momentum": 1.0}),
        ("sc", {"tau": 3, "momentum": 1.0}),
    ],
)
def test_momentum_one_is_answered_by_the_first_resolvable_crossing(name, params):
    """At momentum 1 the root ω = 1 is double at lr = 0: Newton on F's trivial zero at θ → 0
    found a 'crossing' at lr ~ eps, and the locus answered 0 where Spike Compensation is
    stable below 0.065 (a newcomer's matrices).  The locus now equals certified bisection
    (and heavy ball, or SC without weight prediction, at momentum 1 stay 0: ρ ≥ 1 there)."""
    from stability.rules.registry import get_spec

    rule, model = get_spec(name).build(lam=1.0, **params)
    locus, bisection = max_lr(rule, model, method="locus"), max_lr(rule, model, method="bisection")
    assert locus.max_lr == pytest.approx(bisection.max_lr, rel=1e-12, abs=0)
    assert (locus.max_lr > 0) == name.startswith("lwp")


@pytest.mark.parametrize("tau", [0, 1, 3, 5])
def test_a_root_at_one_for_every_lr_is_stable_for_no_lr(tau):
    """Spike Compensation with a/(1 − m) + b = 0 exactly: p(1) = lr·λ·(a + b − b·m) = 0 for
    every lr, so ρ ≥ 1 everywhere; the winding count took the root on the circle for one
    inside and answered 1.0 at τ = 3.  Exact rationals confirm 'not stable'; the same sum
    lost to rounding (m = 0.9, a = 0.2, b = −2: 1 + m rounds) is refused, not answered."""
    from stability.analysis.certify import certify
    from stability.rules.registry import get_spec

    values = dict(tau=tau, momentum=0.5, sc_a=0.5, sc_b=-1.0, lam=1.0)
    rule, model = get_spec("sc").build(**values)
    assert max_lr(rule, model).max_lr == 0.0
    assert not certify(get_spec("sc"), 0.3, **values).stable
    rule, model = get_spec("sc").build(tau=2, momentum=0.9, sc_a=0.2, sc_b=-2.0, lam=1.0)
    with pytest.raises(ValueError, match="moves off the unit circle by less than float64"):
        max_lr(rule, model)
