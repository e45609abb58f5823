"""``heatmap``: the half-life grid and the best point (in ``--json`` and the text), and output
paths whose missing directories are created (as every command's output paths)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import stability as st
from stability.cli.main import main


def test_best_point_is_the_smallest_radius_of_independent_evaluations():
    hm = st.heatmap("momentum", x="lr:0.05:1.5:7:log", y="momentum:0:0.9:4", tau=1)
    radii = np.array(
        [[st.radius("momentum", tau=1, momentum=m, lr=lr).spectral_radius for lr in hm.x.values]
         for m in hm.y.values]
    )  # fmt: skip
    np.testing.assert_allclose(hm.radius, radii, rtol=1e-12)
    i, j = np.unravel_index(np.argmin(radii), radii.shape)
    assert hm.best == pytest.approx(
        {"lr": hm.x.values[j], "momentum": hm.y.values[i], "radius": radii[i, j],
         "half_life": -math.log(2) / math.log(radii[i, j])}, rel=1e-12
    )  # fmt: skip
    stable = radii < 1
    np.testing.assert_allclose(hm.half_life[stable], -np.log(2) / np.log(radii[stable]))
    assert np.all(np.isinf(hm.half_life[~stable])) and np.any(~stable)


def test_no_stable_point_no_best():
    hm = st.heatmap("sgd", x="lr:2.5:3:2", y="tau:0:2:3")
    assert hm.stable_fraction == 0 and hm.best is None


def test_half_life_metric_json_has_the_grid_and_the_text_the_best_point(capsys):
    argv = ["heatmap", "sgd", "--x", "lr:0.25:1.75:4", "--y", "tau:0:1:2", "--metric", "half-life"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # τ = 0: ρ = |1 − lr|; lr = 0.75 → ρ 0.25, half-life 0.5 step; lr = 1.75 → 0.75
    assert out["half_life"][0] == pytest.approx([math.log(2) / math.log(4 / 3), 0.5, 0.5,
                                                 math.log(2) / math.log(4 / 3)])  # fmt: skip
    assert out["best"] == pytest.approx({"lr": 0.75, "tau": 0, "radius": 0.25, "half_life": 0.5})
    assert None in out["half_life"][1]  # τ = 1, lr = 1.75: unstable (Lemma 1: 2 sin(π/6) = 1)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "best point (smallest ρ): lr 0.75, tau 0: ρ 0.25, half-life 0.5 steps" in text


@pytest.mark.parametrize("flag", ["--out", "--csv"])
def test_missing_directories_of_an_output_path_are_created(tmp_path, capsys, flag):
    path = tmp_path / "new" / "dir" / ("a.png" if flag == "--out" else "a.csv")
    argv = ["heatmap", "sgd", "--x", "lr:0.1:1:3", "--y", "tau:0:1:2", flag, str(path)]
    assert main(argv) == 0
    assert path.is_file() and f"wrote {path}" in capsys.readouterr().out


def test_an_output_path_under_a_file_is_refused_before_any_work(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    argv = ["heatmap", "sgd", "--x", "lr:0.1:1:3", "--y", "tau:0:1:2"]
    assert main([*argv, "--out", str(tmp_path / "f" / "a.png")]) == 2
    err = capsys.readouterr().err
    assert err == f"stability: error: --out: {tmp_path / 'f'} is not a directory\n"
    assert main(["tradeoff", "--batch", "8", "--tau", "1", "--out", str(tmp_path / "f/x.png")]) == 2
    assert "--out:" in capsys.readouterr().err
    assert main(["repro", "--list", "--out-dir", str(tmp_path / "f" / "d")]) == 2
    assert "--out-dir:" in capsys.readouterr().err
