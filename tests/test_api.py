"""The public API (`import stability as st`): one function per command, results whose
attributes are exactly the command's JSON keys (with ``schema_version``), lazy imports, and
the numbers against independent computations."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stability as st
from stability.cli.main import main
from stability.result import Result, json_type
from stability.trainer.data import synthetic_regression

ROOT = Path(__file__).resolve().parents[1]
NET = f"{ROOT / 'examples' / 'diabetes_linear.py'}:problem"
SWEEP = str(ROOT / "examples" / "sweeps" / "momentum_small.toml")


@pytest.fixture(scope="module")
def csv(tmp_path_factory):
    """A small regression CSV (64 samples, 4 features) for fast trainer commands."""
    data = synthetic_regression([3.0, 1.0, 0.4, 0.1], samples=64, seed=7, residual=0.2)
    path = tmp_path_factory.mktemp("data") / "small.csv"
    np.savetxt(path, np.c_[data.y, data.X], delimiter=",")
    return path


def _cases(csv, tmp):
    """(public call, the same as a command line) for every command."""
    fast = {"steps": 400, "data": str(csv)}
    return [
        (lambda: st.rules("sgd", "t2"), ["rules", "sgd", "t2"]),
        (lambda: st.poly("sgd", tau=3, lr=0.1, lam=2), ["poly", "sgd", "--tau", "3", "--lr", "0.1",
                                                       "--lam", "2"]),
        (lambda: st.radius("t2", lr=0.01, tau_fwd=8, tau_bkwd=2, delta=1, decay=0.1),
         ["radius", "t2", "--lr", "0.01", "--tau-fwd", "8", "--tau-bkwd", "2", "--delta", "1",
          "--decay", "0.1"]),
        (lambda: st.radius("sgd", tau=1, lr="0.25", certify=True),
         ["radius", "sgd", "--tau", "1", "--lr", "0.25", "--certify"]),
        (lambda: st.max_lr("momentum", tau=10, momentum=0.9),
         ["max-lr", "momentum", "--tau", "10", "--momentum", "0.9"]),
        (lambda: st.bounds("sgd", tau=7, lam=2.5), ["bounds", "sgd", "--tau", "7", "--lam", "2.5"]),
        (lambda: st.halflife("momentum", tau=0, kappa=100, momentum=0),
         ["halflife", "momentum", "--tau", "0", "--kappa", "100", "--momentum", "0"]),
        (lambda: st.heatmap("sgd", x="lr:0.1:1:4", y="tau:0:3:4"),
         ["heatmap", "sgd", "--x", "lr:0.1:1:4", "--y", "tau:0:3:4"]),
        (lambda: st.t1_audit("sgd", lr_schedule="constant:0.3", taus=[1, 4], anneal_steps=10,
                             steps=30),
         ["t1-audit", "sgd", "--lr-schedule", "constant:0.3", "--taus", "1,4", "--anneal-steps",
          "10", "--steps", "30"]),
        (lambda: st.train("sgd", tau=2, lr=0.05, **fast),
         ["train", "--rule", "sgd", "--tau", "2", "--lr", "0.05", "--steps", "400", "--data",
          str(csv)]),
        (lambda: st.validate(["sgd"], taus=[1], rate_steps=400, rate_doublings=0, **fast),
         ["validate", "--rules", "sgd", "--taus", "1", "--steps", "400", "--rate-steps", "400",
          "--rate-doublings", "0", "--data", str(csv)]),
        (lambda: st.coupled("sgd", stages=2, data=str(csv)),
         ["coupled", "--rule", "sgd", "--stages", "2", "--data", str(csv)]),
        (lambda: st.claims(["nesterov-equals-sc"], quick=True),
         ["claims", "--claim", "nesterov-equals-sc", "--quick"]),
        (lambda: st.repro(list_only=True), ["repro", "--list"]),
        (lambda: st.noise("sgd", tau=1, batch=8, lr=0.05, steps=50, lyapunov_steps=200,
                          lyapunov_runs=4, data=str(csv)),
         ["noise", "sgd", "--tau", "1", "--batch", "8", "--lr", "0.05", "--steps", "50",
          "--lyapunov-steps", "200", "--lyapunov-runs", "4", "--data", str(csv)]),
        (lambda: st.tradeoff(batch=8, tau=1, rules=["sgd"], data=str(csv)),
         ["tradeoff", "--batch", "8", "--tau", "1", "--rules", "sgd", "--data", str(csv)]),
        (lambda: st.net_max_lr(NET, "sgd", stages=2, tau=1, k=3),
         ["net", "max-lr", "--problem", NET, "--rule", "sgd", "--stages", "2", "--tau", "1",
          "--k", "3"]),
        (lambda: st.run_sweep(st.read_spec(SWEEP), tmp / "sweep", workers=1),
         ["sweep", SWEEP, "--out", str(tmp / "sweep"), "--workers", "1"]),
    ]  # fmt: skip


VARYING = {"seconds", "compute_seconds", "points_per_second", "workers", "scheduler",
           "chunks_computed", "chunks_skipped"}  # fmt: skip
"""Keys two runs may differ in: wall times, and what a resumed sweep found already done."""


def _drop_timings(x):
    """The JSON without what two runs may differ in (`VARYING`)."""
    if isinstance(x, dict):
        return {k: _drop_timings(v) for k, v in x.items() if k not in VARYING}
    if isinstance(x, list):
        return [_drop_timings(v) for v in x]
    return x


def test_every_command_has_its_function_with_the_json_keys_as_attributes(
    csv, tmp_path, capsys, monkeypatch
):
    from stability.cli.commands import COMMANDS

    monkeypatch.setenv("STABILITY_CACHE", str(tmp_path / "cache"))  # the fitted network
    cases = _cases(csv, tmp_path)
    commands = {argv[0] for _, argv in cases}
    assert commands == {c.__name__.rsplit(".", 1)[-1].replace("_", "-") for c in COMMANDS}
    for call, argv in cases:
        result = call()
        assert isinstance(result, Result) and dataclasses.is_dataclass(result)
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.rule = "changed"  # frozen (every result has fields; rule or not)
        assert main([*argv, "--json"]) == 0, argv
        out, err = capsys.readouterr()
        assert err == "" and out.count("\n") == 1
        data = json.loads(out)  # strict: json.loads refuses nothing, so check the tokens
        assert "NaN" not in out and "Infinity" not in out
        assert data["schema_version"] == st.Result.schema_version == 1
        fields = [f.name for f in dataclasses.fields(result)]
        assert list(data) == ["schema_version", *fields], argv
        assert [e.name for e in type(result).schema()] == list(data)
        assert _drop_timings(data) == _drop_timings(result.to_json()), argv


def test_the_schema_says_where_null_may_stand():
    """The docs' type column (`json_type`): a null element is told from a null array."""
    from typing import Any

    assert json_type(list[float] | None) == "array of number or null"
    assert json_type(list[float | None]) == "array of (number or null)"
    assert json_type(list[list[float | None]]) == "array of array of (number or null)"
    assert json_type(tuple[int, str]) == "array of (integer or string)"
    assert json_type(tuple[str, ...]) == "array of string"
    assert json_type(dict[str, Any] | None) == "object or null"
    assert json_type(list) == "array of any"


