"""Sweeps as a new user meets them: every spec the docs show is accepted and runs, a top-level
list of rules is refused naming ``[grid]``, and without the ``[sweep]`` extra the command says
what to install on one line and leaves no directory behind (no cluster here: the chunks are
computed in this process by `compute_chunk`, the function a worker runs)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import stability as st
from stability.cli.main import main
from stability.extras import MissingExtra
from stability.sweep import SpecError, parse_spec
from stability.sweep.runner import compute_chunk

ROOT = Path(__file__).resolve().parents[1]
DOC_SPECS = [
    (path.name, block)
    for path in sorted((ROOT / "docs").glob("*.md"))
    for block in re.findall(r"```toml\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
]
SPEC = 'command = "max-lr"\nrule = "sgd"\n[grid]\ntau = [1, 2]\n'


def test_the_docs_show_specs():
    assert len(DOC_SPECS) >= 2 and any("rule = [" in block for _, block in DOC_SPECS)


@pytest.mark.parametrize("block", [b for _, b in DOC_SPECS], ids=[n for n, _ in DOC_SPECS])
def test_every_spec_in_the_docs_runs(block):
    spec = parse_spec(block)
    for k in sorted({0, spec.chunks - 1}):
        chunk = compute_chunk(spec, k)
        errors = set(chunk.values["error"].ravel().tolist()) - {""}
        # only the documented failure: a parameter that the rule of a point lacks
        assert all("has no parameter" in e for e in errors), errors
        assert chunk.failed < chunk.values["error"].size  # most points computed


def test_a_spec_file_that_cannot_be_read_is_named_as_the_spec_file(tmp_path, capsys):
    code = main(["sweep", str(tmp_path / "none.toml"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("stability: error: spec file "), err
    assert err.count("\n") == 1 and "cannot read (No such file" in err


def test_a_top_level_list_of_rules_is_refused_naming_the_grid():
    with pytest.raises(SpecError, match=r"put rule = \[\.\.\.\] under \[grid\]"):
        parse_spec('command = "max-lr"\nrule = ["sgd", "lwp"]\n[grid]\ntau = [1, 2]\n')
    assert parse_spec('command = "max-lr"\n[grid]\nrule = ["sgd", "lwp"]\ntau = [1]\n').size == 2


@pytest.fixture
def without(monkeypatch):
    """``without("dask")``: importlib finds no module of that name (as if not installed)."""
    real = importlib.util.find_spec

    def hide(*names):
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a: None if name.split(".")[0] in names else real(name, *a),
        )

    return hide


def test_without_dask_the_sweep_says_what_to_install_and_creates_nothing(tmp_path, capsys, without):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "new" / "o"
    without("dask")
    rc = main(["sweep", str(spec), "--out", str(out), "--workers", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err == (
        "stability: error: stability sweep and st.run_sweep need the [sweep] extra (dask is not "
        "installed): pip install -e '.[sweep]' in the stability checkout\n"
    )
    assert not (tmp_path / "new").exists()
    with pytest.raises(ModuleNotFoundError) as raised:  # the API: the same words
        st.run_sweep(parse_spec(SPEC), out)
    assert isinstance(raised.value, MissingExtra) and f"stability: error: {raised.value}\n" == err
    assert raised.value.name == "dask" and not (tmp_path / "new").exists()
