"""Inputs declared once (`stability.options`, `stability.api.commands`): the public function's
defaults, the command line's flags and the sweep's keyword tables all come from one table per
command and cannot drift apart."""

from __future__ import annotations

import inspect
import re

import pytest

from stability.api.commands import COMMANDS, PIPELINE_OPTIONS, PROBLEM_OPTIONS
from stability.cli.main import main
from stability.options import REQUIRED, check_options, option


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_function_takes_its_table_with_the_table_defaults(name):
    spec = COMMANDS[name]
    signature = inspect.signature(spec.function).parameters
    assert isinstance(spec.result, type)
    for o in spec.options:
        assert o.name in signature, (name, o.name)
        default = signature[o.name].default
        if o.required:
            assert default is inspect.Parameter.empty, (name, o.name)
        elif o.kind != "ints":
            assert default == o.default, (name, o.name, default, o.default)
        else:
            assert default is None or tuple(default) == o.default, (name, o.name)
    if spec.pipeline:
        assert "pipeline" in signature


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_is_a_flag_with_its_help_and_default(capsys, name):
    words = name.split()  # "net max-lr": a subcommand
    argv = (
        [*words, "--help"]
        if name in ("train", "validate", "coupled")
        else [*words, "sgd", "--help"]
    )
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    spec = COMMANDS[name]
    tables = spec.options + (PIPELINE_OPTIONS if spec.pipeline else ())
    if name in ("train", "validate", "coupled"):
        tables += PROBLEM_OPTIONS + PIPELINE_OPTIONS
    for o in tables:
        if o.switches:
            assert all(f"{o.flag}-{c}" in text for c in o.choices), (name, o.name)
            continue
        if name == "coupled" and o.name == "stage_delays":
            continue  # coupled's --taus is its profile
        assert o.flag in text, (name, o.flag)
        assert " ".join(o.help.split())[:40] in text, (name, o.name)


def test_sweep_keywords_are_the_train_table():
    from stability.sweep.catalog import get_command, keyword_kinds

    kinds = keyword_kinds(get_command("train"), ["sgd"])
    table = {o.name: o.kind for o in COMMANDS["train"].options + PROBLEM_OPTIONS}
    assert {k: v for k, v in kinds.items() if k in table} == {
        k: v for k, v in table.items() if k in kinds
    }
    assert set(kinds) >= {"lr", "steps", "batch", "seed", "divergence", "data", "hidden"}
    assert get_command("max-lr").options == COMMANDS["max-lr"].options


@pytest.mark.parametrize(
    "values, match",
    [
        ({"lr": 0.1, "steps": 0}, "steps must be an integer ≥ 1"),
        ({"lr": 0.1, "steps": 2.5}, "steps must be an integer"),
        ({"lr": -1.0, "steps": 3}, "lr must be a finite real number > 0"),
        ({"steps": 3}, "lr must be given"),
        ({"lr": 0.1, "mode": "x"}, "unknown option 'mode'"),
        ({"lr": 0.1, "kind": "x"}, "kind must be one of a, b"),
        ({"lr": 0.1, "delays": [1, -2]}, "delays must be"),
    ],
)
def test_a_table_validates_in_one_line(values, match):
    table = (
        option("lr", "step size", "real", low=0.0, low_open=True),
        option("steps", "steps run", "int", default=10, low=1),
        option("kind", "which", "str", default="a", choices=("a", "b")),
        option("delays", "per stage", "ints", default=None),
    )
    with pytest.raises(ValueError, match=match) as err:
        check_options(table, values)
    assert "\n" not in str(err.value)
    assert check_options(table, {"lr": 1})["steps"] == 10
    assert check_options(table, {"lr": 1, "delays": 3})["delays"] == (3,)
    assert table[0].required and table[0].default is REQUIRED


def test_the_sweep_catalog_is_the_registry():
    """A declared sweepable command is swept by its own function and table: the catalog's
    point evaluation equals the public function's result."""
    import stability as st
    from stability.sweep.catalog import COMMANDS as SWEEP

    assert {n for n, c in COMMANDS.items() if c.sweepable} | {"train"} == set(SWEEP)
    points = [("sgd", {"tau": 2, "lr": 0.1}), ("sgd", {"tau": 2, "lr": -1.0})]
    good, bad = SWEEP["radius"].evaluate(points)
    assert good.to_json() == st.radius("sgd", tau=2, lr=0.1).to_json()
    assert isinstance(bad, str) and "lr must be" in bad
    assert SWEEP["halflife"].options == COMMANDS["halflife"].options


def test_the_development_guide_shows_the_code(capsys):
    """docs/development.md's worked examples (an option of net max-lr, the claims command) are
    the declarations as they are in stability/api/tables.py, and they do what the guide says."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    guide = (root / "docs" / "development.md").read_text(encoding="utf-8")
    section = guide.split("## Adding a command or an option", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    tables = ("tables.py", "net_tables.py")
    source = " ".join(
        " ".join((root / "stability" / "api" / t).read_text() for t in tables).split()
    )
    declared = [b for b in blocks if b.lstrip().startswith(("option(", "CLAIMS_OPTIONS"))]
    assert len(declared) == 2
    for block in declared:
        assert " ".join(block.split()).rstrip(",") in source
    assert main(["net", "max-lr", "--help"]) == 0
    assert "--measure-steps X" in capsys.readouterr().out
    argv = ["net", "max-lr", "--problem", "x.py:f", "--rule", "sgd", "--measure-steps", "9"]
    assert main(argv) == 2
    assert "--measure-steps must be an integer in [100, 1000000]" in capsys.readouterr().err
    spec = COMMANDS["claims"]
    assert (spec.module, spec.function_name, spec.result_name, spec.rule) == (
        "stability.api.claims", "claims", "Claims", None
    )  # fmt: skip


def test_every_flag_of_every_command_comes_from_the_registry():
    """No flag is spelled by hand: every (sub)command's parser is the registry's entry, and
    each of its flags is an option of that entry, a rule parameter's or the common ones."""
    import argparse

    from stability.cli.main import make_parser
    from stability.rules.registry import RULES

    def parsers(parser, name=""):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    yield from parsers(child, f"{name} {sub}".strip())
        if name and not parser._subparsers:
            yield name, parser

    found = dict(parsers(make_parser()))
    assert set(found) == set(COMMANDS)
    rule_flags = {"--" + p.name.replace("_", "-") for s in RULES.values() for p in s.params}
    common = {"-h", "--help", "--json", "--rule", "--rules"}
    for name, parser in found.items():
        spec = COMMANDS[name]
        declared = {o.flag for o in spec.all_options}
        declared |= {f"{o.flag}-{c}" for o in spec.all_options if o.switches for c in o.choices}
        flags = {s for a in parser._actions for s in a.option_strings}
        assert flags - declared - rule_flags - common == set(), name
        assert {o.flag for o in spec.all_options if not o.positional and not o.switches} <= flags