def test_public_names_are_lazy_listed_and_resolve():
    out = subprocess.run(
        [sys.executable, "-c", "import stability, sys; print('numpy' in sys.modules)"],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "False"  # import stability loads no numerics
    assert st.__all__ == sorted(st._HOMES)
    for name in st.__all__:
        assert getattr(st, name) is not None and name in dir(st)
    with pytest.raises(AttributeError):
        st.no_such_name  # noqa: B018


def test_functions_named_like_subpackages_stay_functions():
    import stability.claims.claim  # noqa: F401 - imports the subpackages of the same names
    import stability.coupled.scan  # noqa: F401
    import stability.rules.registry  # noqa: F401

    assert callable(st.rules) and callable(st.claims) and callable(st.coupled)
    assert st.rules("sgd").rules[0].name == "sgd"


def test_version_has_one_source():
    from importlib.metadata import version

    from stability.extras import DISTRIBUTION
    from stability.version import __version__

    assert st.__version__ == __version__ == version(DISTRIBUTION)  # delay-stability


def test_max_lr_is_lemma_1_and_the_rule_is_given_by_name_or_value():
    from stability.rules.delayed_momentum import DelayedMomentum

    for tau in (1, 10, 100):
        lemma1 = 2 * math.sin(math.pi / (4 * tau + 2))  # PipeMare Lemma 1, λ = 1
        assert st.max_lr("sgd", tau=tau).max_lr == pytest.approx(lemma1, rel=1e-13)
    by_value = st.max_lr(DelayedMomentum(tau_fwd=10), lam=2.0)
    assert by_value.max_lr == pytest.approx(math.sin(math.pi / 42), rel=1e-13)
    assert by_value.rule == "DelayedMomentum"


def test_radius_is_the_largest_companion_root_and_certify_decides():
    r = st.radius("t2", lr=0.01, tau_fwd=8, tau_bkwd=2, delta=1, decay=0.1)
    poly = st.poly("t2", lr=0.01, tau_fwd=8, tau_bkwd=2, delta=1, decay=0.1)
    dense = np.max(np.abs(np.roots(poly.coefficients)))  # numpy's companion eigenvalues
    assert r.spectral_radius == pytest.approx(dense, rel=1e-10)
    assert r.half_life == pytest.approx(-math.log(2) / math.log(dense), rel=1e-8)
    assert r.certified is None and r.stable is bool(dense < 1)
    # 2·sin(π/14) = 0.44504186791262880857…: float64 gives ρ = 1 on both sides of it
    below = st.radius("sgd", tau=3, lr="0.4450418679126288000000123", certify=True)
    above = st.radius("sgd", tau=3, lr="0.4450418679126288086", certify=True)
    assert below.spectral_radius == pytest.approx(1, abs=1e-15)
    assert (below.stable, above.stable) == (True, False) and below.certified and above.certified


def test_halflife_is_the_classical_optimum_without_delay():
    kappa = 100.0  # gradient descent on [1, κ]: lr* = 2/(1 + κ), rate (κ − 1)/(κ + 1)
    h = st.halflife("momentum", tau=0, kappa=kappa, momentum=0)
    assert h.lr == pytest.approx(2 / (1 + kappa), rel=1e-6)
    assert h.rate == pytest.approx((kappa - 1) / (kappa + 1), rel=1e-9)
    assert h.half_life == pytest.approx(-math.log(2) / math.log(h.rate), rel=1e-9)
    assert (h.momentum, h.horizon, h.optimized) == (0.0, None, ("lr",))


def test_heatmap_grid_in_the_result_and_the_json():
    hm = st.heatmap("sgd", x="lr:0.1:1:4", y="tau:0:3:4")
    lemma1 = 2 * np.sin(np.pi / (4 * hm.y.values[:, None] + 2))
    assert np.array_equal(hm.radius < 1, hm.x.values[None, :] < lemma1)  # Lemma 1, exact
    grid = hm.to_json()["radius"]
    assert np.allclose(np.array(grid, dtype=float), hm.radius, rtol=0, atol=0)
    assert hm.points == 16 and hm.stable_fraction == 11 / 16


def test_bounds_and_t1_audit_numbers():
    b = st.bounds("sgd", tau=7, lam=2.5)
    assert b.max_lr == pytest.approx(2 / 2.5 * math.sin(math.pi / 30), rel=1e-14)
    assert (b.lemma, b.ratio) == ("1", pytest.approx(1.0, abs=1e-14))
    audit = st.t1_audit("sgd", lr_schedule="constant:0.5", taus=[1, 4], anneal_steps=10, steps=30)
    lemma1 = [2 * math.sin(math.pi / (4 * t + 2)) for t in (1, 4)]
    assert audit.max_lr == pytest.approx(lemma1, rel=1e-12)
    # stage τ = 4 exceeds its bound once 0.5/4^{p_k} ≥ 2 sin(π/18), p_k = 1 − k/10
    first = math.ceil(10 * (1 - math.log(0.5 / lemma1[1]) / math.log(4)))
    assert not audit.safe and (audit.windows[0].stage, audit.windows[0].start) == (1, first)


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: st.max_lr("sgd", momentum=0.5), "rule 'sgd' has no parameter 'momentum'"),
        (lambda: st.max_lr("sgd", tau=-1), "tau must be an integer in [0, 100000], got -1"),
        (lambda: st.radius("sgd", lr=0), "lr must be a finite real number > 0, got 0"),
        (lambda: st.train("sgd", lr=0.1, momentum=0.5), "rule 'sgd' has no parameter"),
        (lambda: st.coupled("sgd", stages=2, momentum=0.5), "rule 'sgd' has no parameter"),
        (lambda: st.validate(["sgd"], momentum=0.5), "no rule of sgd has a parameter 'momentum'"),
        (lambda: st.validate(["sgd"], tau=3), "tau is set by taus"),
        (lambda: st.heatmap("momentum", x="lr:0.1:1:3", y="momentum:0:1.5:25"), "got 1.5"),
    ],
)
def test_bad_keywords_are_one_line_value_errors(call, needle):
    with pytest.raises(ValueError) as info:
        call()
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: st.describe([]), "unknown rule []"),
        (lambda: st.poly("sgd", tau=2, lr=np.array([0.1, 0.2])), "lr must be one real number"),
        (lambda: st.max_lr("sgd", tau=np.array([1, 2])), "tau must be one value here"),
        (lambda: st.max_lr("sgd", tau=3, lam=np.array([1.0, 2.0])), "lam must be one value"),
        (lambda: st.radius("sgd", tau=3, lam=np.array([1.0, 2.0]), lr=0.1), "lam must be one"),
        (lambda: st.bounds("sgd", tau=np.array([3, 4])), "tau must be one value here"),
        (lambda: st.radius("sgd", tau=2, lr=np.array([0.1, 0.2])), "lr must be one real number"),
        (lambda: st.train("sgd", lr=np.array([0.1, 0.2]), steps=5), "lr must be one real number"),
        (lambda: st.noise("sgd", batch=4, lr=0.01, steps=10, seed=3.5), "seed must be an integer"),
        (lambda: st.coupled("sgd", stages=3, schedule="pipemare", hidden=0.5), "hidden must be"),
        (lambda: st.read_spec(3), "path must be a path, got 3"),
        (lambda: st.validate(2), "rule must be a registered rule name here, got 2"),
        (lambda: st.train_runs("sgd", lr=[], steps=5), "lr must give at least one step size"),
        (lambda: st.tradeoff(batch=8, tau=1, rules=0), "rules must be strings, got 0"),
        (lambda: st.tradeoff(batch=8, tau=1, data=1), "data must be a path, got 1"),
        (lambda: st.heatmap("sgd", x=3, y="tau:0:4:3"), "x must be P:lo:hi:n[:log]"),
        (lambda: st.heatmap("sgd", x="lr:0.1:1:3", y="tau:0:4:3", out=""), "an empty string"),
        (lambda: st.heatmap("sgd", x="lr:0.1:1:3", y="tau:0:4:3", out="."), "got the directory"),
        (lambda: st.claims(ids=-1), "ids must be strings, got -1"),
        (lambda: st.poly("sgd", lr=0.1, symbolic="no"), "symbolic must be true or false"),
    ],
)
def test_values_of_another_type_are_one_line_value_errors(call, needle):
    """An API fuzz (odd values for every keyword) found TypeErrors from deep inside: an
    unhashable rule name, arrays where one number is meant, a float seed, a scalar for a
    list of widths or of rules, a number for a path, an empty lr list (KeyError), and a
    heatmap written to "" or a directory (OSError: Device or resource busy)."""
    with pytest.raises(ValueError) as info:
        call()
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_an_output_under_a_file_is_refused_before_anything_is_computed(tmp_path, monkeypatch):
    """``out="afile.txt/x.png"`` raised FileExistsError (NotADirectoryError one level deeper)
    from the figure's writer, after the whole grid: the API now checks where it writes as the
    CLI's flags do."""
    import stability.analysis.radius_grid as radius_grid

    (tmp_path / "afile.txt").write_text("")
    monkeypatch.setattr(radius_grid, "heatmap", lambda *a, **k: pytest.fail("computed"))
    axes = {"x": "lr:0.1:1:3", "y": "tau:0:4:3"}
    for kw in ({"out": tmp_path / "afile.txt" / "x.png"}, {"csv": tmp_path / "afile.txt/a/x"}):
        with pytest.raises(ValueError, match=r"^(out|csv): .*afile.txt is not a directory$"):
            st.heatmap("sgd", **axes, **kw)
    with pytest.raises(ValueError, match=r"^out: .*afile.txt is not a directory$"):
        st.tradeoff(batch=8, tau=1, rules=["sgd"], out=tmp_path / "afile.txt" / "t.png")


