"""T1 audit (PipeMare eq. 4 against each stage's max stable lr): schedules, windows, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from stability.analysis.rescheduling import audit, parse_schedule
from stability.cli.main import main
from stability.pipeline import pipeline

LEMMA_1 = {tau: 2 * math.sin(math.pi / (4 * tau + 2)) for tau in (1, 4, 16)}  # λ = 1


def test_schedules():
    k = np.array([0, 99, 100, 299, 300, 1000])
    np.testing.assert_allclose(parse_schedule("constant:0.2")(k), 0.2)
    np.testing.assert_allclose(
        parse_schedule("step:1:0.1:100,300")(k), [1, 1, 0.1, 0.1, 0.01, 0.01], rtol=1e-15
    )
    np.testing.assert_allclose(
        parse_schedule("warmup:0.5:100")(k), [0.005, 0.5, 0.5, 0.5, 0.5, 0.5], rtol=1e-15
    )
    np.testing.assert_allclose(
        parse_schedule("cosine:2:200")(np.array([0, 100, 200, 500])), [2, 1, 0, 0], atol=1e-15
    )
    for bad, needle in [
        ("linear:0.1", "lr_schedule must be one of"),
        ("step:0.1:0.5", "is written step:LR:FACTOR:B1,B2,..."),
        ("constant:-1", "lr must be a finite real number > 0"),
        ("step:1:0.1:300,100", "increasing"),
        ("warmup:0.1:0", "length must be an integer ≥ 1"),
    ]:
        with pytest.raises(ValueError, match=needle):
            parse_schedule(bad)


def test_a_schedule_built_to_violate_the_bound_is_flagged_where_predicted():
    """α = 0.5/τ^{p_k} on the τ = 16 stage crosses 2 sin(π/66) when 16^{p_k} = 0.5/0.0952,
    i.e. p_k = log(5.254)/log 16 = 0.5986, k = 401.4: unsafe from step 402 on; the τ = 4
    stage from 4^{p} = 1.4397, k = 737.0 (step 738); τ = 1 never (0.5 < 1)."""
    result = audit("sgd", {"lam": 1.0}, parse_schedule("constant:0.5"), [1, 4, 16], 1000, 2000)
    assert not result.safe
    assert result.max_lr == pytest.approx((LEMMA_1[1], LEMMA_1[4], LEMMA_1[16]), rel=1e-12)
    windows = {(w.stage, w.tau, w.start, w.end) for w in result.windows}
    p16 = math.log(0.5 / LEMMA_1[16]) / math.log(16)
    p4 = math.log(0.5 / LEMMA_1[4]) / math.log(4)
    assert windows == {
        (2, 16, math.ceil(1000 * (1 - p16)), 1999),
        (1, 4, math.ceil(1000 * (1 - p4)), 1999),
    }
    assert result.margin == pytest.approx(1 - 0.5 / LEMMA_1[16], rel=1e-12)
    assert (result.worst_step, result.worst_stage) == (1000, 2)


def test_a_safe_schedule_has_no_window_and_a_positive_margin():
    sched = parse_schedule("step:0.09:0.1:500")
    result = audit("momentum", {"lam": 1.0, "momentum": 0.0}, sched, [1, 4, 16], 400, 1000)
    assert result.safe and result.windows == ()
    assert result.margin == pytest.approx(1 - 0.09 / LEMMA_1[16], rel=1e-12)


def test_warmup_then_annealing_window_closes_when_the_base_decays():
    """A held-out schedule: warm-up to 0.3, decay ×0.1 at step 1500: the τ = 16 stage is
    unsafe from the step T1's factor and the warm-up together cross its threshold until 1499."""
    sched = parse_schedule("step:0.3:0.1:1500")
    result = audit("sgd", {"lam": 1.0}, sched, [16], 1000, 3000)
    (window,) = result.windows
    p = math.log(0.3 / LEMMA_1[16]) / math.log(16)
    assert (window.start, window.end) == (math.ceil(1000 * (1 - p)), 1499)


def test_cli_json_and_pipeline_delays(capsys):
    argv = ["t1-audit", "sgd", "--lam", "1", "--lr-schedule", "constant:0.5", "--taus", "1,4,16"]
    assert main([*argv, "--anneal-steps", "1000", "--steps", "2000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["safe"] is False and len(out["windows"]) == 2
    assert out["windows"][0] == {
        "stage": 1,
        "tau": 4,
        "start": 738,
        "end": 1999,
        "worst_ratio": pytest.approx(0.5 / LEMMA_1[4]),
    }
    argv = ["t1-audit", "sgd", "--lam", "1", "--lr-schedule", "constant:0.01"]
    assert (
        main(
            [*argv, "--pipeline", "pipemare:6:2", "--anneal-steps", "10", "--steps", "50", "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["taus"] == pipeline("pipemare", 6, 2).tau_fwd.tolist() and out["safe"] is True
    assert out["windows"] == []


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--taus", "1,x"], "--taus must be comma-separated integers"),
        (["--taus", "1", "--tau", "3"], "--tau is set per stage by the audit"),
        ([], "give the stage delays with taus or with pipeline"),
        (["--pipeline", "pipemare"], "--pipeline is written NAME:P[:N]"),
        # the schedule's own words name its parameters: prefixed with the flag (outsider fuzz)
        (["--pipeline", "nosuch:3"], "--pipeline 'nosuch:3': schedule must be one of"),
        (["--pipeline", "pipemare:0"], "--pipeline 'pipemare:0': stages must be an integer"),
    ],
)
def test_cli_errors_are_one_line(capsys, extra, needle):
    argv = ["t1-audit", "sgd", "--lr-schedule", "constant:0.1", "--anneal-steps", "5"]
    assert main([*argv, "--steps", "10", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_steps_above_the_table_limit_are_refused_up_front(capsys):
    """Defect: `--steps 1000000000` ended in a MemoryError (the steps × stages table)."""
    argv = ["t1-audit", "sgd", "--lr-schedule", "constant:0.1", "--anneal-steps", "5"]
    assert main([*argv, "--steps", "1000000000", "--taus", "1,4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "steps must be ≤ 2000000 with 2 stages" in err


def test_text_report_of_a_stage_stable_for_no_lr_prints_no_infinity(monkeypatch):
    """A stage whose max lr is 0 makes the ratio inf: the text report says so in words
    instead of "margin -inf" and "inf×" (the outsider's fuzz, issue 25)."""
    from stability.analysis import rescheduling
    from stability.cli.commands.t1_audit import report

    monkeypatch.setattr(rescheduling, "stage_max_lr", lambda name, values, taus: {1: 0.5, 4: 0.0})
    result = audit("sgd", {"lam": 1.0}, parse_schedule("constant:0.1"), [1, 4], 10, 20)
    assert result.margin == -math.inf and not result.safe
    text = report(result)
    assert "inf" not in text and "stable for no lr > 0" in text
    assert "stage 1 (τ = 4): steps 0–19, its max stable lr is 0" in text
