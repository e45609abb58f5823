"""An outsider's fuzzer of the CLI: command lines built from what `--help` says, not from the code.

Independent of `tests/fuzz_valid.py` (which draws from the parsers' own objects): here every
(sub)command's flags, metavars, choices and defaults are read from its ``--help`` text, the rule
parameters and their ranges from ``stability rules --json``, and each call starts from one of
the help's own examples.  One call changes 1–4 things of such a line:

* a flag set to a *valid* value (drawn from what the help states: a choice, a size, a real on a
  log scale, a delay list, a schedule grammar, an odd but well-formed data file — constant
  columns, NaN, one row, 1e200 values, a semicolon delimiter, a header, 40 features, LIBSVM),
* a *boundary* value (0, the documented limit, the ends of a rule parameter's range, huge or
  tiny reals),
* an *invalid* value (nan, inf, −1, text, empty, a choice that is not one, a path under a
  regular file, a file that is not there),
* another rule (with 0–3 of its parameters), or a switch turned on.

Recorded per call (``--limit`` s of CPU: issue 25's acceptance line, 20 s): an internal error
(exit other than 0/2, "internal error" or a traceback anywhere), a refusal that is not one
stderr line naming a flag (or the rule, the command, the spec file), an output under ``--json``
that is not one strict JSON object, NaN/inf printed as a number in a report, an output file left
behind by a refused call, a call over the limit.  A fraction of the calls runs as a real
subprocess (exit code and stderr as a user sees them).

    OMP_NUM_THREADS=1 MPLBACKEND=Agg .venv/bin/python benchmarks/fuzz_outsider.py --seed 11 \\
        --calls 1000 --log out/fuzz-11.txt
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import math
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
NET = f"{ROOT / 'examples' / 'diabetes_linear.py'}:problem"
EXPENSIVE = {"repro", "claims", "sweep"}
"""Commands sampled rarely (whole reproductions, claim lists, Dask sweeps)."""
INVALID = ("nan", "inf", "-inf", "-1", "0", "abc", "", "1e308", "3.5", "-0", "1e-320", "0x10",
           "1,,2", " ", "∞")  # fmt: skip


class Hang(BaseException):
    pass


# ---------------------------------------------------------------- reading the help texts


CPU_LIMIT = [25.0]
"""A call is stopped after this many seconds of CPU (a wall clock on a shared machine would
stop calls that are only waiting for a core)."""


def _run_inprocess(argv: list[str], limit: int) -> tuple[int, str, str]:
    from stability.cli.main import main

    out, err = io.StringIO(), io.StringIO()

    def hang(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, hang)
    previous_prof = signal.signal(signal.SIGPROF, hang)
    signal.alarm(limit)
    signal.setitimer(signal.ITIMER_PROF, CPU_LIMIT[0])
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse's own exits (--help)
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception as e:  # escaped main: a crash as the user would see it
                err.write(f"Traceback (escaped main): {type(e).__name__}: {e}\n")
                code = 1
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        signal.signal(signal.SIGPROF, previous_prof)
    return int(code or 0), out.getvalue(), err.getvalue()


def _run_subprocess(argv: list[str], limit: int) -> tuple[int, str, str]:
    import resource

    cpu = int(CPU_LIMIT[0]) + 1

    def cap():  # the child is killed (SIGXCPU) past the CPU limit
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

    try:
        p = subprocess.run(
            [PY, "-m", "stability.cli.main", *argv], capture_output=True, text=True,
            timeout=limit, env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=cap,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise Hang() from None
    if p.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise Hang()
    return p.returncode, p.stdout, p.stderr


OPTION = re.compile(r"^\s{2}(?:-\w, )?(--[a-z0-9-]+)(?: ([^\s].*?))?(?:\s{2,}(.*))?$")


def read_help(words: list[str]) -> dict:
    """{flags: {flag: {metavar, choices, help}}, rule: bool, examples: [argv]} from --help."""
    code, out, _ = _run_inprocess([*words, "--help"], 60)
    flags, current, examples, section = {}, None, [], ""
    for line in out.splitlines():
        if not line.startswith(" "):
            section = line.strip()
            current = None
            continue
        if section == "examples:":
            argv = shlex.split(line.strip())
            if argv and argv[0] == "stability":
                examples.append(argv[1:])
            continue
        m = OPTION.match(line)
        if m:
            flag, metavar, text = m.group(1), m.group(2) or "", m.group(3) or ""
            if flag in ("--help",):
                current = None
                continue
            choices = re.match(r"\{(.*)\}$", metavar.strip())
            current = {"metavar": metavar.strip(), "help": text,
                       "choices": choices.group(1).split(",") if choices else None}  # fmt: skip
            flags[flag] = current
        elif current is not None:
            current["help"] += " " + line.strip()
    usage = out.splitlines()[0] if out else ""
    rule = " RULE" in usage and "--rule" not in flags
    return {"flags": flags, "rule": rule, "examples": examples, "usage": usage}


def read_rules() -> dict:
    """{rule: [{flag, kind, default, low, high, low_open, high_open, choices}]} (rules --json)."""
    code, out, _ = _run_inprocess(["rules", "--json"], 60)
    rules = {}
    for r in json.loads(out)["rules"]:
        params = []
        for p in r["parameters"]:
            allowed = p["allowed"]
            m = re.search(r"([\[(])\s*([-\w.+]+),\s*([-\w.+]+)\s*([\])])", allowed)
            q = {"flag": p["flag"], "kind": p["kind"], "default": p["default"], "allowed": allowed}
            if m:
                q.update(low=float(m.group(2)), high=float(m.group(3)),
                         low_open=m.group(1) == "(", high_open=m.group(4) == ")")  # fmt: skip
            c = re.search(r"one of (.*)", allowed)
            if c:
                q["choices"] = re.findall(r"[\w.+-]+", c.group(1))
            params.append(q)
        rules[r["name"]] = params
    return rules


# ---------------------------------------------------------------- odd files


def make_files(tmp: Path) -> dict[str, list[str]]:
    import numpy as np

    rng = np.random.default_rng(5)
    X = rng.normal(size=(48, 3))
    y = X @ [3.0, 1.0, 0.4] + 0.2 * rng.normal(size=48)
    good, odd = [], []

    def save(name, array, kind, **kw):
        path = tmp / name
        np.savetxt(path, array, delimiter=kw.get("delimiter", ","), header=kw.get("header", ""),
                   comments="")  # fmt: skip
        (good if kind == "good" else odd).append(str(path))

    save("plain.csv", np.c_[y, X], "good")
    save("wide.csv", np.c_[y[:48], rng.normal(size=(48, 40))], "good")  # 40 features
    save("tall.csv", np.c_[rng.normal(size=400), rng.normal(size=(400, 2))], "good")
    save("constant.csv", np.c_[y, np.ones_like(X)], "odd")
    save("one-constant.csv", np.c_[y, X[:, :2], np.ones(48)], "odd")
    save("duplicate-columns.csv", np.c_[y, X[:, 0], X[:, 0]], "odd")
    nan = np.c_[y, X]
    nan[5, 2] = np.nan
    save("nan.csv", nan, "odd")
    inf = np.c_[y, X]
    inf[3, 1] = np.inf
    save("inf.csv", inf, "odd")
    save("one-row.csv", np.c_[y, X][:1], "odd")
    save("two-rows.csv", np.c_[y, X][:2], "odd")
    save("huge.csv", np.c_[y, X] * 1e200, "odd")
    save("tiny.csv", np.c_[y, X] * 1e-200, "odd")
    save("target-only.csv", y[:, None], "odd")
    save("semicolon.csv", np.c_[y, X], "odd", delimiter=";")
    save("tab.csv", np.c_[y, X], "odd", delimiter="\t")
    save("header.csv", np.c_[y, X], "odd", header="y,a,b,c")
    save("constant-target.csv", np.c_[np.ones(48), X], "odd")
    (tmp / "empty.csv").write_text("")
    (tmp / "ragged.csv").write_text("1,2,3\n4,5\n6,7,8\n")
    (tmp / "text.csv").write_text("a,b,c\nd,e,f\n")
    lines = [f"{v:.4f} " + " ".join(f"{j + 1}:{x:.4f}" for j, x in enumerate(row))
             for v, row in zip(y, X, strict=True)]  # fmt: skip
    (tmp / "data.libsvm").write_text("\n".join(lines) + "\n")
    good.append(str(tmp / "data.libsvm"))
    (tmp / "binary.csv").write_bytes(bytes(range(256)))
    odd += [str(tmp / n) for n in ("empty.csv", "ragged.csv", "text.csv", "binary.csv")]
    odd.append(str(tmp / "missing.csv"))
    odd.append(str(tmp))  # a directory

    nets = tmp / "nets.py"
    nets.write_text(
        "import torch\n"
        "def _data(n=24, d=3, seed=0):\n"
        "    g = torch.Generator().manual_seed(seed)\n"
        "    x = torch.randn(n, d, generator=g, dtype=torch.float64)\n"
        "    return x, x @ torch.tensor([[1.0], [-2.0], [0.5]], dtype=torch.float64)[:d]\n"
        "def linear():\n"
        "    x, y = _data()\n"
        "    m = torch.nn.Linear(3, 1).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x, 'targets': y}\n"
        "def mlp():\n"
        "    x, y = _data()\n"
        "    torch.manual_seed(0)\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),"
        " torch.nn.Linear(4, 1)).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x, 'targets': y}\n"
        "def constant_inputs():\n"
        "    x, y = _data()\n"
        "    m = torch.nn.Linear(3, 1).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': torch.ones_like(x), 'targets': y}\n"
        "def one_sample():\n"
        "    x, y = _data(n=1)\n"
        "    m = torch.nn.Linear(3, 1).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x, 'targets': y}\n"
        "def nan_inputs():\n"
        "    x, y = _data()\n"
        "    x[2, 1] = float('nan')\n"
        "    m = torch.nn.Linear(3, 1).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x, 'targets': y}\n"
        "def no_parameters():\n"
        "    x, y = _data()\n"
        "    return {'model': torch.nn.Identity(), 'loss': lambda o, t: 0.5 * ((o[:, :1] - t)"
        " ** 2).mean(), 'inputs': x, 'targets': y}\n"
        "def not_a_dict():\n"
        "    return 3\n"
        "def missing_loss():\n"
        "    x, y = _data()\n"
        "    return {'model': torch.nn.Linear(3, 1).double(), 'inputs': x, 'targets': y}\n"
        "def raises():\n"
        "    raise RuntimeError('the user code fails')\n"
        "def float32():\n"
        "    x, y = _data()\n"
        "    m = torch.nn.Linear(3, 1)\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x.float(), 'targets': y.float()}\n"
    )
    (tmp / "syntax.py").write_text("def problem(:\n")
    good_nets = [NET, f"{nets}:linear", f"{nets}:mlp", f"{nets}:float32"]
    odd_nets = [f"{nets}:{n}" for n in ("constant_inputs", "one_sample", "nan_inputs",
                                        "no_parameters", "not_a_dict", "missing_loss", "raises",
                                        "nothere")]  # fmt: skip
    odd_nets += [f"{tmp / 'syntax.py'}:problem", f"{tmp / 'missing.py'}:problem", str(nets),
                 f"{tmp / 'plain.csv'}:problem"]  # fmt: skip

    sweeps = []
    for i, text in enumerate([
        'command = "max-lr"\nrule = "sgd"\n[grid]\ntau = [0, 1, 2]\n',
        'command = "radius"\nrule = "momentum"\n[fixed]\nlr = 0.1\n[grid]\ntau = [1, 2]\n'
        'momentum = {start = 0.0, stop = 0.5, num = 2}\n',
        'command = "max-lr"\nrule = "sgd"\n[grid]\ntau = []\n',
        'command = "nothing"\nrule = "sgd"\n[grid]\ntau = [1]\n',
        'command = "max-lr"\nrule = "sgd"\n[grid]\nnosuch = [1]\n',
        'command = "max-lr"\nrule = "sgd"\n[grid]\ntau = [-1, 2]\n',
        "this is not toml ===\n",
        'command = "max-lr"\nrule = "sgd"\n',
        'command = "train"\nrule = "sgd"\n[fixed]\nsteps = 20\n[grid]\nlr = [0.01, 0.1]\n',
    ]):  # fmt: skip
        path = tmp / f"sweep{i}.toml"
        path.write_text(text)
        sweeps.append(str(path))
    sweeps.append(str(ROOT / "examples" / "sweeps" / "momentum_small.toml"))
    a_file = tmp / "a-file"
    a_file.write_text("x")
    return {"good": good, "odd": odd, "good_nets": good_nets, "odd_nets": odd_nets,
            "sweeps": sweeps, "a_file": [str(a_file)]}  # fmt: skip


# ---------------------------------------------------------------- values


def log_uniform(rng, low, high):
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def rule_value(rng, p, mode):
    """A rule parameter value: valid inside `allowed`, at its ends, or outside."""
    if mode == "invalid":
        if "low" in p and rng.random() < 0.5:
            return f"{p['low'] - (1 if p['kind'] == 'delay' else 0.1):g}"
        return rng.choice(INVALID)
    if p.get("choices"):
        return rng.choice(p["choices"])
    if p["kind"] == "delay":
        high = int(min(p.get("high", 100000), 100000))
        low = int(p.get("low", 0))
        if mode == "boundary":
            return str(rng.choice([low, low, high, 1000, 5000]))
        return str(rng.choice([low, low + 1, low + 2, rng.randint(low, low + 8),
                               rng.randint(low, low + 40)]))  # fmt: skip
    if p["kind"] == "bool":
        return rng.choice(["0", "1", "true", "false"] if mode != "valid" else ["0", "1"])
    low, high = p.get("low", 0.0), p.get("high", math.inf)
    if mode == "boundary":
        cands = []
        if not p.get("low_open", True):
            cands.append(low)
        if not p.get("high_open", True) and math.isfinite(high):
            cands.append(high)
        cands += [low + 1e-12 if math.isfinite(low) else -1e12,
                  (high - 1e-12) if math.isfinite(high) else 1e12]  # fmt: skip
        return f"{rng.choice(cands):.15g}"
    if isinstance(p.get("default"), int | float) and not isinstance(p["default"], bool):
        if rng.random() < 0.3:
            return f"{p['default']:g}"
    lo = low if math.isfinite(low) else -10.0
    hi = high if math.isfinite(high) else 10.0 * max(1.0, abs(lo))
    if lo >= 0 and hi > 0 and rng.random() < 0.6:
        x = log_uniform(rng, max(lo, hi * 1e-4, 1e-12), hi)
    else:
        x = rng.uniform(lo, hi)
    if (p.get("low_open", False) and x <= lo) or (p.get("high_open", False) and x >= hi):
        x = (lo + hi) / 2
    return f"{x:.6g}"


INT_FLAGS = {  # flag: (low, typical high, documented-extreme high)
    "--steps": (1, 2000, 20000), "--anneal-steps": (0, 500, 5000), "--stages": (1, 6, 16),
    "--microbatches": (1, 4, 16), "--k": (1, 6, 11), "--batch": (1, 16, 48),
    "--samples": (2, 48, 400), "--seed": (0, 9, 2**31 - 1), "--fit-seed": (0, 9, 10**6),
    "--runs": (1, 4, 16), "--pairs": (1, 3, 8), "--pair-steps": (1, 200, 2000),
    "--lyapunov-steps": (1, 300, 4000), "--lyapunov-runs": (1, 4, 32),
    "--measure-steps": (1, 300, 2000), "--rate-steps": (1, 300, 4000),
    "--rate-doublings": (0, 1, 3), "--curve-points": (1, 50, 1000), "--t1": (0, 50, 1000),
    "--warmup-epochs": (0, 2, 10), "--sharpness-every": (1, 20, 200), "--workers": (1, 2, 2),
    "--tau": (0, 8, 64),
}  # fmt: skip
REAL_FLAGS = {
    "--lr": (1e-5, 2.0), "--kappa": (1.0, 1e6), "--lam": (1e-4, 1e4), "--l2": (1e-6, 10.0),
    "--divergence": (1.0, 1e12), "--target": (1e-6, 100.0), "--rel-tol": (1e-6, 0.9),
    "--t1-power": (0.0, 2.0), "--perturbation": (1e-6, 1.0), "--elastic": (1e-4, 1.0),
}  # fmt: skip


def axis(rng, mode):
    name = rng.choice(["lr", "tau", "momentum", "lam", "kappa", "delta"])
    if mode == "invalid":
        return rng.choice(
            [
                "lr:1:0.1:3",
                "lr:0:1:3:log",
                "tau:0:5:0",
                "lr:a:b:c",
                "lr:0.1:1",
                "nosuch:0:1:3",
                "lr:0.1:1:3:cubic",
                "tau:-3:2:3",
                "lr:nan:1:3",
            ]
        )
    n = rng.choice([1, 2, 3, 5]) if mode == "valid" else rng.choice([1, 4096, 200])
    if name == "tau":
        return f"tau:0:{rng.choice([1, 4, 16, 200])}:{n}"
    top = {"lr": 2.0, "momentum": 0.999, "lam": 100.0, "kappa": 1e4, "delta": 1.0}[name]
    low = top * rng.choice([1e-3, 0.1])
    return f"{name}:{low:.3g}:{top:.3g}:{n}" + (":log" if rng.random() < 0.4 else "")


def list_of(rng, mode, high=13, n=3):
    if mode == "invalid":
        return rng.choice(["1,,2", "a,b", "-1,2", "1.5,2", "", ",", "100001", "nan"])
    if mode == "boundary":
        return rng.choice(["0", "0,0,0", ",".join(["1"] * 16), "100000", "0,100000"])
    return ",".join(str(rng.randint(0, high)) for _ in range(rng.randint(1, n)))


def flag_value(rng, flag, info, mode, files, tmp: Path, rules, stages=None) -> str | None:
    """A value for ``flag`` (None: a switch)."""
    meta, text = info["metavar"], info["help"]
    if not meta:
        return None
    if info["choices"]:
        if mode == "invalid":
            return rng.choice(["nosuch", "", info["choices"][0].upper()])
        return rng.choice(info["choices"])
    if flag == "--data":
        pool = files["good"] if mode == "valid" else files["odd"]
        return rng.choice(pool)
    if flag == "--problem" and "FUNC" in meta:
        pool = files["good_nets"] if mode == "valid" else files["odd_nets"]
        return rng.choice(pool)
    if flag == "--problem":
        return rng.choice(["linreg", "mlp"]) if mode != "invalid" else "nosuch"
    if flag in ("--out", "--csv", "--out-dir", "--status"):
        if mode == "invalid":
            return rng.choice([files["a_file"][0] + "/under/x.png", str(tmp), ""])
        suffix = {"--out": rng.choice([".png", ".sweep", ".pdf"]), "--csv": ".csv"}.get(flag, "")
        return str(tmp / f"out{rng.randint(0, 10**9)}" / f"sub/file{suffix}")
    if flag == "--repro-dir":
        return str(ROOT / "paper_repro") if mode == "valid" else str(tmp / "nothing-here")
    if flag == "--precond-from":
        if mode == "invalid":
            return rng.choice(["warmup:0:0.1", "warmup:5", "warmup:a:b", files["a_file"][0],
                               "warmup:5:-1", str(tmp / "missing.pt")])  # fmt: skip
        return f"warmup:{rng.choice([1, 5, 20])}:{log_uniform(rng, 1e-4, 1e-1):.3g}"
    if flag in ("--x", "--y"):
        return axis(rng, mode)
    if flag == "--lr-schedule":
        if mode == "invalid":
            return rng.choice(["constant:-1", "cosine:0.1", "step:0.1:2:5", "warmup:0.1:0",
                               "linear:0.1", "constant:nan", "step:0.1:0.5:5,3"])  # fmt: skip
        lr = f"{log_uniform(rng, 1e-4, 1.0):.6g}"
        n = rng.randint(1, 3000)
        return rng.choice(
            [
                f"constant:{lr}",
                f"cosine:{lr}:{n}",
                f"warmup:{lr}:{n}",
                f"step:{lr}:0.5:{rng.randint(1, 50)},{rng.randint(51, 900)}",
            ]
        )
    if flag == "--pipeline":
        if mode == "invalid":
            return rng.choice(["pipemare", "pipemare:0", "nosuch:3", "gpipe:2:0", "pb:x"])
        name = rng.choice(["pipemare", "pipedream", "pb", "gpipe"])
        p = rng.randint(1, 8) if mode == "valid" else rng.choice([1, 64])
        return f"{name}:{p}" + (f":{rng.randint(1, 4)}" if rng.random() < 0.3 else "")
    if flag in ("--rules",):
        if mode == "invalid":
            return rng.choice(["nosuch", "sgd,,momentum", "", "ea"])
        return ",".join(rng.sample(sorted(rules), rng.randint(1, 3)))
    if flag == "--rule":
        return rng.choice(sorted(rules)) if mode != "invalid" else "nosuch"
    if flag == "--claim":
        return rng.choice(["nesterov-equals-sc", "lemma3-slope"]) if mode != "invalid" else "x"
    if flag == "--hidden":
        if mode == "invalid":
            return rng.choice(["0", "4,,4", "-2", "a", ""])
        return ",".join(str(rng.randint(1, 8)) for _ in range(rng.randint(1, 3)))
    if flag in ("--stage-delays", "--taus"):
        n = int(stages) if mode == "valid" and stages and stages.isdigit() else 4
        return (
            list_of(rng, mode, 16, n)
            if mode != "valid"
            else ",".join(
                str(rng.randint(0, 16)) for _ in range(n if stages else rng.randint(1, 4))
            )
        )
    if flag in ("--at",):
        return list_of(rng, mode, 500, 4)
    if flag == "--seeds":
        return list_of(rng, mode, 9, 3)
    if flag in ("--device",):
        return "cpu" if mode == "valid" else rng.choice(["cuda:0", "nosuch", "meta"])
    if flag in ("--scheduler",):
        return "tcp://127.0.0.1:1"
    if flag in ("--curvature", "--sampling"):
        choices = re.findall(r"\b(hessian|ggn|iid|reshuffle)\b", text)
        return rng.choice(choices or ["iid"]) if mode != "invalid" else "nosuch"
    if flag in ("--standardize",):
        return rng.choice(["none", "features", "all"]) if mode != "invalid" else "z"
    if flag in INT_FLAGS:
        low, typ, ext = INT_FLAGS[flag]
        if mode == "invalid":
            return rng.choice([*INVALID, str(low - 1), "10000001"])
        if mode == "boundary":
            return str(rng.choice([low, ext]))
        return str(rng.randint(low, typ))
    if flag in REAL_FLAGS:
        low, high = REAL_FLAGS[flag]
        if mode == "invalid":
            return rng.choice(INVALID)
        if mode == "boundary":
            return f"{rng.choice([low, high, 1e-12, 1e6]):.6g}"
        return f"{(log_uniform(rng, low, high) if low > 0 else rng.uniform(low, high)):.6g}"
    if mode == "invalid":
        return rng.choice(INVALID)
    return f"{log_uniform(rng, 1e-3, 1.0):.4g}"


# ---------------------------------------------------------------- one call


def set_flag(argv, flag, value):
    """``argv`` with ``flag`` removed, then given ``value`` (None: a switch; "": drop it);
    a value that starts with '-' or is blank is written ``--flag=value``, as a user must."""
    out = [a for a in argv if not a.startswith(flag + "=")]
    while flag in out:
        i = out.index(flag)
        nxt = out[i + 1] if i + 1 < len(out) else None
        del out[i : i + (2 if nxt is not None and not nxt.startswith("--") else 1)]
    if value is None:
        return [*out, flag]
    if value is DROP:
        return out
    if value.startswith("-") or not value.strip():
        return [*out, f"{flag}={value}"]
    return [*out, flag, value]


DROP = object()


def rule_flags(words, rule, cache):
    """The rule's flags this command takes, from ``COMMAND [--rule] RULE --help``."""
    key = (tuple(words), rule)
    if key not in cache:
        spec = cache[tuple(words)]
        argv = [*words, rule, "--help"] if spec["rule"] else [*words, "--rule", rule, "--help"]
        code, out, _ = _run_inprocess(argv, 60)
        section, flags = "", set()
        for line in out.splitlines():
            if not line.startswith(" "):
                section = line.strip()
            elif section.startswith("parameters of"):
                m = OPTION.match(line)
                if m:
                    flags.add(m.group(1))
        cache[key] = flags
    return cache[key]


