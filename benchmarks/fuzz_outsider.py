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
import errno
import io
import json
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

from fuzz_outsider_values import flag_value, make_files, rule_value

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
EXPENSIVE = {"repro", "claims", "sweep"}
"""Commands sampled rarely (whole reproductions, claim lists, Dask sweeps)."""


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
    except OSError as err:  # an argument beyond the OS's limit (a long generated list)
        if err.errno != errno.E2BIG:
            raise
        return _run_inprocess(argv, limit)
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
