"""A non-editable install (``pip install .`` into a fresh virtual environment), run from
another directory: the data ship inside the package, the CLI works, and the main job's
package-side steps run while the checkout's reproductions are skipped with a one-line note.

The fresh venv sees the dependencies (numpy, scipy, ...) through a ``.pth`` line naming the
dev venv's site-packages — a plain path line, so the dev venv's editable-install hook (itself
a ``.pth`` there) is not run and ``import stability`` can only find the new install.  pip
installs with ``--no-deps --no-build-isolation --no-index``: nothing is downloaded.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, cwd, **kw):
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    env.pop("STABILITY_DATA", None)
    env.pop("PYTHONPATH", None)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, bin dir, a working directory outside the checkout) of a fresh install."""
    base = tmp_path_factory.mktemp("install")
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "stability", source / "stability", ignore=shutil.ignore_patterns("__pycache__")
    )
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=False)
    bindir = env_dir / "bin"
    python = bindir / "python"
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], base)
    site = Path(purelib.stdout.strip())
    (site / "dev_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    done = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-build-isolation", "--no-index", str(source)],
        base,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return python, bindir, elsewhere


def test_the_install_is_not_the_checkout_and_ships_the_data(installed):
    python, _, cwd = installed
    code = (
        "import json, stability; from stability.trainer import data as D; "
        "d = D.load_regression(standardize='none'); "
        "print(json.dumps([stability.__file__, d.source, d.X.shape, float(d.y.sum())]))"
    )
    done = _run([python, "-c", code], cwd)
    assert done.returncode == 0, done.stderr
    package, source, shape, total = json.loads(done.stdout)
    site = str(python.parents[1])
    assert package.startswith(site) and str(ROOT) not in package
    assert source.startswith(site) and source.endswith("stability/data/cpusmall.npz")
    assert shape == [8192, 12] and total == 687_873.0  # Σ targets of the CSV (integers: exact)
    readme = Path(source).with_name("README.md")  # provenance and licence ship beside it
    assert "licence" in readme.read_text() and "Delve" in readme.read_text()


def test_the_cli_runs_on_the_shipped_data(installed):
    _, bindir, cwd = installed
    done = _run([bindir / "stability", "max-lr", "sgd", "--tau", "10", "--json"], cwd)
    assert done.returncode == 0, done.stderr
    lemma1 = 2 * math.sin(math.pi / 42)  # PipeMare Lemma 1 at τ = 10, λ = 1
    assert json.loads(done.stdout)["max_lr"] == pytest.approx(lemma1, rel=1e-12)
    argv = ["train", "--rule", "sgd", "--tau", "4", "--lr", "0.05", "--steps", "200", "--json"]
    done = _run([bindir / "stability", *argv], cwd)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"]["source"].endswith("stability/data/cpusmall.npz")
    done = _run([bindir / "stability", "repro", "--list"], cwd)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "no paper_repro/ in" in done.stderr and "--repro-dir" in done.stderr
    done = _run([bindir / "stability", "repro", "--list", "--repro-dir", ROOT / "paper_repro"], cwd)
    assert done.returncode == 0 and "pipemare_fig5b" in done.stdout.split()


def test_main_job_package_steps_run_outside_the_checkout(installed):
    python, _, cwd = installed
    done = _run([python, "-m", "stability.cli.main_job"], cwd, timeout=300)
    assert done.returncode == 0, done.stderr
    out = cwd / "out" / "run"
    table = json.loads((out / "max_lr_table.json").read_text())
    (sgd16,) = [r for r in table["rows"] if r["rule"] == "sgd" and r["tau"] == 16]
    assert sgd16["max_lr"] == pytest.approx(2 * math.sin(math.pi / 66), rel=1e-12)  # Lemma 1
    assert (out / "heatmap_momentum_tau1.png").read_bytes()[:4] == b"\x89PNG"
    assert "reproductions skipped: no paper_repro/ in" in done.stdout
    assert re.search(r"^sgd +4 +0\.0895", done.stdout, re.M)  # validate's row, shipped cpusmall
    assert sorted(p.name for p in out.iterdir()) == [
        "heatmap_momentum_tau1.png",
        "max_lr_table.json",
    ]