def make_call(rng, name, spec, rules, files, tmp, cache):
    words = name.split()
    examples = spec["examples"] or [words]
    argv = list(rng.choice(examples))
    # the examples' paths are relative to the repository
    argv = [str(ROOT / a) if a.startswith("examples/") and ":" not in a else
            (str(ROOT / a.split(":")[0]) + ":" + a.split(":")[1]) if a.startswith("examples/")
            else a for a in argv]  # fmt: skip
    for flag in ("--out", "--csv", "--out-dir"):
        if flag in argv:
            argv = set_flag(argv, flag, str(tmp / f"ex{rng.randint(0, 10**9)}" / "f.png"))
    modes = []
    rule_at = None
    if spec["rule"] and len(argv) > len(words) and not argv[len(words)].startswith("--"):
        rule_at = len(words)
    elif "--rule" in argv:
        rule_at = argv.index("--rule") + 1
    if rule_at is not None and rng.random() < 0.6:
        rule = rng.choice(sorted(rules))
        if rng.random() < 0.03:
            rule, modes = "nosuch", ["invalid"]
        old = argv[rule_at]
        argv[rule_at] = rule
        if rule in rules:
            takes = rule_flags(words, rule, cache)
            for f in rule_flags(words, old, cache) - takes:
                argv = set_flag(argv, f, DROP)
            params = [p for p in rules[rule] if p["flag"] in takes]
            for p in rng.sample(params, min(len(params), rng.randint(0, 3))):
                mode = rng.choices(["valid", "boundary", "invalid"], [0.75, 0.15, 0.1])[0]
                modes.append(mode)
                argv = set_flag(argv, p["flag"], rule_value(rng, p, mode))
    flags = spec["flags"]
    names = [f for f in flags if f not in ("--json",)]
    for flag in rng.sample(names, min(len(names), rng.randint(1, 4))):
        info = flags[flag]
        mode = rng.choices(["valid", "boundary", "invalid"], [0.8, 0.1, 0.1])[0]
        if flag in ("--all",) and rng.random() < 0.9:
            continue
        if flag == "--measure" and rng.random() < 0.5:
            continue
        stages = argv[argv.index("--stages") + 1] if "--stages" in argv[:-1] else None
        value = flag_value(rng, flag, info, mode, files, tmp, rules, stages)
        if value is None:
            argv = set_flag(argv, flag, None)
            continue
        modes.append(mode)
        argv = set_flag(argv, flag, value)
    if rng.random() < 0.5 and "--json" in flags:
        argv = set_flag(argv, "--json", None)
    if rng.random() < 0.03:
        argv = [*argv, "--no-such-flag", "1"]
        modes.append("invalid")
    return argv, modes


