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


@pytest.fixture(scope="session")
def cpusmall_csv() -> Path:
    """LIBSVM's cpusmall_scale as a CSV (the target in column 0).

    When the package ships its own copy, this becomes the package's lookup
    (``return stability.trainer.data.cpusmall_path(download=False)``), one line.
    """
    return shared_data("cpusmall_scale.csv")
