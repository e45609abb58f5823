"""The ``stability`` command line (DESIGN.md, CLI contract).

``stability COMMAND RULE [flags] [--json]``: with ``--json`` exactly one JSON object on
stdout, otherwise a short report.  Errors are one line on stderr with exit code 2 (bad input)
or 1 (an internal failure; set STABILITY_DEBUG=1 for the traceback).

Commands live in `stability.cli.commands` (one module each); this module is the plumbing:
parser, rule flags, error handling, output.  Heavy libraries are imported inside commands,
so that ``stability max-lr`` starts in about the time of ``import numpy``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from stability.cli.args import Parser, UsageError
from stability.files import strict_json
from stability.limits import help_text

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


def make_parser() -> argparse.ArgumentParser:
    from stability.cli.commands import COMMANDS

    parser = Parser(
        prog="stability",
        description="Stability analysis of delayed-gradient (pipeline-parallel) training.",
        epilog=EXAMPLES + "\n" + help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
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


def run_recording_warnings(args) -> dict[str, Any]:
    """Run the command with Python and numpy warnings recorded instead of printed: on success
    they become the result's ``warnings`` field (a list of one-line strings: the result may
    have lost accuracy, e.g. an overflow), never text on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = args.run(args)
    seen = dict.fromkeys(
        f"{w.category.__name__}: {w.message} ({os.path.basename(w.filename)}:{w.lineno}); "
        "the result may have lost accuracy"
        for w in caught
    )
    if seen:
        result = {**result, "warnings": [*result.get("warnings", []), *seen]}
    return result


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = make_parser()
        args = parser.parse_args(argv)
        result = run_recording_warnings(args)
        if args.json:
            sys.stdout.write(json.dumps(strict_json(result)) + "\n")
        else:
            report = getattr(args, "report", None) or format_report
            text = report(result)
            if result.get("warnings") and report is not format_report:
                text += "".join(f"\nwarning: {w}" for w in result["warnings"])
            sys.stdout.write(text + "\n")
        return 0
    except (UsageError, ValueError) as err:
        sys.stderr.write(f"stability: error: {err}\n")
        return 2
    except OSError as err:  # a file that could not be read or written after the checks
        where = f" {err.filename}" if err.filename else ""
        sys.stderr.write(f"stability: error: cannot access{where}: {err.strerror or err}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("stability: interrupted\n")
        return 130
    except Exception as err:  # noqa: BLE001 - the contract is one line, never a traceback
        if os.environ.get("STABILITY_DEBUG"):
            raise
        sys.stderr.write(f"stability: internal error: {type(err).__name__}: {err}\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
