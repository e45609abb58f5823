"""Heatmaps: axis specs, grid == pointwise ``stability radius`` (1e-10), refinement at double
roots, CSV/PNG output, overlays and the CLI's one-line errors."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

from stability.analysis.boundary import max_lr
from stability.analysis.radius_grid import Axis, heatmap, lemma_curve, max_lr_curve, parse_axis
from stability.cli.main import main
from stability.dynamics.linear import characteristic_polynomial
from stability.rules.registry import build_rule
from stability.spectrum import dominant_root_at, spectral_radius

# -- axis specs ----------------------------------------------------------------------------


def test_parse_axis_linear_and_log():
    a = parse_axis("momentum:0:0.9:10")
    assert (a.name, a.lo, a.hi, a.n, a.log) == ("momentum", 0.0, 0.9, 10, False)
    np.testing.assert_allclose(a.values, np.linspace(0, 0.9, 10), rtol=0, atol=0)
    b = parse_axis("lr:1e-3:10:5:log")
    np.testing.assert_allclose(b.values, [1e-3, 1e-2, 1e-1, 1, 10], rtol=1e-15)
    assert parse_axis("lam·lr:0.1:1:3").name == "lam*lr"


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("momentum", "must be P:lo:hi:n[:log]"),
        ("momentum:0:1", "must be P:lo:hi:n[:log]"),
        ("momentum:a:1:5", "lo and hi must be numbers"),
        ("momentum:0:1:five", "n must be an integer"),
        ("momentum:0:1:5:lin", "fifth field must be 'log'"),
        ("momentum:1:0:5", "lo < hi"),
        ("lr:0:1:5:log", "log axis needs lo > 0"),
        ("lr:1e-3:1:1", "n must be an integer in [2, 4096]"),
        ("lr:nan:1:5", "lo < hi must be finite"),
    ],
)
def test_parse_axis_errors_are_one_line(spec, needle):
    with pytest.raises(ValueError) as err:
        parse_axis(spec, "--x")
    assert needle in str(err.value) and "\n" not in str(err.value)


# -- values --------------------------------------------------------------------------------


def _pointwise(name, x, y, fixed, i, j):
    """ρ at one grid point through the CLI's entry point (`dominant_root_at`, mpmath)."""
    values = dict(fixed)
    for axis, v in ((x, x.values[j]), (y, y.values[i])):
        if axis.name in ("lr", "lam*lr"):
            values["lr"] = float(v)
        else:
            values[axis.name] = int(v) if axis.values.dtype.kind == "i" else float(v)
    if "lam*lr" in (x.name, y.name):
        values["lam"] = 1.0
    lr = values.pop("lr")
    rule, model = build_rule(name, **values)
    return dominant_root_at(rule, model, lr).radius


@pytest.mark.parametrize(
    "name, xs, ys, fixed",
    [
        ("momentum", "lr:1e-3:3:9:log", "momentum:0:0.99:7", {"tau": 3}),
        ("sgd", "lr:0.01:1.5:8", "tau:0:12:7", {}),
        ("t2", "delta:-5:5:6", "decay:0.05:0.9:5", {"tau_fwd": 6, "tau_bkwd": 2, "lr": 0.05}),
        ("lwp+sc", "lam*lr:1e-3:2:7:log", "horizon:0:6:5", {"tau": 2, "momentum": 0.9}),
        ("discrepancy", "tau_fwd:3:6:4", "tau_bkwd:0:2:3", {"delta": 1.0, "lr": 0.1}),
    ],
)
def test_grid_equals_pointwise_radius(name, xs, ys, fixed):
    x, y = parse_axis(xs), parse_axis(ys)
    hm = heatmap(name, x, y, **fixed)
    for i in range(hm.y.values.size):
        for j in range(hm.x.values.size):
            want = _pointwise(name, hm.x, hm.y, fixed, i, j)
            assert hm.radius[i, j] == pytest.approx(want, abs=1e-10), (i, j)


