"""The size contract at large delays: the acceptance commands of issue 11, timed end to end.

Each command runs as a subprocess (what a user waits for, start-up included) at τ = 1000 and
at τ = 10⁵; the table gives the wall time, the exit code and, for refusals, the one-line
message.  ``stability rules`` (start-up only) is the baseline in the same run: the ratio column
divides by it, so runs on machines of different speed or load can be compared.

Run: ``.venv/bin/python benchmarks/bench_large_delays.py [--taus 1000,100000]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STABILITY = [sys.executable, "-m", "stability.cli.main"]


def commands(tau: int, csv: str) -> list[list[str]]:
    t = str(tau)
    return [
        ["train", "--problem", "linreg", "--rule", "sgd", "--lr", "0.0001", "--steps", "100"]
        + ["--tau", t],
        ["halflife", "sgd", "--kappa", "100", "--tau", t],
        ["heatmap", "momentum", "--tau", t, "--x", "lr:1e-5:1e-2:8:log"]
        + ["--y", "momentum:0:0.99:8", "--csv", csv],
        ["max-lr", "ea", "--tau", t],
    ]


def timed(argv: list[str]) -> tuple[float, int, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run([*STABILITY, *argv], capture_output=True, text=True, env=env)
    return time.perf_counter() - start, done.returncode, done.stderr.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taus", default="1000,100000")
    args = ap.parse_args()
    base, _, _ = timed(["rules"])
    print(f"baseline `stability rules`: {base:.2f} s")
    print(f"{'tau':>7} {'seconds':>8} {'ratio':>6} {'exit':>4}  command / refusal")
    with tempfile.TemporaryDirectory() as tmp:
        csv = str(Path(tmp) / "grid.csv")
        for tau in (int(t) for t in args.taus.split(",")):
            for argv in commands(tau, csv):
                seconds, code, err = timed(argv)
                print(f"{tau:>7} {seconds:8.2f} {seconds / base:6.1f} {code:>4}  {' '.join(argv)}")
                if code != 0:
                    print(f"{'':>29}{err}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
