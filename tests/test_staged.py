"""One pipeline value, one staging function: the trainer and the coupled analysis cannot drift.

`stability.pipeline.Pipeline.from_options` is the only builder of per-stage delays and
`stability.rules.staged.staged_rule` the only place a rule gets them; here every registry rule
on every schedule answers the same from ``st.coupled`` and ``st.train`` (a result from both,
or the same refusal), and the per-stage rules of the analysis equal the trainer's
per-parameter rule field by field.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import stability as st
from stability.coupled.system import stage_rules
from stability.pipeline import CUSTOM, SCHEDULES, Pipeline, pipemare_delays
from stability.rules.registry import RULES
from stability.trainer.schedules import pipeline_rule

SIZES = [2, 3, 1]
FIELDS = ("tau_fwd", "tau_bkwd", "momentum", "sc_a", "sc_b", "horizon", "gamma")


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory):
    """16 rows, 3 features: a linear regression whose analysis and one step cost nothing."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(16, 3))
    y = X @ [1.0, 0.5, -0.3] + 0.1 * rng.normal(size=16)
    path = tmp_path_factory.mktemp("staged") / "tiny.csv"
    np.savetxt(path, np.column_stack([y, X]), delimiter=",")
    return str(path)


def _outcome(call, *args, **kwargs) -> str:
    try:
        call(*args, **kwargs)
    except ValueError as err:
        return f"refused: {err}"
    return "result"


def test_every_rule_on_every_schedule_answers_the_same_from_coupled_and_train(tiny_csv):
    outcomes = set()
    for rule in RULES:
        fwd = "tau_fwd" if rule in ("discrepancy", "t2", "recompute") else "tau"
        for schedule in SCHEDULES:
            uniform = schedule == "uniform"
            common = {"stages": 2, "schedule": schedule, "data": tiny_csv}
            coupled = _outcome(st.coupled, rule, taus=(2,) if uniform else None, **common)
            train = _outcome(
                st.train,
                rule,
                lr=1e-3,
                steps=1,
                curve_points=2,
                **common,
                **({fwd: 2} if uniform else {}),
            )
            assert coupled == train, (rule, schedule)
            outcomes.add(coupled.split(":")[0])
    assert outcomes == {"result", "refused"}  # both kinds occur: the comparison can fail


def test_t2_without_discrepancy_is_refused_alike_by_coupled_train_and_noise():
    """The issue's case: PipeDream stashes weights, so T2 has nothing to correct (τ_fwd = τ_bkwd).
    Before the staging function was shared, coupled silently ran `discrepancy` (max lr 0.1262)."""
    kw = {"stages": 3, "schedule": "pipedream", "decay": 0.1}
    answers = {
        _outcome(st.coupled, "t2", **kw),
        _outcome(st.train, "t2", lr=0.01, steps=1, **kw),
        _outcome(st.noise, "t2", batch=8, lr=0.01, **kw),
    }
    assert answers == {"refused: T2 needs tau_fwd > tau_bkwd (got tau_fwd=5, tau_bkwd=5)"}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_stage_rules_equal_the_trainer_rule_field_by_field(schedule):
    pipe = Pipeline.from_options(schedule, stages=3, tau=4 if schedule == "uniform" else None)
    compared = 0
    for name in RULES:
        params = {"decay": 0.1} if name == "t2" else {}
        try:
            trainer = pipeline_rule(name, params, pipe, SIZES)
        except ValueError as err:
            with pytest.raises(ValueError, match=re.escape(str(err))):
                stage_rules(name, pipe.tau_fwd, pipe.tau_bkwd, **params)
            continue
        stages = stage_rules(name, pipe.tau_fwd, pipe.tau_bkwd, **params)
        start = 0
        for rule, n in zip(stages, SIZES, strict=True):
            assert type(rule) is type(trainer), name
            for field in FIELDS:
                mine, theirs = getattr(rule, field, None), getattr(trainer, field, None)
                if theirs is None:
                    assert mine is None, (name, field)
                    continue
                theirs = np.broadcast_to(theirs, (sum(SIZES),))[start : start + n]
                assert np.allclose(theirs, mine, rtol=1e-14), (name, field)
            start += n
        compared += 1
    assert compared >= 12  # most of the registry runs under per-stage delays


