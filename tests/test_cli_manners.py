"""CLI manners: help without arguments, --version, per-rule --help with runnable examples, one
rule for rule flags in every command, ranges as enforced, BLAS threads, and the regression
tests of the issue-11 defects that lived in the argument handling."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stability.cli.commands import COMMANDS
from stability.cli.main import limit_blas_threads, main, passive_omp_wait
from stability.rules.registry import RULES

ROOT = Path(__file__).resolve().parents[1]
NAMES = [c.__name__.rsplit(".", 1)[-1].replace("_", "-") for c in COMMANDS]
RULE_COMMANDS = ["poly", "radius", "max-lr", "bounds", "halflife", "heatmap", "t1-audit",
                 "train", "validate", "coupled", "noise"]  # fmt: skip


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv", [[], ["-h"], ["--help"]])
def test_no_arguments_or_h_lists_every_command_with_an_example(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 0 and err == ""
    for command in COMMANDS:
        name = command.__name__.rsplit(".", 1)[-1].replace("_", "-")
        assert re.search(rf"^  {name}\s", out, re.M), name
        assert f"stability {command.EXAMPLES[0]}" in out


def test_version(capsys):
    from stability.version import __version__

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"stability {__version__}\n"


def _flags(help_text: str) -> set[str]:
    """The rule flags listed in a help text."""
    every = {"--" + p.name.replace("_", "-") for s in RULES.values() for p in s.params}
    return {f for f in re.findall(r"^\s+(--[a-z0-9-]+)", help_text, re.M) if f in every}


@pytest.mark.parametrize("command", RULE_COMMANDS)
def test_help_without_a_rule_points_to_the_rules(capsys, command):
    code, out, _ = run(capsys, command, "--help")
    pipeline = {"--stages", "--microbatches"}  # the commands that take a pipeline
    own = {"train": pipeline, "validate": pipeline, "coupled": pipeline, "noise": pipeline,
           "max-lr": pipeline, "radius": pipeline, "halflife": pipeline
           }.get(command, set())  # fmt: skip
    assert code == 0 and _flags(out) <= own  # pipeline flags are the command's own
    rule = {"train": "--rule RULE", "coupled": "--rule RULE", "validate": "--rules R1,R2"}.get(
        command, "RULE"
    )  # the way the command names its rule (the usage line's)
    assert "stability rules RULE" in out and f"stability {command} {rule} --help" in out
    assert rule in out.splitlines()[0]
    assert len(out.splitlines()) < 80


@pytest.mark.parametrize("rule", sorted(RULES))
def test_help_with_a_rule_shows_exactly_its_flags_after_the_options(capsys, rule):
    code, out, _ = run(capsys, "heatmap", rule, "--help")
    assert code == 0
    assert _flags(out) == {"--" + p.replace("_", "-") for p in RULES[rule].param_names}
    assert out.index("options:") < out.index(f"parameters of {rule}") < out.index("examples:")


def test_help_with_a_rule_for_the_commands_that_take_it_as_a_flag(capsys):
    for argv, rule in ((["train", "--rule", "t2"], "t2"), (["coupled", "--rule=lwp"], "lwp")):
        code, out, _ = run(capsys, *argv, "--help")
        shown = {"--" + p.replace("_", "-") for p in RULES[rule].param_names}
        assert code == 0 and _flags(out) - {"--stages", "--microbatches"} == shown
    code, out, _ = run(capsys, "validate", "--rules", "sgd,momentum", "--help")
    assert _flags(out) - {"--stages", "--microbatches"} == {"--tau", "--lam", "--momentum"}


def _examples(capsys) -> list[tuple[str, list[str]]]:
    found = []
    for name in NAMES:
        _, out, _ = run(capsys, name, "--help")
        lines = out.split("examples:\n", 1)[1].splitlines()
        shown = [line.strip() for line in lines if line.startswith("  stability ")]
        assert len(shown) == 2, name
        found += [(name, shlex.split(line)[1:]) for line in shown]
    return found


@pytest.mark.parametrize("name", NAMES)
def test_every_example_in_every_help_runs(capsys, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)  # examples write their files here
    for folder in ("examples", "paper_repro"):  # what net, sweep and repro read, as in a checkout
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.setenv("STABILITY_CACHE", str(tmp_path / "cache"))
    for command, argv in _examples(capsys):
        if command != name:
            continue
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, err)
        if "--json" in argv:
            assert json.loads(out)["schema_version"] == 1
        else:
            assert out.strip() and "None" not in out and "{'" not in out, out


@pytest.mark.parametrize(
    "argv",
    [
        ["poly", "sgd", "--lr", "0.1"],
        ["radius", "sgd", "--lr", "0.1"],
        ["max-lr", "sgd"],
        ["bounds", "sgd"],
        ["halflife", "sgd", "--kappa", "10"],
        ["heatmap", "sgd", "--x", "lr:0.1:1:3", "--y", "tau:0:2:3"],
        ["t1-audit", "sgd", "--lr-schedule", "constant:0.1", "--taus", "1", "--anneal-steps",
         "5", "--steps", "10"],
        ["train", "--rule", "sgd", "--lr", "0.1", "--steps", "10"],
        ["validate", "--rules", "sgd", "--taus", "1"],
        ["coupled", "--rule", "sgd", "--stages", "2"],
    ],
)  # fmt: skip
def test_a_flag_the_rule_does_not_take_is_refused_by_every_command(capsys, argv):
    code, out, err = run(capsys, *argv, "--momentum", "0.5")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--momentum: rule 'sgd' has no parameter 'momentum'" in err, err


@pytest.mark.parametrize(
    "argv",
    [["max-lr", "sgd", "--tau", "3", "--tau", "4"], ["max-lr", "sgd", "--tau=3", "--tau", "4"]],
)
def test_a_flag_given_twice_is_refused_not_the_last_value_kept(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert (
        code == 2
        and out == ""
        and err == "stability: error: --tau is given 2 times; give it once\n"
    )


def test_the_refusal_lists_only_the_rule_flags_the_command_has(capsys):
    """`max-lr` takes sgd's ``--tau`` and ``--lam``; `net max-lr` sets both itself (pipeline
    flags, the model's curvature), so it lists none rather than two flags it would refuse."""
    code, _, err = run(capsys, "max-lr", "sgd", "--delta", "1")
    assert code == 2 and err.endswith("(its flags here: --tau, --lam)\n"), err
    problem = str(Path(__file__).parents[1] / "examples" / "cancer_mlp.py") + ":problem"
    code, _, err = run(capsys, "net", "max-lr", "--problem", problem, "--rule", "sgd",
                       "--delta", "1")  # fmt: skip
    assert code == 2 and err.endswith("has no parameter 'delta' (no flag here)\n"), err


