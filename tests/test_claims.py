"""The papers' claims (stability.claims): each verdict re-checked by an independent computation.

Claims run on their quick grids (``QUICK``: same statements, coarser sampling); the full-grid
Lemma 2/3 sweeps run in tests/test_symbolic.py.  Independent references: dense state-matrix
eigenvalues and their bisection (tests/oracles.py), closed forms derived by hand, exact
Schur-Cohn verdicts.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from oracles import dense_max_lr, state_radius

from stability.analysis.certify import certify
from stability.claims import check_claims, claim_ids, quick_parameters
from stability.claims import kosson as kosson_claims
from stability.claims import pipemare as pipemare_claims
from stability.claims.claim import intervals
from stability.cli.main import main
from stability.rules.registry import build_rule, get_spec


def quick(module, claim_id):
    return module.CLAIMS[claim_id](**quick_parameters()[claim_id])


def dense(name, hi=2.0, **params):
    rule, model = build_rule(name, **params)
    return dense_max_lr(rule, model, lo=1e-7, hi=hi)


def test_registry_lists_every_claim_of_the_issue():
    assert set(claim_ids()) == {
        "lemma2-upper-bound",
        "lemma3-upper-bound",
        "t2-raises-max-lr",
        "t2-negative-delta",
        "fig6b-correction",
        "fig16-correction",
        "lemma3-slope",
        "nesterov-equals-sc",
        "sc-enlarges-region",
        "lwp-shrinks-small-momentum",
    }
    assert set(quick_parameters()) == set(claim_ids())
    with pytest.raises(ValueError, match="unknown claim 'nope'"):
        check_claims(["nope"])


def test_intervals_helper():
    x = np.arange(7.0)
    assert intervals(x, [1, 1, 0, 0, 1, 0, 1]) == [(0.0, 1.0), (4.0, 4.0), (6.0, 6.0)]
    assert intervals(x, [0] * 7) == []


# -- PipeMare --------------------------------------------------------------------------------------


def test_lemma2_and_3_claims_quick_with_dense_check():
    lemma2 = quick(pipemare_claims, "lemma2-upper-bound")
    assert lemma2.holds and lemma2.numbers["max_ratio"] <= 1
    at = lemma2.numbers["min_ratio_at"]
    from stability.analysis.bounds import lemma2_bound, lemma3_bound

    bound = lemma2_bound(at["tau_fwd"], at["tau_bkwd"], at["delta"])
    assert dense("discrepancy", **at) / bound == pytest.approx(
        lemma2.numbers["min_ratio"], rel=1e-7
    )
    lemma3 = quick(pipemare_claims, "lemma3-upper-bound")
    assert lemma3.holds and lemma3.numbers["max_lr_at_momentum_1"] == 0.0
    at = lemma3.numbers["min_ratio_at"]
    assert dense("momentum", **at) / lemma3_bound(at["tau"]) == pytest.approx(
        lemma3.numbers["min_ratio_below_momentum_1"], rel=1e-7
    )


def test_t2_raises_max_lr_quick_and_spot_checks():
    claim = quick(pipemare_claims, "t2-raises-max-lr")
    assert claim.holds and claim.numbers["min_ratio"] > 1
    assert claim.numbers["plain_unstable_for_every_lr"] == 0
    at = claim.numbers["min_ratio_at"]  # the weakest point: small Δ, τf − τb = 1
    assert at["delta"] == min(pipemare_claims.QUICK_DELTAS)
    ratio = dense("t2", **at) / dense("discrepancy", **at)
    assert ratio == pytest.approx(claim.numbers["min_ratio"], rel=1e-7)
    # points of the full range (τf ≤ 40, Δ up to 100), by dense eigenvalues alone
    for point in (
        {"tau_fwd": 40, "tau_bkwd": 39, "delta": 0.01},
        {"tau_fwd": 22, "tau_bkwd": 2, "delta": 100.0},
    ):
        assert dense("t2", **point) > dense("discrepancy", **point)


@pytest.mark.slow
def test_t2_negative_delta_intervals():
    claim = quick(pipemare_claims, "t2-negative-delta")
    assert claim.holds
    [found] = claim.numbers["lowered_on"]
    assert found["delta_from"] == pytest.approx(-1.9606, abs=2e-4) and found["delta_to"] == 0.0
    kw = {"tau_fwd": 40, "tau_bkwd": 10}
    for delta, lowered in (
        (-1.0, True),
        (-0.2, True),
        (-1.95, True),
        (-1.97, False),
        (-30.0, False),
    ):
        plain, t2 = dense("discrepancy", delta=delta, **kw), dense("t2", delta=delta, **kw)
        assert bool(t2 < plain) is lowered, delta
    # at Δ = −1 the plain gradient is w_{t−10}: delayed SGD with τ = 10 (Lemma 1)
    assert found["max_lr_plain"] >= 2 * math.sin(math.pi / 42) * (1 - 1e-12)


@pytest.mark.parametrize(
    "claim_id, plain, corrected, edge",
    [
        (
            "fig6b-correction",
            ("discrepancy", {"tau_fwd": 10, "tau_bkwd": 6, "delta": 5.0}),
            ("t2", {"tau_fwd": 10, "tau_bkwd": 6, "delta": 5.0, "decay": 0.1}),
            0.0226,
        ),
        (
            "fig16-correction",
            (
                "recompute",
                {"tau_fwd": 10, "tau_bkwd": 1, "tau_recomp": 4, "delta": 10.0, "phi": -5.0},
            ),
            (
                "recompute",
                {
                    "tau_fwd": 10,
                    "tau_bkwd": 1,
                    "tau_recomp": 4,
                    "delta": 10.0,
                    "phi": -5.0,
                    "decay": 0.1,
                },
            ),
            0.0085,
        ),
    ],
)
def test_correction_lowers_radius_except_at_small_lr(claim_id, plain, corrected, edge):
    claim = quick(pipemare_claims, claim_id)
    assert not claim.holds  # holds only above a small step size: reported, not forced
    [(first, last)] = claim.numbers["not_reduced_on"]
    assert first == pytest.approx(0.002) and last < edge < last + 0.0021
    assert claim.numbers["not_closer_on"] == []
    rules = [build_rule(name, **params) for name, params in (plain, corrected)]
    for lr, reduced in ((0.3 * edge, False), (2 * edge, True), (0.1, True), (0.19, True)):
        rho_plain, rho_corrected = (state_radius(r, m, lr) for r, m in rules)
        assert bool(rho_corrected < rho_plain) is reduced, lr
    for key, (name, params) in zip(("plain", "corrected"), (plain, corrected), strict=True):
        assert claim.numbers["max_lr"][key] == pytest.approx(dense(name, **params), rel=1e-8)
    assert claim.numbers["max_lr"]["corrected"] > 2 * claim.numbers["max_lr"]["plain"]


def test_lemma3_slope_quick():
    claim = quick(pipemare_claims, "lemma3-slope")
    assert claim.holds
    for value in claim.numbers["slopes"].values():
        assert -1.1 <= value <= -0.9
    ratios = claim.numbers["ratio_to_asymptote_(1-β)π/(2τ)"]
    assert ratios["0.5"] == pytest.approx(1, abs=0.002) and ratios["0.9"] == pytest.approx(
        1, abs=0.01
    )
    # the fitted max lr at τ = 32, checked by dense eigenvalues and an exact bracket at τ = 128
    lr32 = claim.numbers["max_lr_times_tau_at_largest_tau"]  # τ·lr at τ = 1000
    assert lr32["0.5"] == pytest.approx(0.5 * math.pi / 2, rel=2e-3)
    from stability.analysis.boundary import max_lr

    rule, model = build_rule("momentum", tau=32, momentum=0.9)
    assert max_lr(rule, model).max_lr == pytest.approx(
        dense_max_lr(rule, model, lo=1e-7, hi=1.0), rel=1e-8
    )
    rule, model = build_rule("momentum", tau=128, momentum=0.5)
    edge = max_lr(rule, model).max_lr
    spec = get_spec("momentum")
    assert certify(spec, edge * (1 - 1e-6), tau=128, momentum="0.5").stable
    assert not certify(spec, edge * (1 + 1e-6), tau=128, momentum="0.5").stable


# -- Kosson ----------------------------------------------------------------------------------------


def test_nesterov_equals_sc_at_delay_one():
    claim = quick(kosson_claims, "nesterov-equals-sc")
    assert claim.holds
    assert claim.numbers["polynomial_difference"]["1"] == "0"
    assert claim.numbers["max_relative_max_lr_difference"]["1"] == 0.0
    assert claim.numbers["max_relative_max_lr_difference"]["2"] > 0.1
    for tau, same in ((1, True), (2, False)):
        for m, lr in ((0.5, 0.3), (0.9, 0.05)):
            a = np.sort(np.abs(np.linalg.eigvals(_state("nesterov", tau, m, lr))))
            b = np.sort(np.abs(np.linalg.eigvals(_state("sc", tau, m, lr))))
            assert bool(np.allclose(a, b, atol=1e-10)) is same


def _state(name, tau, m, lr):
    from stability.dynamics.linear import linearize

    rule, model = build_rule(name, tau=tau, momentum=m)
    return linearize(rule, model, lr).state_matrix()


def test_sc_enlarges_region():
    claim = quick(kosson_claims, "sc-enlarges-region")
    assert claim.holds and claim.numbers["grid_points_stable_only_for_momentum"] == 0
    assert claim.numbers["ratio_at_momentum_0"] == pytest.approx(1, rel=1e-12)
    for m in (0.05, 0.5, 0.95):
        base = dense("momentum", tau=1, momentum=m)
        assert base == pytest.approx(1 - m, rel=1e-9)  # delay 1 heavy ball: ηλ < 1 − m
        assert dense("sc", tau=1, momentum=m) > base


def test_lwp_shrinks_for_small_momentum_only():
    claim = quick(kosson_claims, "lwp-shrinks-small-momentum")
    assert claim.holds
    lwp, lwp_sc = claim.numbers["lwp"], claim.numbers["lwp+sc"]
    golden = (math.sqrt(5) - 1) / 2  # m = 0: p = z³ − z² + ηλ(2z − 1) crosses at ηλ = 1/φ
    assert lwp["min_ratio"] == pytest.approx(golden, rel=1e-9) and lwp["min_ratio_at_momentum"] == 0
    assert lwp["momentum_where_it_stops_shrinking"] == pytest.approx(0.5, abs=0.011)
    assert lwp_sc["momentum_where_it_stops_shrinking"] == pytest.approx(0.61, abs=0.011)
    for name, m, shrinks in (("lwp", 0.2, True), ("lwp", 0.8, False), ("lwp+sc", 0.55, True)):
        assert (
            bool(dense(name, tau=1, momentum=m) < dense("momentum", tau=1, momentum=m)) is shrinks
        )
    assert dense("lwp+sc", tau=1, momentum=0.7) > dense("momentum", tau=1, momentum=0.7)


# -- the CLI ---------------------------------------------------------------------------------------


def test_claims_cli_json(capsys):
    code = main(
        [
            "claims",
            "--quick",
            "--claim",
            "nesterov-equals-sc",
            "--claim",
            "fig6b-correction",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert [c["id"] for c in data["claims"]] == ["nesterov-equals-sc", "fig6b-correction"]
    assert [c["holds"] for c in data["claims"]] == [True, False] and data["all_hold"] is False
    for c in data["claims"]:
        assert {"id", "source", "statement", "holds", "numbers"} <= set(c)


def test_claims_cli_unknown_claim_is_one_line(capsys):
    code = main(["claims", "--claim", "nope"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "unknown claim" in err