NUMBER_NAN = re.compile(r"(?<![\w-])(nan|-?inf)(?![\w-])", re.IGNORECASE)


def check(argv, code, out, err, outputs_before) -> list[str]:
    found = []
    text = out + err
    if "Traceback" in text or "internal error" in text:
        found.append(f"internal error: {err.strip().splitlines()[-1][:300] if err else ''}")
    elif code not in (0, 2):
        found.append(f"exit {code}: {err.strip()[:300]}")
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if len(lines) != 1:
            found.append(f"refusal of {len(lines)} lines: {err.strip()[:300]!r}")
        elif (
            not re.search(r"--[a-z][a-z0-9-]*", lines[0])
            and not any(
                f"'{a}'" in lines[0] or f" {a}" in lines[0]
                for a in argv
                if not a.startswith("-") and a not in ("net",)
            )
            and not re.search(r"\b(RULE|COMMAND|SUBCOMMAND|spec|rule)\b", lines[0])
        ):
            found.append(f"refusal names nothing of the line: {lines[0][:300]}")
    if code == 0:
        if "--json" in argv:
            try:
                json.loads(out, parse_constant=lambda t: (_ for _ in ()).throw(ValueError(t)))
            except ValueError as e:
                found.append(f"not one strict JSON object: {str(e)[:100]}")
            if out.count("\n") != 1:
                found.append("JSON is not one line")
        else:
            hits = [m.group(0) for m in NUMBER_NAN.finditer(out)]
            if hits:
                found.append(f"non-finite number printed: {hits[:3]}")
        if err.strip() and "--json" in argv:
            found.append(f"stderr on success: {err.strip()[:200]}")
    if code != 0:
        for flag in ("--out", "--csv"):
            if flag in argv:
                i = argv.index(flag) + 1
                path = Path(argv[i]) if i < len(argv) else None
                if path and str(path) not in outputs_before and path.is_file():
                    found.append(f"refused, yet {flag} {path} was written")
    return found


