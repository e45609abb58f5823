"""Pipeline stages on the scalar commands (issue 26 item 4): ``max-lr``, ``radius`` and
``halflife`` with ``--schedule``/``--stages``/``--stage-delays``, every stage's rule at its own
delays on the same curvature and one common step size; checked against closed forms (PipeMare
Lemma 1) and plain companion-matrix eigenvalues, independent of the code under test."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import stability as st
from stability.cli.main import main

PIPEMARE_8 = st.Pipeline.from_options("pipemare", stages=8)  # τ_fwd = 15, 13, …, 1


def _cli(capsys, *argv):
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _sgd_radius(tau: int, x: np.ndarray) -> np.ndarray:
    """max |ω| of ω^{τ+1} − ω^τ + x (PipeMare eq. 13 at β = 0) by companion eigenvalues."""
    x = np.atleast_1d(np.asarray(x, dtype=float))
    n = tau + 1
    C = np.zeros((x.size, n, n))
    C[:, 0, 0] = 1.0
    C[:, 0, -1] = -x
    C[:, np.arange(1, n), np.arange(n - 1)] = 1.0
    return np.abs(np.linalg.eigvals(C)).max(axis=-1)


def test_max_lr_of_8_pipemare_stages_is_the_worst_stage_tau_15(capsys):
    for rule, params in (("sgd", {}), ("momentum", {"momentum": 0.9}), ("lwp+sc", {})):
        staged = st.max_lr(rule, pipeline=PIPEMARE_8, **params)
        alone = st.max_lr(rule, tau=15, **params)
        assert staged.max_lr == pytest.approx(alone.max_lr, rel=1e-9, abs=0)
        assert staged.critical_stage == 1 and len(staged.stages) == 8
    flags = ["sgd", "--stages", "8", "--schedule", "pipemare"]
    out = _cli(capsys, "max-lr", *flags)
    assert out["pipeline"]["tau_fwd"] == [15, 13, 11, 9, 7, 5, 3, 1]
    for row in out["stages"]:  # PipeMare Lemma 1 per stage: 2·sin(π/(4τ + 2)) at λ = 1
        lemma1 = 2 * math.sin(math.pi / (4 * row["tau_fwd"] + 2))
        assert row["max_lr"] == pytest.approx(lemma1, rel=1e-12)
    assert out["max_lr"] == pytest.approx(2 * math.sin(math.pi / 62), rel=1e-12)
    assert out["critical_stage"] == 1
    text = main(["max-lr", *flags]) == 0 and capsys.readouterr().out
    assert "critical stage 1" in text and text.count("\n") >= 12


def test_stage_delays_profile_on_every_scalar_command(capsys):
    out = _cli(capsys, "max-lr", "sgd", "--stage-delays", "2,9,4")
    assert out["critical_stage"] == 2 and out["pipeline"]["schedule"] == "custom"
    assert out["max_lr"] == pytest.approx(2 * math.sin(math.pi / 38), rel=1e-12)
    lr = 0.1
    out = _cli(capsys, "radius", "sgd", "--lr", str(lr), "--stage-delays", "2,9,4")
    radii = [_sgd_radius(t, lr)[0] for t in (2, 9, 4)]
    assert [r["spectral_radius"] for r in out["stages"]] == pytest.approx(radii, rel=1e-9)
    assert out["spectral_radius"] == pytest.approx(max(radii), rel=1e-9)
    assert out["critical_stage"] == 1 + int(np.argmax(radii))
    out = _cli(capsys, "halflife", "sgd", "--kappa", "10", "--stage-delays", "2,9,4")
    assert out["pipeline"]["tau_fwd"] == [2, 9, 4] and len(out["stages"]) == 3


def test_halflife_of_a_pipeline_is_the_common_lr_optimum():
    """Against brute force: the worst radius over stages and a λ grid, minimised over an lr
    grid, with plain companion eigenvalues; and never shorter than the worst stage alone."""
    kappa = 20.0
    pipe = st.Pipeline.from_options("pipemare", stages=3)  # τ_fwd = 5, 3, 1
    found = st.halflife("sgd", kappa=kappa, pipeline=pipe)
    alone = st.halflife("sgd", kappa=kappa, tau=5)
    assert found.half_life >= alone.half_life
    lams = np.geomspace(1.0, kappa, 161)
    lrs = found.lr * np.geomspace(0.8, 1.25, 91)
    x = (lrs[:, None] * lams[None, :]).ravel()
    worst = np.max([_sgd_radius(t, x) for t in (5, 3, 1)], axis=0).reshape(lrs.size, -1)
    rate = worst.max(axis=1)
    brute = -math.log(2) / math.log(rate.min())
    assert found.half_life <= brute * (1 + 1e-6)  # no grid lr does better than the optimum
    assert found.half_life == pytest.approx(brute, rel=2e-3)
    assert found.rate == pytest.approx(max(r["rate"] for r in found.stages), rel=1e-12)


@pytest.mark.parametrize("rule, params", [("sgd", {}), ("momentum", {"momentum": 0.9})])
def test_halflife_of_8_pipemare_stages_is_no_shorter_than_tau_15(rule, params):
    found = st.halflife(rule, kappa=100, pipeline=PIPEMARE_8, **params)
    alone = st.halflife(rule, kappa=100, tau=15, **params)
    assert found.half_life >= alone.half_life
    assert found.stages[0]["own_half_life"] == pytest.approx(alone.half_life, rel=1e-12)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["max-lr", "sgd", "--tau", "3", "--schedule", "pipemare"], "--tau is set by the pipeline"),
        (["max-lr", "sgd", "--stages", "3"], "--stages needs a schedule"),
        (["radius", "sgd", "--lr", "0.1", "--stage-delays", "3,1", "--certify"], "certify"),
        (["halflife", "momentum", "--kappa", "10", "--stage-delays", "3,1",
          "--optimize-momentum"], "optimize"),
        (["max-lr", "sgd", "--stage-delays", "3,x"], "--stage-delays must be"),
        (["max-lr", "sgd", "--schedule", "uniform", "--stages", "2"], "tau"),
    ],
)  # fmt: skip
def test_bad_pipeline_input_is_one_line(capsys, argv, match):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err, err
