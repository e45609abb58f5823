"""The edge-of-stability run's cost: the simulator step and the sharpness tracker, per method.

On the digits MLP of paper_repro/edge_of_stability_delay.py (1,000 images, 64-64-64-10 tanh,
8,970 parameters, MSE, float64, one thread), sgd τ = 2, η = 0.03 from the standard
initialisation for ``--steps`` steps (the figure's sgd τ = 2 row, shortened):

* the simulator alone (`stability.nets.simulator.simulate`, no tracking): CPU ms per step;
* λ₁ every 50 steps of that trajectory by each tracker, each warm-started from its own
  previous eigenvector at tolerance 1e-4: ``arpack`` (`stability.nets.curvature.top_eigenpair`,
  ARPACK's eigsh with ncv = 12: the tracker before issue 25) and ``lanczos``
  (`stability.nets.sharpness.warm_lanczos`, stopped at ARPACK's residual test after ≥ 3
  products: the tracker now); HVPs, CPU seconds, and the largest relative difference from a
  reference λ₁ (ARPACK at tol 1e-10).

CPU time (``time.process_time``), not wall: the machine is shared.  Run:
``.venv/bin/python benchmarks/bench_sharpness.py [--quick]`` (``--quick``: 300 steps); `make
bench` writes its output to docs/generated/bench_sharpness.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "paper_repro"))

import edge_of_stability_delay as eos  # noqa: E402

from stability.nets.curvature import HessianOperator, top_eigenpair  # noqa: E402
from stability.nets.prediction import net_rules  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.nets.sharpness import MIN_PRODUCTS, warm_lanczos  # noqa: E402
from stability.nets.simulator import simulate  # noqa: E402
from stability.pipeline import Pipeline  # noqa: E402

EVERY = 50
TOL = 1e-4


def trajectory(net, steps: int):
    """The weights every EVERY steps, and CPU ms per simulator step."""
    rules = net_rules("sgd", {}, Pipeline.from_options("uniform", tau=2, stages=1))
    points = [net.w_star.clone()]

    def observe(step, w):
        if step % EVERY == 0:
            points.append(w[0].clone())

    start = time.process_time()
    simulate(net, rules, [0.03], steps=steps, observe=observe)
    return points, 1e3 * (time.process_time() - start) / steps


def track(net, points, method: str):
    """(HVPs, CPU seconds, λ₁ list) of one tracker along ``points``."""
    vector, hvps, lams = None, 0, []
    start = time.process_time()
    for w in points:
        if method == "arpack":
            lam, vector, n = top_eigenpair(net, w, vector, TOL)
        else:
            v0 = np.random.default_rng(0).standard_normal(net.dim) if vector is None else vector
            lam, vector, n = warm_lanczos(HessianOperator(net, w=w).matvec, v0, TOL, MIN_PRODUCTS)
        hvps += n
        lams.append(lam)
    return hvps, time.process_time() - start, np.array(lams)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="300 steps")
    args = ap.parse_args()
    args.steps = 300 if args.quick else 1000
    torch.set_num_threads(1)
    net = problem_from_dict(eos.problem(False), stages=1)
    points, step_ms = trajectory(net, args.steps)
    reference = np.array([top_eigenpair(net, w, None, 1e-10)[0] for w in points])
    lines = [
        f"digits EoS MLP (8,970 parameters), sgd τ = 2, η = 0.03, {args.steps} steps: "
        f"simulator {step_ms:.2f} ms CPU per step; λ₁ at {len(points)} points (every {EVERY} "
        f"steps, tolerance {TOL:g}, warm-started):",
        "",
        "| tracker | HVPs | HVPs per point | CPU s | CPU ms per step (amortized) | "
        "max rel. difference from λ₁ at tol 1e-10 |",
        "|---|---|---|---|---|---|",
    ]
    for method in ("arpack", "lanczos"):
        hvps, seconds, lams = track(net, points, method)
        err = float(np.max(np.abs(lams - reference) / reference))
        lines.append(
            f"| {method} | {hvps} | {hvps / len(points):.1f} | {seconds:.2f} | "
            f"{1e3 * seconds / args.steps:.2f} | {err:.1e} |"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