def run(seed, calls, limit, hang, tmp: Path, log, subprocess_share=0.05, verbose=False):
    rng = random.Random(seed)
    files = make_files(tmp)
    rules = read_rules()
    names = ["rules", "poly", "radius", "max-lr", "halflife", "heatmap", "repro", "bounds",
             "claims", "t1-audit", "train", "validate", "coupled", "noise", "tradeoff", "sweep",
             "net curvature", "net max-lr", "net train", "net noise"]  # fmt: skip
    specs = {n: read_help(n.split()) for n in names}
    cache = {tuple(n.split()): specs[n] for n in names}
    weights = [0.2 if n in EXPENSIVE else 1.0 for n in names]
    failures, slow, codes, per = [], [], collections.Counter(), collections.Counter()
    for i in range(calls):
        name = rng.choices(names, weights)[0]
        argv, modes = make_call(rng, name, specs[name], rules, files, tmp / "w", cache)
        valid = all(m != "invalid" for m in modes)
        sub = rng.random() < subprocess_share
        outputs = {a for a in argv if os.path.exists(a)}
        start, cpu0 = time.perf_counter(), time.process_time()
        c0 = os.times()
        try:
            code, out, err = (_run_subprocess if sub else _run_inprocess)(argv, hang)
        except Hang:
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - start
            if sub:
                c1 = os.times()
                cpu = c1.children_user - c0.children_user + c1.children_system - c0.children_system
            slow.append((cpu, wall, valid, argv))
            print(f"HANG {cpu:.0f}s cpu {wall:.0f}s wall {'valid' if valid else 'invalid'}: "
                  f"{shlex.join(argv)}", file=log, flush=True)  # fmt: skip
            continue
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu0
        if sub:
            c1 = os.times()
            cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
        codes[code] += 1
        per[name, code] += 1
        if cpu > limit:
            slow.append((cpu, wall, valid, argv))
            print(f"SLOW {cpu:.1f}s cpu {wall:.1f}s wall {'valid' if valid else 'invalid'}: "
                  f"{shlex.join(argv)}", file=log, flush=True)  # fmt: skip
        if verbose:
            print(f"[{code}] {cpu:5.1f}s {'V' if valid else 'I'} {shlex.join(argv)} :: "
                  f"{err.strip()[:160]}", file=log, flush=True)  # fmt: skip
        for p in check(argv, code, out, err, outputs):
            failures.append((p, argv))
            print(f"FAIL [{'sub' if sub else 'in'}] {p} :: {shlex.join(argv)}", file=log,
                  flush=True)  # fmt: skip
        if (i + 1) % 100 == 0:
            print(f"... {i + 1} calls, {len(failures)} failures, {len(slow)} slow, codes "
                  f"{dict(codes)}", file=log, flush=True)  # fmt: skip
    return {"codes": dict(codes), "failures": failures, "slow": slow, "per": per}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--limit", type=float, default=20.0, help="slow call threshold (s of CPU)")
    ap.add_argument("--hang", type=int, default=600, help="stop a call after this many s wall")
    ap.add_argument("--cpu", type=float, default=25.0, help="stop a call after this many s CPU")
    ap.add_argument("--subprocess", type=float, default=0.05, help="share of real subprocesses")
    ap.add_argument("--verbose", action="store_true", help="print every call")
    ap.add_argument("--log", default="-", help="where to write each failure as it happens")
    args = ap.parse_args()
    CPU_LIMIT[0] = args.cpu
    log = sys.stdout if args.log == "-" else open(args.log, "a")  # noqa: SIM115
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["STABILITY_CACHE"] = str(Path(tmp) / "cache")
        os.chdir(tmp)
        (Path(tmp) / "w").mkdir()
        result = run(args.seed, args.calls, args.limit, args.hang, Path(tmp), log,
                     args.subprocess, args.verbose)  # fmt: skip
    print(f"seed {args.seed}: {args.calls} calls, exit codes {result['codes']}", file=log)
    print(f"{len(result['failures'])} failures, {len(result['slow'])} calls over {args.limit} s",
          file=log)  # fmt: skip
    print("per command:", dict(sorted(result["per"].items())), file=log, flush=True)
    return 1 if result["failures"] or result["slow"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
