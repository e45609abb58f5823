"""Flags shared by the trainer commands (``train``, ``validate``, ``coupled``): the problem and
data, and the pipeline that gives per-stage delays — generated from their option tables
(`stability.api.commands.PROBLEM_OPTIONS`, `PIPELINE_OPTIONS`); their values go to the public
functions as keywords (`stability.api.setup.split_keywords`)."""

from __future__ import annotations

import argparse
from typing import Any

from stability.cli.args import add_options, option_values

PIPELINE_GROUP = "pipeline (per-stage delays, PipeMare Table 1)"


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """``--problem``, ``--data`` and the preprocessing / MLP flags."""
    from stability.api.commands import PROBLEM_OPTIONS

    add_options(parser, PROBLEM_OPTIONS, title="problem and data")


def add_pipeline_arguments(parser: argparse.ArgumentParser, *, stage_delays: bool = True) -> None:
    """``--schedule``, ``--stage-delays``, ``--stages`` P and ``--microbatches`` N (PipeMare
    Table 1); ``stage_delays=False`` where the command has its own per-stage delays flag."""
    from stability.api.commands import PIPELINE_OPTIONS

    options = [o for o in PIPELINE_OPTIONS if stage_delays or o.name != "stage_delays"]
    add_options(parser, tuple(options), title=PIPELINE_GROUP)


def pipeline_values(args: argparse.Namespace) -> dict[str, Any]:
    """The pipeline keywords given on the command line."""
    from stability.api.commands import PIPELINE_OPTIONS

    return {o.name: getattr(args, o.name, None) for o in PIPELINE_OPTIONS}


def problem_values(args: argparse.Namespace) -> dict[str, Any]:
    """The problem keywords given on the command line."""
    from stability.api.commands import PROBLEM_OPTIONS

    return option_values(args, PROBLEM_OPTIONS)


def register_trainer_command(
    sub,
    name: str,
    *,
    title: str,
    rule: str = "--rule",
    stage_delays: bool = True,
    report,
    run,
    **words: Any,
) -> argparse.ArgumentParser:
    """The parser of a trainer command (``train``, ``validate``, ``coupled``): its rule flags
    (``rule``: ``--rule`` or ``--rules``), its option table of `stability.api.commands` (in a
    group ``title``), the problem's and the pipeline's flags; ``words`` are `add_command`'s."""
    from stability.api.commands import command
    from stability.cli.args import add_command, add_output_arguments, add_rule_arguments

    p = add_command(sub, name, **words)
    add_rule_arguments(p, rule=rule, exclude=("stages", "microbatches"))
    add_options(p, command(name).options, title=title)
    add_problem_arguments(p)
    add_pipeline_arguments(p, stage_delays=stage_delays)
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)
    return p


def trainer_keywords(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """A trainer command's keywords from the command line: its options, the pipeline's, the
    problem's and the rule parameters."""
    from stability.api.commands import command
    from stability.cli.args import rule_values

    options = option_values(args, command(name).options)
    return {**options, **pipeline_values(args), **problem_values(args), **rule_values(args)}
