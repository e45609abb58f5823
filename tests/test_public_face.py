"""One public face (`import stability as st`): every public name once in ``dir(st)``, nothing
the package imported to build itself, and the functions named like a subpackage stay functions
whatever is imported afterwards."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import stability as st

PACKAGE = Path(st.__file__).parent


def test_dir_lists_each_public_name_once_and_no_helpers():
    names = dir(st)
    public = [n for n in names if not n.startswith("_")]
    assert sorted(public) == sorted(set(public)) == sorted(st.__all__)
    for leaked in ("Any", "sys", "importlib", "types", "annotations", "lazy", "version"):
        assert leaked not in names


def test_every_function_named_like_a_subpackage_stays_a_function():
    shadowed = sorted(n for n in st.__all__ if (PACKAGE / n / "__init__.py").is_file())
    assert shadowed == ["claims", "coupled", "noise", "rules"]
    for name in shadowed:  # import a module of each subpackage, then look again
        module = next(p.stem for p in (PACKAGE / name).glob("*.py") if p.stem != "__init__")
        importlib.import_module(f"stability.{name}.{module}")
        assert callable(getattr(st, name)), name
    code = (
        "import stability.noise.minibatch, stability.rules.registry, stability as st; "
        "print(callable(st.noise) and callable(st.rules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "True", out.stderr


def test_subpackage_names_still_import_lazily():
    from stability.claims import check_claims
    from stability.rules import RULES, get_spec

    assert "sgd" in RULES and get_spec("sgd").name == "sgd" and callable(check_claims)
    assert "RULES" in dir(importlib.import_module("stability.rules"))
