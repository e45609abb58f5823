"""``stability train`` and ``stability validate``: JSON contract, bad data → exit 2 with one
line naming the file and row, determinism, no NaN in the output, progress on stderr only."""

from __future__ import annotations

import io
import json
import math
import re

import numpy as np
import pytest

from stability.cli.main import main
from stability.cli.progress import Progress, wanted
from stability.trainer.data import synthetic_regression


@pytest.fixture(scope="module")
def csv(tmp_path_factory):
    """A small regression CSV with a known spectrum after standardization."""
    data = synthetic_regression([3.0, 1.0, 0.4, 0.1], samples=64, seed=7, residual=0.2)
    path = tmp_path_factory.mktemp("data") / "small.csv"
    np.savetxt(path, np.c_[data.y, data.X], delimiter=",")
    return path


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.count("\n") == 1
    return json.loads(out)


def no_nan(x):
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(no_nan(v) for v in x.values())
    if isinstance(x, list):
        return all(no_nan(v) for v in x)
    return True


def test_train_reports_measured_and_predicted_rate(capsys, csv):
    d = run_json(
        capsys, "train", "--problem", "linreg", "--data", str(csv), "--rule", "momentum",
        "--tau", "2", "--momentum", "0.5", "--lr", "0.05", "--steps", "3000",
    )  # fmt: skip
    assert d["diverged"] is False and d["diverged_step"] is None
    assert d["final_loss"] < d["initial_loss"]
    assert d["measured_log_rate"] == pytest.approx(d["predicted_log_rate"], rel=1e-3)
    assert d["measured_rate"] == pytest.approx(math.exp(d["measured_log_rate"]))
    assert d["predicted_max_lr"] > 0.05
    assert d["loss_curve"][0][0] == 0 and d["loss_curve"][-1][0] == 3000
    assert len(d["loss_curve"]) <= 201 and no_nan(d)


def test_train_divergence_is_a_result_with_nulls(capsys, csv):
    d = run_json(capsys, "train", "--data", str(csv), "--rule", "sgd", "--tau", "3",
                 "--lr", "5", "--steps", "500")  # fmt: skip
    assert d["diverged"] is True and d["diverged_step"] > 0 and d["final_loss"] is None
    assert any(v is None for _, v in d["loss_curve"])
    assert d["measured_rate"] > 1 > d["predicted_max_lr"] / 5


def test_train_minibatch_same_seed_same_json(capsys, csv):
    argv = ["train", "--data", str(csv), "--rule", "sgd", "--tau", "1", "--lr", "0.05",
            "--steps", "400", "--batch", "8", "--seed", "3"]  # fmt: skip
    a, b = run_json(capsys, *argv), run_json(capsys, *argv)
    assert a == b and a["measured_rate"] is None and a["batch"] == 8
    c = run_json(capsys, *argv[:-1], "4")
    assert c["final_loss"] != a["final_loss"]


def test_train_with_schedule_t1_and_warmup(capsys, csv):
    d = run_json(
        capsys, "train", "--data", str(csv), "--rule", "t2", "--momentum", "0.5",
        "--schedule", "pipemare", "--stages", "3", "--lr", "0.02", "--steps", "600",
        "--t1", "200", "--warmup-epochs", "20",
    )  # fmt: skip
    assert d["pipeline"]["tau_fwd"] == [5, 3, 1] and d["pipeline"]["tau_bkwd"] == [0, 0, 0]
    s = d["scalar_predictions"]
    assert len(s["predicted_max_lr_per_stage"]) == 3 and s["predicted_max_lr_coupled"] > 0
    assert d["diverged"] is False


def test_train_mlp_near_its_minimum_states_its_assumptions(capsys, csv):
    d = run_json(capsys, "train", "--problem", "mlp", "--data", str(csv), "--hidden", "3,3",
                 "--rule", "t2", "--tau-fwd", "3", "--lr", "0.01", "--steps", "2000",
                 "--start", "minimum")  # fmt: skip
    assert d["problem"]["widths"] == [4, 3, 3, 1] and d["data"]["standardize"] == "all"
    assert len(d["assumptions"]) == 4 and "linearization" in d["assumptions"][0]
    assert d["diverged"] is False and d["measured_rate"] < 1 and d["predicted_rate"] < 1


