"""Regression data: CSV and LIBSVM/svmlight readers, the cpusmall default, preprocessing, and a
synthetic data set with a prescribed Hessian spectrum.

Formats (detected from the suffix and the first data line, or given as ``fmt``):

* **CSV** (``"csv"``): comma-separated numbers, the target in column 0, one row per sample, the
  same number of columns on every row.  A first line in which *every* cell is non-numeric is
  a header and skipped; any other non-numeric cell is an error.
* **svmlight** (``"svmlight"``, the LIBSVM format): ``target index:value ...`` with 1-based,
  strictly increasing indices, absent entries 0, ``# comments`` ignored.
* **npz** (``"npz"``, a file ending in ``.npz``): float arrays ``target`` (n,) and
  ``features`` (p, n), one row per feature — the format of the shipped copy.

Every problem with the file raises `ValueError` with one line naming the file and the row
(1-based line number): missing file, empty file, non-numeric cell, NaN or infinite value,
wrong column count, bad ``index:value`` token.

Preprocessing (``standardize``):

* ``"none"``: the data as stored (PipeMare Fig. 5(b) trains on cpusmall_scale as is);
* ``"features"``: every feature column centred and scaled to unit standard deviation (z-score),
  the target centred; constant feature columns are dropped (recorded in
  `Dataset.dropped_columns`) since they carry no information and would make the Hessian
  singular;
* ``"all"``: as ``"features"``, and the target scaled to unit standard deviation too.

``bias=True`` appends a column of ones (an intercept) after preprocessing.

The default data set (``path=None``) is LIBSVM's cpusmall_scale, taken from, in order:
``$STABILITY_DATA`` (a data file, or a folder holding ``cpusmall_scale.csv`` or the svmlight
``cpusmall_scale``) → the copy shipped with the package, ``stability/data/cpusmall.npz`` (the
same float64 values as the CSV; provenance and licence in the README beside it).  A ``path``
(``--data`` on the command line) comes before both; ``"cpusmall"`` names the shipped copy.
Nothing is ever downloaded.  When a source is missing the error names every path tried and
``$STABILITY_DATA``.

API::

    data = load_regression()                      # cpusmall, standardize="features"
    data = load_regression("my.csv", standardize="none", bias=True)
    data.X, data.y                                # (n, p) features, (n,) targets
    data = synthetic_regression([1.0, 0.1, 0.01], seed=0)   # XᵀX/n has exactly this spectrum
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stability.checks import check_choice, parse_finite, unreadable_file

STANDARDIZE = ("none", "features", "all")
FORMATS = ("csv", "svmlight", "npz")
CPUSMALL = "cpusmall"
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "cpusmall.npz"
"""The package's own copy of cpusmall_scale (``scripts/pack_cpusmall.py`` made it)."""
ENVIRONMENT = "STABILITY_DATA"
ENV_NAMES = ("cpusmall_scale.csv", "cpusmall_scale")
"""File names looked for in a ``$STABILITY_DATA`` folder, in order."""


@dataclass(frozen=True)
class Dataset:
    """Features ``X`` (n, p) and targets ``y`` (n,), float64, after preprocessing.

    ``source`` is the file read (or a description), ``standardize`` and ``bias`` the
    preprocessing applied, ``dropped_columns`` the 0-based feature columns dropped as constant.
    """

    X: np.ndarray
    y: np.ndarray
    source: str
    standardize: str = "none"
    bias: bool = False
    dropped_columns: tuple[int, ...] = field(default=())

    @property
    def samples(self) -> int:
        return self.X.shape[0]

    @property
    def features(self) -> int:
        return self.X.shape[1]

    def describe(self) -> dict:
        return {
            "source": self.source,
            "samples": self.samples,
            "features": self.features,
            "standardize": self.standardize,
            "bias": self.bias,
            "dropped_columns": list(self.dropped_columns),
        }


# -- reading ---------------------------------------------------------------------------------


def _number(text: str, path: Path, row: int, what: str) -> float:
    return parse_finite(
        text,
        f"{path}: row {row}: non-numeric {what} {text.strip()!r}",
        f"{path}: row {row}: {what} is {text.strip()} (NaN/inf not allowed)",
    )


