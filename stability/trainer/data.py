"""Regression data: CSV and LIBSVM/svmlight readers, the cpusmall default, preprocessing, and a
synthetic data set with a prescribed Hessian spectrum.

Formats (detected from the first data line, or given as ``fmt``):

* **CSV** (``"csv"``): comma-separated numbers, the target in column 0, one row per sample, the
  same number of columns on every row.  A first line in which *every* cell is non-numeric is
  a header and skipped; any other non-numeric cell is an error.
* **svmlight** (``"svmlight"``, the LIBSVM format): ``target index:value ...`` with 1-based,
  strictly increasing indices, absent entries 0, ``# comments`` ignored.

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

The default data set (``path=None`` or ``"cpusmall"``) is LIBSVM's cpusmall_scale, looked up in
order: ``$STABILITY_DATA`` → ``../shared/data/cpusmall_scale.csv`` relative to the repository
and to the working directory → the user cache (``$XDG_CACHE_HOME/stability`` or
``~/.cache/stability``) → downloaded from the LIBSVM page into that cache.

API::

    data = load_regression()                      # cpusmall, standardize="features"
    data = load_regression("my.csv", standardize="none", bias=True)
    data.X, data.y                                # (n, p) features, (n,) targets
    data = synthetic_regression([1.0, 0.1, 0.01], seed=0)   # XᵀX/n has exactly this spectrum
"""

from __future__ import annotations

import math
import os
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stability.checks import check_choice
from stability.files import atomic_write

STANDARDIZE = ("none", "features", "all")
FORMATS = ("csv", "svmlight")
CPUSMALL = "cpusmall"
CPUSMALL_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/regression/cpusmall_scale"
CPUSMALL_CSV = Path("..") / "shared" / "data" / "cpusmall_scale.csv"


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
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path}: row {row}: non-numeric {what} {text.strip()!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{path}: row {row}: {what} is {text.strip()} (NaN/inf not allowed)")
    return value


def _data_lines(path: Path) -> list[tuple[int, str]]:
    """(1-based line number, content) of the non-blank, non-comment lines of a text file."""
    if not path.is_file():
        raise ValueError(f"data file {path} not found")
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
    """``"svmlight"`` if the first data line has an ``index:value`` token, else ``"csv"``."""
    _, first = _data_lines(Path(path))[0]
    return "svmlight" if ":" in first else "csv"


# -- the default data set ---------------------------------------------------------------------


def cache_dir() -> Path:
    """The user cache for downloaded data: ``$XDG_CACHE_HOME/stability`` or ~/.cache/stability."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stability"


def cpusmall_candidates() -> list[Path]:
    """Where cpusmall is looked for, in order (module doc); the cache file comes last."""
    out = []
    if os.environ.get("STABILITY_DATA"):
        out.append(Path(os.environ["STABILITY_DATA"]) / "cpusmall_scale.csv")
    repo = Path(__file__).resolve().parents[2]
    out += [repo / CPUSMALL_CSV, Path.cwd() / CPUSMALL_CSV]
    out.append(cache_dir() / "cpusmall_scale")
    return out


def fetch_cpusmall(target: Path, url: str = CPUSMALL_URL) -> Path:
    """Download LIBSVM's cpusmall_scale (svmlight format) to ``target`` atomically."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            payload = response.read()
    except OSError as err:
        raise ValueError(f"could not download cpusmall from {url}: {err}") from None
    atomic_write(target, lambda fh: fh.write(payload), binary=True)
    return target


def cpusmall_path(*, download: bool = True) -> Path:
    """The first existing cpusmall file of `cpusmall_candidates`, downloading if none exists."""
    candidates = cpusmall_candidates()
    for path in candidates:
        if path.is_file():
            return path
    if not download:
        raise ValueError(
            "cpusmall not found (looked in "
            + ", ".join(str(p) for p in candidates)
            + "); pass a path or allow the download"
        )
    return fetch_cpusmall(candidates[-1])


# -- preprocessing ---------------------------------------------------------------------------


def preprocess(
    X: np.ndarray, y: np.ndarray, standardize: str
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Apply ``standardize`` (module doc); returns ``(X, y, dropped_columns)``."""
    check_choice("standardize", standardize, STANDARDIZE)
    if standardize == "none":
        return X, y, ()
    std = X.std(axis=0)
    scale = np.max(np.abs(X), axis=0)
    constant = std <= 1e-12 * np.maximum(scale, 1e-300)
    keep = ~constant
    if not np.any(keep):
        raise ValueError("every feature column is constant: nothing to standardize")
    Xs = (X[:, keep] - X[:, keep].mean(axis=0)) / std[keep]
    ys = y - y.mean()
    if standardize == "all":
        sy = y.std()
        if sy == 0:
            raise ValueError("the target is constant: cannot scale it to unit variance")
        ys = ys / sy
    return Xs, ys, tuple(int(j) for j in np.flatnonzero(constant))


def load_regression(
    path: str | Path | None = None,
    *,
    standardize: str = "features",
    bias: bool = False,
    fmt: str | None = None,
    download: bool = True,
) -> Dataset:
    """Read a regression data set and preprocess it (module doc).

    ``path``: a CSV or svmlight file; ``None`` or ``"cpusmall"``: the default cpusmall lookup.
    ``fmt``: ``"csv"`` or ``"svmlight"`` (default: detected).  ``download``: allow fetching
    cpusmall from the LIBSVM page when no local copy exists.
    """
    check_choice("standardize", standardize, STANDARDIZE)
    if path is None or str(path) == CPUSMALL:
        path = cpusmall_path(download=download)
    path = Path(path)
    fmt = detect_format(path) if fmt is None else check_choice("fmt", fmt, FORMATS)
    X, y = read_svmlight(path) if fmt == "svmlight" else read_csv(path)
    X, y, dropped = preprocess(X, y, standardize)
    if bias:
        X = np.hstack([X, np.ones((X.shape[0], 1))])
    return Dataset(
        np.ascontiguousarray(X), np.ascontiguousarray(y), str(path), standardize, bias, dropped
    )


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
    "CPUSMALL_URL",
    "STANDARDIZE",
    "Dataset",
    "cache_dir",
    "cpusmall_candidates",
    "cpusmall_path",
    "detect_format",
    "fetch_cpusmall",
    "load_regression",
    "preprocess",
    "read_csv",
    "read_svmlight",
    "synthetic_regression",
]
