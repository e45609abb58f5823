"""paper_repro: every script runs in --quick mode and writes a PNG and a JSON whose claims are
graded verdicts; ``stability repro`` runs them by name.

The grades in the JSON are re-derived here from independent computations (`INDEPENDENT`, one
check per script): dense state-matrix eigenvalues and their bisection, the papers' printed
polynomials searched on dense λ × lr grids (`oracles.naive_optimum`), closed forms (Lemma 1,
Polyak's heavy-ball rate, Table 1's fractions, 1/φ), a log-slope of the simulated
trajectories — never the code the scripts call.  A script added later is checked for its
files and keys only.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from oracles import dense_max_lr, naive_optimum, single_crossing, state_radius

from stability.api import repro
from stability.cli.main import main
from stability.rules.registry import build_rule

ROOT = Path(__file__).resolve().parents[1]
REPRO_DIR = ROOT / "paper_repro"


def available() -> list[str]:
    """The checkout's reproduction scripts (found relative to this file, not the cwd)."""
    return repro.available(REPRO_DIR)


GRADES = {"holds", "direction_only", "partial_range", "fails"}
LN2 = math.log(2.0)


def _claims(record) -> dict:
    return {c["id"]: c for c in record["claims"]}


def _radius(name, lr, **params):
    return state_radius(*build_rule(name, **params), lr)


def _dense(name, hi=2.0, **params):
    return dense_max_lr(*build_rule(name, **params), lo=1e-7, hi=hi)


def _starts(claim, margin, lo, hi):
    """The claim holds from the step size where ``margin`` turns positive, up to ``hi``."""
    edge = single_crossing(margin, lo, hi)
    assert claim["grade"] == "partial_range" and claim["holds"] is False
    assert claim["range_where_it_holds"]["parameter"] == "lr"
    assert claim["range_where_it_holds"]["from"] == pytest.approx(edge, rel=1e-8)
    assert claim["range_where_it_holds"]["to"] == pytest.approx(hi)


def _correction(record, corrected, raised, reference, correction_id):
    """Figs. 6(b)/16: the correction and "discrepancy raises ρ" hold above their own α*
    (dense radii, bisection); T2 widens the stable range (dense max lr)."""
    claims = _claims(record)
    plain = next(iter(raised.values()))

    def correction_margin(lr):
        p, c, r = (_radius(n, lr, **kw) for n, kw in (plain, corrected, reference))
        return min(p - c, abs(p - r) - abs(c - r))

    def raise_margin(lr):
        return min(_radius(n, lr, **kw) for n, kw in raised.values()) - _radius(
            reference[0], lr, **reference[1]
        )

    _starts(claims[correction_id], correction_margin, 1e-3, 0.2)
    alphas = record["data"]["alpha"]
    _starts(
        claims[f"{correction_id}-discrepancy-raises-radius"], raise_margin, alphas[0], alphas[-1]
    )
    widen = claims[f"{correction_id}-t2-widens-range"]
    gain = _dense(corrected[0], **corrected[1]) / _dense(plain[0], **plain[1]) - 1
    assert gain > 0 and widen["grade"] == "holds"
    assert widen["size"]["value"] == pytest.approx(100 * gain, rel=1e-7)


def check_fig6b(record):
    setup = {"tau_fwd": 10, "tau_bkwd": 6}
    _correction(
        record,
        ("t2", {**setup, "delta": 5.0, "decay": 0.1}),
        {"Δ = 5": ("discrepancy", {**setup, "delta": 5.0})},
        ("discrepancy", {**setup, "delta": 0.0}),
        "fig6b-correction",
    )


def check_fig16(record):
    recompute = {"tau_fwd": 10, "tau_bkwd": 1, "tau_recomp": 4, "delta": 10.0, "phi": -5.0}
    _correction(
        record,
        ("recompute", {**recompute, "decay": 0.1}),
        {
            "recompute": ("recompute", recompute),
            "plain": ("discrepancy", {"tau_fwd": 10, "tau_bkwd": 1, "delta": 10.0}),
        },
        ("discrepancy", {"tau_fwd": 10, "tau_bkwd": 1, "delta": 0.0}),
        "fig16-correction",
    )


