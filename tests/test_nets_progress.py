"""Progress of the network simulations (`stability.nets.step_counter`): ``progress(done,
total)`` from ``st.net_train``, the ``--measure`` of ``st.net_max_lr`` and ``st.net_noise``,
counted in simulator steps; the CLI's bar on stderr only, never under ``--json``."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import stability as st  # noqa: E402
from stability.cli.main import main  # noqa: E402
from stability.nets.bracket import NetProtocol  # noqa: E402
from stability.nets.step_counter import REPORT_EVERY, StepCounter, chained  # noqa: E402

PROBLEM = "examples/diabetes_linear.py:problem"


def _reports(call) -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []
    call(lambda done, total: seen.append((done, total)))
    return seen


def _check(seen: list[tuple[int, int]], steps: int) -> None:
    """Steps counted one by one, reported every REPORT_EVERY, never past the total, and a
    last report of all the work done."""
    done = [d for d, _ in seen]
    assert done[:-1] == list(range(REPORT_EVERY, steps + 1, REPORT_EVERY))
    assert seen[-1] == (steps, steps)
    assert all(0 < d <= t for d, t in seen)


def test_net_train_reports_its_steps():
    seen = _reports(
        lambda p: st.net_train(PROBLEM, "sgd", lr=0.1, steps=130, stages=2, tau=1, progress=p)
    )
    _check(seen, 130)
    assert {t for _, t in seen} == {130}  # known in advance


def test_net_train_with_sharpness_keeps_both_hooks():
    kw = dict(lr=0.1, steps=60, sharpness_every=20)
    seen: list[tuple[int, int]] = []
    r = st.net_train(PROBLEM, "sgd", progress=lambda d, t: seen.append((d, t)), **kw)
    _check(seen, 60)
    assert [s for s, _ in r.sharpness] == [0, 20, 40, 60]
    assert r.sharpness == st.net_train(PROBLEM, "sgd", **kw).sharpness


def test_measurements_count_every_simulated_step():
    protocol = NetProtocol(steps=200, rate_steps=150)
    seen = _reports(
        lambda p: st.net_max_lr(
            PROBLEM, "sgd", tau=1, k=3, measure=True, protocol=protocol, progress=p
        )
    )
    steps = seen[-1][0]
    assert (steps - protocol.rate_steps) % protocol.steps == 0  # whole rounds, then the rate run
    _check(seen, steps)
    assert seen[0][1] == protocol.expected_steps() + protocol.rate_steps  # the first total

    seen = _reports(
        lambda p: st.net_noise(
            PROBLEM, "sgd", tau=1, batch=16, k=4, steps=100, lyapunov_steps=400,
            measure=True, runs=8, pairs=4, pair_steps=100, progress=p,
        )
    )  # fmt: skip
    steps = seen[-1][0]
    assert (steps - 100) % 100 == 0 and steps >= 100 + 100  # loss runs, then rounds of pairs
    _check(seen, steps)


def test_a_counter_grows_its_total_rather_than_pass_it():
    seen: list[tuple[int, int]] = []
    count = StepCounter(lambda d, t: seen.append((d, t)), expected=2 * REPORT_EVERY)
    for _ in range(3 * REPORT_EVERY):
        count()
    count.finish()
    assert [d / t for d, t in seen] == [0.5, 1.0, 1.0, 1.0]
    calls: list[int] = []
    hook = chained(None, lambda s, w: calls.append(s), None, lambda s, w: calls.append(-s))
    hook(3, None)
    assert calls == [3, -3] and chained(None, None) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["net", "train", "--rule", "sgd", "--lr", "0.1", "--steps", "60"],
        ["net", "noise", "--rule", "sgd", "--batch", "16", "--k", "2", "--steps", "50",
         "--lyapunov-steps", "200", "--measure", "--runs", "4", "--pairs", "4",
         "--pair-steps", "100"],
    ],
)  # fmt: skip
def test_net_bars_on_stderr_only_and_never_under_json(argv, capsys, monkeypatch):
    monkeypatch.setenv("STABILITY_PROGRESS", "1")
    argv = [*argv, "--problem", PROBLEM]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "100.0%" in err and f"{argv[0]} {argv[1]} sgd" in err
    assert "\x1b[K" not in out and "%  " not in out  # no bar (its erase code, its percentages)
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["rule"] == "sgd"


def test_no_bar_where_nothing_is_simulated(capsys, monkeypatch):
    monkeypatch.setenv("STABILITY_PROGRESS", "1")
    assert main(["net", "max-lr", "--problem", PROBLEM, "--rule", "sgd", "--k", "2"]) == 0
    assert capsys.readouterr().err == ""
