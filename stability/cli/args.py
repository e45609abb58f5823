"""Argument helpers shared by the commands: rule flags, number parsers, the one-line errors.

Every parser raises `UsageError` with one line naming the flag and its allowed values; the
command line (`stability.cli.main`) prints it and exits with code 2.

Rule flags follow one rule in every command: the parser knows the flags of every registered
rule, ``--help`` shows only those of the rule(s) named on the line (`focus_help`), and a flag
the named rule does not take is refused in one line naming the flag and the rule
(`check_rule_flags`).
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

RULE_GROUP_TITLE = "rule parameters"


class UsageError(Exception):
    """Bad command-line input: reported on one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one `UsageError` line, not usage + message.

    A command's flags may be added when the parser is first used (`fill_later`): the command
    line builds only the command it runs (every command's ~750 flags cost ~50 ms a call, most
    of an in-process `stability.cli.main.main` call)."""

    _fill: Callable[[], None] | None = None

    def fill_later(self, fill: Callable[[], None]) -> None:
        """Add the flags by calling ``fill`` when the parser is parsed, its help or usage is
        formatted, or `filled` is called."""
        self._fill = fill

    def filled(self) -> Parser:
        """This parser with its flags added."""
        fill, self._fill = self._fill, None
        if fill is not None:
            fill()
        return self

    def parse_known_args(self, args=None, namespace=None):
        return super(Parser, self.filled()).parse_known_args(args, namespace)

    def format_usage(self) -> str:
        return super(Parser, self.filled()).format_usage()

    def format_help(self) -> str:
        return super(Parser, self.filled()).format_help()

    def error(self, message: str):
        raise UsageError(message)

    def _get_values(self, action, arg_strings):
        # ``--kappa=--``: argparse would drop the "--" and hand the flag an empty list; it is
        # the value the user typed, to be parsed (and refused) like any other.
        if action.nargs is None and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)


def flag_of(name: str) -> str:
    """The command-line flag of a parameter name: ``tau_fwd`` → ``--tau-fwd``."""
    return "--" + name.replace("_", "-")


# -- values ------------------------------------------------------------------------------------


class ExactFloat(float):
    """A float parsed from the command line that keeps its text's exact value in ``exact``.

    Computations use the float; ``stability radius --certify`` reads ``exact`` (a Fraction),
    so that ``--lr 0.4450418679126288000000123`` is not rounded to float64 there.
    """

    exact: Fraction


def float_arg(flag: str) -> Callable[[str], ExactFloat]:
    def parse(text: str) -> ExactFloat:
        from stability.checks import parse_finite  # numpy: not before the entry point's threads

        try:
            value = ExactFloat(
                parse_finite(
                    text,
                    f"{flag} must be a real number, got {text!r}",
                    f"{flag} must be a finite real number, got {text}",
                )
            )
        except ValueError as refusal:
            raise UsageError(str(refusal)) from None
        value.exact = Fraction(text.strip().replace("_", ""))
        return value

    return parse


def int_arg(flag: str, low: int = 0, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (written as an integer, or a float with an integer value)."""
    rng = f"an integer in [{low}, {high}]" if high is not None else f"an integer ≥ {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)  # exact, however many digits
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise UsageError(f"{flag} must be {rng}, got {text!r}") from None
            if not math.isfinite(number) or number != int(number):
                raise UsageError(f"{flag} must be {rng}, got {text}") from None
            value = int(number)
        if value < low or (high is not None and value > high):
            raise UsageError(f"{flag} must be {rng}, got {text.strip()}")
        return value

    parse.high = high  # the documented limit (help, the CLI fuzz test)
    return parse


def int_list(flag: str, low: int = 0) -> Callable[[str], tuple[int, ...]]:
    """Comma-separated integers ≥ low."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(t) for t in text.split(",") if t.strip())
        except ValueError:
            raise UsageError(f"{flag} must be comma-separated integers, got {text!r}") from None
        if not values or any(v < low for v in values):
            raise UsageError(f"{flag} must be comma-separated integers ≥ {low}, got {text!r}")
        return values

    return parse


def names_arg(flag: str) -> Callable[[str], tuple[str, ...]]:
    """Comma-separated names."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(t.strip() for t in text.split(",") if t.strip())
        if not names:
            raise UsageError(f"{flag} must be comma-separated names, got {text!r}")
        return names

    return parse


