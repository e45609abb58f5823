"""The command line of a declared command (`stability.api.commands`): its parser, flags and
call generated from the registry entry; the command's module adds its words and its report
(and a ``run`` where the call needs more than the values, e.g. a progress bar).

Flags: the rule's parameters (`add_rule_arguments`, as the command names its rule), the
command's positional arguments, options and keyword tables and, for a command that takes a
pipeline, the pipeline's (`stability.api.commands.PIPELINE_OPTIONS`), which build one
`stability.pipeline.Pipeline` (``--schedule uniform`` takes the rule's delay).  A rule whose
own parameters are named ``stages``/``microbatches`` (``gpipe``) keeps them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from stability.cli.args import (
    add_command,
    add_output_arguments,
    add_rule_arguments,
    existing_dir_arg,
    float_arg,
    int_arg,
    int_list,
    output_dir_arg,
    output_file_arg,
    rule_names_arg,
    rule_values,
)


def register_declared(
    sub,
    name: str,
    *,
    report: Callable[[Any], str],
    run: Callable[[argparse.Namespace], Any] | None = None,
    title: str | None = None,
    progress: str | Callable[[argparse.Namespace], str] | None = None,
    **words: Any,
) -> argparse.ArgumentParser:
    """The parser of declared command ``name`` (module doc; ``net max-lr``: the subcommand
    max-lr of ``sub``): ``words`` are `add_command`'s (usage, help, description, examples);
    ``title``: the ``--help`` section of the command's own options; ``run`` defaults to
    `call`, with a progress bar on stderr labelled ``progress`` (a text, or a function of
    the values) when given."""
    p = add_command(sub, name, **words)
    p.fill_later(lambda: add_declared_arguments(p, name, title=title))
    if run is None and progress is not None:
        run = _with_progress(name, progress)
    p.set_defaults(run=run or (lambda args: call(name, args)), report=report)
    return p


def _with_progress(name: str, label: str | Callable[[argparse.Namespace], str]):
    """`call` with the ``progress`` callback of a progress bar labelled ``label``."""

    def run(args: argparse.Namespace) -> Any:
        from stability.cli.progress import progress_bar

        text = label(args) if callable(label) else label
        with progress_bar(text, json=args.json) as progress:
            return call(name, args, progress=progress)

    return run


def add_declared_arguments(
    parser: argparse.ArgumentParser, name: str, *, title: str | None = None
) -> None:
    """The flags of declared command ``name``: the rule's (as the command names its rule),
    its positional arguments, its options, its keyword tables, the pipeline's, ``--json``."""
    from stability.api.commands import PIPELINE_OPTIONS, command

    spec = command(name)
    if spec.rule is not None:
        exclude = spec.rule_exclude
        if spec.pipeline:
            exclude += tuple(o.name for o in PIPELINE_OPTIONS)
        add_rule_arguments(parser, rule=spec.rule, exclude=exclude)
    add_options(parser, spec.arguments)
    add_options(parser, spec.options, title=title)
    add_options(parser, spec.keywords)
    if spec.pipeline:
        add_options(parser, PIPELINE_OPTIONS)
    add_output_arguments(parser)


def keywords(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The public function's keywords from the command line: options and keyword tables given,
    ``pipeline`` (built from the pipeline's flags), rule parameters."""
    from stability.api.commands import PIPELINE_OPTIONS, command

    spec = command(name)
    values = rule_values(args) if spec.rule is not None else {}
    out = option_values(args, spec.options + spec.keywords)
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
    """The declared command's public function on the command line's values: the positional
    arguments, the rule (keyword ``rule``, or ``rules``), the keywords."""
    from stability.api.commands import command

    spec = command(name)
    values = [v for o in spec.arguments for v in getattr(args, o.name) or ()]
    if spec.rule is not None:
        which = "rules" if spec.rule == "--rules" else "rule"
        extra = {which: getattr(args, which), **extra}
    return spec.function(*values, **keywords(name, args), **extra)


# -- an option table on the command line ------------------------------------------------------


def add_options(parser, options, *, title: str | None = None) -> None:
    """One flag per `stability.options.Option` of a command's table, with its parser and its
    help (meaning, unit, default); absent flags are None, so the public function's defaults
    apply.  ``title``: put them in an argument group of that title (an option's own ``group``
    puts it in that one)."""
    groups: dict[str | None, Any] = {None: parser if title is None else _group(parser, title)}
    for o in options:
        if o.group not in groups:
            groups[o.group] = _group(parser, o.group)
        _add_option(groups[o.group], o)


def _group(parser, title: str):
    """The argument group of ``parser`` titled ``title`` (made the first time); ``parser``
    itself when it is a group already (groups do not nest)."""
    if not isinstance(parser, argparse.ArgumentParser):
        return parser
    for group in parser._action_groups:
        if group.title == title:
            return group
    return parser.add_argument_group(title)


def _add_option(target, o) -> None:
    """The flag (or positional argument) of one option (`add_options`)."""
    kw: dict[str, Any] = {"dest": o.name, "default": None, "help": o.help}
    if o.switches:  # one switch per choice, at most one of them
        which = target.add_mutually_exclusive_group()
        for choice in o.choices:
            which.add_argument(
                f"{o.flag}-{choice}",
                dest=o.name,
                action="store_const",
                const=choice,
                help=f"{o.doc}: {choice}",
            )
        return
    if o.kind == "bool":  # a switch; with a default of True it turns the option off
        on = o.default is not True
        action = "store_true" if on else "store_false"
        off = {"help": f"do not {o.doc} (done by default)"} if not on else {}
        target.add_argument(o.flag, action=action, **{**kw, "default": not on, **off})
        return
    flag = o.flag
    if o.kind == "real":
        kw["type"] = float_arg(flag)
    elif o.kind == "int":
        low = 0 if o.low is None else int(o.low)
        kw["type"] = int_arg(flag, low, None if o.high is None else int(o.high))
    elif o.kind == "ints":
        kw["type"] = int_list(flag, 0 if o.low is None else int(o.low))
    elif o.kind == "rules":
        kw["type"] = rule_names_arg(flag, several=True)
    elif o.path == "write-file":
        kw["type"] = output_file_arg(flag)
    elif o.path == "write-dir":
        kw["type"] = output_dir_arg(flag)
    elif o.path == "read-dir":
        kw["type"] = existing_dir_arg(flag)
    elif o.choices is not None:
        kw["choices"] = o.choices
    if o.metavar is not None:
        kw["metavar"] = o.metavar
    elif o.kind in ("real", "int", "ints", "str", "path") and o.choices is None:
        kw["metavar"] = "X"
    if o.positional:
        del kw["dest"]
        several = o.kind == "strs"
        nargs = "*" if several else (None if o.required else "?")
        if nargs is not None:
            kw["nargs"] = nargs
        target.add_argument(o.name, **kw)
        return
    if o.repeat:
        kw["action"] = "append"
    target.add_argument(flag, required=o.required, **kw)


def option_values(args: argparse.Namespace, options) -> dict[str, Any]:
    """The values of a command's `add_options` flags that were given (a switch: when it is
    not at its default; positional lists: when not empty)."""
    out = {}
    for o in options:
        value = getattr(args, o.name)
        if value is None or (o.kind == "bool" and value is (o.default is True)):
            continue
        if o.positional and o.kind == "strs" and not value:
            continue
        out[o.name] = value
    return out


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


__all__ = [
    "add_declared_arguments",
    "add_options",
    "option_values",
    "call",
    "keywords",
    "register_declared",
    "stage_lines",
]