def test_numpy_scalars_and_single_values_are_taken_as_their_plain_forms():
    """``lam=np.int64(3)`` ended in "TypeError: cannot create mpf from np.int64(3)", a single
    delay or time for a list (``taus=2``, ``at=50``) in "'int' object is not iterable", and
    ``divergence=None`` in train's rate runs (it skipped the default).  Each now gives the
    answer of the plain form."""
    assert st.bounds("sgd", tau=2, lam=np.int64(3)) == st.bounds("sgd", tau=2, lam=3)
    assert st.bounds("sgd", tau=2, lam=np.float32(0.5)) == st.bounds("sgd", tau=2, lam=0.5)
    audit = dict(lr_schedule="constant:0.01", anneal_steps=10, steps=50)
    assert st.t1_audit("sgd", taus=2, **audit) == st.t1_audit("sgd", taus=[2], **audit)
    assert st.t1_audit("sgd", taus=np.int64(2), **audit) == st.t1_audit("sgd", taus=[2], **audit)
    noise = dict(batch=4, lr=0.01, tau=1, steps=100, lyapunov_steps=100, lyapunov_runs=2)
    assert st.noise("sgd", at=50, **noise) == st.noise("sgd", at=[50], **noise)
    train = dict(lr=0.01, steps=30, tau=1, samples=20)
    assert st.train("sgd", divergence=None, **train) == st.train("sgd", **train)
    assert st.coupled("sgd", stages=2, taus=np.int64(3), samples=20).max_lr == pytest.approx(
        st.coupled("sgd", stages=2, taus=[3], samples=20).max_lr, rel=1e-12
    )


