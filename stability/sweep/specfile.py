"""Sweep specs: one command, its fixed parameters and its grid axes, read from TOML.

A spec names one sweepable command (`stability.sweep.catalog`), the rule (or a ``rule`` axis),
fixed keyword parameters and the grid axes, named like the command's Python keywords (the CLI
flags in snake case)::

    command = "max-lr"
    rule = "lwp"                       # or a grid axis: [grid] rule = ["sgd", "momentum"]
    [fixed]
    lam = 1.0
    [grid]                             # one dimension of the result per axis, in this order
    tau = [0, 1, 2, 4, 8, 16]                                   # a list
    momentum = { start = 0.0, stop = 0.99, num = 100 }          # numpy.linspace
    lr = { start = 1e-3, stop = 1.0, num = 96, log = true }     # numpy.geomspace
    seed = { start = 0, stop = 9, step = 1 }                    # start, start + step, … ≤ stop
    [sweep]
    chunk = 256                        # points per chunk (one task, one Zarr chunk)

Reading a spec checks *types* up front: the command, every fixed and axis name (a keyword of
the command or a parameter of at least one of the spec's rules), every value against its
parameter's type (numbers for real parameters, integers for delays and counts, …), sizes
(`MAX_POINTS`, `MAX_AXES`, `MAX_CHUNK`).  A violation is one `SpecError` line naming it.  Values
*within* a type (a momentum of 1.5, a parameter the rule of one point lacks) are the command's
business: such points are recorded as failed, with the command's one-line error.

Chunks are blocks of the grid in C order: the trailing axes whole while the block holds at
most ``chunk`` points, then a run along the next axis (`SweepSpec.block`), so a chunk of a
(τ × momentum × horizon) grid is, e.g., one τ and every (momentum, horizon).
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stability.checks import check_path
from stability.sweep.catalog import get_command, keyword_kinds

MAX_POINTS = 10_000_000
"""Largest grid (points); a chunk's results travel as one message, the dataset fits in memory."""
MAX_AXES = 8
"""Most grid axes."""
MAX_CHUNK = 100_000
"""Most points per chunk."""
DEFAULT_CHUNK = 256
"""Points per chunk when the spec's ``[sweep]`` table gives none."""

_TOP_KEYS = ("command", "rule", "fixed", "grid", "sweep")
_RANGE_KEYS = ({"start", "stop", "num"}, {"start", "stop", "num", "log"}, {"start", "stop", "step"})


class SpecError(ValueError):
    """A spec that cannot be run: one line naming the offending key or value."""