def test_acceptance_grid_agrees_with_cli_radius(capsys):
    """The acceptance grid (momentum, τ = 1, 256 × 256): sampled points and every refined
    point agree with ``stability radius`` to 1e-10."""
    x, y = parse_axis("lr:1e-3:10:256:log"), parse_axis("momentum:0:0.999:256")
    hm = heatmap("momentum", x, y, tau=1)
    rng = np.random.default_rng(0)
    picks = {tuple(p) for p in rng.integers(0, 256, size=(150, 2))}
    picks |= {tuple(p) for p in np.argwhere(hm.refined)}
    for i, j in sorted(picks):
        want = _pointwise("momentum", x, y, {"tau": 1}, i, j)
        assert hm.radius[i, j] == pytest.approx(want, abs=1e-10)
    for i, j in sorted(picks)[:3]:  # and through the command line itself
        argv = ["radius", "momentum", "--tau", "1", "--json"]
        argv += ["--momentum", repr(float(y.values[i])), "--lr", repr(float(x.values[j]))]
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["spectral_radius"] == pytest.approx(
            hm.radius[i, j], abs=1e-10
        )


def test_double_roots_are_refined():
    """Heavy ball without delay has a double root at lr = (1 − √m)²: float64 radii are ~1e-8
    off there; the heatmap flags and refines those points."""
    m = np.array([0.25, 0.49, 0.64, 0.81])
    lrs = (1 - np.sqrt(m)) ** 2
    rule, model = build_rule("momentum", tau=0, momentum=m)
    raw = spectral_radius(characteristic_polynomial(rule, model).at(lrs).normalized().dense())
    exact = np.array(
        [
            dominant_root_at(*build_rule("momentum", tau=0, momentum=v), lr).radius
            for v, lr in zip(m, lrs, strict=True)
        ]
    )
    assert np.max(np.abs(raw - exact)) > 1e-10  # float64 alone is not accurate enough here
    hm = heatmap("momentum", Axis.of("lr", lrs), Axis.of("momentum", m), tau=0)
    diag = hm.radius[np.arange(m.size), np.arange(m.size)]
    assert np.all(hm.refined[np.arange(m.size), np.arange(m.size)])
    np.testing.assert_allclose(diag, exact, rtol=0, atol=1e-12)


def test_huge_radii_are_solved_rescaled_without_mpmath():
    """At lr·λ ~ 1e146 the roots reach 1e73 and the coefficients span ~290 decades: in the
    rescaled variable (`stability.spectrum.root_scaled`) the float64 radii agree with
    mpmath's (`stability radius`) to 1e-12 relative and no point needs refining; before,
    every point went to mpmath (32 × 4096 points: 25 s)."""
    x, y = parse_axis("lr:0.01:1:3:log"), parse_axis("delta:0.001:1:3")
    fixed = {"tau_max": 1, "lam": 3.25245e148, "momentum": 0.9}
    hm = heatmap("spectrain", x, y, **fixed)
    assert not hm.refined.any()
    for i in range(3):
        for j in range(3):
            want = _pointwise("spectrain", x, y, fixed, i, j)
            assert want > 1e70 and hm.radius[i, j] == pytest.approx(want, rel=1e-12)


def test_metrics_follow_the_radius():
    hm = heatmap("sgd", parse_axis("lr:0.1:2.5:6"), parse_axis("tau:0:3:4"))
    rho = hm.radius
    stable = rho < 1
    np.testing.assert_array_equal(hm.metric("stable"), stable.astype(float))
    h = hm.metric("half-life")
    np.testing.assert_allclose(h[stable], -math.log(2) / np.log(rho[stable]), rtol=1e-14)
    assert np.all(np.isinf(h[~stable]))
    with pytest.raises(ValueError, match="metric must be one of"):
        hm.metric("speed")