def check_fig10(record):
    claims = _claims(record)
    data = record["data"]
    delta, plain, t2 = (np.array(data[k]) for k in ("delta", "max_lr_discrepancy", "max_lr_t2"))
    kw = {"tau_fwd": 40, "tau_bkwd": 10}
    smallest = float(delta[delta > 0].min())
    for d in (smallest, 1.0, 100.0):
        i = int(np.argmin(np.abs(delta - d)))
        assert plain[i] == pytest.approx(_dense("discrepancy", delta=d, **kw), rel=1e-7)
        assert t2[i] == pytest.approx(_dense("t2", delta=d, **kw), rel=1e-7)
    bigger = claims["fig10-t2-consistently-bigger"]
    gain = 100 * (t2[delta > 0] / plain[delta > 0] - 1)
    assert gain.min() > 0 and bigger["grade"] == "holds"
    assert bigger["size"]["value"] == pytest.approx(gain.min(), rel=1e-9)
    for optimum in bigger["optima"]:  # γ* against the best γ: dense max lr at both
        d = float(optimum["setting"].split("Δ = ")[1].split(",")[0])
        best = _dense("t2", gamma=optimum["computed"], delta=d, hi=1.0, **kw)
        paper = _dense("t2", gamma=optimum["paper"], delta=d, hi=1.0, **kw)
        assert optimum["paper"] == pytest.approx(1 - 2 / 31)  # eq. 14, τf − τb = 30
        assert optimum["cost"]["value"] == pytest.approx(100 * (1 - paper / best), rel=1e-5)
    lowered = claims["t2-negative-delta"]["numbers"]["lowered_on"][0]
    for d, lowers in ((lowered["delta_from"] + 0.01, True), (lowered["delta_from"] - 0.01, False)):
        assert bool(_dense("t2", delta=d, **kw) < _dense("discrepancy", delta=d, **kw)) is lowers


def check_fig5a(record):
    """Lemma 1: α = 0.2 is unstable exactly where 2 sin(π/(4τ+2)) < 0.2 (τ = 8, 10 here)."""
    claims = _claims(record)
    runs = record["data"]["runs"]
    unstable = [int(t) for t in runs if 2 * math.sin(math.pi / (4 * int(t) + 2)) < 0.2]
    assert unstable == [8, 10]
    for t in runs:
        rho = _radius("sgd", 0.2, tau=int(t))
        assert runs[t]["radius"] == pytest.approx(rho, rel=1e-9)
        assert (rho >= 1) is (int(t) in unstable)
    w = np.abs(np.array(runs["10"]["w"]))
    tail = len(w) // 2
    growth = math.exp(np.polyfit(np.arange(tail), np.log(w[-tail:]), 1)[0])
    rho10 = _radius("sgd", 0.2, tau=10)
    assert abs(growth / rho10 - 1) < 0.01 and claims["fig5a-growth-is-radius"]["grade"] == "holds"
    assert all(c["grade"] == "holds" for c in claims.values())


def check_fig6a(record):
    claims = _claims(record)
    runs = record["data"]["runs"]
    kw = {"tau_fwd": 10, "tau_bkwd": 6}
    top = [_dense("discrepancy", delta=float(d), **kw) for d in runs]
    assert all(np.diff(top) < 0) and claims["fig6a-lemma2-decreasing"]["grade"] == "holds"
    assert (
        _radius("discrepancy", 0.1, delta=0.0, **kw)
        < 1
        < _radius("discrepancy", 0.1, delta=5.0, **kw)
    )
    assert claims["fig6a-discrepancy-diverges"]["grade"] == "holds"


def check_table1(record):
    """GPipe's utilization N/(N+P−1) as exact fractions, rounded like Table 2."""
    claims = _claims(record)
    printed = {"CIFAR10 ResNet50": 7, "ImageNet ResNet50": 13, "IWSLT14 Transformer": 17}
    printed["WMT17 Transformer"] = 56
    for row in record["data"]["rows"]:
        if row["schedule"] == "gpipe":
            n, p = row["microbatches"], row["stages"]
            exact = Fraction(n, n + p - 1)
            assert Fraction(row["timeline"]["utilization"]) == exact
            assert round(100 * exact) == printed[row["task"]]
    gain = 1 / Fraction(8, 8 + 107 - 1)  # CIFAR10: N = 8, P = 107
    table2 = claims["table2-utilization"]
    assert table2["size"]["value"] == float(gain) == 14.25 and table2["grade"] == "holds"
    assert all(c["grade"] == "holds" for c in claims.values())