def test_validate_rows_and_protocol(capsys, csv):
    d = run_json(
        capsys, "validate", "--data", str(csv), "--rules", "sgd,lwp", "--taus", "0,3",
        "--momentum", "0.9", "--steps", "4000", "--rate-steps", "2000",
    )  # fmt: skip
    assert [(r["rule"], r["tau"]) for r in d["rows"]] == [
        ("sgd", 0), ("sgd", 3), ("lwp", 0), ("lwp", 3)
    ]  # fmt: skip
    lam = np.array(d["hessian_eigenvalues"])
    assert lam.size == 4 and np.all(lam > 0)
    p = d["protocol"]
    assert p["steps"] == 4000 and p["divergence"] == 1e6 and p["seeds"] == [] and p["batch"] is None
    for r in d["rows"]:
        assert abs(r["ratio"] - 1) < 0.01 and r["measured_max_lr"] > 0
        assert r["rate_lr_fractions"] == [0.5, 0.95]
        assert all(abs(x - 1) < 0.02 for x in r["log_rate_ratio"])
        assert len(r["predicted_rate"]) == len(r["measured_rate"]) == 2
    assert no_nan(d)
    sgd0 = d["rows"][0]
    assert sgd0["predicted_max_lr"] == pytest.approx(2 / lam.max(), rel=1e-12)  # τ = 0: 2/λ


def test_validate_minibatch_reports_the_protocol(capsys, csv):
    d = run_json(capsys, "validate", "--data", str(csv), "--rules", "sgd", "--taus", "2",
                 "--batch", "16", "--steps", "1500", "--seeds", "0,1")  # fmt: skip
    (row,) = d["rows"]
    assert d["protocol"]["seeds"] == [0, 1] and d["protocol"]["batch"] == 16
    assert row["measured_rate"] is None and 0.5 < row["ratio"] < 1.5


@pytest.mark.parametrize(
    "text, match",
    [
        ("1,2,3\n4,abc,6\n", r"bad\.csv: row 2: non-numeric cell in column 1 'abc'"),
        ("1,2,3\n4,nan,6\n", r"bad\.csv: row 2: cell in column 1 is nan"),
        ("1,2,3\n4,5\n", r"bad\.csv: row 2: 2 columns, expected 3"),
        ("", r"bad\.csv: empty file"),
    ],
)
@pytest.mark.parametrize("command", ["train", "validate"])
def test_bad_data_exits_2_with_one_line(capsys, tmp_path, text, match, command):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    extra = ["--rule", "sgd", "--lr", "0.1"] if command == "train" else ["--rules", "sgd"]
    code = main([command, "--data", str(path), *extra, "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("stability: error: ")
    assert re.search(match, err), err


def test_missing_file_and_bad_flags_exit_2(capsys, tmp_path):
    cases = [
        (["train", "--data", str(tmp_path / "none.csv"), "--rule", "sgd", "--lr", "0.1"],
         "none.csv does not exist"),
        (["train", "--data", str(tmp_path), "--rule", "sgd", "--lr", "0.1"],
         f"{tmp_path} is a directory, not a file"),
        (["train", "--rule", "nosuchrule", "--lr", "0.1"], "unknown rule 'nosuchrule'"),
        (["train", "--rule", "sgd", "--lr", "-1"], "lr must be"),
        (["validate", "--rules", "sgd,nosuch"], "unknown rule 'nosuch'"),
        (["validate", "--rules", "sgd", "--taus", "1,x"], "taus must be"),
    ]  # fmt: skip
    for argv, message in cases:
        code = main(argv)
        _, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1 and message in err, (argv, err)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal_and_never_under_json(monkeypatch):
    monkeypatch.delenv("STABILITY_PROGRESS", raising=False)
    assert not wanted(json=False, stream=io.StringIO())  # a pipe or a file: silent
    assert wanted(json=False, stream=_Terminal())
    assert not wanted(json=True, stream=_Terminal())
    monkeypatch.setenv("STABILITY_PROGRESS", "1")
    assert wanted(json=False, stream=io.StringIO()) and not wanted(json=True)
    loud = io.StringIO()
    bar = Progress(10, "train", stream=loud)
    bar.update(5)
    bar.close()
    assert "50.0%" in loud.getvalue() and "train" in loud.getvalue()


def test_train_draws_its_bar_on_stderr_only(capsys, csv, monkeypatch):
    monkeypatch.setenv("STABILITY_PROGRESS", "1")
    argv = ["train", "--data", str(csv), "--rule", "sgd", "--lr", "0.1", "--steps", "50"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "100.0%" in err and "train sgd" in err and "%" not in out
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["steps"] == 50