def test_overlays_are_the_exact_max_lr_and_lemma_1():
    hm = heatmap("sgd", parse_axis("lr:0.01:1:4"), parse_axis("tau:0:8:9"), lam=2.0)
    curve = max_lr_curve(hm)
    for tau, top in zip(curve.other, curve.step, strict=True):
        want = max_lr(*build_rule("sgd", tau=int(tau), lam=2.0)).max_lr
        assert top == pytest.approx(want, rel=1e-12)
    lemma = lemma_curve(hm)
    np.testing.assert_allclose(lemma.step, 2 / 2.0 * np.sin(np.pi / (4 * curve.other + 2)))
    np.testing.assert_allclose(lemma.step, curve.step, rtol=1e-12)  # Lemma 1 is tight
    hm_m = heatmap("momentum", parse_axis("momentum:0:0.9:4"), parse_axis("lr:0.01:1:3"), tau=2)
    top = max_lr_curve(hm_m)
    for m, v in zip(top.other, top.step, strict=True):
        assert v == pytest.approx(
            max_lr(*build_rule("momentum", tau=2, momentum=float(m))).max_lr, rel=1e-12
        )
    assert (
        max_lr_curve(
            heatmap(
                "t2",
                parse_axis("delta:0:1:2"),
                parse_axis("decay:0.1:0.5:2"),
                lr=0.1,
                tau_fwd=3,
                tau_bkwd=1,
            )
        )
        is None
    )


def test_progress_is_reported_as_points_finish():
    from stability.cli.progress import Progress

    stream = io.StringIO()
    bar = Progress(9, "heatmap", stream=stream)
    seen = []
    heatmap(
        "sgd",
        parse_axis("lr:0.1:1:3"),
        parse_axis("tau:0:2:3"),
        progress=lambda done, total: (seen.append((done, total)), bar.update(done)),
    )
    bar.close()
    assert seen[-1] == (9, 9) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert "100.0%" in stream.getvalue()


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"x": "tau:0:2:3", "y": "tau:0:2:3", "lr": 0.1}, "must be different"),
        ({"x": "lr:0.1:1:3", "y": "lam*lr:0.1:1:3"}, "must be different"),
        ({"x": "gamma:0:1:3", "y": "lr:0.1:1:3"}, "x: axis parameter 'gamma' is not a"),
        ({"x": "lr:0.1:1:3", "y": "gamma:0:1:3"}, "y: axis parameter 'gamma' is not a"),
        ({"x": "tau:0:3:4", "y": "lam:1:2:3"}, "lr must be given"),
        ({"x": "lam*lr:0.1:1:3", "y": "tau:0:2:3", "lam": 2.0}, "sets lam = 1"),
        ({"x": "lr:0.1:1:3", "y": "tau:0:2:3", "tau": 2}, "tau is an axis"),
        ({"x": "lr:0.1:1:3", "y": "lam:-1:2:3"}, "lam must be"),
    ],
)
def test_heatmap_errors_are_one_line(kwargs, needle):
    x, y = parse_axis(kwargs.pop("x")), parse_axis(kwargs.pop("y"))
    with pytest.raises(ValueError) as err:
        heatmap("sgd", x, y, **kwargs)
    assert needle in str(err.value) and "\n" not in str(err.value)


# -- the command ---------------------------------------------------------------------------


