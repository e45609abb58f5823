"""Networks: Lanczos vs power iteration with deflation, and the simulator vs a plain loop.

Table 1: the top-k Hessian eigenvalues of the shipped examples by

* ``lanczos``: `stability.nets.curvature.lanczos` (ARPACK eigsh, tol 1e-10) — the reference;
* ``power``: power iteration with deflation (PyHessian's method: one eigenvector at a time,
  each iterate orthogonalized against those found), run until every eigenvalue agrees with
  Lanczos's to ``--rtol`` (default 1e-6) relative — the same accuracy.

HVP counts and seconds, measured in the same run, and their ratios.

Table 2: seconds per step of the simulator (`stability.nets.simulator.simulate`, sgd, τ = 0,
one run) against a plain PyTorch loop (``loss.backward()``; ``p -= lr·p.grad``) on the same
model and batch: the per-step overhead ratio (issue 12 asks ≤ 2).

Run: ``.venv/bin/python benchmarks/bench_nets.py [--quick] [--k 5]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from stability.coupled.system import stage_rules
from stability.nets.curvature import HessianOperator, lanczos
from stability.nets.problem import load_problem
from stability.nets.simulator import simulate

ROOT = Path(__file__).resolve().parents[1]


def power_deflation(op: HessianOperator, reference: np.ndarray, rtol: float, seed: int = 0):
    """PyHessian's top-k: power iteration on H, deflated by the eigenvectors already found."""
    rng = np.random.default_rng(seed)
    found, values = [], []
    for target in reference:
        v = rng.standard_normal(op.shape[0])
        v /= np.linalg.norm(v)
        lam = 0.0
        for _ in range(100_000):
            Hv = op.matvec(v)
            for u in found:
                Hv -= (u @ Hv) * u
            lam = float(v @ Hv)
            v = Hv / np.linalg.norm(Hv)
            if abs(lam - target) <= rtol * abs(reference[0]):
                break
        found.append(v)
        values.append(lam)
    return np.array(values)


def eigen_table(specs, k: int, rtol: float) -> None:
    print(f"{'problem':<12}{'p':>7}{'k':>3}{'Lanczos HVPs':>14}{'s':>8}{'power HVPs':>12}"
          f"{'s':>8}{'HVP ratio':>11}{'time ratio':>11}")  # fmt: skip
    for name, spec, stages in specs:
        net = load_problem(spec, stages=stages)
        op = HessianOperator(net)
        t0 = time.perf_counter()
        ref = lanczos(op, k)
        t_l = time.perf_counter() - t0
        op2 = HessianOperator(net)
        t0 = time.perf_counter()
        vals = power_deflation(op2, ref.values, rtol)
        t_p = time.perf_counter() - t0
        err = np.max(np.abs(vals - ref.values)) / ref.values[0]
        row = f"{name:<12}{net.dim:>7}{k:>3}{ref.hvps:>14}{t_l:>8.2f}{op2.hvps:>12}{t_p:>8.2f}"
        print(f"{row}{op2.hvps / ref.hvps:>11.1f}{t_p / t_l:>11.1f}  (max rel diff {err:.0e})")


def overhead_table(specs, steps: int) -> None:
    print(f"\n{'problem':<12}{'plain ms/step':>15}{'simulator ms/step':>19}{'ratio':>8}")
    for name, spec, stages in specs:
        net = load_problem(spec, stages=stages)
        lr = 1e-3
        model = net.model
        params = [dict(model.named_parameters())[n] for n in net.names]
        t0 = time.perf_counter()
        for _ in range(steps):
            for p in params:
                p.grad = None
            net.loss_fn(model(net.inputs), net.targets).backward()
            with torch.no_grad():
                for p in params:
                    p -= lr * p.grad
        plain = (time.perf_counter() - t0) / steps
        rules = stage_rules("sgd", [0] * len(net.stage_sizes))
        t0 = time.perf_counter()
        simulate(net, rules, [lr], steps=steps, check_every=steps)
        sim = (time.perf_counter() - t0) / steps
        print(f"{name:<12}{plain * 1e3:>15.2f}{sim * 1e3:>19.2f}{sim / plain:>8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the MLP only, fewer steps")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--rtol", type=float, default=1e-6)
    args = ap.parse_args()
    torch.set_num_threads(1)
    specs = [("digits_mlp", str(ROOT / "examples/digits_mlp.py:problem"), 4)]
    if not args.quick:
        specs.append(("digits_cnn", str(ROOT / "examples/digits_cnn.py:problem"), None))
    eigen_table(specs, args.k, args.rtol)
    overhead_table(specs, 50 if args.quick else 200)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
