"""Argument checks shared by the API and the CLI.

Every check raises `ValueError` with one line naming the parameter, its allowed range and the
offending value, e.g. ``momentum must be in [0, 1], got 1.5``.  The CLI turns that line into
its error message (exit code 2).  Values may be scalars or arrays (parameter grids); an array
is accepted only if every element is.  Exact types (Fraction) and sympy symbols pass through
unchecked where a numeric comparison is impossible.
"""

from __future__ import annotations

import math
import os
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

MAX_DELAY = 100_000
"""Largest delay accepted (the max-lr and radius paths are tested up to 10⁴)."""


def _shown(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array containing {value.flat[0]!r}" if value.size else "an empty array"
    return repr(value) if isinstance(value, str) else str(value)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float, Fraction, np.integer, np.floating, np.ndarray)) and not (
        isinstance(value, bool)
    )


def _range_text(low, high, low_open, high_open) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{_g(low)}, {_g(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '≥'} {_g(low)}"
    if high is not None:
        return f"{'<' if high_open else '≤'} {_g(high)}"
    return "finite"


def _g(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> Any:
    """A finite real number (or array of them) in the given range; returns it unchanged (a
    numpy scalar as the Python number, which mpmath and sympy take)."""
    if hasattr(value, "free_symbols"):  # a sympy symbol or expression: nothing to check
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if not _numeric(value):
        raise ValueError(f"{name} must be a real number, got {_shown(value)}")
    rng = _range_text(low, high, low_open, high_open)
    what = "a finite real number" + ("" if rng == "finite" else " " + rng)
    if isinstance(value, Fraction):  # compared exactly
        v = value
        bad = (low is not None and (v <= low if low_open else v < low)) or (
            high is not None and (v >= high if high_open else v > high)
        )
        if bad:
            raise ValueError(f"{name} must be {what}, got {v}")
        return value
    v = np.asarray(value, dtype=float)
    bad = ~np.isfinite(v)
    if low is not None:
        bad |= (v <= low) if low_open else (v < low)
    if high is not None:
        bad |= (v >= high) if high_open else (v > high)
    if np.any(bad):
        raise ValueError(f"{name} must be {what}, got {_g(float(v[bad].flat[0]))}")
    return value


def check_number(name: str, value: Any, **bounds: Any) -> float:
    """One finite real number in the range of `check_real` (``bounds``: its keywords), as a
    float; an array is refused."""
    value = check_real(name, value, **bounds)
    if np.ndim(value):
        raise ValueError(f"{name} must be one real number, got an array")
    return float(value)


def check_delay(name: str, value: Any, low: int = 0) -> Any:
    """A delay or count: an integer (or integer array) in [low, MAX_DELAY]; returns it as int /
    int array."""
    rng = f"an integer in [{low}, {MAX_DELAY}]"
    if isinstance(value, bool) or not _numeric(value) or isinstance(value, Fraction):
        raise ValueError(f"{name} must be {rng}, got {_shown(value)}")
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            bad = arr[~np.isfinite(arr) | (arr != np.round(arr))].flat[0]
            raise ValueError(f"{name} must be {rng}, got {_g(float(bad))}")
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be {rng}, got {_shown(value)}")
    if np.any(arr < low) or np.any(arr > MAX_DELAY):
        bad = arr[(arr < low) | (arr > MAX_DELAY)].flat[0]
        raise ValueError(f"{name} must be {rng}, got {int(bad)}")
    return int(arr) if arr.ndim == 0 else arr.astype(np.int64)


def check_scalar_delay(name: str, value: Any) -> int:
    """A single delay (not a per-parameter array): rules whose structure depends on it."""
    value = check_delay(name, value)
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a single integer for this rule, not an array")
    return value


def check_count(name: str, value: Any) -> int:
    """A count (stages, replicas, …): a single integer ≥ 1."""
    value = check_scalar_delay(name, value)
    if value < 1:
        raise ValueError(f"{name} must be an integer ≥ 1, got {value}")
    return value


def one_or_many(value: Any) -> list:
    """The values of a parameter that takes one value or a sequence of them (``taus=4`` or
    ``taus=[4, 2]``), as a list for the per-value check."""
    return list(value) if np.iterable(value) and not isinstance(value, str | dict) else [value]


def check_path(name: str, value: Any) -> Path:
    """A file or directory path given as a non-empty string or a path object."""
    if not isinstance(value, str | os.PathLike):
        raise ValueError(f"{name} must be a path, got {_shown(value)}")
    if not str(os.fspath(value)).strip():
        raise ValueError(f"{name} must be a path, got an empty string")
    return Path(value).expanduser()


def unreadable_file(path: Path) -> str | None:
    """Why ``path`` is no file to read ("is a directory, not a file" or "does not exist"), or
    None where it is one."""
    if path.is_file():
        return None
    return "is a directory, not a file" if path.is_dir() else "does not exist"


def check_writable_directory(name: str, directory: Path) -> None:
    """Refuse (one line naming ``name``) unless files can be created in ``directory`` or in its
    nearest existing ancestor (the missing levels are created when writing): checked before
    anything is computed."""
    existing = directory
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{name}: {existing} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise ValueError(f"{name}: cannot write in {existing} ({err.strerror})") from None


def check_integer(name: str, value: Any, *, low: int = 0, high: int | None = None) -> int:
    """An integer (not a bool) in [low, high]; returns it as int."""
    rng = f"an integer in [{low}, {high}]" if high is not None else f"an integer ≥ {low}"
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and value == int(value):
        ok, value = True, int(value)
    if not ok or value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {rng}, got {_shown(value)}")
    return int(value)


def check_step_sizes(lr: Any) -> np.ndarray:
    """The step sizes of R runs trained side by side as an (R,) float array: at least one,
    every one finite and > 0."""
    lr = np.asarray(lr, dtype=float).reshape(-1)
    if lr.size == 0 or not np.all(np.isfinite(lr)) or np.any(lr <= 0):
        raise ValueError("lr must be a non-empty array of finite numbers > 0")
    return lr


def check_order(name_small: str, small: Any, name_large: str, large: Any) -> None:
    """``small ≤ large`` elementwise (delays), e.g. τ_bkwd ≤ τ_fwd."""
    if np.any(np.asarray(small) > np.asarray(large)):
        raise ValueError(
            f"{name_small} must be ≤ {name_large} (got {name_small}={_shown(small)}, "
            f"{name_large}={_shown(large)})"
        )


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {_shown(value)}")
    return value


def is_literal_zero(value: Any) -> bool:
    """True for a scalar that is exactly 0 (not for arrays, symbols or None).

    Rules use it to leave out a structure (a tap, a state variable) whose coefficient is a
    literal zero; an array that merely contains zeros keeps the structure.
    """
    return isinstance(value, (int, float, Fraction, np.integer, np.floating)) and value == 0


def finite_or_none(value: Any) -> float | None:
    """``float(value)``, or None for None, NaN and infinities (a result's JSON null)."""
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def parse_finite(text: str, not_a_number: str, not_finite: str) -> float:
    """``float(text)`` for text that spells a finite real number; otherwise a `ValueError`
    with the caller's words: ``not_a_number`` for text that is no number, ``not_finite`` for
    NaN or an infinity (a command-line flag and a data file's cell word them differently)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(not_a_number) from None
    if not math.isfinite(value):
        raise ValueError(not_finite)
    return value


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a long run, carrying what was completed (each finished piece is already
    written atomically; nothing partial is left).  The CLI prints the message on one line."""