def test_a_figure_path_without_the_png_suffix_is_refused_before_computing(tmp_path, capsys):
    argv = ["heatmap", "sgd", "--x", "lr:0.1:1:3", "--y", "tau:0:2:3"]
    assert main([*argv, "--out", str(tmp_path / "F.txt")]) == 2
    err = capsys.readouterr().err
    expected = "--out: the figure is a PNG, give a path ending in .png, got "
    assert err == f"stability: error: {expected}{tmp_path / 'F.txt'}\n"
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_png_and_csv(tmp_path, capsys):
    png, table = tmp_path / "F.png", tmp_path / "F.csv"
    argv = ["heatmap", "momentum", "--tau", "1", "--x", "lr:1e-3:10:16:log"]
    argv += ["--y", "momentum:0:0.999:12", "--out", str(png), "--csv", str(table), "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["points"] == 192 and data["png"] == str(png) and data["csv"] == str(table)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 192
    assert list(rows[0]) == ["lr", "momentum", "spectral_radius", "half_life", "stable", "refined"]
    x, y = parse_axis("lr:1e-3:10:16:log"), parse_axis("momentum:0:0.999:12")
    hm = heatmap("momentum", x, y, tau=1)
    got = np.array([float(r["spectral_radius"]) for r in rows]).reshape(12, 16)
    np.testing.assert_array_equal(got, hm.radius)  # 17 significant digits: bit for bit
    r = rows[37]
    rule, model = build_rule("momentum", tau=1, momentum=float(r["momentum"]))
    assert float(r["spectral_radius"]) == pytest.approx(
        dominant_root_at(rule, model, float(r["lr"])).radius, abs=1e-10
    )
    assert data["stable_fraction"] == pytest.approx(float(np.mean(hm.radius < 1)))


def test_cli_half_life_metric_with_bounds(tmp_path, capsys):
    png = tmp_path / "h.png"
    argv = ["heatmap", "sgd", "--x", "tau:0:20:21", "--y", "lr:1e-3:2:30:log"]
    argv += ["--metric", "half-life", "--bounds", "--out", str(png)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"wrote {png}" in out and png.stat().st_size > 10_000


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["heatmap", "sgd", "--x", "lr:1:0:3", "--y", "tau:0:3:4", "--csv", "f.csv"], "lo < hi"),
        (["heatmap", "sgd", "--x", "lr:-1:1:3", "--y", "tau:0:3:4"], "--x axis lr:-1:1:3: lr must"),
        (["heatmap", "sgd", "--x", "lr:0.1:1:3", "--y", "tau:-2:3:4"], "--y axis tau:-2:3:4: tau"),
        (["heatmap", "sgd", "--x", "lr:0.1:1:3", "--y", "tau:0:3:4:x", "--csv", "f"], "'log'"),
        (["heatmap", "sgd", "--x", "lr:0.1:1:3", "--csv", "f.csv"], "required: --y"),
        (["heatmap", "sgd", "--x", "tau:0:3:4", "--y", "lam:1:2:3", "--csv", "f"], "lr must be"),
        (
            ["heatmap", "sgd", "--x", "lr:0.1:1:3", "--y", "tau:0:3:4", "--metric", "x"],
            "invalid choice",
        ),
    ],
)
def test_cli_errors_are_one_line_exit_2(tmp_path, capsys, argv, needle, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err, err
    assert not list(tmp_path.iterdir())  # no partial files


def test_delay_rate_axis_is_one_distribution_per_point():
    """Defect: a `delay_rate` axis (random-delay) crashed converting the grid to one float."""
    hm = heatmap("random-delay", parse_axis("delay_rate:-30:-16:2"), parse_axis("lr:1e-3:1e-1:2"))
    for i, lr in enumerate(hm.y.values):
        for j, rate in enumerate(hm.x.values):
            rule, model = build_rule("random-delay", delay_rate=float(rate))
            assert hm.radius[i, j] == pytest.approx(
                dominant_root_at(rule, model, float(lr)).radius, rel=1e-10
            )


@pytest.mark.parametrize("name", ["adam", "pipeoptim"])
def test_png_over_an_axis_the_linearised_rule_ignores(name, tmp_path, capsys):
    """Defect: beta2 leaves the frozen-preconditioner analysis unchanged, so the max-lr overlay
    was one value for four points and matplotlib refused the figure."""
    out = tmp_path / "f.png"
    argv = ["heatmap", name, "--x", "beta2:0.79:0.92:4", "--y", "lr:1e-3:1e-1:4"]
    assert main([*argv, "--out", str(out)]) == 0
    assert out.stat().st_size > 0
    hm = heatmap(name, parse_axis("beta2:0.79:0.92:4"), parse_axis("lr:1e-3:1e-1:4"))
    curve = max_lr_curve(hm)
    np.testing.assert_array_equal(curve.step, np.full(4, curve.step[0]))