def _data_lines(path: Path) -> list[tuple[int, str]]:
    """(1-based line number, content) of the non-blank, non-comment lines of a text file."""
    if reason := unreadable_file(path):
        raise ValueError(f"data file {path} {reason}")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file (CSV or svmlight expected)") from None
    lines = [
        (n, line.split("#", 1)[0].strip()) for n, line in enumerate(text.splitlines(), start=1)
    ]
    lines = [(n, s) for n, s in lines if s]
    if not lines:
        raise ValueError(f"{path}: empty file (no data rows)")
    return lines


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` from a CSV file with the target in column 0 (module doc for the rules)."""
    path = Path(path)
    lines = _data_lines(path)
    first = [c.strip() for c in lines[0][1].split(",")]
    if not any(_is_number(c) for c in first):
        lines = lines[1:]  # a header row
        if not lines:
            raise ValueError(f"{path}: empty file (a header but no data rows)")
    width = len(lines[0][1].split(","))
    if width < 2:
        raise ValueError(
            f"{path}: row {lines[0][0]}: 1 column; need a target and at least one feature"
        )
    rows = []
    for n, line in lines:
        cells = line.split(",")
        if len(cells) != width:
            raise ValueError(f"{path}: row {n}: {len(cells)} columns, expected {width}")
        rows.append([_number(c, path, n, f"cell in column {j}") for j, c in enumerate(cells)])
    data = np.array(rows, dtype=float)
    return data[:, 1:], data[:, 0]


def read_svmlight(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` from a LIBSVM/svmlight file: ``target index:value ...`` (1-based indices)."""
    path = Path(path)
    targets, entries = [], []
    width = 0
    for n, line in _data_lines(path):
        tokens = line.split()
        targets.append(_number(tokens[0], path, n, "target"))
        row, last = {}, 0
        for tok in tokens[1:]:
            key, sep, val = tok.partition(":")
            if not sep:
                raise ValueError(f"{path}: row {n}: token {tok!r} is not index:value")
            if key == "qid":
                continue
            if not key.isdigit() or int(key) <= last:
                raise ValueError(
                    f"{path}: row {n}: index {key!r} must be an integer > {last} "
                    "(1-based, increasing)"
                )
            last = int(key)
            row[last - 1] = _number(val, path, n, f"value of feature {key}")
        width = max(width, last)
        entries.append(row)
    if width == 0:
        raise ValueError(f"{path}: no features on any row")
    X = np.zeros((len(entries), width))
    for i, row in enumerate(entries):
        for j, v in row.items():
            X[i, j] = v
    return X, np.array(targets)


def detect_format(path: str | Path) -> str:
    """``"npz"`` for a ``.npz`` file; else ``"svmlight"`` if the first data line has an
    ``index:value`` token, else ``"csv"``."""
    if Path(path).suffix == ".npz":
        return "npz"
    _, first = _data_lines(Path(path))[0]
    return "svmlight" if ":" in first else "csv"


# -- the default data set ---------------------------------------------------------------------


def _environment() -> str:
    value = os.environ.get(ENVIRONMENT)
    return f"${ENVIRONMENT}={value}" if value else f"${ENVIRONMENT} is not set"


def read_npz(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` from an ``.npz`` with float arrays ``target`` (n,) and ``features`` (p, n)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            y, features = archive["target"], archive["features"]
    except (OSError, KeyError, ValueError):
        raise ValueError(f"{path}: not an .npz data archive with 'target' and 'features'") from None
    if features.ndim != 2 or y.ndim != 1 or features.shape[1] != y.size:
        raise ValueError(f"{path}: 'features' must be (p, n) and 'target' (n,)")
    X = np.ascontiguousarray(features.T, dtype=float)
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError(f"{path}: NaN or infinite values")
    return X, np.asarray(y, dtype=float)


def default_data_path() -> Path:
    """The default data set: ``$STABILITY_DATA`` if set, else the shipped cpusmall (module doc).

    Raises `ValueError` naming every path tried and ``$STABILITY_DATA`` when the source
    it selects is missing (an unusable ``$STABILITY_DATA`` is an error, never skipped).
    """
    value = os.environ.get(ENVIRONMENT)
    if value:
        root = Path(value)
        tried = [root] if not root.is_dir() else [root / name for name in ENV_NAMES]
        for path in tried:
            if path.is_file():
                return path
        raise ValueError(
            f"data not found: ${ENVIRONMENT}={value} but none of "
            + ", ".join(str(p) for p in tried)
            + f" exists (unset ${ENVIRONMENT} to use the shipped copy {SHIPPED})"
        )
    return shipped_path()


def shipped_path() -> Path:
    """The shipped cpusmall copy; a one-line `ValueError` if the installation lacks it."""
    if not SHIPPED.is_file():
        raise ValueError(
            f"data not found: the shipped copy {SHIPPED} is missing and {_environment()} "
            "(reinstall the package, or pass a data file)"
        )
    return SHIPPED


def resolve_data_path(path: str | Path | None) -> Path:
    """Where the data of ``path`` are: ``--data`` > ``$STABILITY_DATA`` > the shipped copy."""
    if path is None:
        return default_data_path()
    if str(path) == CPUSMALL:
        return shipped_path()
    path = Path(path)
    if reason := unreadable_file(path):
        state = os.environ.get(ENVIRONMENT) or "not set"
        raise ValueError(
            f"data file {path} {reason} (looked at {path.resolve()}; with no path the data "
            f"come from ${ENVIRONMENT} ({state}) or the shipped copy {SHIPPED})"
        )
    return path


# -- preprocessing ---------------------------------------------------------------------------


def preprocess(
    X: np.ndarray, y: np.ndarray, standardize: str, source: str = "the data"
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Apply ``standardize`` (module doc); returns ``(X, y, dropped_columns)``.

    ``source``: how the refusals name the data (they start with ``data:``, which the CLI
    writes as ``--data``)."""
    check_choice("standardize", standardize, STANDARDIZE)
    if standardize == "none":
        _check_magnitude(X, y, source)
        return X, y, ()
    std = X.std(axis=0)
    scale = np.max(np.abs(X), axis=0)
    constant = std <= 1e-12 * np.maximum(scale, 1e-300)
    keep = ~constant
    if not np.any(keep):
        raise ValueError(
            f"data: every feature column of {source} is constant over its {X.shape[0]} "
            "samples: nothing to learn from (give data whose features vary)"
        )
    Xs = (X[:, keep] - X[:, keep].mean(axis=0)) / std[keep]
    ys = y - y.mean()
    if standardize == "all":
        sy = y.std()
        if sy == 0:
            raise ValueError(
                f"data: the target of {source} is constant: cannot scale it to unit variance "
                "(standardize 'all')"
            )
        ys = ys / sy
    _check_magnitude(Xs, ys, source)
    return Xs, ys, tuple(int(j) for j in np.flatnonzero(constant))