def test_validate_applies_a_flag_to_the_rules_that_take_it(capsys):
    code, _, err = run(capsys, "validate", "--rules", "sgd,ea", "--momentum", "0.5")
    assert code == 2 and "--momentum: no rule of --rules (sgd, ea) has a parameter" in err


def test_ranges_shown_are_the_ranges_enforced(capsys):
    code, out, _ = run(capsys, "rules", "gpipe", "ea", "--json")
    allowed = {p["name"]: p["allowed"] for r in json.loads(out)["rules"] for p in r["parameters"]}
    for name in ("stages", "microbatches", "replicas", "sync_period"):
        assert allowed[name] == "integer in [1, 100000]"
    for rule, flag in (("gpipe", "--stages"), ("gpipe", "--microbatches"),
                       ("ea", "--replicas"), ("ea", "--sync-period")):  # fmt: skip
        assert run(capsys, "max-lr", rule, flag, "1")[0] == 0
        code, _, err = run(capsys, "max-lr", rule, flag, "0")
        assert code == 2 and f"{flag} must be an integer in [1, 100000], got 0" in err


def test_blas_threads_limited_before_numpy_unless_the_user_chose():
    env = {}
    assert limit_blas_threads(env) and env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"
    user = {"OMP_NUM_THREADS": "4"}
    assert not limit_blas_threads(user) and user == {"OMP_NUM_THREADS": "4"}
    code = "import stability.cli.main, sys; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False"  # the entry point sets them before numpy loads


def test_omp_threads_wait_passively_unless_the_user_chose():
    env = {}
    assert passive_omp_wait(env) and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    user = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert not passive_omp_wait(user) and user == {"OMP_WAIT_POLICY": "ACTIVE"}


# -- issue 11 defects in the argument handling -------------------------------------------------