@dataclass(frozen=True)
class GridAxis:
    """One grid axis: a keyword name and its values (Python scalars, distinct)."""

    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec (format: docs/sweep.md): the command, its rule (or a ``rule``
    axis), the fixed parameters, the grid axes and the chunk size.  ``text``: the TOML it was
    read from (not part of its
    identity: two specs are the same sweep when `identity` is)."""

    command: str
    rule: str | None
    fixed: dict[str, Any]
    axes: tuple[GridAxis, ...]
    chunk: int = DEFAULT_CHUNK
    text: str = field(default="", compare=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(a.values) for a in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def block(self) -> tuple[int, ...]:
        """Shape of a chunk: trailing axes whole while at most ``chunk`` points (module doc)."""
        block = [1] * len(self.axes)
        room = self.chunk
        for i in reversed(range(len(self.axes))):
            block[i] = max(1, min(self.shape[i], room))
            if block[i] < self.shape[i]:
                break
            room //= self.shape[i]
        return tuple(block)

    @property
    def chunk_grid(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return tuple(-(-n // b) for n, b in zip(self.shape, self.block, strict=True))

    @property
    def chunks(self) -> int:
        return math.prod(self.chunk_grid)

    def chunk_slices(self, k: int) -> tuple[slice, ...]:
        """The region of the grid that chunk ``k`` (C order over `chunk_grid`) covers."""
        position = np.unravel_index(k, self.chunk_grid)
        return tuple(
            slice(int(p) * b, min((int(p) + 1) * b, n))
            for p, b, n in zip(position, self.block, self.shape, strict=True)
        )

    def points(self, k: int) -> list[tuple[str, dict[str, Any]]]:
        """``(rule, keywords)`` of every point of chunk ``k``, in C order over its block."""
        region = self.chunk_slices(k)
        ranges = [range(s.start, s.stop) for s in region]
        out = []
        for index in np.ndindex(*(len(r) for r in ranges)):
            params = dict(self.fixed)
            for axis, r, i in zip(self.axes, ranges, index, strict=True):
                params[axis.name] = axis.values[r[i]]
            rule = params.pop("rule", self.rule)
            out.append((rule, params))
        return out

    def identity(self) -> dict[str, Any]:
        """What makes two sweeps the same (JSON-ready): a changed identity is a new sweep."""
        return {
            "command": self.command,
            "rule": self.rule,
            "fixed": {k: list(v) if isinstance(v, tuple) else v for k, v in self.fixed.items()},
            "grid": [[a.name, list(a.values)] for a in self.axes],
            "chunk": self.chunk,
        }

    @classmethod
    def from_identity(cls, identity: dict[str, Any], text: str = "") -> SweepSpec:
        """The spec whose `identity` is ``identity`` (as stored with a sweep's results)."""
        fixed = {k: tuple(v) if isinstance(v, list) else v for k, v in identity["fixed"].items()}
        axes = tuple(GridAxis(name, tuple(values)) for name, values in identity["grid"])
        return cls(identity["command"], identity["rule"], fixed, axes, identity["chunk"], text)

    def difference(self, other: dict[str, Any]) -> str | None:
        """The first way the identity ``other`` differs from this spec's, in words; None if not."""
        mine = json.loads(json.dumps(self.identity()))
        for key in ("command", "rule", "fixed", "chunk"):
            if mine[key] != other.get(key):
                return f"{key} {other.get(key)!r} → {mine[key]!r}"
        theirs = other.get("grid", [])
        if [a for a, _ in mine["grid"]] != [a for a, _ in theirs]:
            return f"grid axes {[a for a, _ in theirs]} → {[a for a, _ in mine['grid']]}"
        for (name, values), (_, old) in zip(mine["grid"], theirs, strict=True):
            if values != old:
                return f"values of grid axis {name!r}"
        return None


def read_spec(path: str | Path) -> SweepSpec:
    """Parse the TOML spec at ``path`` (format: docs/sweep.md); `SpecError` names what is
    wrong in one line."""
    path = check_path("path", path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(f"spec file {path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file") from None
    return parse_spec(text, source=path.name)


def parse_spec(text: str, *, source: str = "spec") -> SweepSpec:
    """Parse a TOML spec from ``text``; ``source`` names it in errors."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{source}: not valid TOML ({err})") from None

    def fail(message: str) -> SpecError:
        return SpecError(f"{source}: {message}")

    unknown = [k for k in raw if k not in _TOP_KEYS]
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (a spec has {', '.join(_TOP_KEYS)})")
    name = raw.get("command")
    if not isinstance(name, str):
        raise fail('command must be given as a string, e.g. command = "max-lr"')
    try:
        command = get_command(name)
    except ValueError as err:
        raise fail(str(err)) from None
    fixed_raw, grid_raw, sweep_raw = (_table(raw, key, fail) for key in ("fixed", "grid", "sweep"))
    if not grid_raw:
        raise fail("[grid] must have at least one axis")
    if len(grid_raw) > MAX_AXES:
        raise fail(f"[grid] has {len(grid_raw)} axes; at most {MAX_AXES}")
    both = sorted(set(fixed_raw) & set(grid_raw))
    if both:
        raise fail(f"{both[0]!r} is both fixed and a grid axis")
    if "rule" in fixed_raw:
        raise fail('the rule is the top-level key rule = "NAME" (or a grid axis), not [fixed]')

    rules = _rules(raw, grid_raw, fail)
    kinds = keyword_kinds(command, rules)
    fixed = {}
    for key, value in fixed_raw.items():
        if key not in kinds:
            raise fail(f"unknown fixed parameter {key!r} for {_context(name, rules, kinds)}")
        fixed[key] = _coerce(value, kinds[key], f"fixed parameter {key!r}", fail)
    for key in grid_raw:
        if key != "rule" and key not in kinds:
            raise fail(f"unknown axis {key!r} for {_context(name, rules, kinds)}")
        if kinds.get(key) == "ints":
            raise fail(f"{key!r} takes a list of integers: it can be fixed, not a grid axis")
    size = math.prod(_axis_length(key, value, fail) for key, value in grid_raw.items())
    if size > MAX_POINTS:
        raise fail(f"the grid has {size:,} points; at most {MAX_POINTS:,}")
    axes = []
    for key, value in grid_raw.items():
        kind = "rule" if key == "rule" else kinds[key]
        values = tuple(_coerce(v, kind, f"axis {key!r}", fail) for v in _axis_values(key, value))
        if len(set(values)) != len(values):
            raise fail(f"axis {key!r} repeats a value (coordinates must be distinct)")
        axes.append(GridAxis(key, values))
    unknown = [k for k in sweep_raw if k != "chunk"]
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} in [sweep] (it has chunk)")
    chunk = sweep_raw.get("chunk", DEFAULT_CHUNK)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 1 <= chunk <= MAX_CHUNK:
        raise fail(f"[sweep] chunk must be an integer in [1, {MAX_CHUNK}], got {chunk!r}")
    rule = raw.get("rule") if "rule" not in grid_raw else None
    return SweepSpec(name, rule, fixed, tuple(axes), chunk, text)


def _table(raw: dict, key: str, fail) -> dict:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise fail(f"{key} must be a table [{key}], got {_type_name(value)}")
    return value


def _rules(raw: dict, grid: dict, fail) -> tuple[str, ...]:
    """The spec's rule names (top-level ``rule`` or the ``rule`` axis), each registered."""
    from stability.rules.registry import get_spec

    if "rule" in grid:
        if "rule" in raw:
            raise fail("rule is both a top-level key and a grid axis")
        names = grid["rule"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise fail("axis 'rule' must be a list of rule names")
    elif "rule" in raw:
        if isinstance(raw["rule"], list):
            raise fail("a list of rules is a grid axis: put rule = [...] under [grid]")
        if not isinstance(raw["rule"], str):
            raise fail(f"rule must be a rule name, got {_type_name(raw['rule'])}")
        names = [raw["rule"]]
    else:
        raise fail('no rule: give rule = "NAME" or a grid axis rule = [...]')
    for n in names:
        try:
            get_spec(n)
        except ValueError as err:
            raise fail(str(err)) from None
    return tuple(names)


def _context(command: str, rules: tuple[str, ...], kinds: dict[str, str]) -> str:
    return f"{command} with rule {', '.join(rules)} (its parameters: {', '.join(kinds)})"


def _axis_length(key: str, value: Any, fail) -> int:
    """Number of values of an axis (a list or a range table), checking the range's form."""
    if isinstance(value, list):
        if not value:
            raise fail(f"axis {key!r} is empty")
        return len(value)
    if not isinstance(value, dict):
        raise fail(f"axis {key!r} must be a list or a range table, got {_type_name(value)}")
    keys = set(value)
    if keys not in _RANGE_KEYS:
        forms = "; ".join("{" + ", ".join(sorted(k)) + "}" for k in _RANGE_KEYS)
        raise fail(f"axis {key!r}: a range has the keys {forms}, got {sorted(keys)}")
    for k in keys - {"log"}:
        v = value[k]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise fail(f"axis {key!r}: range {k} must be a finite number, got {v!r}")
    start, stop = value["start"], value["stop"]
    if "step" in value:
        if value["step"] <= 0 or stop < start:
            raise fail(f"axis {key!r}: a stepped range needs step > 0 and stop ≥ start")
        return _steps(start, stop, value["step"])
    num = value["num"]
    if not isinstance(num, int) or num < 1:
        raise fail(f"axis {key!r}: num must be an integer ≥ 1, got {num!r}")
    log = value.get("log", False)
    if not isinstance(log, bool):
        raise fail(f"axis {key!r}: log must be true or false, got {log!r}")
    if log and (start <= 0 or stop <= 0):
        raise fail(f"axis {key!r}: a log range needs start > 0 and stop > 0")
    return num


def _steps(start, stop, step) -> int:
    """Values start, start + step, … ≤ stop (with a relative slack of 1e-12 for floats)."""
    return math.floor((stop - start) / step * (1 + 1e-12)) + 1


def _axis_values(key: str, value: Any) -> list[Any]:
    """The values of an axis whose form `_axis_length` has checked."""
    if isinstance(value, list):
        return value
    start, stop = value["start"], value["stop"]
    if "step" in value:
        step = value["step"]
        if all(isinstance(v, int) for v in (start, stop, step)):
            return list(range(start, stop + 1, step))
        return [start + i * step for i in range(_steps(start, stop, step))]
    if value.get("log", False):
        return np.geomspace(float(start), float(stop), value["num"]).tolist()
    return np.linspace(float(start), float(stop), value["num"]).tolist()


def _coerce(value: Any, kind: str, what: str, fail) -> Any:
    """``value`` as its parameter's Python type (as the CLI would parse the flag)."""
    if kind in ("real", "int") and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise fail(f"{what} must be a number, got {_type_name(value)} {value!r}")
    if kind == "real":
        return float(value)
    if kind == "int":
        if isinstance(value, float) and not value.is_integer():
            raise fail(f"{what} must be an integer, got {value!r}")
        return int(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise fail(f"{what} must be true or false, got {_type_name(value)} {value!r}")
        return value
    if kind in ("str", "rule"):
        if not isinstance(value, str):
            raise fail(f"{what} must be a string, got {_type_name(value)} {value!r}")
        return value
    if kind == "ints":
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise fail(f"{what} must be a list of integers, got {_type_name(value)} {value!r}")
        return tuple(value)
    raise AssertionError(f"unknown parameter kind {kind!r}")


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), f"a {type(value).__name__}"
    )
