"""What every command takes: its inputs declared once, the twin of `stability.result.output`.

A command's options (besides the rule and its parameters) are a table of `Option` values made
by `option` — name, one-line meaning, unit, value kind, default, allowed range or choices — so
that one declaration gives

* the Python API's validation (`check_options`: one-line `ValueError` naming the keyword and its
  range, defaults filled in),
* the command line's flags (`stability.cli.declared.add_options`: ``--name`` with its parser, its
  help text with the default),
* the sweep's keyword kinds (`stability.sweep.catalog`) and the docs' option tables
  (`option_rows`).

It imports nothing heavy (the command line reads the tables before any computation).

Kinds: ``real``, ``int``, ``ints`` (a list of integers; on the command line comma-separated),
``str`` (``choices`` when given), ``strs`` (a list of strings), ``rules`` (registered rule names;
on the command line comma-separated), ``path`` (a file or directory: ``path`` says which the
command line checks — ``"write-file"`` (with metavar ``F.png`` a figure, whose path must end in
``.png``), ``"write-dir"``, ``"read-dir"``), ``bool`` (on the
command line a switch; with a default of True the switch, named by ``flag``, turns it off).  A
default of `REQUIRED` makes the option mandatory.

How the command line shows an option: ``flag`` (default ``--name-with-dashes``), ``metavar``,
``positional`` (an argument without a flag: several values for ``strs``, optional when it has
a default), ``repeat`` (``strs``: the flag given once per value), ``group`` (the title of the
``--help`` section it is listed in).

>>> lr = option("lr", "step size", "real", low=0.0, low_open=True)
>>> lr.check(0.1), lr.required
(0.1, True)
>>> check_options((lr, option("steps", "steps run", "int", default=10, low=1)), {"lr": 0.5})
{'lr': 0.5, 'steps': 10}
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()
"""The default of an option that must be given."""

KINDS = ("real", "int", "ints", "str", "strs", "rules", "path", "bool")
"""Value kinds of an option (module doc); the sweep spec uses the same words."""

PATHS = (None, "write-file", "write-dir", "read-dir")
"""What the command line checks of a ``path`` option (module doc)."""


@dataclass(frozen=True)
class Option:
    """One input of a command (module doc)."""

    name: str
    doc: str
    kind: str
    unit: str = ""
    default: Any = REQUIRED
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    switches: bool = False
    """On the command line one switch per choice (``--optimize-momentum``), not ``--optimize X``."""
    cli_flag: str | None = None
    positional: bool = False
    repeat: bool = False
    group: str | None = None
    path: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.path not in PATHS:
            raise ValueError(f"path must be one of {', '.join(map(str, PATHS))}, got {self.path!r}")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def flag(self) -> str:
        """The command-line flag: ``tau_fwd`` → ``--tau-fwd`` (unless declared otherwise); a
        positional argument's metavar (``NAME``)."""
        if self.positional:
            return self.metavar or self.name.upper()
        return self.cli_flag or "--" + self.name.replace("_", "-")

    @property
    def allowed(self) -> str:
        """The allowed values, in words (help texts and docs)."""
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        low = "" if self.low is None else f"{'>' if self.low_open else '≥'} {self.low:g}"
        high = "" if self.high is None else f"≤ {self.high:g}"
        what = {"real": "a real number", "int": "an integer", "ints": "integers"}.get(self.kind)
        if self.kind == "rules":
            return "registered rule names"
        if what is None:
            return ""
        return " ".join(x for x in (what, low, "and" if low and high else "", high) if x)

    @property
    def help(self) -> str:
        """The ``--help`` text: meaning, unit, allowed values and the default."""
        unit = f" [{self.unit}]" if self.unit else ""
        if self.required:
            return f"{self.doc}{unit}; required"
        if self.default is None or self.kind == "bool" or self.default == ():
            return self.doc + unit
        shown = self.default
        if isinstance(shown, tuple):
            shown = ",".join(str(v) for v in shown)
        elif isinstance(shown, float):
            shown = f"{shown:g}"
        return f"{self.doc}{unit} (default: {shown})"

    def check(self, value: Any) -> Any:
        """The validated value (`ValueError`, one line, naming the option and its range);
        None (not given) passes where the default is None."""
        from stability.checks import (
            check_choice,
            check_delay,
            check_integer,
            check_number,
            check_path,
            check_writable_directory,
            one_or_many,
        )

        if value is None and not self.required and self.default is None:
            return None
        if value is None or value is REQUIRED:
            raise ValueError(f"{self.name} must be given ({self.doc})")
        if self.kind == "real":
            low, high = self.low, self.high
            return check_number(self.name, value, low=low, high=high, low_open=self.low_open)
        if self.kind == "int":
            low = 0 if self.low is None else int(self.low)
            high = None if self.high is None else int(self.high)
            return check_integer(self.name, value, low=low, high=high)
        if self.kind == "ints":
            values = one_or_many(value)
            if not values:
                raise ValueError(f"{self.name} must give at least one integer")
            low = 0 if self.low is None else int(self.low)
            return tuple(int(check_delay(self.name, v, low=low)) for v in values)
        if self.kind in ("strs", "rules"):  # rule names: the rules' registry checks them
            values = one_or_many(value)
            if self.kind == "rules" and not values:
                raise ValueError(f"{self.name} must name at least one rule")
            if not all(isinstance(v, str) for v in values):
                raise ValueError(f"{self.name} must be strings, got {value!r}")
            return tuple(values)
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{self.name} must be true or false, got {value!r}")
            return value
        if self.choices is not None:
            return check_choice(self.name, value, self.choices)
        if self.kind == "path":
            path = check_path(self.name, value)
            if self.path == "write-file" and path.is_dir():
                raise ValueError(f"{self.name} must be a file path, got the directory {value}")
            if self.path == "write-file":
                check_writable_directory(self.name, path.parent)
                if self.metavar and self.metavar.endswith(".png") and path.suffix.lower() != ".png":
                    raise ValueError(  # PNG bytes under another suffix would mislead its reader
                        f"{self.name}: the figure is a PNG, give a path ending in .png, got {value}"
                    )
            elif self.path == "write-dir":
                check_writable_directory(self.name, path)
            return value
        if isinstance(value, os.PathLike):  # a path given as a Path
            value = os.fspath(value)
        if not isinstance(value, str):
            raise ValueError(f"{self.name} must be a string, got {value!r}")
        return value


