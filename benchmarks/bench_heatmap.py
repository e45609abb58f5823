"""Heatmaps and half-life curves: the batched engine vs the obvious baselines, in one run.

Table 1 — a 256 × 256 heatmap (lr × momentum, delayed heavy ball, τ = 1 and τ = 10):

* ``stability``: `stability.analysis.radius_grid.heatmap` (one batched companion-eigenvalue call
  per chunk,
  mpmath refinement of the ill-conditioned points) — median of repeats;
* ``numpy.roots loop``: one `numpy.roots` call per grid point, timed on a random subsample of
  points and extrapolated to the full grid (the loop over 65 536 points takes minutes);
* ``CLI``: the acceptance command ``stability heatmap ... --out F.png --csv F.csv`` end to end
  in a fresh process, minus the start-up (``stability --help``) of the same interpreter.

Table 2 — an optimal half-life curve over κ (Kosson Fig. 7 style, fixed momentum):

* ``stability``: `stability.analysis.conditioning.optimal_half_life` (exact window maxima, optimum
  refined to 1e-8);
* ``naive grid``: for each κ a dense lr grid × λ grid (batched eigenvalues, no per-point
  loop), best grid lr — with its relative error against ours.

Run: ``.venv/bin/python benchmarks/bench_heatmap.py [--sample 2048] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from stability.analysis.conditioning import optimal_half_life
from stability.analysis.radius_grid import heatmap, parse_axis
from stability.dynamics.linear import characteristic_polynomial
from stability.rules.registry import build_rule
from stability.spectrum import spectral_radius


def timed(fn, repeats: int):
    """(value, median wall seconds, median CPU seconds of this process)."""
    walls, cpus, value = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        value = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return value, statistics.median(walls), statistics.median(cpus)


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def roots_loop(tau: int, lrs, momenta, picks) -> tuple[np.ndarray, float]:
    """ρ by `numpy.roots` at the picked (i, j) points; returns radii and seconds per point."""
    out = np.empty(len(picks))
    t0 = time.perf_counter()
    for k, (i, j) in enumerate(picks):
        rule, model = build_rule("momentum", tau=tau, momentum=float(momenta[i]))
        poly = characteristic_polynomial(rule, model).at(float(lrs[j])).normalized()
        out[k] = np.max(np.abs(np.roots(poly.dense())))
    return out, (time.perf_counter() - t0) / len(picks)


def cli_seconds(tau: int) -> tuple[float, float, float, float]:
    """Wall and CPU seconds of the acceptance command in a fresh interpreter, and of the
    start-up alone (``stability --help``): (wall, cpu, start-up wall, start-up cpu)."""
    env = {**os.environ, "MPLBACKEND": "Agg"}

    def run(cmd):
        t0, c0 = time.perf_counter(), _child_cpu()
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        return time.perf_counter() - t0, _child_cpu() - c0

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "stability.cli.main", "heatmap", "momentum", "--tau", str(tau)]
        cmd += ["--x", "lr:1e-3:10:256:log", "--y", "momentum:0:0.999:256"]
        cmd += ["--out", f"{tmp}/F.png", "--csv", f"{tmp}/F.csv"]
        wall, cpu = run(cmd)
    start_wall, start_cpu = run([sys.executable, "-m", "stability.cli.main", "--help"])
    return wall, cpu, start_wall, start_cpu


def naive_half_lives(kappas, tau: int, momentum: float, n_lr: int, n_lam: int) -> np.ndarray:
    rule, model = build_rule("lwp+sc", tau=tau, momentum=momentum)
    cp = characteristic_polynomial(rule, model)
    out = []
    for kappa in kappas:
        lam = np.geomspace(1.0, kappa, n_lam)
        lrs = np.logspace(-8, 1, n_lr)
        best = 1.0
        for chunk in np.array_split(lrs, max(1, n_lr // 50)):
            rho = spectral_radius(cp.at(chunk[:, None] * lam[None, :]).normalized().dense())
            best = min(best, float(rho.max(axis=1).min()))
        out.append(-math.log(2) / math.log(best))
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=2048, help="points timed in the roots loop")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    x, y = parse_axis("lr:1e-3:10:256:log"), parse_axis("momentum:0:0.999:256")
    heatmap("momentum", parse_axis("lr:0.1:1:4"), parse_axis("momentum:0:0.5:4"), tau=1)  # warm
    rng = np.random.default_rng(0)

    print("Table 1: 256 x 256 heatmap, lr x momentum, delayed heavy ball (wall/CPU seconds)")
    print(
        f"{'tau':>4} {'stability':>13} {'roots loop':>10} {'ratio':>7} {'max |diff|':>11} "
        f"{'refined':>8} {'CLI total':>12} {'start-up':>11} {'CLI - start-up':>15}"
    )
    for tau in (1, 10):
        hm, t_ours, c_ours = timed(lambda tau=tau: heatmap("momentum", x, y, tau=tau), args.repeats)
        picks = [tuple(p) for p in rng.integers(0, 256, size=(args.sample, 2))]
        radii, per_point = roots_loop(tau, x.values, y.values, picks)
        t_loop = per_point * hm.radius.size
        diff = max(abs(hm.radius[i, j] - r) for (i, j), r in zip(picks, radii, strict=True))
        wall, cpu, s_wall, s_cpu = cli_seconds(tau)
        print(
            f"{tau:>4} {t_ours:>6.2f}/{c_ours:<6.2f} {t_loop:>10.1f} {t_loop / t_ours:>6.0f}x "
            f"{diff:>11.1e} {int(hm.refined.sum()):>8} {wall:>5.2f}/{cpu:<6.2f} "
            f"{s_wall:>5.2f}/{s_cpu:<5.2f} {wall - s_wall:>7.2f}/{cpu - s_cpu:<7.2f}"
        )
    print(f"(roots loop: wall time of {args.sample} random points, extrapolated to 65 536)")

    print("\nTable 2: optimal half-life curve, lwp+sc, D = 1, m = 0.9, 9 values of kappa")
    kappas = np.logspace(1, 5, 9)
    ours, t_ours, _ = timed(
        lambda: optimal_half_life("lwp+sc", kappas, tau=1, momentum=0.9).half_life,
        args.repeats,
    )
    print(f"{'method':<34} {'seconds':>9} {'ratio':>8} {'max rel. error':>15}")
    print(f"{'stability (exact windows, 1e-8)':<34} {t_ours:>9.3f} {'1x':>8} {'(reference)':>15}")
    for n_lr, n_lam in ((500, 200), (2000, 1000)):
        naive, t_naive, _ = timed(lambda a=n_lr, b=n_lam: naive_half_lives(kappas, 1, 0.9, a, b), 1)
        err = float(np.max(np.abs(naive / ours - 1)))
        label = f"naive grid {n_lr} lr x {n_lam} lambda"
        print(f"{label:<34} {t_naive:>9.3f} {t_naive / t_ours:>7.0f}x {err:>15.1e}")
    _, t_opt, _ = timed(lambda: optimal_half_life("lwp+sc", kappas, tau=1, optimize="momentum"), 1)
    print(f"(with the momentum optimised too: {t_opt:.2f} s for the 9 points)")


if __name__ == "__main__":
    main()
