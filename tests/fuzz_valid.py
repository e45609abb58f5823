"""Valid random command lines for the CLI fuzzer (issue 25 item 3).

`tests/test_fuzz_cli.py` corrupts one flag of a fixed valid line; the defects an independent
fuzzer found came from *valid* lines with random values instead (an elastic force of 0.0024
with a cosine schedule, a network with an L2 of 0.68, a data file whose features are
constant, a discrepancy Δ where a command ignores it).  Here every command gets its base line
from `tests/test_fuzz_cli.py` plus 1-4 flags set to random values drawn from the parser
itself: a rule flag from the rule's declared range (`stability.rules.spec.Param`), an integer
flag from [low, a small cap], a choice from its choices, a real from a log-uniform range
around its scale; a few flags whose values have a grammar (schedules, heatmap axes, delay
lists, network files, data files) have their own generators.  Switches are turned on at
random.  A valid line must end in a result (exit 0) or in one line naming a flag of the line
— never an internal error; `benchmarks/fuzz_cli.py` runs thousands of them with fresh seeds
and times each call.
"""

from __future__ import annotations

import argparse
import math
import random
import re
from pathlib import Path

from stability.rules.registry import RULES

ROOT = Path(__file__).resolve().parents[1]
NETS = (f"{ROOT / 'examples' / 'diabetes_linear.py'}:problem",)
"""Network problems the net commands load (a small one: the fuzzer must stay fast)."""

ODD_NETS = """
import torch
def _data():
    x = torch.linspace(-1, 1, 24, dtype=torch.float64).reshape(8, 3)
    return x, x[:, :1] - 0.5 * x[:, 1:2]
def _problem(model, x, y):
    return {"model": model, "inputs": x, "targets": y, "loss": lambda o, t: ((o - t) ** 2).mean()}
def linear():
    return _problem(torch.nn.Linear(3, 1).double(), *_data())
def nan_inputs():
    x, y = _data()
    x[2, 1] = float("nan")
    return _problem(torch.nn.Linear(3, 1).double(), x, y)
def no_parameters():
    x, y = _data()
    return _problem(torch.nn.Identity(), x, y[:, :1].repeat(1, 3))
"""
"""A file of odd network problems (NaN inputs, no trainable parameters: refused naming
--problem) beside a plain one."""


def data_files(tmp: Path) -> dict[str, str | list[str]]:
    """The files the valid lines draw: a small regression CSV, one whose features are all
    constant, one with 40 features (beyond the minibatch commands' 32 parameters) and the odd
    network problems of `ODD_NETS`."""
    import numpy as np

    from stability.trainer.data import synthetic_regression

    data = synthetic_regression([3.0, 1.0, 0.4], samples=48, seed=3, residual=0.2)
    files = {name: tmp / f"{name}.csv" for name in ("csv", "constant", "wide")}
    np.savetxt(files["csv"], np.c_[data.y, data.X], delimiter=",")
    np.savetxt(files["constant"], np.c_[data.y, np.ones_like(data.X)], delimiter=",")
    wide = np.random.default_rng(3).normal(size=(48, 40))
    np.savetxt(files["wide"], np.c_[data.y, wide], delimiter=",")
    nets = tmp / "odd_nets.py"
    nets.write_text(ODD_NETS)
    odd = [f"{nets}:{f}" for f in ("linear", "nan_inputs", "no_parameters")]
    return {**{k: str(v) for k, v in files.items()}, "odd_nets": odd}


INT_CAPS = {
    "--steps": 600, "--anneal-steps": 400, "--lyapunov-steps": 200, "--lyapunov-runs": 3,
    "--runs": 3, "--measure-steps": 300, "--rate-steps": 100, "--samples": 64, "--batch": 16,
    "--k": 4, "--stages": 6, "--microbatches": 4, "--tau": 16, "--tau-fwd": 16,
    "--tau-bkwd": 16, "--tau-recomp": 16, "--tau-max": 16, "--replicas": 16,
    "--sync-period": 6, "--t1": 10, "--curve-points": 8, "--rate-doublings": 1, "--seed": 5,
    "--fit-seed": 3, "--sharpness-every": 50, "--warmup-epochs": 3, "--workers": 4,
}  # fmt: skip
"""Upper ends of the integer draws (the declared limits are far larger; runtime is bounded)."""

