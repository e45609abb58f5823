"""MkDocs hooks: pages whose content is generated from one source at build time.

* ``<!-- api-reference -->`` (docs/reference/api.md) becomes one mkdocstrings block per name
  of ``stability.__all__``, read from its home module (``stability._HOMES``): the API page
  lists exactly the public names, with their docstrings.
* ``<!-- reproductions -->`` (docs/reproductions.md) becomes the list of the committed
  full-mode reproductions, read from ``figures/<name>.json``, with the ids of their claims
  (graded once, on docs/claims.md).
* ``<!-- cli-options -->`` (docs/reference/cli.md) becomes one table per command of the
  registry (``stability.api.commands.COMMANDS``): its inputs, each declared once.
* ``<!-- cli-help -->`` and ``<!-- json-reference -->`` (docs/reference/) become every
  command's ``--help`` text and the JSON keys of every public result type (``Result.schema``):
  generated from the parsers and the result types at every build, so they cannot go stale.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def api_reference() -> str:
    """One mkdocstrings block per public name; a result type is followed by its fields (the
    attributes, which are its JSON keys: name, type, unit, meaning)."""
    import stability

    blocks = []
    for name in stability.__all__:
        blocks.append(f"::: {stability._HOMES[name]}.{name}\n")
        fields = _fields_table(getattr(stability, name))
        if fields:
            blocks.append(f"**Fields of `{name}`** (its attributes and JSON keys):\n\n{fields}\n")
    return "\n".join(blocks)


def _fields_table(value) -> str:
    """The schema of a `Result` type as a Markdown table ("" for anything else)."""
    from stability.result import Result

    if not (isinstance(value, type) and issubclass(value, Result)):
        return ""
    if not dataclasses.is_dataclass(value):
        return ""
    rows = ["| key | type | unit | meaning |", "|---|---|---|---|"]
    for e in value.schema():
        rows.append(f"| `{e.name}` | `{_cell(e.type)}` | {e.unit} | {_cell(e.doc)} |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reproductions() -> str:
    lines = ["| script | reproduces | its claims (graded on [The papers' claims](claims.md)) |",
             "|---|---|---|"]  # fmt: skip
    for path in sorted((ROOT / "figures").glob("*.json")):
        record = json.loads(path.read_text())
        if "claims" not in record or "name" not in record:
            continue  # not a reproduction (max_lr_table.json, claims.json)
        ids = ", ".join(f"`{c['id']}`" for c in record["claims"])
        lines.append(f"| `{record['name']}` | {_cell(record['source'])} | {ids} |")
    return "\n".join(lines)


def cli_help() -> str:
    from stability.cli.main import make_parser

    def sections(parser, title: str) -> list[str]:
        parts = [f"## {title}", "", "```", parser.format_help().rstrip(), "```", ""]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):  # commands, net's subcommands
                for name, sub in action.choices.items():
                    parts += sections(sub, f"{title} {name}")
        return parts

    return "\n".join(sections(make_parser(), "stability"))


def json_reference() -> str:
    import stability
    from stability.result import Result

    parts = []
    for name in stability.__all__:
        value = getattr(stability, name)
        if (
            isinstance(value, type)
            and issubclass(value, Result)
            and dataclasses.is_dataclass(value)
        ):
            parts += [f"## {name}", "", _fields_table(value), ""]
    return "\n".join(parts)


def cli_options() -> str:
    """One table per command of the registry (`stability.api.commands.COMMANDS`): every input
    with its flag, Python keyword, kind, allowed values, meaning and default — the same
    declarations the parsers, the public functions' validation and the sweep use."""
    from stability.api.commands import COMMANDS

    parts = []
    for name, spec in COMMANDS.items():
        parts += [
            f"### {name}",
            "",
            f"`{spec.module}.{spec.function_name}` → `{spec.result_name}`"
            + ("; sweepable" if spec.sweepable else ""),
            "",
            "| flag | keyword | kind | allowed | meaning (default) |",
            "|---|---|---|---|---|",
        ]
        for o in spec.all_options:
            cells = (f"`{o.flag}`", f"`{o.name}`", o.kind, o.allowed, o.help)
            parts.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        if spec.pipeline:
            one = "`pipeline=Pipeline.from_options(schedule=..., stages=..., ...)`"
            parts += ["", f"From Python the pipeline's inputs come as one value: {one}."]
        parts.append("")
    return "\n".join(parts)


MARKERS = {
    "<!-- cli-options -->": cli_options,
    "<!-- api-reference -->": api_reference,
    "<!-- reproductions -->": reproductions,
    "<!-- cli-help -->": cli_help,
    "<!-- json-reference -->": json_reference,
}


def on_page_markdown(markdown: str, page, config, files) -> str:
    for marker, make in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
