"""The distribution's own name, and install lines that install this project.

The package index has an unrelated project called ``stability``: the distribution is
``delay-stability`` (free on the index), the import name and the console command stay
``stability``, and no tracked file tells anyone to install the index's ``stability``.  Without an
optional extra, the CLI and the Python API say the same line naming the checkout's install
command (`stability.extras`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import stability
from stability.cli.main import main
from stability.extras import EXTRAS, MissingExtra, extra_of, install_line, missing_extra

ROOT = Path(__file__).resolve().parents[1]
FOREIGN = re.compile(r"pip\s+install\s+[\"']?" + "stability" + r"(\[|[\s\"']|$)", re.M)
"""An install line that would fetch the index's ``stability`` (quoted or not, with extras)."""


def test_the_distribution_has_its_own_name_and_the_command_is_stability():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "delay-stability"
    assert project["scripts"] == {"stability": "stability.cli.main:main"}
    assert set(project["optional-dependencies"]) >= set(EXTRAS)


def test_the_pattern_finds_every_foreign_install_line():
    name = "stab" + "ility"  # never spelled out after "pip install" here: this file is tracked
    found = (f"pip install {name}[torch]", f"pip install '{name}[sweep]'", f"pip install {name}",
             f'pip  install "{name}" x', f"python -m pip install {name} --upgrade")  # fmt: skip
    for line in found:
        assert FOREIGN.search(line), line
    for line in ("pip install -e '.[torch]'", "pip install -e .", f"pip install {name}-x"):
        assert not FOREIGN.search(line), line


def test_no_tracked_file_installs_the_index_stability():
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    found = []
    for name in filter(None, files):
        path = ROOT / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary (figures, data)
        found += [f"{name}: {m.group(0)!r}" for m in FOREIGN.finditer(text)]
    assert len(files) > 100 and found == []


def test_extras_name_their_install_line():
    assert install_line("torch") == "pip install -e '.[torch]'"
    assert extra_of("torch.nn") == "torch" and extra_of("dask") == "sweep"
    assert extra_of("numpy") is None and extra_of(None) is None
    err = missing_extra("distributed.client")
    assert isinstance(err, ModuleNotFoundError) and isinstance(err, ValueError)
    assert err.name == "distributed" and "\n" not in str(err)
    with pytest.raises(ValueError, match="extra must be one of torch, sweep"):
        install_line("gpu")


BLOCKED = (
    "import sys, json; sys.modules['torch'] = None; import stability as st\n"
    "try:\n    st.{name}('x.py:problem')\n"
    "except ModuleNotFoundError as err:\n"
    "    print(json.dumps([type(err).__name__, err.name, str(err), 'torch' in str(err)]))\n"
)


@pytest.mark.parametrize("name", [n for n in stability.__all__ if n.startswith("net_")])
def test_the_api_without_torch_raises_the_cli_line(name, monkeypatch, capsys):
    """``sys.modules['torch'] = None`` in a fresh interpreter: importing torch fails as if it
    were not installed."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED.format(name=name)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    kind, module, message, _ = json.loads(done.stdout)
    assert kind == "MissingExtra" and module == "torch"
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    rc = main(["net", "max-lr", "--problem", "x.py:problem", "--rule", "sgd"])
    assert rc == 2 and capsys.readouterr().err == f"stability: error: {message}\n"
    assert message == str(MissingExtra(message)) and "pip install -e '.[torch]'" in message