def check_kosson_fig6(record):
    """m = 0: GDM at D = 1 has max ηλ 1 (1 − m), D = 0 has 2, LWP_D 1/φ — −50 %, −38.2 %."""
    claims = _claims(record)
    golden = (math.sqrt(5) - 1) / 2
    assert _dense("lwp", tau=1, momentum=0.0) == pytest.approx(golden, rel=1e-9)
    assert _dense("momentum", tau=1, momentum=0.0) == pytest.approx(1.0, rel=1e-9)
    lwp = claims["lwp-shrinks-small-momentum"]
    assert lwp["size"]["value"] == pytest.approx(100 * (golden - 1), rel=1e-9)
    assert lwp["grade"] == "direction_only"  # −38.2 % is not "slightly" (≤ 10 %)
    shrink = claims["delay-shrinks-region"]
    assert shrink["size"]["value"] == pytest.approx(-50.0) and shrink["grade"] == "holds"


def _polyak_half_life(kappa):
    return -LN2 / math.log((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1))


def check_kosson_fig7(record):
    """No delay: Polyak's rate at the formula's momentum; LWP_D vs SC_D: −18 % at κ = 10."""
    claims = _claims(record)
    for o in claims["fig7-no-delay-momentum"]["optima"]:
        kappa = float(o["setting"].split("κ = ")[1].split(",")[0])
        assert o["paper"] == pytest.approx(((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)) ** 2)
        # double roots at the optimum: float64 radii ~1e-8 off, half-lives ~1e-5 at κ = 1e5
        assert o["at_paper"] == pytest.approx(_polyak_half_life(kappa), rel=3e-5)
        assert o["at_computed"] == pytest.approx(_polyak_half_life(kappa), rel=3e-5)
        assert abs(o["cost"]["value"]) < 3e-3  # the formula is the optimum (to the precision)
    h = record["data"]["half_life"]
    ratio = np.array(h["LWP_D, D = 1"]) / np.array(h["SC_D, D = 1"])
    slight = claims["fig7-lwp-slightly-beats-sc"]
    assert np.all(ratio < 1) and ratio.min() < 0.9
    assert slight["grade"] == "direction_only"
    kappa = record["data"]["kappa"]
    rate = naive_optimum(
        "sc", kappa[0], tau=1, momentum=record["data"]["optimal_momentum"]["SC_D, D = 1"][0]
    )
    assert h["SC_D, D = 1"][0] == pytest.approx(-LN2 / math.log(rate), rel=2e-6)


def check_kosson_fig8(record):
    h = record["data"]["half_life"]
    assert h["GDM"][0] == pytest.approx(_polyak_half_life(1e3), rel=1e-6)  # D = 0
    assert all(c["grade"] == "holds" for c in record["claims"])


def check_kosson_fig9(record):
    claims = _claims(record)
    zero = claims["fig9-gdm-momentum-zero"]["optima"][0]
    rate = naive_optimum("momentum", 1e3, tau=5, momentum=0.0)
    assert zero["at_paper"] == pytest.approx(-LN2 / math.log(rate), rel=2e-6)
    horizon = claims["fig9-horizon-2d-optimal"]
    (optimum,) = horizon["optima"]
    m_star = horizon["numbers"]["optimal_momentum_at_t_star"]
    rate = naive_optimum("lwp", 1e3, tau=5, momentum=m_star, horizon=optimum["computed"])
    assert optimum["at_computed"] == pytest.approx(-LN2 / math.log(rate), rel=2e-6)
    near = abs(optimum["computed"] / 5 - 2) <= 0.2  # "≈ 2D": within 10 %
    assert horizon["grade"] == ("holds" if near else "direction_only")


def check_kosson_fig17(record):
    """The half-lives at the computed optimum and at α = 2 (κ = 10³, D = 4), each by the naive
    λ × lr search at the reported momentum; "≈ 2" within 10 % decides the grade."""
    claim = _claims(record)["fig17-horizon-2d-optimal"]
    optimum, at = claim["optima"][0], claim["numbers"]["momentum_and_lr"]["κ = 10³, D = 4"]
    assert "κ = 10³, D = 4" in optimum["setting"]
    for key, scale, value in (
        ("optimum", optimum["computed"], optimum["at_computed"]),
        ("paper", 2.0, optimum["at_paper"]),
    ):
        rate = naive_optimum("lwp", 1e3, tau=4, momentum=at[key]["momentum"], horizon=4 * scale)
        assert value == pytest.approx(-LN2 / math.log(rate), rel=2e-6)
    assert all(o["cost"]["value"] >= 0 for o in claim["optima"])
    near = all(abs(o["computed"] - 2) <= 0.2 for o in claim["optima"])
    assert claim["grade"] == ("holds" if near else "direction_only")


