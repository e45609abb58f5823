"""Human-readable output of a result: aligned ``key  value unit`` lines, no Python reprs.

The keys are the JSON keys (so the text and ``--json`` read alike); units come from the
result's schema (`stability.result.output`).  Numbers are shown to 12 significant digits,
missing values as ``—``, booleans as yes/no, long lists shortened.  Commands with a table to
show (train, validate, coupled, ...) write their own report from the same result.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from stability.result import Result

MISSING = "—"
LIST_SHOWN = 8


def number(x: Any, digits: int = 12) -> str:
    """A number for people: ``—`` for None/NaN/inf, ints as they are, floats to ``digits``;
    a string (a field that is text, such as a criterion) as it is."""
    if x is None:
        return MISSING
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, complex):
        sign = "−" if x.imag < 0 else "+"
        return f"{number(x.real, digits)} {sign} {number(abs(x.imag), digits)}i"
    x = float(x)
    if not math.isfinite(x):
        return MISSING
    return f"{x:.{digits}g}"


def value(x: Any, digits: int = 12) -> str:
    """One value on one line (lists shortened, dicts as ``key value`` pairs)."""
    if isinstance(x, str):
        return x
    if isinstance(x, Result):
        x = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return ", ".join(f"{k} {value(v, digits)}" for k, v in x.items()) or MISSING
    if hasattr(x, "tolist") and not isinstance(x, (int, float, complex)):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        if not x:
            return "none"
        if len(x) > LIST_SHOWN:
            head = ", ".join(value(v, 6) for v in x[:3])
            return f"{len(x)} values: {head}, …, {value(x[-1], 6)}"
        return ", ".join(value(v, digits) for v in x)
    return number(x, digits)


def rows(result: Result, keys: list[str] | None = None) -> list[tuple[str, str]]:
    """``(key, "value unit")`` for the keys of ``result`` (all, or ``keys``)."""
    units = {e.name: e.unit for e in result.schema()}
    names = keys or [f.name for f in dataclasses.fields(result) if f.name != "warnings"]
    out = []
    for name in names:
        text = value(getattr(result, name))
        unit = units.get(name, "")
        out.append((name, f"{text} {unit}" if unit and text not in (MISSING, "none") else text))
    return out


def aligned(pairs: list[tuple[str, str]]) -> list[str]:
    """``key  value`` lines, the values in one column."""
    width = max((len(k) for k, _ in pairs), default=0) + 2
    return [f"{k:<{width}}{v}" for k, v in pairs]


def lines(result: Result, keys: list[str] | None = None) -> list[str]:
    """Aligned ``key  value unit`` lines of ``result`` (all keys, or ``keys``)."""
    return aligned(rows(result, keys))


def report(result: Result) -> str:
    """The default report: every key of the result."""
    return "\n".join(lines(result))


def pipeline_line(pipe: dict) -> str:
    """One line for a pipeline's description (`stability.pipeline.Pipeline.describe`)."""
    fwd, bkwd = (", ".join(map(str, pipe[k])) for k in ("tau_fwd", "tau_bkwd"))
    return f"pipeline {pipe['schedule']}, {pipe['stages']} stages: τ_fwd {fwd}; τ_bkwd {bkwd}"
