"""The suite itself: runnable from any directory and any clone, reproducible in CI.

* no test names a path that exists on one machine only (an absolute path) or depends on the
  working directory (a relative ``../`` path): data comes from the ``cpusmall_csv`` fixture;
* the hypothesis profile follows ``HYPOTHESIS_PROFILE`` (``ci``: derandomized, ``explore``:
  a new random search every run).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
from conftest import PROFILES, REPO
from hypothesis import settings

TESTS = Path(__file__).resolve().parent
PREFIXES = tuple(start + "/" for start in ("", "~", "..", "."))  # no path literal in this file


def machine_paths(source: str) -> list[str]:
    """String literals of ``source`` that are absolute or parent-relative file paths."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip()
            if " " in text or "\n" in text:
                continue  # prose, not a path
            if text.startswith(PREFIXES) and len(text) > 1:
                found.append(text)
    return found


def test_no_test_reads_a_machine_path():
    offenders = {
        path.name: machine_paths(path.read_text(encoding="utf-8"))
        for path in sorted(TESTS.glob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_path_check_sees_planted_paths():
    absolute, relative = "/".join(["", "work", "x.csv"]), "/".join(["..", "shared", "x.csv"])
    planted = f'A = "{absolute}"\nB = "{relative}"\nC = "a b /c"\n'
    assert machine_paths(planted) == [absolute, relative]


def test_cpusmall_fixture_is_found_relative_to_the_repository(cpusmall_csv):
    assert cpusmall_csv.is_file()
    if not os.environ.get("STABILITY_DATA"):
        assert cpusmall_csv == REPO.parent / "shared" / "data" / "cpusmall_scale.csv"
    first = np.loadtxt(cpusmall_csv, delimiter=",", max_rows=1)
    assert first.shape == (13,)  # target + 12 features


def test_the_hypothesis_profile_follows_the_environment():
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    assert name in PROFILES
    assert settings.default.derandomize == (name == "ci")
    assert settings.default.deadline is None