def rule_names_arg(flag: str, *, several: bool = False) -> Callable[[str], Any]:
    """A registered rule name (``several``: comma-separated names), refused naming ``flag``."""

    def parse(text: str):
        from stability.rules.registry import get_spec

        names = tuple(t.strip() for t in text.split(",") if t.strip()) if several else (text,)
        for name in names or ("",):
            try:
                get_spec(name)
            except ValueError as err:
                raise UsageError(f"{flag}: {err}") from None
        return names if several else text

    return parse


def bool_arg(flag: str) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"{flag} must be true or false, got {text!r}")

    return parse


def choice_arg(flag: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise UsageError(f"{flag} must be one of {', '.join(choices)}, got {text!r}")
        return text

    return parse


# -- rule flags --------------------------------------------------------------------------------


def add_rule_arguments(
    parser: argparse.ArgumentParser, *, rule: str = "positional", exclude: Sequence[str] = ()
) -> None:
    """One flag per rule parameter of the registry, and where the command names its rule(s):
    ``rule`` is ``"positional"`` (RULE), ``"--rule"`` or ``"--rules"`` (comma-separated).

    ``exclude``: parameters the command takes as its own options (e.g. ``--stages``).
    """
    from stability.checks import MAX_DELAY
    from stability.rules.registry import RULES

    if rule == "positional":
        parser.add_argument("rule", metavar="RULE", help="rule name (see `stability rules`)")
    elif rule == "--rule":
        parser.add_argument(
            "--rule", type=rule_names_arg("--rule"), required=True, metavar="RULE", help="rule name"
        )
    else:
        parser.add_argument(
            "--rules",
            type=rule_names_arg("--rules", several=True),
            required=True,
            help="comma-separated rule names",
        )
    params: dict[str, Any] = {}
    for spec in RULES.values():
        for p in spec.params:
            if p.name not in exclude:
                params.setdefault(p.name, p)
    group = parser.add_argument_group(RULE_GROUP_TITLE)
    actions = {}
    for name, p in params.items():
        flag = flag_of(name)
        if p.kind == "choice":
            parse = choice_arg(flag, p.choices)
        elif p.kind == "delay":
            parse = int_arg(flag, int(p.low or 0), MAX_DELAY)
        elif p.kind == "bool":
            parse = bool_arg(flag)
        else:
            parse = float_arg(flag)
        actions[name] = group.add_argument(
            flag, dest=name, type=parse, default=None, metavar="X", help=f"{p.doc}; {p.allowed}"
        )
    parser.set_defaults(_rule_source=rule, _rule_params=tuple(actions))
    parser.rule_group = group
    parser.rule_actions = actions


def named_rules(args: argparse.Namespace) -> tuple[str, ...]:
    """The rule names of the command line (one, or several for ``--rules``)."""
    source = getattr(args, "_rule_source", None)
    if source == "--rules":
        return tuple(args.rules)
    return () if source is None else (args.rule,)


def rule_values(args: argparse.Namespace) -> dict[str, Any]:
    """The rule parameters given on the command line (absent ones are left to defaults)."""
    names = getattr(args, "_rule_params", ())
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def check_rule_flags(args: argparse.Namespace) -> None:
    """Refuse, in one line, a rule flag that the rule named on the line does not take (with
    ``--rules``: that none of the rules takes; each flag applies to the rules that take it)."""
    from stability.rules.registry import get_spec

    specs = [get_spec(name) for name in named_rules(args)]
    for param in rule_values(args):
        if specs and not any(param in s.param_names for s in specs):
            if len(specs) == 1:
                taken = getattr(args, "_rule_params", ())  # the flags this command has
                flags = [flag_of(p) for p in specs[0].param_names if p in taken]
                listed = f"its flags here: {', '.join(flags)}" if flags else "no flag here"
                raise UsageError(
                    f"{flag_of(param)}: rule {specs[0].name!r} has no parameter {param!r} "
                    f"({listed})"
                )
            names = ", ".join(s.name for s in specs)
            raise UsageError(
                f"{flag_of(param)}: no rule of --rules ({names}) has a parameter {param!r}"
            )


def focus_help(parser: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """Show only the flags of the rules ``names`` (those any of them takes) in ``parser``'s
    help, after the command's own options; with no known rule, a pointer."""
    from stability.rules.registry import RULES

    actions = getattr(parser, "rule_actions", None)
    if actions is None:
        return
    known = [RULES[n] for n in names if n in RULES]
    shown = {p for s in known for p in s.param_names}
    for name, action in actions.items():
        if name not in shown:
            action.help = argparse.SUPPRESS
            continue
        defaults = {str(p.default) for s in known for p in s.params if p.name == name}
        if len(defaults) == 1 and "None" not in defaults:  # the named rule's default
            action.help = f"{action.help} (default: {defaults.pop()})"
    group = parser.rule_group
    words = (parser.usage or parser.prog).split()[1:]  # "stability net max-lr --problem …"
    command = " ".join(itertools.takewhile(lambda w: re.fullmatch(r"[a-z][a-z0-9-]*", w), words))
    rule = {"--rule": "--rule RULE", "--rules": "--rules R1,R2"}.get(
        parser.get_default("_rule_source"), "RULE"
    )
    if known:
        group.title = f"parameters of {' and '.join(s.name for s in known)}"
        group.description = None
    else:
        group.description = (
            "each rule has its own flags: `stability rules RULE` lists them, and "
            f"`stability {command} {rule} --help` shows them here"
        )
    parser._action_groups.remove(group)
    parser._action_groups.append(group)


def rule_names_in(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """The rule name(s) written in ``argv`` (the arguments after the command), for the help."""
    source = parser.get_default("_rule_source")
    if source in ("--rule", "--rules"):
        for i, token in enumerate(argv):
            if token == source and i + 1 < len(argv):
                return argv[i + 1].split(",")
            if token.startswith(source + "="):
                return token.split("=", 1)[1].split(",")
        return []
    if source != "positional":
        return []
    takes_value = {
        s: a.nargs != 0 for a in parser._actions for s in a.option_strings
    }  # flags that consume the next token
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token.startswith("-"):
            skip = "=" not in token and takes_value.get(token, False)
        else:
            return [token]
    return []


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


class HelpFormatter(argparse.HelpFormatter):
    """Wraps the description, keeps the ``examples:`` epilog as written, and shows each
    option's default (``(default: X)``) unless its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if not action.option_strings or not text or "default" in text:
            return text
        if default is None or default is False or default == argparse.SUPPRESS:
            return text
        if isinstance(default, (tuple, list)):
            default = ",".join(map(str, default))
        elif isinstance(default, float):
            default = f"{default:g}"  # 1e+06, not 1000000.0
        return f"{text} (default: {str(default).replace('%', '%%')})"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:") or text.startswith("commands"):
            return text
        return super()._fill_text(text, width, indent)


def add_command(
    sub,
    name: str,
    *,
    usage: str,
    help: str,  # noqa: A002 - argparse's name
    description: str,
    examples: Sequence[str],
):
    """A subcommand parser with its usage line (after ``stability NAME``), one-line help,
    description and examples; ``NAME`` may be a subcommand's (``net max-lr``: max-lr of
    ``sub``)."""
    return sub.add_parser(
        name.split()[-1],
        usage=f"stability {name} {usage}",
        help=help,
        description=description,
        epilog=examples_epilog(examples),
        formatter_class=HelpFormatter,
    )


def examples_epilog(examples: Sequence[str]) -> str:
    """The ``examples:`` section of a command's help (every line runs in the tests)."""
    return "examples:\n" + "\n".join(f"  stability {line}" for line in examples)


# -- output paths ------------------------------------------------------------------------------


def _writable_directory(flag: str, directory: Path) -> None:
    """`stability.checks.check_writable_directory` as a `UsageError` naming ``flag``."""
    from stability.checks import check_writable_directory

    try:
        check_writable_directory(flag, directory)
    except ValueError as err:
        raise UsageError(str(err)) from None


def output_file_arg(flag: str) -> Callable[[str], Path]:
    """A file to write: not a directory, in a directory where files can be created (its
    missing directories are created when writing, as for `output_dir_arg`; docs/conventions.md)."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise UsageError(f"{flag} must be a file path, got an empty string")
        path = Path(text).expanduser()
        if path.is_dir():
            raise UsageError(f"{flag} must be a file path, got the directory {text}")
        _writable_directory(flag, path.parent)
        return path

    return parse


def existing_dir_arg(flag: str) -> Callable[[str], Path]:
    """A directory that exists (to read)."""

    def parse(text: str) -> Path:
        if not text.strip():  # Path("") is the working directory
            raise UsageError(f"{flag} must be an existing directory, got an empty string")
        path = Path(text).expanduser()
        if not path.is_dir():
            raise UsageError(f"{flag} must be an existing directory, got {text!r}")
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