INDEPENDENT = {
    "pipemare_fig6b": check_fig6b,
    "pipemare_fig16": check_fig16,
    "pipemare_fig10": check_fig10,
    "pipemare_fig5a": check_fig5a,
    "pipemare_fig6a": check_fig6a,
    "pipemare_table1": check_table1,
    "kosson_fig6": check_kosson_fig6,
    "kosson_fig7": check_kosson_fig7,
    "kosson_fig8": check_kosson_fig8,
    "kosson_fig9": check_kosson_fig9,
    "kosson_fig17": check_kosson_fig17,
}
"""Per script, an independent re-derivation of its claims' grades (module docstring).
pipemare_fig5b's verdicts rest on the reference trainer's runs, checked against Lemma 1 in
tests/test_trainer_*.py; here its files and keys."""


def test_every_expected_script_exists():
    assert set(INDEPENDENT) | {"pipemare_fig5b"} <= set(available())


def _check_keys(data, name):
    assert {"name", "source", "quick", "holds", "claims", "png", "data"} <= set(data)
    assert data["name"] == name and data["quick"] is True and data["data"]
    assert data["png"] == f"{name}.png"  # relative: the JSON sits next to it
    assert data["claims"]
    for c in data["claims"]:
        assert {"id", "statement", "holds", "grade", "size", "range_where_it_holds"} <= set(c)
        assert c["grade"] in GRADES and c["holds"] is (c["grade"] == "holds")
        assert c["size"] is None or set(c["size"]) == {"value", "unit", "qualifier"}
        part = c["range_where_it_holds"]
        assert part is None or (
            set(part) == {"parameter", "from", "to"} and part["from"] <= part["to"]
        )
        assert (part is not None) or c["grade"] != "partial_range"
    assert data["holds"] == all(c["holds"] for c in data["claims"])
    assert len({c["id"] for c in data["claims"]}) == len(data["claims"])


@pytest.mark.slow
@pytest.mark.parametrize("name", available())
def test_script_quick_mode_writes_png_and_json(name, tmp_path, monkeypatch):
    """Each script's ``main`` in this process (the suite's imports, no interpreter start per
    script: ~1.5 s each); ``stability repro`` runs them as subprocesses, tested below."""
    import importlib

    monkeypatch.syspath_prepend(str(REPRO_DIR))
    importlib.import_module(name).main(["--quick", "--out-dir", str(tmp_path)])
    png, record = tmp_path / f"{name}.png", tmp_path / f"{name}.json"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    data = json.loads(record.read_text())
    _check_keys(data, name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.json", f"{name}.png"]
    if name in INDEPENDENT:
        INDEPENDENT[name](data)


def test_repro_command_runs_a_script_and_lists_grades(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code = main(["repro", "pipemare_fig6b", "--quick", "--out-dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["out_dir"] == str(tmp_path.resolve()) and data["all_hold"] is False
    (result,) = data["results"]
    assert result["name"] == "pipemare_fig6b" and result["holds"] is False
    assert result["png"].endswith("pipemare_fig6b.png") and result["claims"]
    record = json.loads((tmp_path / "pipemare_fig6b.json").read_text())
    assert [c["grade"] for c in result["claims"]] == [c["grade"] for c in record["claims"]]
    assert result["claims"][0]["range_where_it_holds"]["parameter"] == "lr"


def test_repro_writes_to_out_repro_by_default_never_to_figures(tmp_path, capsys, monkeypatch):
    """Without --out-dir the files land in out/repro of the working directory; the human
    output lists every claim's grade and the files."""
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
    lines = out.splitlines()
    assert lines[0].startswith("pipemare_table1")
    for c in record["claims"]:
        assert f"  {c['grade']:<15}{c['id']}" in lines
    assert f"  wrote {written / 'pipemare_table1.png'}, pipemare_table1.json" in lines


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
