"""The README and the documentation site: the README stays short, every command it shows runs and
prints what it shows, its Python quick start runs, its links resolve, and the MkDocs site
builds with ``--strict`` (broken links, anchors, snippets and API references fail)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import stability

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

_spec = importlib.util.spec_from_file_location(
    "readme_examples", ROOT / "scripts" / "readme_examples.py"
)
readme_examples = sys.modules["readme_examples"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_examples)
EXAMPLES = readme_examples.examples(README)


def test_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200


def test_readme_shows_ten_commands():
    assert len(EXAMPLES) == 10 and all(e.command.startswith("stability ") for e in EXAMPLES)


@pytest.mark.parametrize(
    "example", EXAMPLES, ids=[e.command.split()[1] + f"@{e.line}" for e in EXAMPLES]
)
def test_readme_command_prints_what_the_readme_shows(example, tmp_path):
    actual = readme_examples.run(example.command, tmp_path)
    assert not readme_examples.differences(example, actual), (
        f"README.md:{example.line} `{example.command}` printed:\n{actual}"
        "(python scripts/readme_examples.py --update rewrites the README's outputs)"
    )


def test_the_comparison_can_fail():
    """A changed digit beyond the tolerance, or a changed word, is a difference."""
    example = readme_examples.Example(1, "stability x", ("max_lr: 0.1494601871728484", "ok ..."))
    assert not readme_examples.differences(example, "max_lr: 0.14946018717285\nok 3.2 s\n")
    assert readme_examples.differences(example, "max_lr: 0.1494611871728484\nok 3.2 s\n")
    assert readme_examples.differences(example, "max_lr: 0.1494601871728484\nko 3.2 s\n")
    assert readme_examples.differences(example, "max_lr: 0.1494601871728484\n")


def test_readme_python_quick_start_runs():
    assert readme_examples.python_failures(README) == []


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local and all((ROOT / link).is_file() for link in local), [
        link for link in local if not (ROOT / link).is_file()
    ]


def test_docs_site_builds_strict(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert all(f'id="{home}.{name}"' in api for name, home in stability._HOMES.items())