def test_none_for_a_scalar_model_parameter_is_its_default_in_radius_too():
    """``st.radius("sgd", lr=0.1, lam=None)`` ended in "TypeError: float() argument must be …
    not 'NoneType'" (its overflow check read the None); max_lr, bounds and poly take None as
    the default, and so does radius now."""
    for rule, key in (("sgd", "lam"), ("discrepancy", "delta"), ("recompute", "phi")):
        with_none = st.radius(rule, lr=0.1, **{key: None})
        assert with_none == st.radius(rule, lr=0.1)
    assert st.max_lr("sgd", tau=2, lam=None) == st.max_lr("sgd", tau=2)


def test_the_max_lr_is_the_first_boundary_and_the_stable_set_can_return_above_it():
    """DC at τ = 5, quality 0.8, momentum 0.9 (the example of max-lr's help): stable below
    max_lr = 0.23592, unstable just above, stable again on (0.28816, 1.45370) — an independent
    derivation's crossings at 50 digits; the radii here are numpy's roots of the polynomial."""
    params = dict(tau=5, quality=0.8, momentum=0.9)
    first = st.max_lr("dc", **params).max_lr
    assert first == pytest.approx(0.2359204518625, rel=1e-12)

    def rho(lr):
        coefficients = st.poly("dc", lr=lr, **params).coefficients
        return max(abs(np.roots(coefficients)))

    assert rho(0.999 * first) < 1 < rho(1.001 * first) and rho(0.26) > 1
    assert rho(0.29) < 1 and rho(1.0) < 1 and rho(1.45) < 1 < rho(1.46)
    assert st.radius("dc", lr=1.0, **params).stable