REAL_SCALES = {
    "--lr": (1e-4, 1.0), "--kappa": (1.0, 1e4), "--lam": (1e-3, 1e3), "--l2": (1e-4, 1.0),
    "--divergence": (1.0, 1e8), "--target": (1e-4, 1.0), "--rel-tol": (1e-4, 0.5),
    "--t1-power": (0.0, 1.0), "--workers": (1.0, 8.0),
}  # fmt: skip
"""(low, high) of the real draws of command flags; others: [1e-4, 1] log-uniform."""

EXPENSIVE_SWITCHES = {"--measure", "--all", "--symbolic"}
"""Switches drawn rarely (they run trainings or every script)."""

SKIP = {"--repro-dir", "--status", "--out", "--out-dir", "--csv", "--scheduler", "--claim"}
"""Flags left at their base value (paths, sweeps, the claim list)."""


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    if low <= 0:
        return rng.choice([0.0, rng.uniform(low, high)])
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _real(rng: random.Random, low, high, low_open=False, high_open=False) -> str:
    """A real in [low, high] (None: unbounded), ends included sometimes, 6 significant digits."""
    lo = -1.0 if low is None else float(low)
    hi = 10.0 if high is None or math.isinf(high) else float(high)
    if low is None and rng.random() < 0.7:
        lo = 0.0
    pick = rng.random()
    if pick < 0.1 and not low_open and low is not None:
        x = lo
    elif pick < 0.2 and not high_open and high is not None and not math.isinf(high):
        x = hi
    elif lo >= 0 and hi > 0:
        x = _log_uniform(rng, max(lo, 1e-4 * hi), hi)
    else:
        x = rng.uniform(lo, hi)
    return f"{x:.6g}"


def rule_value(rng: random.Random, param) -> str:
    """A value of one rule parameter inside its declared range."""
    if param.kind == "delay":
        low = int(param.low or 0)
        return str(rng.choice([low, low + 1, low + 2, rng.randint(low, low + 16)]))
    if param.kind == "bool":
        return rng.choice(["0", "1"])
    if param.kind == "choice":
        return rng.choice(param.choices)
    return _real(rng, param.low, param.high, param.low_open, param.high_open)


def _special(rng: random.Random, flag: str, data: dict[str, str]) -> str | None:
    """Values of flags with a grammar of their own (None: not one of them)."""
    lr = f"{_log_uniform(rng, 1e-4, 1.0):.6g}"
    if flag == "--lr-schedule":  # a step factor > 1 is refused naming --lr-schedule
        steps = rng.randint(1, 2000)
        return rng.choice(
            [f"constant:{lr}", f"cosine:{lr}:{steps}", f"warmup:{lr}:{min(steps, 500)}",
             f"step:{lr}:{rng.choice([0.5, 2])}:{rng.randint(1, 100)},{rng.randint(101, 400)}"]
        )  # fmt: skip
    if flag == "--device":
        return rng.choice(["cpu", "cpu", "meta"])  # meta: shapes without values, refused
    if flag == "--pipeline":
        return f"{rng.choice(['pipemare', 'pipedream', 'pb', 'gpipe'])}:{rng.randint(1, 6)}"
    if flag in ("--x", "--y"):
        axis = rng.choice(["lr", "tau", "momentum", "lam"])
        if axis == "tau":
            return f"tau:0:{rng.randint(1, 8)}:{rng.randint(2, 4)}"
        top = {"lr": 1.0, "momentum": 0.99, "lam": 10.0}[axis]
        return f"{axis}:{top * 1e-3:.3g}:{top:.3g}:{rng.randint(2, 4)}"
    if flag in ("--taus", "--at", "--seeds"):
        return ",".join(str(rng.randint(0, 13)) for _ in range(rng.randint(1, 3)))
    if flag == "--hidden":
        return ",".join(str(rng.randint(1, 6)) for _ in range(rng.randint(1, 2)))
    if flag == "--data":
        return rng.choice(
            [data["csv"], data["csv"], data["constant"]] + [data[k] for k in ("wide",) if k in data]
        )
    if flag == "--problem" and "--problem" in data.get("net_flags", ""):
        return rng.choice([*NETS, *NETS, *data.get("odd_nets", ())])
    if flag in ("--rule", "--rules"):
        return rng.choice(sorted(RULES))
    return None