@pytest.mark.parametrize(
    "argv, needle",
    [
        # 1, 2: a single-delay rule without a backward delay under a schedule whose backward
        # weights differ (pipemare, pb) is refused in one line, by every command
        (["coupled", "--rule", "pipeoptim", "--stages", "2"], "rule 'pipeoptim' has no backward"),
        (["train", "--rule", "pipeoptim", "--schedule", "pb", "--stages", "2", "--lr", "0.01",
          "--steps", "20"], "rule 'pipeoptim' has no backward delay"),
        (["train", "--rule", "pipesgd", "--lr", "0.01", "--steps", "20", "--schedule", "pipemare",
          "--stages", "2"], "rule 'pipesgd' has no backward delay"),
        (["validate", "--rules", "pipesgd", "--schedule", "pipemare", "--stages", "2"],
         "rule 'pipesgd' has no backward delay"),
        # 3: T1 needs a fixed delay
        (["train", "--rule", "random-delay", "--lr", "0.01", "--steps", "10", "--t1", "5"],
         "--t1: T1 divides the step size by the forward delay"),
        # 6: "--" as a value is a value, refused naming its flag
        (["halflife", "sgd", "--kappa=--"], "--kappa must be a real number, got '--'"),
        (["halflife", "lwp", "--kappa", "10", "--horizon=--"], "--horizon must be a real number"),
        (["halflife", "lwp", "--kappa", "10", "--horizon-scale=--"], "--horizon-scale must be"),
        (["max-lr", "sgd", "--method=--"], "--method"),
        # 11: accepted but invalid
        (["heatmap", "sgd", "--x", "tau:0:3:4", "--y", "lam:1:2:3", "--lr=-1"], "--lr must be"),
        (["heatmap", "sgd", "--x", "tau:0:3:4", "--y", "lam:1:2:3", "--lr=0"], "--lr must be"),
        (["heatmap", "sgd", "--x", "lr:-1:1:25", "--y", "tau:0:3:4"], "lr must be a finite"),
        (["heatmap", "momentum", "--x", "lr:0.1:1:3", "--y", "momentum:0:1.5:25"],
         "--y axis momentum:0:1.5:25: momentum must be a finite real number in [0, 1], got 1.5"),
        (["coupled", "--rule", "sgd", "--momentum", "0.5", "--stages", "2"], "--momentum"),
        (["train", "--rule", "sgd", "--momentum", "0.5", "--lr", "0.1"], "--momentum"),
        (["validate", "--rules", "sgd", "--momentum", "0.5"], "--momentum"),
        (["train", "--rule", "sgd", "--schedule", "pipemare", "--tau", "3", "--lr", "0.1"],
         "--tau is set by the schedule (pipemare)"),
        (["train", "--rule", "sgd", "--stages", "3", "--lr", "0.1"], "--stages needs a schedule"),
    ],
)  # fmt: skip
def test_issue_11_defects_are_one_line_refusals(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert needle in err and "internal error" not in err, err


@pytest.mark.parametrize("rule, tau", [("pipesgd", 3), ("spectrain", 3), ("ea", 2), ("adam", 3)])
def test_issue_11_defect_3_t1_uses_the_single_delay(rule, tau):
    """T1's factor τ^{-p_k} (PipeMare eq. 4) for rules with one delay ``tau``: 1/τ at step 0,
    τ^{-1/2} half-way through K, 1 from K on; and the command runs."""
    from stability.trainer.schedules import plan

    built, _ = RULES[rule].build(tau=tau)
    (phase,) = plan(built, t1_steps=10)
    assert phase.lr_scale(0) == pytest.approx([1 / tau])
    assert phase.lr_scale(5) == pytest.approx([tau**-0.5])
    assert phase.lr_scale(10) == pytest.approx([1.0])
    argv = ["train", "--rule", rule, "--tau", str(tau), "--lr", "0.001", "--steps", "20", "--t1",
            "5", "--samples", "64", "--json"]  # fmt: skip
    assert main(argv) == 0


def test_issue_11_defect_10_symbolic_adam_leaves_weight_decay_out(capsys):
    import sympy

    code, out, err = run(capsys, "poly", "pipeoptim", "--optimizer", "adam", "--lr", "0.03",
                         "--symbolic", "--json")  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert "weight_decay" not in data["sympy"]
    # the symbolic polynomial at the defaults is the numeric one
    spec = RULES["pipeoptim"]
    values = spec.resolve(optimizer="adam")
    symbols = {s.name: s for s in sympy.sympify(data["sympy"]).free_symbols}
    at = {symbols[k]: v for k, v in {**values, "lr": 0.03}.items() if k in symbols}
    poly = sympy.Poly(sympy.sympify(data["sympy"]).subs(at), symbols["omega"])
    coefficients = [float(c) for c in poly.all_coeffs()]
    assert coefficients == pytest.approx(data["coefficients"], rel=1e-12, abs=1e-15)
