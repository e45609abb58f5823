"""The ``stability`` command line (docs/conventions.md, "Errors and output").

``stability COMMAND RULE [flags] [--json]``: with ``--json`` exactly one JSON object on
stdout (the result's ``to_json()``, with ``schema_version``), otherwise a short report.
Errors are one line on stderr naming the flag, with exit code 2 (bad input) or 1 (an internal
failure; set STABILITY_DEBUG=1 for the traceback).  ``stability`` alone, or ``-h``, lists the
commands with one example each; ``stability COMMAND RULE --help`` shows the command's options
and the flags of RULE.

Commands live in `stability.cli.commands` (one module each) and call the public API
(`stability.api`); this module is the plumbing: parser, rule flags, errors, output, threads.
Heavy libraries are imported inside commands, so that ``stability max-lr`` starts in about
the time of ``import numpy``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from stability.cli.args import (
    HelpFormatter,
    Parser,
    UsageError,
    check_rule_flags,
    flag_of,
    focus_help,
    rule_names_in,
)
from stability.result import Result, warning_lines, with_warnings

BLAS_THREADS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
"""Thread-count variables of the BLAS libraries numpy may use."""


def limit_blas_threads(environ=os.environ) -> bool:
    """One BLAS thread, unless the user set a thread count (returns whether it did).

    The CLI's eigen-solves and trainer steps are small matrix operations run many times:
    threads cost more than they gain (``train --tau 300``: 23.7 s with the default threads,
    2.7 s with one).  It must run before numpy is imported to take effect.
    """
    if any(name in environ for name in BLAS_THREADS):
        return False
    for name in BLAS_THREADS:
        environ[name] = "1"
    return True


def passive_omp_wait(environ=os.environ) -> bool:
    """``OMP_WAIT_POLICY=PASSIVE`` unless the user set a policy (returns whether it did).

    With more than one thread (the user's ``OMP_NUM_THREADS``), torch's OpenMP threads spin
    while they wait for work by default; on a machine whose cores are shared, the spinning
    thread takes the core from the one that has work.  Measured on the 1.07·10⁶-parameter
    examples/tiny_transformer.py, ``net curvature --k 5`` on two threads at load 9–10 on two
    cores: 159 s of CPU and 619 s wall spinning, 15 s of CPU and 57 s wall passive (one
    thread: 12.5 s of CPU; benchmarks/bench_curvature.py, table 2).  It must run before torch
    is imported to take effect.
    """
    if "OMP_WAIT_POLICY" in environ:
        return False
    environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


def make_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; the command named in ``argv`` gets its flags now, the others when they are
    used (every command's now when ``argv`` names none), and its help shows only the named
    rule's flags."""
    from stability.cli.commands import COMMANDS
    from stability.limits import help_text
    from stability.version import __version__

    parser = Parser(
        prog="stability",
        usage="stability [-h] [--version] COMMAND [RULE] [flags] [--json]",
        description="Stability analysis of delayed-gradient (pipeline-parallel) training: "
        "for an update rule, its delays and the curvature, which step sizes keep training "
        "stable, how fast it converges, and whether a real training run agrees.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"stability {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser, help=argparse.SUPPRESS
    )
    sub.required = True
    listing = ["commands (`stability COMMAND --help`: its options and two examples):"]
    for command in COMMANDS:
        command.register(sub)
        name, helptext = sub._choices_actions[-1].dest, sub._choices_actions[-1].help
        listing += [f"  {name:<10}  {helptext}", f"  {'':<10}    stability {command.EXAMPLES[0]}"]
    parser.epilog = "\n".join(listing) + "\n\n" + help_text()
    command_parser, rest = _command_parser(sub, list(argv))
    if command_parser is None:  # no command named: every command's flags, for the introspection
        _fill_all(parser)
    else:
        focus_help(command_parser, rule_names_in(command_parser, rest))
    return parser


def _command_parser(sub, argv: list[str]) -> tuple[argparse.ArgumentParser | None, list[str]]:
    """The parser of the (sub)command named in ``argv`` (``net max-lr`` → max-lr's), its flags
    added, and the arguments after its name."""
    parser = None
    while True:
        position = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
        if position is None or argv[position] not in sub.choices:
            return parser, argv
        parser, argv = sub.choices[argv[position]].filled(), argv[position + 1 :]
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not nested:
            return parser, argv
        sub = nested[0]


def _fill_all(parser: argparse.ArgumentParser) -> None:
    """Add the flags of ``parser``'s commands and subcommands (`Parser.fill_later`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _fill_all(command.filled())


def main(argv: Sequence[str] | None = None) -> int:
    limit_blas_threads()
    passive_omp_wait()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = make_parser(argv)
        if not argv:
            sys.stdout.write(parser.format_help())
            return 0
        args = parser.parse_args(argv)
        _refuse_repeated_flags(parser, argv)
        check_rule_flags(args)
        result, lost = run_recording_warnings(args)
        if args.json:
            out = result.to_json()
            if not isinstance(result, Result) and lost:
                out["warnings"] = lost
            sys.stdout.write(json.dumps(out, allow_nan=False) + "\n")
        else:
            shown = result.warnings if isinstance(result, Result) else lost
            text = args.report(result) + "".join(f"\nwarning: {w}" for w in shown)
            sys.stdout.write(text + "\n")
        return 0
    except SystemExit as done:  # --help, --version
        return int(done.code or 0)
    except (UsageError, ValueError, OSError) as err:
        flags = _known_flags(locals().get("parser"), argv)
        sys.stderr.write(f"stability: error: {_naming_the_flag(err, argv, flags)}\n")
        return 2
    except KeyboardInterrupt as stop:  # `stability.checks.Interrupted` says what was completed
        done = f": {stop}" if str(stop) else ""
        sys.stderr.write(f"stability: interrupted{done} (no partial files are left behind)\n")
        return 130
    except Exception as err:  # noqa: BLE001 - the contract is one line, never a traceback
        if os.environ.get("STABILITY_DEBUG"):
            raise
        sys.stderr.write(f"stability: internal error: {type(err).__name__}: {err}\n")
        return 1


def run_recording_warnings(args) -> tuple[Any, list[str]]:
    """Run the command with Python and numpy warnings recorded instead of printed.

    On success they are returned as one-line strings (the result may have lost accuracy, e.g.
    an overflow), which `main` adds as the ``warnings`` list of the JSON object or as
    ``warning:`` lines of the report: never text on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = args.run(args)
    lost = warning_lines(caught)  # deprecation notices are dropped: they are not results
    return with_warnings(result, lost), lost


def _parsers_of(parser: Any, argv: Sequence[str]) -> Iterator[argparse.ArgumentParser]:
    """The parser and the (sub)command parsers ``argv`` runs through (none before it is
    built)."""
    words = [a for a in argv if not a.startswith("-")]
    while parser is not None:
        yield parser
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = next((subs[0].choices[w] for w in words if subs and w in subs[0].choices), None)


def _known_flags(parser: Any, argv: Sequence[str]) -> frozenset[str]:
    """The option strings of the (sub)command ``argv`` runs (empty before it is built)."""
    return frozenset(
        s for p in _parsers_of(parser, argv) for a in p._actions for s in a.option_strings
    )


def _refuse_repeated_flags(parser: Any, argv: Sequence[str]) -> None:
    """A flag that takes one value given twice (``--tau 3 --tau 4``): argparse keeps the last
    silently; the two values conflict, so it is refused (flags declared repeatable are not)."""
    for command_parser in _parsers_of(parser, argv):
        for action in command_parser._actions:
            if isinstance(action, argparse._AppendAction | argparse._CountAction):
                continue
            given = [
                a
                for a in argv
                for s in action.option_strings
                if s.startswith("--") and (a == s or a.startswith(s + "="))
            ]
            if len(given) > 1:
                raise UsageError(
                    f"{action.option_strings[-1]} is given {len(given)} times; give it once"
                )


def _naming_the_flag(
    err: Exception, argv: Sequence[str], flags: frozenset[str] = frozenset()
) -> str:
    """The error's one line, its leading parameter name written as the flag the user typed
    (``tau_bkwd must be ≤ …`` → ``--tau-bkwd must be ≤ …``), or as the command's flag when
    the user did not type it (``stages must be given …`` → ``--stages must be given …``);
    other parameter names with an underscore become flags too (``give both sc_a and sc_b``
    → ``give both --sc-a and --sc-b``)."""
    text = " ".join(str(err).split())
    if isinstance(err, OSError):  # a file that could not be read or written after the checks
        where = f" {err.filename}" if err.filename else ""
        return f"cannot access{where}: {err.strerror or err}"
    text = re.sub(
        r"(?<![\w-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w-])",
        lambda m: flag_of(m.group(1)) if flag_of(m.group(1)) in flags else m.group(1),
        text,
    )
    first = text.split(" ", 1)[0].rstrip(":")
    if not first.isidentifier():
        return text
    delays = ["--taus", "--stage-delays"] if first == "tau" else []  # or the lists of delays
    for flag in (flag_of(first), *delays):
        if any(a == flag or a.startswith(flag + "=") for a in argv):
            return flag + text[len(first) :]
    if flag_of(first) in flags:
        return flag_of(first) + text[len(first) :]
    if text.startswith("rule:"):  # the positional RULE: name it
        from stability.rules.registry import RULES

        name = next((a for a in argv if a in RULES), None)
        rest = text[len(first) :]
        if name is not None and not rest.lstrip().startswith(repr(name)):  # not named twice
            return f"rule {name!r}" + rest
    return text


if __name__ == "__main__":
    raise SystemExit(main())