def _value(rng: random.Random, action: argparse.Action, flag: str, data) -> str | None:
    special = _special(rng, flag, data)
    if special is not None:
        return special
    if action.choices:
        return rng.choice(list(action.choices))
    qualname = getattr(action.type, "__qualname__", "")
    if qualname.startswith("int_arg"):
        low = 0 if "tau" in flag or flag in ("--seed", "--fit-seed") else 1
        high = INT_CAPS.get(flag, 10)
        return str(rng.randint(low, high))
    if qualname.startswith("float_arg"):
        low, high = REAL_SCALES.get(flag, (1e-4, 1.0))
        return f"{_log_uniform(rng, low, high) if low > 0 else rng.uniform(low, high):.6g}"
    if qualname.startswith("bool_arg"):
        return rng.choice(["0", "1"])
    return None


def _without(argv: list[str], flag: str) -> list[str]:
    out = list(argv)
    while flag in out:
        i = out.index(flag)
        del out[i : i + 2]
    return [a for a in out if not a.startswith(flag + "=")]


def valid_line(
    rng: random.Random, name: str, base: list[str], parser, data: dict[str, str]
) -> list[str]:
    """``base`` (a valid line of command ``name``) with 1-4 flags set to random valid values,
    a random rule (and 0-3 of its parameters) where the command takes one, and switches."""
    argv = list(base)
    words = name.split()
    rule_actions = getattr(parser, "rule_actions", {})
    if rule_actions:
        rule = rng.choice(sorted(RULES))
        if "--rule" in argv:
            argv[argv.index("--rule") + 1] = rule
        elif "--rules" in argv:
            argv[argv.index("--rules") + 1] = rule
        elif len(argv) > len(words) and not argv[len(words)].startswith("--"):
            argv[len(words)] = rule
        for flag in ("--tau", "--momentum", "--lam"):  # the base's rule flags may not apply
            if flag.lstrip("-") not in RULES[rule].param_names:
                argv = _without(argv, flag)
        params = [p for p in RULES[rule].params if p.name in rule_actions]
        for p in rng.sample(params, min(len(params), rng.randint(0, 3))):
            flag = "--" + p.name.replace("_", "-")
            argv = [*_without(argv, flag), flag, rule_value(rng, p)]
    flags = [
        a
        for a in parser._actions
        if a.option_strings and a.nargs is None and a.option_strings[-1] not in SKIP
        and a.dest not in rule_actions
        and not isinstance(a, (argparse._HelpAction, argparse._VersionAction,
                               argparse._StoreConstAction))
    ]  # fmt: skip
    data = {**data, "net_flags": "--problem" if words[0] == "net" else ""}
    for action in rng.sample(flags, min(len(flags), rng.randint(1, 4))):
        flag = action.option_strings[-1]
        value = _value(rng, action, flag, data)
        if value is not None:
            argv = [*_without(argv, flag), flag, value]
    switches = [
        a.option_strings[-1]
        for a in parser._actions
        if a.option_strings and a.nargs == 0 and a.option_strings[-1] != "--json"
        and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
    ]  # fmt: skip
    for flag in switches:
        if rng.random() < (0.03 if flag in EXPENSIVE_SWITCHES else 0.25):
            argv.append(flag)
    return argv


def names_a_flag(err: str, argv: list[str]) -> bool:
    """The refusal names a flag (``--name``: given, or missing from the line) or the rule."""
    rules = {a for a in argv if a in RULES}
    return re.search(r"--[a-z][a-z0-9-]*", err) is not None or any(f"'{r}'" in err for r in rules)


LEAKS = ("math domain error", "division by zero", "has no attribute", "unsupported operand",
         "index out of range", "referenced before assignment", "could not certify",
         "RuntimeWarning", "meta tensors", "cannot be log-scaled")  # fmt: skip
"""Python's own messages (or an uncertified analysis) in a report or a refusal: an internal
error that reached the user as text (issue 25: "train … math domain error"; the outsider's
fuzz: a numpy overflow warning in `noise`'s result, torch's meta-tensor error, matplotlib's
log scale of a zero floor)."""


def leaks(out: str, err: str) -> list[str]:
    """The `LEAKS` found in the output or the refusal."""
    return [f"internal message in the output: {w!r}" for w in LEAKS if w in out or w in err]


NUMBER_NAN = re.compile(r"(?<![\w-])(nan|-?inf)(?![\w-])", re.IGNORECASE)


def non_finite(argv: list[str], out: str) -> list[str]:
    """NaN or ±inf printed as a number in a text report (``--json`` has null instead): a
    report must say in words what such a value means (the outsider's fuzz: t1-audit printed
    "margin -inf" for a stage stable for no lr)."""
    if "--json" in argv:
        return []
    hits = [m.group(0) for m in NUMBER_NAN.finditer(out)]
    return [f"non-finite number printed: {hits[:3]}"] if hits else []
