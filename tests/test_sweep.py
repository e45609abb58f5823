"""Sweeps (stability.sweep): the spec, the dataset against the direct command, resume after a
killed sweep process, a killed worker, one-line refusals.

One LocalCluster of 2 worker processes serves the module (``--scheduler`` / ``scheduler=``),
kept in one pytest-xdist worker by its group (``make test`` runs ``--dist loadgroup``);
timeouts are hang guards only.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from oracles import dense_max_lr

import stability as st
import stability.sweep as sweep
from stability.cli.main import main
from stability.rules.registry import build_rule
from stability.sweep.store import NOT_COMPUTED

pytestmark = pytest.mark.xdist_group("sweep-cluster")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "sweeps"

MAX_LR_SPEC = """
command = "max-lr"
rule = "lwp"
[fixed]
lam = 1.0
[grid]
tau = [0, 1, 3]
momentum = { start = 0.0, stop = 0.99, num = 8 }
horizon = { start = 0.0, stop = 4.0, num = 3 }
[sweep]
chunk = 10
"""

TRAIN_SPEC = """
command = "train"
rule = "sgd"
[fixed]
problem = "linreg"
steps = 2000
[grid]
tau = [1, 2, 4, 8, 16, 32]
lr = { start = 0.01, stop = 1.0, num = 12, log = true }
[sweep]
chunk = 3
"""


@pytest.fixture(scope="module")
def scheduler():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # a free port: 8787 may be taken
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(2, timeout=120)
        yield cluster.scheduler_address, client


def worker_pids(client) -> set[int]:
    """The pids of the 2 workers, once both are up (a killed one is being restarted)."""
    deadline = time.monotonic() + 180
    while True:
        try:
            client.wait_for_workers(2, timeout=10)
            pids = set(client.run(os.getpid).values())
            if len(pids) == 2:
                return pids
        except Exception:  # noqa: BLE001 - a worker still starting or just gone: ask again
            pass
        assert time.monotonic() < deadline, "hang guard"
        time.sleep(0.2)


def write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def same(a, b) -> bool:
    """Two datasets hold the same numbers (bit for bit, NaN where NaN) and strings."""
    return all(
        np.array_equal(a[v].values, b[v].values, equal_nan=a[v].dtype.kind == "f")
        for v in a.data_vars
    ) and list(a.data_vars) == list(b.data_vars)


# -- the spec ----------------------------------------------------------------------------------


def test_spec_axes_ranges_and_chunks(tmp_path):
    spec = sweep.read_spec(write(tmp_path, MAX_LR_SPEC))
    assert spec.names == ("tau", "momentum", "horizon")
    assert spec.shape == (3, 8, 3) and spec.size == 72
    assert spec.axes[1].values == tuple(np.linspace(0.0, 0.99, 8).tolist())
    assert spec.fixed == {"lam": 1.0}
    # chunks: the last axis whole (3 points), then 3 momenta (9 ≤ 10 points)
    assert spec.block == (1, 3, 3) and spec.chunks == 3 * 3
    covered = np.zeros(spec.shape, int)
    for k in range(spec.chunks):
        covered[spec.chunk_slices(k)] += 1
    assert np.all(covered == 1)
    rule, params = spec.points(4)[0]  # chunk 4: tau index 1, momenta 3..5
    m3 = spec.axes[1].values[3]
    assert rule == "lwp" and params == {"lam": 1.0, "tau": 1, "momentum": m3, "horizon": 0.0}
    log = sweep.parse_spec(TRAIN_SPEC).axes[1].values
    assert log == tuple(np.geomspace(0.01, 1.0, 12).tolist())
    stepped = MAX_LR_SPEC.replace("[0, 1, 3]", "{ start = 0, stop = 6, step = 3 }")
    assert sweep.parse_spec(stepped).axes[0].values == (0, 3, 6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('command = "max-lr"', 'command = "frobnicate"'), "unknown command 'frobnicate'"),
        (("[grid]", "[grid]\nwobble = [1, 2]"), "unknown axis 'wobble'"),
        (("lam = 1.0", "lam = 1979-05-27"), "fixed parameter 'lam' must be a number, got a date"),
        (("[0, 1, 3]", '[0, "one"]'), "axis 'tau' must be a number, got a string 'one'"),
        (("[0, 1, 3]", "[0, 1.5]"), "axis 'tau' must be an integer, got 1.5"),
        (("[0, 1, 3]", "{ start = 0, stop = 3 }"), "axis 'tau': a range has the keys"),
        (("[0, 1, 3]", "[[0], [1]]"), "axis 'tau' must be a number, got a list"),
        (('rule = "lwp"', 'rule = "lwpp"'), "unknown rule 'lwpp'"),
        (("chunk = 10", "chunk = 0"), "[sweep] chunk must be an integer in [1, 100000]"),
        (("[sweep]", "[swept]"), "unknown key 'swept'"),
        (("num = 8", "num = 8000000"), "the grid has 72,000,000 points; at most 10,000,000"),
    ],
)
def test_a_bad_spec_is_one_line_naming_it_and_exit_2(tmp_path, capsys, change, message):
    spec = write(tmp_path, MAX_LR_SPEC.replace(*change))
    code, out, err = run_cli(capsys, "sweep", str(spec), "--out", str(tmp_path / "o"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o").exists()


def test_one_sweep_per_directory_and_never_into_foreign_files(tmp_path, capsys):
    spec = write(tmp_path, MAX_LR_SPEC)
    out = tmp_path / "o"
    with sweep.store.SweepStore(out).lock():
        code, _, err = run_cli(capsys, "sweep", str(spec), "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and "in use by another running sweep" in err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "sweep", str(spec), "--out", str(other))
    assert code == 2 and "is not empty and holds no sweep" in err
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


# -- max-lr: every point is the direct command, bit for bit ----------------------------------


def test_max_lr_sweep_equals_the_command_bit_for_bit(tmp_path, capsys, scheduler):
    address, _ = scheduler
    spec = write(tmp_path, MAX_LR_SPEC)
    code, out, err = run_cli(
        capsys, "sweep", str(spec), "--out", str(tmp_path / "o"), "--scheduler", address, "--json"
    )
    assert code == 0 and err == "", err
    summary = json.loads(out)
    assert summary["points"] == 72 and summary["chunks_computed"] == 9
    assert summary["complete"] and summary["points_failed"] == 0
    assert summary["variables"] == ["max_lr", "crossing_angle", "method", "error"]

    ds = sweep.load(tmp_path / "o")
    assert dict(ds.sizes) == {"tau": 3, "momentum": 8, "horizon": 3}
    assert json.loads(ds.attrs["sweep_spec"])["rule"] == "lwp"
    assert ds.attrs["stability_version"] == st.__version__
    assert len(json.loads(ds.attrs["runs"])) == 1
    for tau in ds.tau.values:  # every point against the public function
        for m in ds.momentum.values:
            for h in ds.horizon.values:
                r = st.max_lr("lwp", lam=1.0, tau=int(tau), momentum=float(m), horizon=float(h))
                p = ds.sel(tau=tau, momentum=m, horizon=h)
                assert float(p.max_lr) == r.max_lr and float(p.crossing_angle) == r.crossing_angle
                assert str(p.method.values) == r.method and str(p.error.values) == ""
    for i, j, k in [(0, 0, 0), (1, 5, 2), (2, 7, 1)]:  # sampled points against the CLI
        p = ds.isel(tau=i, momentum=j, horizon=k)
        flags = ["--tau", str(int(p.tau)), "--momentum", repr(float(p.momentum))]
        flags += ["--horizon", repr(float(p.horizon)), "--lam", "1.0"]
        code, out, _ = run_cli(capsys, "max-lr", "lwp", *flags, "--json")
        direct = json.loads(out)
        assert direct["max_lr"] == float(p.max_lr)
        assert direct["crossing_angle"] == float(p.crossing_angle)

    code, out, err = run_cli(capsys, "sweep", "--status", str(tmp_path / "o"), "--json")
    status = json.loads(out)
    assert status["complete"] and status["chunks_done"] == 9 and status["points_done"] == 72

    # the same command again computes nothing and says so; a changed spec is refused
    code, out, err = run_cli(capsys, "sweep", str(spec), "--out", str(tmp_path / "o"), "--json")
    again = json.loads(out)
    assert code == 0 and again["chunks_skipped"] == 9 and again["chunks_computed"] == 0
    write(tmp_path, MAX_LR_SPEC.replace("[0, 1, 3]", "[0, 1, 2]"))
    code, out, err = run_cli(capsys, "sweep", str(spec), "--out", str(tmp_path / "o"))
    assert code == 2 and err.count("\n") == 1
    assert "holds a different sweep (changed: values of grid axis 'tau')" in err


def test_a_rule_axis_records_nan_with_the_reason_where_a_rule_lacks_a_parameter(
    tmp_path, scheduler
):
    spec = sweep.parse_spec(
        'command = "max-lr"\n[grid]\nrule = ["sgd", "momentum"]\ntau = [2, 5]\n'
        "momentum = [0.0, 0.5, 0.9]\n"
    )
    summary = sweep.run_sweep(spec, tmp_path / "o", scheduler=scheduler[0])
    assert summary.points_failed == 6
    ds = sweep.load(tmp_path / "o")
    sgd, heavy = ds.sel(rule="sgd"), ds.sel(rule="momentum")
    assert np.all(np.isnan(sgd.max_lr.values)) and np.all(np.isnan(sgd.crossing_angle.values))
    assert set(sgd.error.values.ravel()) == {
        "rule 'sgd' has no parameter 'momentum' (its parameters: tau, lam)"
    }
    assert set(heavy.error.values.ravel()) == {""}
    momenta = (0.0, 0.5, 0.9)
    expected = [[st.max_lr("momentum", tau=t, momentum=m).max_lr for m in momenta] for t in (2, 5)]
    assert np.array_equal(heavy.max_lr.values, expected)


# -- resume and failures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def train_reference(tmp_path_factory, scheduler):
    """`TRAIN_SPEC` swept without interruption: the dataset both kill tests must end with (one
    sweep for the module; each test still runs its own interrupted sweep from scratch)."""
    out = tmp_path_factory.mktemp("sweep") / "reference"
    sweep.run_sweep(sweep.parse_spec(TRAIN_SPEC), out, scheduler=scheduler[0])
    return sweep.load(out)


def test_a_killed_sweep_process_resumes_without_recomputing_a_finished_chunk(
    tmp_path, scheduler, train_reference
):
    """SIGKILL the sweep (its own LocalCluster, the default) after some chunks; the rerun
    skips exactly the finished chunks and ends with the dataset of an uninterrupted sweep."""
    address, _ = scheduler
    spec_path = write(tmp_path, TRAIN_SPEC)
    spec = sweep.read_spec(spec_path)

    out = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "stability.cli.main", "sweep", str(spec_path), "--out", str(out)]
    proc = subprocess.Popen([*cmd, "--workers", "2"], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    try:
        while len(list((out / "chunks").glob("*.json"))) < 4:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "hang guard"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    before = {k: m for k, m in sweep.store.SweepStore(out).finished().items()}
    assert 4 <= len(before) < spec.chunks
    assert sweep.status(out).chunks_done == len(before) and not sweep.status(out).complete
    partial = sweep.load(out)
    assert np.sum(partial.error.values == NOT_COMPUTED) == spec.size - 3 * len(before)

    assert sweep.status(out).runs == 1  # the killed run counts (recorded when it started)
    summary = sweep.run_sweep(spec, out, scheduler=address)
    assert summary.complete and summary.chunks_skipped == len(before)
    assert sweep.status(out).runs == 2
    assert summary.chunks_computed == spec.chunks - len(before)
    after = sweep.store.SweepStore(out).finished()
    assert all(after[k] == m for k, m in before.items())  # the same run's markers: not redone
    assert same(sweep.load(out), train_reference)


def test_a_killed_worker_loses_nothing(tmp_path, scheduler, train_reference):
    address, client = scheduler
    spec = sweep.parse_spec(TRAIN_SPEC)
    killed = []

    def kill_one_worker(done, total):
        if done >= 1 and not killed:
            pid = next(iter(client.run(os.getpid).values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    out = tmp_path / "o"
    summary = sweep.run_sweep(spec, out, scheduler=address, progress=kill_one_worker)
    assert killed and killed[0] not in worker_pids(client)  # the nanny started a new one
    assert summary.complete and summary.chunks_failed == 0
    assert summary.chunks_computed == spec.chunks
    assert same(sweep.load(out), train_reference)


# -- train: the trainer's numbers, and the reproduction specs ----------------------------------


def test_train_sweep_is_the_trainer_and_the_command(tmp_path, capsys, scheduler):
    """The Fig. 5(b) spec on a small grid: the lockstep trainer of paper_repro, and one point
    against ``stability train``."""
    sys.path.insert(0, str(ROOT / "paper_repro"))
    try:
        import pipemare_fig5b as fig5b
    finally:
        sys.path.remove(str(ROOT / "paper_repro"))
    text = (EXAMPLES / "pipemare_fig5b.toml").read_text(encoding="utf-8")
    full = sweep.parse_spec(text)
    assert full.shape == (28, 96) and full.fixed["steps"] == 200_000
    assert full.axes[0].values == fig5b.FULL.taus
    assert full.axes[1].values == tuple(fig5b.FULL.alphas.tolist())
    head = text.split("tau = [")[0].replace("steps = 200000", "steps = 2000")
    grid = "tau = [1, 3, 9, 28, 64, 128]\nlr = { start = 1e-3, stop = 1.0, num = 8, log = true }"
    spec = sweep.parse_spec(head + grid + "\n[sweep]\nchunk = 32\n")
    sweep.run_sweep(spec, tmp_path / "o", scheduler=scheduler[0])
    ds = sweep.load(tmp_path / "o")
    taus, alphas = np.array(spec.axes[0].values), np.array(spec.axes[1].values)
    problem, _ = fig5b.load_problem()
    runs = fig5b.train_pairs(
        problem, np.repeat(taus, alphas.size), np.tile(alphas, taus.size), steps=2000, batch=64
    )
    shape = (taus.size, alphas.size)
    assert np.array_equal(ds.diverged.values, runs.diverged.reshape(shape))
    assert 0 < runs.diverged.sum() < runs.diverged.size
    steps = np.where(runs.diverged, runs.diverged_step, np.nan).reshape(shape)
    assert np.array_equal(ds.diverged_step.values, steps, equal_nan=True)
    np.testing.assert_allclose(ds.final_loss.values, runs.final_loss.reshape(shape), rtol=1e-14)
    p = ds.isel(tau=1, lr=int(np.flatnonzero(ds.diverged.values[1] == 0)[-1]))  # near the edge
    flags = ["--tau", "3", "--lr", repr(float(p.lr)), "--steps", "2000", "--batch", "64"]
    code, out, _ = run_cli(capsys, "train", "--rule", "sgd", *flags, "--json")
    direct = json.loads(out)
    assert direct["diverged"] == bool(p.diverged)
    assert direct["initial_loss"] == float(p.initial_loss)
    assert direct["final_loss"] == pytest.approx(float(p.final_loss), rel=1e-14)


def test_kosson_fig6_spec_gives_the_committed_curves(tmp_path, scheduler):
    """The Kosson Fig. 6 spec on every 50th momentum.  Plumbing against figures/kosson_fig6.json
    (written by the same max_lr_grid, which agrees with the per-point command to ~1e-12); the
    independent oracles are the heavy-ball closed form at D = 0 (max ηλ = 2(1 + m), Polyak) and
    a bisection of the dense state matrix at D = 4."""
    text = (EXAMPLES / "kosson_fig6.toml").read_text(encoding="utf-8")
    full = sweep.parse_spec(text)
    assert full.shape == (5, 3, 1000)
    m = full.axes[2].values[::50]
    spec = sweep.parse_spec(
        text.replace("{ start = 0.0, stop = 0.999, num = 1000 }", repr(list(m)))
    )
    sweep.run_sweep(spec, tmp_path / "o", scheduler=scheduler[0])
    ds = sweep.load(tmp_path / "o")
    data = json.loads((ROOT / "figures" / "kosson_fig6.json").read_text())["data"]
    every5 = np.array(data["max_stable_eta_lambda"]["momentum"])
    assert np.array_equal(every5[::10], m)
    panels = {"GDM, D = 0": ("momentum", 0), "Nesterov, D = 0": ("nesterov", 0),
              "GDM, D = 1": ("momentum", 1), "Nesterov, D = 1": ("nesterov", 1),
              "SC_D, D = 1": ("sc", 1), "LWP_D, D = 1": ("lwp", 1),
              "LWP_D + SC_D, D = 1": ("lwp+sc", 1)}  # fmt: skip
    curves = [(data["max_stable_eta_lambda"][t], rule, tau) for t, (rule, tau) in panels.items()]
    for committed, rule, tau in curves:
        today = np.array([np.nan if v is None else v for v in committed[::10]], dtype=float)
        swept = ds.max_lr.sel(rule=rule, tau=tau).values
        np.testing.assert_allclose(swept, today, rtol=1e-11)
    heavy_ball = ds.max_lr.sel(rule="momentum", tau=0).values  # |roots| < 1 iff ηλ < 2(1 + m)
    np.testing.assert_allclose(heavy_ball, 2 * (1 + np.array(m)), rtol=1e-9)
    # D = 4 is not in the figure: each point against a bisection of the dense state matrix
    for rule in ("momentum", "nesterov", "sc"):
        swept = ds.max_lr.sel(rule=rule, tau=4).values
        dense = [dense_max_lr(*build_rule(rule, tau=4, momentum=b), lo=1e-9, hi=4.5) for b in m]
        np.testing.assert_allclose(swept, dense, rtol=1e-9)
    assert set(ds.error.values.ravel()) == {""}


def test_status_counts_an_interrupted_run_and_its_resume(tmp_path, capsys, scheduler):
    """A run stopped after its first chunk (Ctrl-C) counts: --status says 2 runs after the
    resume (it said "1 runs": a run was recorded only when it finished)."""
    address, _ = scheduler
    spec = sweep.parse_spec(MAX_LR_SPEC)
    out = tmp_path / "o"

    def stop_after_one_chunk(done, total):
        if done >= 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt, match=f"of {spec.chunks} chunks are stored"):
        sweep.run_sweep(spec, out, scheduler=address, progress=stop_after_one_chunk)
    assert sweep.status(out).runs == 1 and not sweep.status(out).complete
    summary = sweep.run_sweep(spec, out, scheduler=address)
    assert summary.complete and summary.chunks_skipped >= 1
    runs = json.loads(sweep.load(out).attrs["runs"])
    assert [r["finished"] for r in runs] == [False, True] and runs[1]["chunks_computed"] > 0
    code, text, err = run_cli(capsys, "sweep", "--status", str(out))
    assert code == 0 and ", 2 runs (killed ones included)" in text and "complete" in text
