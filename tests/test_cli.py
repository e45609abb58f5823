"""The CLI contract (docs/conventions.md): JSON keys, one-line errors with exit code 2, --help."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from stability.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    assert out.count("\n") == 1  # exactly one JSON object
    return json.loads(out)


def test_rules_lists_every_rule_with_parameters_and_sources(capsys):
    from stability.rules.registry import RULES

    data = run_json(capsys, "rules")
    assert [r["name"] for r in data["rules"]] == list(RULES)
    for r in data["rules"]:
        assert r["sources"] and r["parameters"]
        assert all({"name", "default", "allowed", "doc"} <= set(p) for p in r["parameters"])


def test_max_lr_sgd_is_lemma_1(capsys):
    data = run_json(capsys, "max-lr", "sgd", "--tau", "7", "--lam", "2.5")
    assert data["max_lr"] == pytest.approx(2 / 2.5 * math.sin(math.pi / 30), rel=1e-13)
    assert data["crossing_angle"] == pytest.approx(math.pi / 15, rel=1e-12)
    assert data["method"] == "boundary locus"


def test_poly_coefficients_highest_degree_first(capsys):
    data = run_json(capsys, "poly", "sgd", "--tau", "3", "--lam", "2", "--lr", "0.1")
    assert data["coefficients"] == pytest.approx([1, -1, 0, 0, 0.2])
    assert data["degree"] == 4


def test_radius_keys_and_values(capsys):
    data = run_json(capsys, "radius", "sgd", "--tau", "0", "--lr", "0.25", "--lam", "2")
    assert data["spectral_radius"] == pytest.approx(0.5, rel=1e-15)
    assert data["half_life"] == pytest.approx(1.0, rel=1e-15)
    assert data["stable"] is True
    assert data["dominant_root"] == pytest.approx([0.5, 0.0])
    unstable = run_json(capsys, "radius", "sgd", "--tau", "0", "--lr", "1.5", "--lam", "2")
    assert unstable["half_life"] is None and unstable["stable"] is False
    # the text report says which side of 1 the float radius is on
    assert main(["radius", "sgd", "--tau", "0", "--lr", "1.5", "--lam", "2"]) == 0
    assert "no (ρ ≥ 1 in floating point)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["max-lr", "sgd", "--tau", "-1"], "tau must be an integer in [0, 100000], got -1"),
        (["max-lr", "sgd", "--tau", "1.5"], "tau must be an integer"),
        (["max-lr", "discrepancy", "--tau-fwd", "2", "--tau-bkwd", "3"], "--tau-bkwd must be ≤"),
        (["radius", "sgd", "--lr", "0"], "lr must be a finite real number > 0, got 0"),
        (["radius", "sgd", "--lr", "-1"], "lr must be"),
        (["max-lr", "momentum", "--momentum", "1.5"], "momentum must be a finite real number in"),
        (["max-lr", "momentum", "--momentum", "nan"], "momentum must be a finite real number"),
        (["max-lr", "sgd", "--lam", "inf"], "lam must be a finite real number"),
        (["max-lr", "nosuchrule"], "unknown rule 'nosuchrule'"),
        (["max-lr", "adamw"], "unknown rule 'adamw' (AdamW is adam with --weight-decay: decou"),
        (["net", "max-lr", "--rule", "AdamW"], "--rule: unknown rule 'AdamW' (AdamW is adam "),
        (["max-lr", "sgd", "--no-such-flag", "1"], "unrecognized arguments"),
        (["max-lr", "sgd", "--momentum", "0.5"], "rule 'sgd' has no parameter 'momentum'"),
        (["radius", "sgd"], "the following arguments are required: --lr"),
        # lr·λ = 1e450 overflowed the coefficients: ρ = 1 was answered
        (["radius", "sgd", "--lr", "1e300", "--lam", "1e150"], "--lr: lr·max(|λ + Δ|"),
        (["radius", "discrepancy", "--lr", "1e149", "--delta", "20"], "at most 1e+150"),
        # an integer beyond float64's 53 bits is echoed as given, not rounded through a float
        (["max-lr", "sgd", "--tau", "99999999999999999999999"], "got 99999999999999999999999"),
        (["repro", "--list", "--repro-dir", ""], "--repro-dir must be a path, got an empty"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and needle in err, err


def test_console_script_help_has_examples():
    out = subprocess.run(
        [sys.executable, "-m", "stability.cli.main", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "stability max-lr sgd --tau 10" in out.stdout


def test_console_script_error_has_no_traceback():
    out = subprocess.run(
        [sys.executable, "-m", "stability.cli.main", "max-lr", "sgd", "--tau", "x"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "flag, target",
    [
        ("--csv", "{tmp}"),  # a directory
        ("--csv", "{file}/grid.csv"),  # under a regular file
        ("--out", "{tmp}"),  # a directory
        ("--out", ""),
    ],
)
def test_unwritable_output_paths_are_refused_in_one_line(flag, target, tmp_path, capsys):
    """Issue 11, defect 5: one line naming the flag, exit 2 — not an internal error."""
    regular = tmp_path / "a-file"
    regular.write_text("x")
    path = target.format(tmp=tmp_path, file=regular)
    argv = ["heatmap", "sgd", "--x", "lr:0.1:0.5:2", "--y", "tau:0:1:2", flag, path]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err and "internal" not in err
    assert list(tmp_path.iterdir()) == [regular]  # nothing written


def test_repro_out_dir_must_be_a_directory(tmp_path, capsys):
    regular = tmp_path / "a-file"
    regular.write_text("x")
    assert main(["repro", "kosson_fig6", "--quick", "--out-dir", str(regular)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out-dir" in err


def test_ctrl_c_during_repro_says_what_was_completed(tmp_path, capsys, monkeypatch):
    """Issue 11: an interrupted long run says, on one line, what it completed (exit 130)."""
    from stability.api import repro as api_repro

    calls = []

    def run_one(repro_dir, name, out_dir, quick):
        calls.append(name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return api_repro.ReproRun(name, "a.png", "a.json", True, (), 0.0)

    monkeypatch.setattr(api_repro, "_run_one", run_one)
    argv = ["repro", "--all", "--quick", "--repro-dir", str(ROOT / "paper_repro")]
    assert main([*argv, "--out-dir", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"1 of {len(api_repro.available(ROOT / 'paper_repro'))} reproductions completed" in err
    assert f"({calls[0]})" in err and f"{calls[1]} was stopped" in err


def test_a_refusal_about_one_delay_names_the_list_flag_typed(capsys):
    """`validate --taus` refused at a size limit names --taus (the message says `tau`)."""
    assert main(["validate", "--rules", "sgd", "--taus", "100000", "--steps", "100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("stability: error: --taus ")


def test_repro_skips_a_script_whose_optional_modules_are_missing(tmp_path, capsys):
    """`make run` installs the core only: --all skips (and lists) a script whose REQUIRES are
    not installed; naming it is a one-line refusal."""
    (tmp_path / "needs_x.py").write_text(
        'REQUIRES = ("no_such_module_xyz",)\nraise SystemExit(3)\n'
    )
    argv = ["repro", "--repro-dir", str(tmp_path), "--out-dir", str(tmp_path / "out"), "--json"]
    assert main([*argv, "--all"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"] == [] and out["skipped"][0].startswith(
        "needs_x (needs no_such_module_xyz"
    )
    assert main([*argv, "needs_x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs no_such_module_xyz" in err


def test_coupled_dense_refuses_a_block_state_matrix_beyond_its_limit(capsys):
    """--method dense diagonalises the block state matrix ~30 times: above
    DENSE_SEARCH_MAX_STATES rows (here 12 parameters × ~400 values) it is refused naming
    --method, where the scan answers."""
    from stability.limits import DENSE_SEARCH_MAX_STATES

    argv = ("coupled", "--rule", "sgd", "--stages", "2", "--taus", "400,0")
    code, out, err = run_cli(capsys, *argv, "--method", "dense")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("stability: error: --method dense")
    assert f"at most {DENSE_SEARCH_MAX_STATES} rows" in err
    assert run_json(capsys, *argv)["max_lr"] > 0