HUGE = 1e150
"""Values past this (after preprocessing) overflow the loss's squares and the Hessian."""


def _check_magnitude(X: np.ndarray, y: np.ndarray, source: str) -> None:
    biggest = max(float(np.max(np.abs(X), initial=0.0)), float(np.max(np.abs(y), initial=0.0)))
    if not biggest <= HUGE:
        raise ValueError(
            f"data: {source} has values of magnitude {biggest:.1e} after preprocessing: the "
            "squared loss overflows; rescale the data"
        )


def load_regression(
    path: str | Path | None = None,
    *,
    standardize: str = "features",
    bias: bool = False,
    fmt: str | None = None,
) -> Dataset:
    """Read a regression data set and preprocess it (module doc).

    ``path``: a CSV, svmlight or ``.npz`` file; ``None``: ``$STABILITY_DATA`` or the shipped
    cpusmall; ``"cpusmall"``: the shipped copy.  ``fmt``: ``"csv"``, ``"svmlight"`` or
    ``"npz"`` (default: detected).
    """
    check_choice("standardize", standardize, STANDARDIZE)
    path = resolve_data_path(path)
    fmt = detect_format(path) if fmt is None else check_choice("fmt", fmt, FORMATS)
    X, y = READERS[fmt](path)
    X, y, dropped = preprocess(X, y, standardize, str(path))
    if bias:
        X = np.hstack([X, np.ones((X.shape[0], 1))])
    return Dataset(
        np.ascontiguousarray(X), np.ascontiguousarray(y), str(path), standardize, bias, dropped
    )


READERS = {"csv": read_csv, "svmlight": read_svmlight, "npz": read_npz}


# -- synthetic -------------------------------------------------------------------------------


def synthetic_regression(
    eigenvalues, *, samples: int | None = None, seed: int = 0, residual: float = 0.0
) -> Dataset:
    """A least-squares data set whose Hessian XᵀX/n has exactly the given eigenvalues.

    X = √n·U·diag(√λ)·Qᵀ with U (n × p) orthonormal columns and Q (p × p) orthogonal, both
    random from ``seed``; y = X·w_true + r with w_true ~ N(0, I) and r ⟂ range(X) of norm
    ``residual``·√n, so the minimizer is exactly w_true and the minimum loss residual²/2.
    ``samples`` n defaults to max(4p, 64).
    """
    lam = np.asarray(eigenvalues, dtype=float)
    if lam.ndim != 1 or lam.size == 0 or not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise ValueError("eigenvalues must be a non-empty list of finite numbers > 0")
    p = lam.size
    n = max(4 * p, 64) if samples is None else int(samples)
    if n <= p:
        raise ValueError(f"samples must be > the number of eigenvalues {p}, got {n}")
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n, p + 1)))
    Q, _ = np.linalg.qr(rng.standard_normal((p, p)))
    X = math.sqrt(n) * (U[:, :p] * np.sqrt(lam)) @ Q.T
    w_true = rng.standard_normal(p)
    y = X @ w_true + residual * math.sqrt(n) * U[:, p]
    return Dataset(X, y, f"synthetic(eigenvalues={lam.tolist()}, seed={seed})")


__all__ = [
    "ENVIRONMENT",
    "SHIPPED",
    "STANDARDIZE",
    "Dataset",
    "default_data_path",
    "detect_format",
    "load_regression",
    "preprocess",
    "read_csv",
    "read_npz",
    "read_svmlight",
    "resolve_data_path",
    "shipped_path",
    "synthetic_regression",
]