def test_pipeline_from_options():
    pipe = Pipeline.from_options("pipemare", stages=4, microbatches=2)
    assert pipe.tau_fwd.tolist() == pipemare_delays(4, 2).tolist() == [4, 3, 2, 1]
    assert pipe.tau_bkwd.tolist() == [0] * 4
    # an explicit profile: consistent weights, printed as it was given
    own = Pipeline.from_options(stage_delays="7,5,3,1")
    assert own.schedule == CUSTOM and own.stages == 4 and own.tau_bkwd is None
    assert own.describe()["tau_fwd"] == [7, 5, 3, 1]
    # with a schedule it replaces the forward delays and keeps the schedule's backward rule
    over = Pipeline.from_options("pipemare", stage_delays=[2], stages=3)
    assert over.tau_fwd.tolist() == [2, 2, 2] and over.tau_bkwd.tolist() == [0, 0, 0]
    assert Pipeline.from_options(tau=3, stages=2).schedule == "uniform"
    assert Pipeline.from_options("pipemare", stages=3, backward="stashed").tau_bkwd is None
    current = Pipeline.from_options(tau=3, stages=2, backward="current", tau_bkwd=1)
    assert current.tau_bkwd.tolist() == [1, 1]
    assert Pipeline.from_options(stages=2, default="pipemare").tau_fwd.tolist() == [3, 1]
    assert Pipeline.from_options() is None


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"stages": 3}, "stages needs a schedule"),
        ({"microbatches": 2}, "microbatches needs a schedule"),
        ({"schedule": "pipemare", "tau": 2}, "give a uniform tau or a schedule, not both"),
        ({"stage_delays": "3,x"}, "stage_delays must be comma-separated integers"),
        ({"stage_delays": [3, 1], "stages": 3}, "stage_delays must give one delay per stage"),
        ({"stage_delays": [3, -1]}, "stage_delays must be"),
        ({"stage_delays": [3], "tau": 3}, "not both"),
        ({"schedule": "pipemare", "tau_bkwd": 1}, "tau_bkwd needs"),
        ({"schedule": "zigzag"}, "schedule must be one of"),
        ({"schedule": "pb", "microbatches": 2}, "microbatches must be 1"),
        ({"tau": 2, "backward": "sideways"}, "backward must be one of"),
        ({"tau": 2, "backward": "current", "tau_bkwd": 3}, "tau_bkwd"),
    ],
)
def test_bad_pipeline_options_are_one_line_value_errors(kw, match):
    with pytest.raises(ValueError, match=match) as err:
        Pipeline.from_options(**kw)
    assert "\n" not in str(err.value)


def test_stage_delays_reach_train_and_validate_results(tiny_csv):
    run = st.train("sgd", lr=1e-3, steps=2, curve_points=2, stage_delays=(3, 1), data=tiny_csv)
    assert run.pipeline["schedule"] == CUSTOM and run.pipeline["tau_fwd"] == [3, 1]
    assert len(run.scalar_predictions["predicted_max_lr_per_stage"]) == 2


def test_t2_under_stashing_is_refused_alike_by_coupled_train_noise_and_net_max_lr(tiny_csv, capsys):
    """One refusal function (`stability.rules.discrepancy.t2_refusal`): a network runs weight
    stashing (τ_bkwd = τ_fwd on every stage, under any schedule), so net max-lr refuses T2 in
    the words of the trainer, the coupled analysis and the minibatch theory, which refuse it
    under PipeDream, and adds the network's way out (--backward current).  Stage 1's delay
    is 3 under both schedules at P = 2 (PipeMare Table 1)."""
    from stability.cli.main import main

    pytest.importorskip("torch")
    net = "examples/diabetes_linear.py:problem"
    kw = {"stages": 2, "schedule": "pipedream", "decay": 0.1}
    refusal = "refused: T2 needs tau_fwd > tau_bkwd (got tau_fwd=3, tau_bkwd=3)"
    answers = {
        _outcome(st.coupled, "t2", **kw, data=tiny_csv),
        _outcome(st.train, "t2", lr=0.01, steps=1, **kw, data=tiny_csv),
        _outcome(st.noise, "t2", batch=8, lr=0.01, **kw, data=tiny_csv),
    }
    assert answers == {refusal}
    remedy = "; a network stashes weights (τ_bkwd = τ_fwd) unless --backward current"
    for schedule in ("pipedream", "pipemare"):  # the network's own way out after the refusal
        net_answer = _outcome(st.net_max_lr, net, "t2", k=2, **{**kw, "schedule": schedule})
        assert net_answer == refusal + remedy
    lines = []
    for argv in (
        ["coupled", "--rule", "t2", "--data", tiny_csv],
        ["train", "--rule", "t2", "--lr", "0.01", "--steps", "1", "--data", tiny_csv],
        ["noise", "t2", "--batch", "8", "--lr", "0.01", "--data", tiny_csv],
        ["net", "max-lr", "--problem", net, "--rule", "t2", "--k", "2"],
    ):
        assert main([*argv, "--stages", "2", "--schedule", "pipedream", "--decay", "0.1"]) == 2
        lines.append(capsys.readouterr().err)
    line = "stability: error: T2 needs --tau-fwd > --tau-bkwd (got --tau-fwd=3, --tau-bkwd=3)"
    assert lines == [line + "\n"] * 3 + [line + remedy + "\n"]


def test_t2s_listing_says_the_range_its_refusal_enforces(capsys):
    """``stability rules t2`` listed τ_bkwd ≤ τ_fwd (the discrepancy family's range) while
    every command refuses τ_bkwd = τ_fwd for T2: the listing now says <, and the refusal holds."""
    from stability.cli.main import main

    assert main(["rules", "t2"]) == 0
    (flag,) = [x for x in capsys.readouterr().out.splitlines() if "--tau-bkwd" in x]
    assert "τ_bkwd < τ_fwd" in flag
    assert main(["max-lr", "t2", "--tau-fwd", "4", "--tau-bkwd", "4"]) == 2
    assert "T2 needs --tau-fwd > --tau-bkwd" in capsys.readouterr().err
    assert main(["max-lr", "t2", "--tau-fwd", "4", "--tau-bkwd", "3"]) == 0
