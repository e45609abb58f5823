"""Argument helpers shared by the commands: rule flags, number parsers, the one-line errors.

Every parser raises `UsageError` with one line naming the flag and its allowed values; the
command line (`stability.cli.main`) prints it and exits with code 2.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """Bad command-line input: reported on one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one `UsageError` line, not usage + message."""

    def error(self, message: str):
        raise UsageError(message)


class ExactFloat(float):
    """A float parsed from the command line that keeps its text's exact value in ``exact``.

    Computations use the float; ``stability radius --certify`` reads ``exact`` (a Fraction),
    so that ``--lr 0.4450418679126288000000123`` is not rounded to float64 there.
    """

    exact: Fraction


def float_arg(name: str) -> Callable[[str], ExactFloat]:
    def parse(text: str) -> ExactFloat:
        try:
            value = ExactFloat(text)
        except ValueError:
            raise UsageError(f"{name} must be a real number, got {text!r}") from None
        if not math.isfinite(value):
            raise UsageError(f"{name} must be a finite real number, got {text}")
        value.exact = Fraction(text.strip().replace("_", ""))
        return value

    return parse


def int_arg(name: str, low: int = 0) -> Callable[[str], int]:
    """An integer ≥ ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise UsageError(f"{name} must be an integer ≥ {low}, got {text!r}") from None
        if value < low:
            raise UsageError(f"{name} must be an integer ≥ {low}, got {value}")
        return value

    return parse


def delay_arg(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{name} must be an integer in [0, 100000], got {text!r}") from None
        if not math.isfinite(value) or value != int(value):
            raise UsageError(f"{name} must be an integer in [0, 100000], got {text}")
        return int(value)

    return parse


def bool_arg(name: str) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"{name} must be true or false, got {text!r}")

    return parse


def choice_arg(name: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise UsageError(f"{name} must be one of {', '.join(choices)}, got {text!r}")
        return text

    return parse


def add_rule_arguments(parser: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """The RULE positional and one flag per rule parameter of the registry."""
    from stability.rules.registry import RULES

    if positional:
        parser.add_argument("rule", metavar="RULE", help="rule name (see `stability rules`)")
    seen: dict[str, Any] = {}
    users: dict[str, list[str]] = {}
    for spec in RULES.values():
        for p in spec.params:
            seen.setdefault(p.name, p)
            users.setdefault(p.name, []).append(spec.name)
    group = parser.add_argument_group("rule parameters (each applies to the rules listed)")
    for name, p in seen.items():
        if p.kind == "choice":
            parse = choice_arg(name, p.choices)
        else:
            parse = {"delay": delay_arg, "bool": bool_arg}.get(p.kind, float_arg)(name)
        group.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=parse,
            default=None,
            metavar="X",
            help=f"{p.doc}; {p.allowed} [{', '.join(users[name])}]",
        )


def rule_values(args: argparse.Namespace) -> dict[str, Any]:
    """The rule parameters given on the command line (absent ones are left to defaults)."""
    from stability.rules.registry import RULES

    names = {p.name for spec in RULES.values() for p in spec.params}
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def build_from_args(args: argparse.Namespace, values: dict[str, Any] | None = None):
    """``(spec, rule, model)`` for the RULE and rule flags of ``args``."""
    from stability.rules.registry import get_spec

    spec = get_spec(args.rule)
    rule, model = spec.build(**(rule_values(args) if values is None else values))
    return spec, rule, model


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _writable_directory(flag: str, directory: Path) -> None:
    """Refuse (one line naming ``flag``) unless files can be created in ``directory`` or in its
    nearest existing ancestor (the missing levels are created when writing)."""
    existing = directory
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag}: {existing} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise UsageError(f"{flag}: cannot write in {existing} ({err.strerror})") from None


def output_file_arg(flag: str) -> Callable[[str], Path]:
    """A file to write: not a directory, in a directory where files can be created."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise UsageError(f"{flag} must be a file path, got an empty string")
        path = Path(text).expanduser()
        if path.is_dir():
            raise UsageError(f"{flag} must be a file path, got the directory {text}")
        _writable_directory(flag, path.parent)
        return path

    return parse


def output_dir_arg(flag: str) -> Callable[[str], Path]:
    """A directory to write files in (created if missing)."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise UsageError(f"{flag} must be a directory path, got an empty string")
        path = Path(text).expanduser()
        if path.exists() and not path.is_dir():
            raise UsageError(f"{flag} must be a directory, got the file {text}")
        _writable_directory(flag, path)
        return path

    return parse
