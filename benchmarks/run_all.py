"""Run every benchmark in turn (``make bench``); each prints its own table.

Each benchmark measures ratios against baselines in the same run (never timed assertions in
the tests).  ``--quick`` passes the small-size option to those that have one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = [
    ("bench_max_lr.py", []),
    ("bench_heatmap.py", []),
    ("bench_trainer.py", ["--quick?"]),
    ("bench_seed.py", ["--quick?"]),
    ("bench_coupled.py", ["--quick?"]),
    ("bench_sweep.py", ["--quick?"]),
    ("bench_nets.py", ["--quick?"]),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes where a benchmark has them")
    args = ap.parse_args()
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    status = 0
    for script, options in BENCHMARKS:
        flags = [o.rstrip("?") for o in options if args.quick or not o.endswith("?")]
        print(f"\n== {script} {' '.join(flags)}", flush=True)
        status |= subprocess.call([sys.executable, str(HERE / script), *flags], env=env)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
