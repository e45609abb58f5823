"""The command line of a declared command (`stability.api.commands`): its parser, flags and
call generated from the registry entry; the command's module adds its words and its report.

Flags: the rule's parameters (`add_rule_arguments`), the command's options and, for a command
that takes a pipeline, the pipeline's (`stability.api.commands.PIPELINE_OPTIONS`), which build
one `stability.pipeline.Pipeline` (``--schedule uniform`` takes the rule's delay).  A rule
whose own parameters are named ``stages``/``microbatches`` (``gpipe``) keeps them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from stability.cli.args import (
    add_command,
    add_options,
    add_output_arguments,
    add_rule_arguments,
    option_values,
    rule_values,
)

PIPELINE_GROUP = "pipeline (per-stage delays, PipeMare Table 1)"


def register_declared(
    sub,
    name: str,
    *,
    report: Callable[[Any], str],
    run: Callable[[argparse.Namespace], Any] | None = None,
    **words: Any,
) -> argparse.ArgumentParser:
    """The parser of declared command ``name`` (module doc): ``words`` are `add_command`'s
    (usage, help, description, examples); ``run`` defaults to `call`."""
    from stability.api.commands import PIPELINE_OPTIONS, command

    spec = command(name)
    p = add_command(sub, name, **words)
    exclude = tuple(o.name for o in PIPELINE_OPTIONS) if spec.pipeline else ()
    add_rule_arguments(p, exclude=exclude)
    add_options(p, spec.options)
    if spec.pipeline:
        add_options(p, PIPELINE_OPTIONS, title=PIPELINE_GROUP)
    add_output_arguments(p)
    p.set_defaults(run=run or (lambda args: call(name, args)), report=report)
    return p


def keywords(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The public function's keywords from the command line: options, ``pipeline``, rule
    parameters."""
    from stability.api.commands import PIPELINE_OPTIONS, command

    spec = command(name)
    values = rule_values(args)
    out = option_values(args, spec.options)
    if spec.pipeline:
        from stability.pipeline import Pipeline
        from stability.rules.registry import get_spec

        given = option_values(args, PIPELINE_OPTIONS)
        rule = get_spec(args.rule)
        for key in ("stages", "microbatches"):  # gpipe's own parameters
            if key in rule.param_names and key in given:
                values[key] = given.pop(key)
        tau = None
        if given.get("schedule") == "uniform" and rule.delay_parameter in values:
            tau = values.pop(rule.delay_parameter)
        pipe = Pipeline.from_options(tau=tau, **given)
        if pipe is not None:
            out["pipeline"] = pipe
    return {**out, **values}


def call(name: str, args: argparse.Namespace, **extra: Any) -> Any:
    """The declared command's public function on the command line's values."""
    from stability.api.commands import command

    return command(name).function(args.rule, **keywords(name, args), **extra)


def stage_lines(result, columns: Sequence[str]) -> list[str]:
    """The per-stage rows of a pipeline result (``stages``), critical stage marked."""
    from stability.cli.report import number

    if getattr(result, "stages", None) is None:
        return []
    p = result.pipeline
    out = [
        f"pipeline: {p['schedule']}, {p['stages']} stages, {p['microbatches']} microbatches; "
        f"critical stage {result.critical_stage}",
        "  stage  tau_fwd  tau_bkwd  " + "  ".join(f"{c:>14}" for c in columns),
    ]
    for row in result.stages:
        mark = "  <- critical" if row["stage"] == result.critical_stage else ""
        cells = "  ".join(f"{number(row[c]):>14}" for c in columns)
        out.append(f"  {row['stage']:>5}  {row['tau_fwd']:>7}  {row['tau_bkwd']:>8}  {cells}{mark}")
    return out


__all__ = ["call", "keywords", "register_declared", "stage_lines"]
