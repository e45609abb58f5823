"""``--help`` of every command and subcommand: every option has a description, and where it has
a default the help shows it; ``net max-lr --rule R --help`` shows only R's flags, and the pointer
to the rule flags names the rule the way the command takes it (``--rule RULE``)."""

from __future__ import annotations

import argparse
import re

import pytest

from stability.cli.main import main, make_parser
from stability.rules.registry import RULES


def _parsers(parser: argparse.ArgumentParser, name: str = ""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _parsers(child, f"{name} {sub}".strip())
    if name:
        yield name, parser


PARSERS = dict(_parsers(make_parser()))


def test_every_command_is_checked():
    assert {"noise", "max-lr", "heatmap", "sweep", "net train", "net max-lr"} <= set(PARSERS)
    assert "net" not in PARSERS or PARSERS["net"]._subparsers is not None


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_option_has_help_and_shows_its_default(name):
    parser = PARSERS[name]
    formatter = parser._get_formatter()
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        flag = action.option_strings[0] if action.option_strings else action.dest
        if not action.help:
            missing.append(f"{flag}: no help")
            continue
        shown = formatter._get_help_string(action) % {**vars(action), "prog": parser.prog}
        default = action.default
        if action.option_strings and default not in (None, False, argparse.SUPPRESS):
            if "default" not in shown:
                missing.append(f"{flag}: default {default!r} not shown")
    assert missing == []


def test_a_default_is_shown_in_the_help_text(capsys):
    assert main(["net", "curvature", "--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"--k K\s+eigenvalues \(at most p: all of them\) \(default: 10\)", out)
    assert main(["noise", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--lyapunov-runs LYAPUNOV_RUNS independent runs" in out and "(default: 32)" in out


def _rule_flags(text: str) -> set[str]:
    every = {"--" + p.name.replace("_", "-") for s in RULES.values() for p in s.params}
    return {f for f in re.findall(r"^\s+(--[a-z0-9-]+)", text, re.M) if f in every}


@pytest.mark.parametrize("sub", ["max-lr", "train"])
@pytest.mark.parametrize("rule", ["sgd", "momentum", "lwp+sc", "t2"])
def test_net_help_with_a_rule_lists_only_its_flags(capsys, sub, rule):
    assert main(["net", sub, "--rule", rule, "--help"]) == 0
    out = capsys.readouterr().out
    own = {"--tau", "--stages", "--microbatches"}  # the network's delay flags
    expected = {"--" + p.replace("_", "-") for p in RULES[rule].param_names} - {"--lam"}
    assert _rule_flags(out) - own == expected - own
    assert (f"parameters of {rule}" in out) == bool(expected - own)  # sgd: none to show


def test_net_help_without_a_rule_points_to_the_rule_flags(capsys):
    assert main(["net", "max-lr", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "`stability net max-lr --rule RULE --help` shows them here" in out
    assert _rule_flags(out) <= {"--tau", "--stages", "--microbatches"}


def test_a_named_rule_shows_its_defaults(capsys):
    assert main(["max-lr", "lwp", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--momentum X heavy-ball momentum" in out and "(default: 0.9)" in out


def test_coupled_usage_names_the_rule_flag(capsys):
    assert main(["coupled", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: stability coupled --rule RULE")
    assert "stability coupled --rule RULE --help" in " ".join(out.split())
    assert "coupled RULE --help" not in " ".join(out.split())


def test_a_command_not_named_gets_its_flags_when_it_is_used():
    """`make_parser` adds only the named command's flags (`Parser.fill_later`); another
    command's parser of that same tree adds its own when it parses or shows its help, and then
    parses and helps exactly as the one built for it."""

    def values(parser, line):  # the parsed values (run and report are closures of each build)
        parsed = vars(parser.parse_args(line))
        return {k: v for k, v in parsed.items() if k not in ("run", "report")}

    line = ["poly", "momentum", "--tau", "2", "--lr", "0.1", "--momentum", "0.5", "--json"]
    built_for_bounds = make_parser(["bounds", "sgd"])
    poly = built_for_bounds._subparsers._group_actions[0].choices["poly"]
    assert poly._fill is not None and not any("--tau" in a.option_strings for a in poly._actions)
    assert values(built_for_bounds, line) == values(make_parser(line), line)
    assert poly._fill is None and any("--tau" in a.option_strings for a in poly._actions)
    noise = make_parser(["bounds"])._subparsers._group_actions[0].choices["noise"]
    assert noise.format_help() == PARSERS["noise"].format_help()
