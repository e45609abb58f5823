"""Reference-trainer throughput: batched lockstep engine vs a naive per-run Python loop.

Prints a table (and ``--json`` writes it):

1. **same size, both ways**: R runs × S steps of minibatch SGD (B = 32) on cpusmall, once
   with `stability.trainer.engine.train` (all runs as one array computation) and once as a
   naive loop — for each run, for each step, `stability.rules.base.step` on a `History` with
   the minibatch gradient X_Bᵀ(X_B w − y_B)/B — measured in the same process; throughput in
   run·steps per second and the ratio;
2. **PipeMare Fig. 5(b)-style sweep**: delayed SGD on cpusmall as stored (12 features, no
   preprocessing, as in the paper), ``--lrs`` step sizes × ``--delays`` delays, ``--steps``
   steps each (default 40 × 20 × 10⁵), B = 32, all cells in one batched computation; wall time,
   nominal throughput (cells × steps / time), and, per delay, the largest step size of the
   grid that did not diverge next to PipeMare Lemma 1's bound 2/λ_max·sin(π/(4τ+2)).

Run: ``.venv/bin/python benchmarks/bench_trainer.py [--quick] [--json out.json]``.
No timing is asserted anywhere; this only measures.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stability.rules.base import History, step  # noqa: E402
from stability.rules.registry import build_rule  # noqa: E402
from stability.trainer.data import load_regression  # noqa: E402
from stability.trainer.engine import BatchStream, train  # noqa: E402
from stability.trainer.linreg import LinearRegression  # noqa: E402
from stability.trainer.schedules import uniform_rule  # noqa: E402


def naive_runs(problem: LinearRegression, rule, lrs, steps: int, batch: int, seed: int):
    """Each run on its own, step by step, with the History reference (the baseline)."""
    finals = []
    for lr in lrs:
        stream = BatchStream(problem.samples, batch, seed)
        hist = History.constant(rule, np.zeros(problem.dim))
        for _ in range(steps):
            idx = stream.take(1)[0]
            Xb, yb = problem.X[idx], problem.y[idx]

            def oracle(u_f, u_b, u_r, Xb=Xb, yb=yb):
                return Xb.T @ (Xb @ u_f - yb) / batch

            hist = step(rule, hist, oracle, lr)
        finals.append(hist.weights)
    return np.array(finals)


def same_size(problem, runs: int, steps: int, batch: int) -> dict:
    rule, _ = build_rule("sgd", tau=4)
    lrs = np.geomspace(1e-3, 2e-2, runs)
    t0 = time.perf_counter()
    naive = naive_runs(problem, rule, lrs, steps, batch, seed=0)
    t_naive = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = train(problem, rule, lrs, steps=steps, batch=batch, seed=0)
    t_batched = time.perf_counter() - t0
    agree = float(np.max(np.abs(res.final_weights - naive)) / np.max(np.abs(naive)))
    work = runs * steps
    return {
        "runs": runs,
        "steps": steps,
        "naive_seconds": t_naive,
        "batched_seconds": t_batched,
        "naive_throughput": work / t_naive,
        "batched_throughput": work / t_batched,
        "speedup": t_naive / t_batched,
        "max_relative_difference": agree,
    }


def sweep(problem, n_lr: int, n_delay: int, steps: int, batch: int) -> dict:
    lam_max = float(problem.hessian_eigenvalues()[-1])
    delays = np.arange(n_delay) * 5
    lrs = np.geomspace(1e-4, 0.5, n_lr)
    L, T = np.meshgrid(lrs, delays, indexing="ij")
    rule = uniform_rule("sgd", {}, T.reshape(-1, 1))
    t0 = time.perf_counter()
    res = train(problem, rule, L.ravel(), steps=steps, batch=batch, seed=0, check_every=25)
    seconds = time.perf_counter() - t0
    diverged = res.diverged.reshape(L.shape)
    executed = int(np.where(res.diverged, res.diverged_step, steps).sum())
    per_delay = []
    for j, tau in enumerate(delays):
        ok = np.flatnonzero(~diverged[:, j])
        largest = float(lrs[ok.max()]) if ok.size else None
        bound = 2 / lam_max * math.sin(math.pi / (4 * tau + 2))
        per_delay.append({"tau": int(tau), "largest_stable_lr_on_grid": largest, "lemma1": bound})
    cells = L.size
    return {
        "cells": cells,
        "lrs": n_lr,
        "delays": n_delay,
        "steps": steps,
        "batch": batch,
        "seconds": seconds,
        "nominal_throughput": cells * steps / seconds,
        "executed_run_steps": executed,
        "executed_throughput": executed / seconds,
        "diverged_cells": int(diverged.sum()),
        "grid_ratio": float(lrs[1] / lrs[0]),
        "per_delay": per_delay,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--lrs", type=int, default=40)
    ap.add_argument("--delays", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    problem = LinearRegression.from_dataset(load_regression(standardize="none"))
    steps = args.steps or (2_000 if args.quick else 100_000)
    small = same_size(
        problem, runs=8 if args.quick else 40, steps=500 if args.quick else 2_000, batch=32
    )
    big = sweep(problem, args.lrs, args.delays, steps, 32)
    out = {"same_size": small, "sweep": big}

    print("Reference trainer throughput (run·steps per second), cpusmall, SGD, B = 32")
    print(f"{'':34}{'seconds':>10}{'throughput':>14}")
    print(
        f"{'naive per-run loop (History.step)':34}{small['naive_seconds']:>10.2f}"
        f"{small['naive_throughput']:>14.4g}"
    )
    print(
        f"{'batched engine, same runs':34}{small['batched_seconds']:>10.2f}"
        f"{small['batched_throughput']:>14.4g}"
    )
    print(
        f"{'speedup (same size)':34}{small['speedup']:>10.1f}x"
        f"   (final weights agree to {small['max_relative_difference']:.1e})"
    )
    print(
        f"\nFig. 5(b)-style sweep: {big['lrs']} lr × {big['delays']} delays × {big['steps']} "
        f"steps = {big['cells'] * big['steps']:.3g} run·steps"
    )
    print(
        f"  wall time {big['seconds']:.1f} s, nominal throughput {big['nominal_throughput']:.4g}"
        f" run·steps/s ({big['nominal_throughput'] / small['naive_throughput']:.0f}x the naive "
        f"loop), {big['diverged_cells']} cells diverged and were frozen"
    )
    print(f"  {'tau':>5}{'largest stable lr on grid':>28}{'Lemma 1 bound':>16}")
    for row in big["per_delay"]:
        largest = row["largest_stable_lr_on_grid"]
        print(
            f"  {row['tau']:>5}{('-' if largest is None else f'{largest:.4g}'):>28}"
            f"{row['lemma1']:>16.4g}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
