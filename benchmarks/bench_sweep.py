"""Sweeps on Dask: throughput with 2 workers vs 1, the sweep vs the direct command, and the
reproduction specs vs today's numbers.

Table 1 — a 20,000-point ``max-lr`` sweep (lwp, λ = 1: 5 delays × 100 momenta × 40 horizons),
``stability sweep SPEC --workers N --out DIR --json`` in a fresh process, N = 1 and N = 2
alternately, ``--repeats`` times each (one thread and one BLAS thread per worker): throughput
= points / compute seconds (first task to last result, from the JSON summary), and total wall
time (cluster start included); the ratio of the medians.  The machine's load average is printed
next to each run: other processes on the cores change the ratio.

Table 2 — the sweep against the direct command: ``stability max-lr ... --json`` at
``--samples`` random points (in this process, `stability.cli.main.main`; the first 5 also as a
fresh process), compared bit for bit; and every run's dataset against the first one's.

Table 3 (``--repro``) — examples/sweeps/pipemare_fig5b.toml and kosson_fig6.toml in full
(2 workers) against figures/pipemare_fig5b.json and kosson_fig6.json.

Run: ``.venv/bin/python benchmarks/bench_sweep.py [--repeats 3] [--samples 100] [--repro]
[--json results.json]`` (``--quick``: a 2,000-point grid, one run each, 10 samples).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import stability.sweep as sweep
from stability.cli.main import main as cli

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

SPEC = """\
command = "max-lr"
rule = "lwp"
[fixed]
lam = 1.0
[grid]
tau = [0, 1, 2, 4, 8]
momentum = { start = 0.0, stop = 0.99, num = 100 }
horizon = { start = 0.0, stop = 4.0, num = 40 }
"""


def _children_cpu() -> float:
    """CPU seconds of the finished child processes (a sweep and, through it, its workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli_process(spec: Path, out: Path, *flags: str) -> dict:
    t0, c0 = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "stability.cli.main", "sweep", str(spec), "--out", str(out),
         *flags, "--json"],
        env=ENV, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0 or done.stderr:
        raise SystemExit(f"sweep failed ({done.returncode}): {done.stderr.strip()}")
    summary = json.loads(done.stdout)
    summary["process_seconds"] = time.perf_counter() - t0
    summary["cpu_seconds"] = _children_cpu() - c0
    return summary


def throughput(spec: Path, work: Path, repeats: int) -> tuple[dict, list]:
    runs = {1: [], 2: []}
    for r in range(repeats):
        for n in (1, 2):
            load = os.getloadavg()[0]
            s = run_cli_process(spec, work / f"w{n}-{r}", "--workers", str(n))
            s["load_before"] = load
            runs[n].append(s)
            s["cores_obtained"] = s["cpu_seconds"] / s["process_seconds"]
            print(
                f"  workers {n} run {r + 1}: {s['points_per_second']:8.1f} points/s  compute "
                f"{s['compute_seconds']:6.1f} s  total {s['seconds']:6.1f} s  CPU "
                f"{s['cpu_seconds']:6.1f} s ({s['cores_obtained']:.2f} cores; load {load:.2f})",
                flush=True,
            )
    med = {n: statistics.median(s["points_per_second"] for s in runs[n]) for n in runs}
    wall = {n: statistics.median(s["seconds"] for s in runs[n]) for n in runs}
    per_cpu = {n: statistics.median(s["points"] / s["cpu_seconds"] for s in runs[n]) for n in runs}
    table = {
        "points": runs[1][0]["points"],
        "median_points_per_cpu_second": {str(n): per_cpu[n] for n in per_cpu},
        "cpu_efficiency_2_vs_1": per_cpu[2] / per_cpu[1],
        "best_throughput_ratio_2_vs_1": max(s["points_per_second"] for s in runs[2])
        / max(s["points_per_second"] for s in runs[1]),
        "chunks": runs[1][0]["chunks"],
        "median_points_per_second": {str(n): med[n] for n in med},
        "median_total_seconds": {str(n): wall[n] for n in wall},
        "throughput_ratio_2_vs_1": med[2] / med[1],
        "total_time_ratio_1_vs_2": wall[1] / wall[2],
        "runs": {str(n): runs[n] for n in runs},
    }
    dirs = [work / f"w{n}-{r}" for r in range(repeats) for n in (1, 2)]
    return table, dirs


def direct(argv: list[str]) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli(argv)
    if code != 0:
        raise SystemExit(f"direct command failed: {argv}")
    return json.loads(buf.getvalue())


def against_command(dirs: list[Path], samples: int) -> dict:
    ds = sweep.load(dirs[-1])
    rng = np.random.default_rng(0)
    picks = [tuple(int(rng.integers(n)) for n in ds.max_lr.shape) for _ in range(samples)]
    mismatches, fresh = [], 0
    for n, (i, j, k) in enumerate(picks):
        p = ds.isel(tau=i, momentum=j, horizon=k)
        argv = ["max-lr", "lwp", "--lam", "1.0", "--tau", str(int(p.tau)), "--momentum",
                repr(float(p.momentum)), "--horizon", repr(float(p.horizon)), "--json"]  # fmt: skip
        if n < 5:  # a fresh process, exactly as a user types it
            out = subprocess.run([sys.executable, "-m", "stability.cli.main", *argv], env=ENV,
                                 capture_output=True, text=True, check=True).stdout  # fmt: skip
            got, fresh = json.loads(out), fresh + 1
        else:
            got = direct(argv)
        want = (float(p.max_lr), float(p.crossing_angle), str(p.method.values))
        have = tuple(np.nan if v is None else v for v in (got["max_lr"], got["crossing_angle"]))
        equal = np.array_equal(np.array(have, float), np.array(want[:2]), equal_nan=True)
        if not (equal and got["method"] == want[2]):
            mismatches.append({"point": [i, j, k], "command": got, "sweep": list(want)})
    first = sweep.load(dirs[0])

    def same(other) -> bool:
        kinds = {v: first[v].dtype.kind == "f" for v in first.data_vars}
        return all(
            np.array_equal(first[v].values, other[v].values, equal_nan=nan)
            for v, nan in kinds.items()
        )

    identical = [same(sweep.load(d)) for d in dirs[1:]]
    return {
        "sampled_points": samples,
        "fresh_processes": fresh,
        "bit_for_bit_mismatches": mismatches,
        "runs_identical_to_first": all(identical),
    }