def option(
    name: str,
    doc: str,
    kind: str,
    unit: str = "",
    *,
    default: Any = REQUIRED,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    choices: tuple[str, ...] | None = None,
    metavar: str | None = None,
    switches: bool = False,
    flag: str | None = None,
    positional: bool = False,
    repeat: bool = False,
    group: str | None = None,
    path: str | None = None,
) -> Option:
    """An option of a command (module doc)."""
    return Option(
        name, doc, kind, unit, default, low, high, low_open, choices, metavar, switches,
        flag, positional, repeat, group, path,
    )  # fmt: skip


def check_options(options: tuple[Option, ...], values: dict[str, Any]) -> dict[str, Any]:
    """Every option of the table validated (`Option.check`), defaults filled in; a keyword the
    table does not declare is refused."""
    known = {o.name: o for o in options}
    for name in values:
        if name not in known:
            raise ValueError(f"unknown option {name!r} (options: {', '.join(known)})")
    out = {}
    for o in options:
        given = values.get(o.name)
        out[o.name] = o.check(o.default if given is None and not o.required else given)
    return out


def check_given(options: tuple[Option, ...], **values: Any) -> dict[str, Any]:
    """``values`` validated by their entries of the table ``options`` (`Option.check`), for a
    function that validates some of its keywords by its command's table (the others, e.g. an
    `Axis` given for a string, it checks itself)."""
    known = {o.name: o for o in options}
    return {name: known[name].check(value) for name, value in values.items()}


def option_rows(options: tuple[Option, ...]) -> list[tuple[str, str, str]]:
    """``(flag, allowed values, help)`` per option: the docs' option table."""
    return [(o.flag, o.allowed, o.help) for o in options]


__all__ = [
    "KINDS",
    "PATHS",
    "REQUIRED",
    "Option",
    "check_given",
    "check_options",
    "option",
    "option_rows",
]
