"""The ``stability`` command line (DESIGN.md, CLI contract).

``stability COMMAND RULE [flags] [--json]``: with ``--json`` exactly one JSON object on
stdout, otherwise a short report.  Errors are one line on stderr with exit code 2 (bad input)
or 1 (an internal failure; set STABILITY_DEBUG=1 for the traceback).

Commands live in `stability.commands` (one module each); this module is the plumbing:
parser, rule flags, error handling, output.  Heavy libraries are imported inside commands,
so that ``stability max-lr`` starts in about the time of ``import numpy``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from stability.files import strict_json

EXAMPLES = """\
examples:
  stability rules
  stability poly momentum --tau 2 --momentum 0.9 --lr 0.1 --symbolic --json
  stability radius sgd --tau 4 --lr 0.2 --json
  stability radius sgd --tau 3 --lr 0.4450418679126288000000123 --certify --json
  stability max-lr sgd --tau 10 --lam 1 --json
  stability max-lr t2 --tau-fwd 40 --tau-bkwd 10 --delta 5 --decay 0.1 --json
  stability bounds momentum --tau 10 --momentum 0.9 --json
  stability claims --quick
  stability halflife lwp+sc --tau 1 --kappa 1000 --optimize-momentum --json
  stability heatmap momentum --tau 1 --x lr:1e-3:10:256:log --y momentum:0:0.999:256 \\
      --out F.png --csv F.csv
  stability repro --all --quick
  stability validate --problem linreg --rules sgd,momentum --taus 0,1,4,16 --momentum 0.9
  stability coupled --problem linreg --stages 4 --schedule pipemare --rule sgd --measure
  stability t1-audit sgd --lam 4 --lr-schedule constant:0.1 --taus 1,4,16 --anneal-steps 1000 \\
      --steps 2000
"""


class UsageError(Exception):
    """Bad command-line input: reported on one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + message
        raise UsageError(message)


class ExactFloat(float):
    """A float parsed from the command line that keeps its text's exact value in ``exact``.

    Computations use the float; ``stability radius --certify`` reads ``exact`` (a Fraction),
    so that ``--lr 0.4450418679126288000000123`` is not rounded to float64 there.
    """

    exact: Fraction


def _float_arg(name: str) -> Callable[[str], ExactFloat]:
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


def _delay_arg(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{name} must be an integer in [0, 100000], got {text!r}") from None
        if not math.isfinite(value) or value != int(value):
            raise UsageError(f"{name} must be an integer in [0, 100000], got {text}")
        return int(value)

    return parse


def _bool_arg(name: str) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"{name} must be true or false, got {text!r}")

    return parse


def _choice_arg(name: str, choices: tuple[str, ...]) -> Callable[[str], str]:
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
            parse = _choice_arg(name, p.choices)
        else:
            parse = {"delay": _delay_arg, "bool": _bool_arg}.get(p.kind, _float_arg)(name)
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


def make_parser() -> argparse.ArgumentParser:
    from stability.commands import COMMANDS

    parser = _Parser(
        prog="stability",
        description="Stability analysis of delayed-gradient (pipeline-parallel) training.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for command in COMMANDS:
        command.register(sub)
    return parser


def format_report(result: dict[str, Any]) -> str:
    """Default human-readable output: one ``key: value`` line per field."""
    lines = []
    for key, value in result.items():
        if isinstance(value, float):
            value = f"{value:.16g}"
        elif isinstance(value, (list, tuple)) and len(value) > 12:
            value = f"[{len(value)} values]"
        lines.append(f"{key}: {value}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = make_parser()
        args = parser.parse_args(argv)
        result = args.run(args)
        if args.json:
            sys.stdout.write(json.dumps(strict_json(result)) + "\n")
        else:
            report = getattr(args, "report", None) or format_report
            sys.stdout.write(report(result) + "\n")
        return 0
    except (UsageError, ValueError) as err:
        sys.stderr.write(f"stability: error: {err}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("stability: interrupted\n")
        return 130
    except Exception as err:  # noqa: BLE001 - the contract is one line, never a traceback
        if os.environ.get("STABILITY_DEBUG"):
            raise
        sys.stderr.write(f"stability: internal error: {type(err).__name__}: {err}\n")
        return 1


if __name__ == "__main__":  # run through the package module so exception classes are shared
    from stability.cli import main as _main

    raise SystemExit(_main())