def repro(work: Path) -> dict:
    out = {}
    spec = ROOT / "examples" / "sweeps" / "pipemare_fig5b.toml"
    s = run_cli_process(spec, work / "fig5b", "--workers", "2")
    ds = sweep.load(work / "fig5b")
    today = json.loads((ROOT / "figures" / "pipemare_fig5b.json").read_text())["data"]
    diverged = np.array(today["diverged"], dtype=bool)
    step = np.where(diverged, np.array(today["diverged_step"], dtype=float), np.nan)
    final = np.array([[np.nan if v is None else v for v in row] for row in today["final_loss"]])
    swept = ds.final_loss.values
    both = np.isfinite(final) & np.isfinite(swept)
    out["pipemare_fig5b"] = {
        "seconds": s["seconds"],
        "runs": int(diverged.size),
        "diverged_equal": bool(np.array_equal(ds.diverged.values.astype(bool), diverged)),
        "diverged_step_equal": bool(np.array_equal(ds.diverged_step.values, step, equal_nan=True)),
        "final_loss_nan_where_today_null": bool(np.array_equal(np.isnan(swept), np.isnan(final))),
        "final_loss_bit_equal": int(np.sum(swept[both] == final[both])),
        "final_loss_max_rel_diff": float(np.max(np.abs(swept[both] / final[both] - 1))),
    }
    spec = ROOT / "examples" / "sweeps" / "kosson_fig6.toml"
    s = run_cli_process(spec, work / "fig6", "--workers", "2")
    ds = sweep.load(work / "fig6")
    data = json.loads((ROOT / "figures" / "kosson_fig6.json").read_text())["data"]
    panels = {"GDM, D = 0": ("momentum", 0), "Nesterov, D = 0": ("nesterov", 0),
              "GDM, D = 1": ("momentum", 1), "Nesterov, D = 1": ("nesterov", 1),
              "SC_D, D = 1": ("sc", 1), "LWP_D, D = 1": ("lwp", 1),
              "LWP_D + SC_D, D = 1": ("lwp+sc", 1)}  # fmt: skip
    curves = [(data["max_stable_eta_lambda"][t], r, d) for t, (r, d) in panels.items()]
    curves += [(data["max_stable_eta_lambda_D4"][r], r, 4) for r in ("momentum", "nesterov", "sc")]
    worst, equal, total = 0.0, 0, 0
    for committed, rule, tau in curves:
        today = np.array([np.nan if v is None else v for v in committed], dtype=float)
        swept = ds.max_lr.sel(rule=rule, tau=tau).values[::5]
        finite = np.isfinite(today)
        assert np.array_equal(finite, np.isfinite(swept))
        worst = max(worst, float(np.max(np.abs(swept[finite] / today[finite] - 1))))
        equal += int(np.sum(swept[finite] == today[finite]))
        total += int(finite.sum())
    out["kosson_fig6"] = {
        "seconds": s["seconds"],
        "points_compared": total,
        "bit_equal": equal,
        "max_rel_diff": worst,
        "points_failed": s["points_failed"],
    }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--repro", action="store_true", help="also the full reproduction specs")
    ap.add_argument("--quick", action="store_true", help="2,000 points, one run each, 10 samples")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    text = SPEC
    if args.quick:
        args.repeats, args.samples = 1, 10
        text = SPEC.replace("num = 100", "num = 20").replace("num = 40", "num = 20")
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    print(f"bench_sweep {started}, {os.cpu_count()} CPUs, load {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = work / "max_lr.toml"
        spec.write_text(text, encoding="utf-8")
        size = sweep.parse_spec(text).size
        print(f"Table 1: {size:,}-point max-lr sweep, --workers 1 vs 2", flush=True)
        table, dirs = throughput(spec, work, args.repeats)
        print(
            f"  median throughput ratio 2 vs 1 workers: {table['throughput_ratio_2_vs_1']:.3f}; "
            f"total-time ratio: {table['total_time_ratio_1_vs_2']:.3f}; best-run ratio "
            f"{table['best_throughput_ratio_2_vs_1']:.3f}; points per CPU second 2 vs 1: "
            f"{table['cpu_efficiency_2_vs_1']:.3f}",
            flush=True,
        )
        print("Table 2: the sweep vs the direct command", flush=True)
        check = against_command(dirs, args.samples)
        print(
            f"  {check['sampled_points']} sampled points ({check['fresh_processes']} as fresh "
            f"processes): {len(check['bit_for_bit_mismatches'])} differ; every run's dataset "
            f"identical to the first: {check['runs_identical_to_first']}",
            flush=True,
        )
        results = {"started": started, "throughput": table, "command": check}
        if args.repro:
            print("Table 3: reproduction specs vs figures/*.json", flush=True)
            results["repro"] = repro(work)
            for name, row in results["repro"].items():
                print(f"  {name}: {json.dumps(row)}", flush=True)
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
