"""The CLI fuzzer at scale, outside the test suite: valid random lines with fresh seeds, timed.

The suite runs a few dozen valid lines (`tests/test_fuzz_cli.py`); this runs thousands, each
call in-process with a wall clock, and prints every failure: an internal error (exit 1,
"internal error", a traceback), a refusal that is not one line naming a flag of the line, a
JSON output that is not one strict object, an internal message in a report ("math domain
error"), or a call over ``--limit`` seconds of CPU (20 s: issue 25's acceptance line; the wall
clock is printed beside it).  A call past ``--hang`` seconds is stopped and counted slow.

    MPLBACKEND=Agg OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fuzz_cli.py --seed 7 --calls 2000
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fuzz_valid import data_files, leaks, names_a_flag, valid_line  # noqa: E402
from test_fuzz_cli import FORBIDDEN, Hang, _bases, _call, _parsers, _problems  # noqa: E402

SKIPPED = {"sweep", "repro", "claims"}
"""Commands whose valid lines are files of specs or whole reproductions (fuzzed for refusals
by the suite only)."""


def run(seed: int, calls: int, limit: float, hang: int, tmp: Path) -> dict:
    import test_fuzz_cli

    test_fuzz_cli.HANG_SECONDS = hang
    rng = random.Random(seed)
    data = data_files(tmp)
    parsers = _parsers()
    bases = _bases(data["csv"], tmp)
    names = sorted(n for n in parsers if n not in SKIPPED)
    failures, slow, codes = [], [], collections.Counter()
    for _ in range(calls):
        name = rng.choice(names)
        argv = valid_line(rng, name, bases[name], parsers[name], data)
        argv = [*argv, "--json"] if rng.random() < 0.5 else argv
        start, cpu = time.perf_counter(), time.process_time()
        try:
            code, out, err = _call(argv)
        except Hang:
            slow.append((float(hang), float(hang), argv))
            continue
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        codes[code] += 1
        if cpu > limit:  # CPU time: the wall clock of a machine shared by several jobs inflates
            slow.append((cpu, seconds, argv))
        found = _problems(argv, None, False, code, out, err) + leaks(out, err)
        if code == 2 and not names_a_flag(err, argv):
            found.append(f"refusal names no flag of the line: {err.strip()[:300]}")
        if any(word in out for word in FORBIDDEN[:2]):
            found.append("internal error text in the output")
        failures += [f"{' '.join(argv)}: {p}" for p in found]
    return {"codes": dict(codes), "failures": failures, "slow": slow}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--limit", type=float, default=20.0, help="slow call threshold (s)")
    ap.add_argument("--hang", type=int, default=120, help="stop a call after this many s")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ["STABILITY_CACHE"] = str(Path(tmp) / "cache")
        os.chdir(tmp)
        (Path(tmp) / "work").mkdir()
        result = run(args.seed, args.calls, args.limit, args.hang, Path(tmp) / "work")
    print(f"seed {args.seed}: {args.calls} calls, exit codes {result['codes']}")
    print(f"{len(result['failures'])} failures, {len(result['slow'])} calls over {args.limit} s")
    for f in result["failures"]:
        print("FAIL", f)
    for cpu, seconds, argv in result["slow"]:
        print(f"SLOW {cpu:.1f} s CPU ({seconds:.1f} s wall): {' '.join(argv)}")
    return 1 if result["failures"] or result["slow"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
