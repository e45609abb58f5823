"""paper_repro: every script runs in --quick mode and writes a PNG and a JSON whose claims are
computed verdicts; ``stability repro`` runs them by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stability.claims import check_claims
from stability.cli.commands import repro
from stability.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
REPRO_DIR = ROOT / "paper_repro"


def available() -> list[str]:
    return repro.available(REPRO_DIR)


# the verdicts these reproductions reach (quick and full mode); a script added later is
# checked for its files and keys only
EXPECTED_HOLDS = {
    "kosson_fig6": True,
    "kosson_fig7": True,
    "kosson_fig8": True,
    "kosson_fig9": True,
    "kosson_fig17": True,
    "pipemare_fig5a": True,
    "pipemare_fig6a": True,
    "pipemare_fig6b": False,  # stability.claims' fig6b-correction: not for α < 0.022
    "pipemare_fig10": True,
    "pipemare_fig16": False,  # stability.claims' fig16-correction: not for α < 0.008
    "pipemare_fig5b": True,
    "pipemare_table1": True,
}
# reproductions whose first claim is a stability.claims claim (one claim, one verdict)
CLAIM_IDS = {"pipemare_fig6b": "fig6b-correction", "pipemare_fig16": "fig16-correction"}


def test_every_expected_script_exists():
    assert set(EXPECTED_HOLDS) <= set(available())


@pytest.mark.slow
@pytest.mark.parametrize("name", available())
def test_script_quick_mode_writes_png_and_json(name, tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPRO_DIR / f"{name}.py"), "--quick", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert done.returncode == 0, done.stderr
    png, record = tmp_path / f"{name}.png", tmp_path / f"{name}.json"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    data = json.loads(record.read_text())
    assert {"name", "source", "quick", "holds", "claims", "png", "data"} <= set(data)
    assert data["name"] == name and data["quick"] is True and data["data"]
    assert data["png"] == f"{name}.png"  # relative: the JSON sits next to it
    assert data["claims"] and all(
        {"claim", "holds", "evidence"} <= set(c) and isinstance(c["holds"], bool)
        for c in data["claims"]
    )
    assert data["holds"] == all(c["holds"] for c in data["claims"])
    if name in EXPECTED_HOLDS:
        failing = [c for c in data["claims"] if not c["holds"]]
        assert data["holds"] is EXPECTED_HOLDS[name], failing
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.json", f"{name}.png"]
    if name in CLAIM_IDS:
        (checked,) = check_claims([CLAIM_IDS[name]], quick=True)
        assert data["claims"][0]["holds"] is checked.holds
        assert data["claims"][0]["claim"].endswith(checked.statement)


def test_repro_command_runs_a_script_and_lists_verdicts(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code = main(["repro", "pipemare_fig6b", "--quick", "--out-dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["out_dir"] == str(tmp_path.resolve()) and data["all_hold"] is False
    (result,) = data["results"]
    assert result["name"] == "pipemare_fig6b" and result["holds"] is False
    assert result["png"].endswith("pipemare_fig6b.png") and result["claims"]
    assert (tmp_path / "pipemare_fig6b.json").exists()


def test_repro_writes_to_out_repro_by_default_never_to_figures(tmp_path, capsys, monkeypatch):
    """Without --out-dir the files land in out/repro of the working directory; human output
    lists every claim's verdict and the files."""
    monkeypatch.chdir(tmp_path)
    figures = {p.name: p.stat().st_mtime_ns for p in (ROOT / "figures").iterdir()}
    code = main(["repro", "pipemare_table1", "--quick", "--repro-dir", str(REPRO_DIR)])
    out, err = capsys.readouterr()
    assert code == 0, err
    written = tmp_path / "out" / "repro"
    assert sorted(p.name for p in written.iterdir()) == [
        "pipemare_table1.json",
        "pipemare_table1.png",
    ]
    assert {p.name: p.stat().st_mtime_ns for p in (ROOT / "figures").iterdir()} == figures
    record = json.loads((written / "pipemare_table1.json").read_text())
    assert out.splitlines()[0].startswith("pipemare_table1") and "holds" in out.splitlines()[0]
    assert out.count("\n  holds ") == sum(c["holds"] for c in record["claims"]) > 0
    assert f"wrote {written / 'pipemare_table1.png'}, pipemare_table1.json" in out


def test_repro_outside_a_checkout_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["repro", "--list"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert f"no paper_repro/ in {tmp_path}" in err and "--repro-dir" in err


def test_repro_list_and_errors(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["repro", "--list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["available"] == available()
    for argv, needle in (
        (["repro"], "give script NAMEs or --all"),
        (["repro", "nosuch", "--quick"], "unknown reproduction 'nosuch'"),
        (["repro", "--all", "pipemare_fig6b"], "give script NAMEs or --all"),
    ):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and needle in err
