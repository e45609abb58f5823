"""The ``train`` sweep's chunk time: one chunk of PipeMare Fig. 5(b) (examples/sweeps/
pipemare_fig5b.toml: 7 delays × 96 step sizes of delayed minibatch SGD on cpusmall, B = 64) at a
shortened length, evaluated the way a sweep worker evaluates it (`stability.sweep.catalog`'s
``train`` entry, no dask), against one ``st.train`` run of the same length (what a chunk would
cost point by point is 672 × that).

Run: ``.venv/bin/python benchmarks/bench_sweep_train.py [--steps 20000] [--repeats 3]
[--quick]``; prints one Markdown table (CPU seconds, best of the repeats, one thread).
"""

from __future__ import annotations

import argparse
import os
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

TAUS = (1, 2, 3, 4, 5, 6, 7)
"""The first chunk's delays (chunk = 672 = 7 × 96 in the spec)."""


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2000 steps, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats = 2000, 1

    import stability as st
    from stability.sweep.catalog import get_command

    lrs = np.geomspace(1e-3, 1.0, 96)
    fixed = {"problem": "linreg", "steps": args.steps, "batch": 64, "seed": 0}
    points = [("sgd", {**fixed, "tau": t, "lr": float(a)}) for t in TAUS for a in lrs]
    chunk = get_command("train")
    chunk.evaluate(points[:2])  # the problem is built once per process: not timed
    seconds = _best(lambda: chunk.evaluate(points), args.repeats)
    one = _best(lambda: st.train("sgd", tau=4, lr=0.01, **fixed), args.repeats)
    diverged = sum(r.diverged for r in chunk.evaluate(points))
    print("| runs | steps | chunk (s) | per run (ms) | one st.train (s) | diverged |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {len(points)} | {args.steps} | {seconds:.2f} | {1000 * seconds / len(points):.2f} | "
        f"{one:.2f} | {diverged} |"
    )


if __name__ == "__main__":
    main()
