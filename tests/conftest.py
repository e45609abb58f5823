"""Shared fixtures and hypothesis profiles (docs/contributing.md).

Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE`` (default ``ci``):

* ``ci`` — derandomized: every run draws the same examples, so CI is reproducible and a red
  build is never luck.  No example database.
* ``explore`` — a fresh random seed every run: searches examples CI never tried.  Failures are
  saved in ``<repo>/.hypothesis/examples`` (git-ignored) and replayed first on the next run,
  and hypothesis prints a ``@reproduce_failure`` blob to pin them.

Data: tests never name an absolute path nor depend on the working directory; they take the
``cpusmall_csv`` fixture below.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

REPO = Path(__file__).resolve().parents[1]
"""The repository root (the directory holding pyproject.toml), wherever pytest is run from."""

PROFILES = ("ci", "explore")
_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, database=None, **_COMMON)
settings.register_profile(
    "explore",
    derandomize=False,
    database=DirectoryBasedExampleDatabase(REPO / ".hypothesis" / "examples"),
    print_blob=True,
    **_COMMON,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def shared_data(name: str) -> Path:
    """``$STABILITY_DATA/name`` if that variable is set, else ``<repo>/../shared/data/name``."""
    root = os.environ.get("STABILITY_DATA")
    path = Path(root) / name if root else REPO.parent / "shared" / "data" / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: the tests need ../shared/data beside the repository "
            "(or STABILITY_DATA pointing at a directory holding it)"
        )
    return path


def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` first (a stable sort, the same order in every worker): with
    two xdist workers the long ones then run side by side at the start, instead of one
    worker finishing a minute-long notebook alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def cpusmall_csv() -> Path:
    """LIBSVM's cpusmall_scale as a CSV (the target in column 0).

    When the package ships its own copy, this becomes the package's lookup
    (``return stability.trainer.data.cpusmall_path(download=False)``), one line.
    """
    return shared_data("cpusmall_scale.csv")


def _conforms(value, hint) -> bool:
    """Whether a JSON value has the type a result field's annotation documents (the schema
    table of the docs, `stability.result.json_type`): ``float`` takes integers as JSON does,
    ``bool`` is not an integer, a nested `Result` or an array is an object or a list."""
    import dataclasses
    import types
    import typing

    from stability.result import Result

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin in (list, tuple) or hint in (list, tuple):
        items = [a for a in args if a is not Ellipsis]
        if not isinstance(value, list):
            return False
        if origin is tuple and Ellipsis not in args and items:
            return len(value) == len(items) and all(map(_conforms, value, items))
        return all(_conforms(v, items[0]) for v in value) if items else True
    if origin is dict or hint is dict:
        return isinstance(value, dict) and (
            not args or all(_conforms(v, args[1]) for v in value.values())
        )
    if isinstance(hint, type) and issubclass(hint, Result):
        hints = typing.get_type_hints(hint)
        fields = {f.name for f in dataclasses.fields(hint)}
        return isinstance(value, dict) and all(
            _conforms(v, hints[k]) for k, v in value.items() if k in fields
        )
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is complex:
        return isinstance(value, list) and len(value) == 2
    if getattr(hint, "__name__", "") == "ndarray":
        return isinstance(value, list)
    return isinstance(value, hint)


@pytest.fixture(autouse=True)
def json_as_documented(monkeypatch):
    """Every result the suite turns into JSON (``--json``, `Result.to_json`) holds, in each
    field, the JSON type its schema documents — so the docs' schema tables cannot drift."""
    import dataclasses
    import typing

    from stability.result import Result

    to_json = Result.to_json

    def checked(self):
        data = to_json(self)
        hints = typing.get_type_hints(type(self))
        fields = [f.name for f in dataclasses.fields(self)]
        wrong = {k: data[k] for k in fields if not _conforms(data[k], hints[k])}
        assert not wrong, f"{type(self).__name__}: JSON not as documented: {wrong}"
        return data

    monkeypatch.setattr(Result, "to_json", checked)
