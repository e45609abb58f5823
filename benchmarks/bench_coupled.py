"""Coupled multi-stage max lr: frequency scan vs block-state-matrix search (and cpusmall).

Table 1 (speed), measured in one run on dense random PSD Hessians H = AᵀA/(2p) (A Gaussian,
2p × p; Marchenko-Pastur spectrum ≈ [0.09, 2.9]), P equal stages with forward delays spread
evenly from τ_max down to 2, delayed SGD (and momentum 0.9):

* ``scan``: `stability.coupled.scan.scan_max_lr` — p×p eigen-decompositions at a few dozen
  angles, O(n_θ·p³);
* ``dense``: `stability.coupled.system.dense_max_lr` — log grid and Brent's method on the
  spectral radius of the block state matrix (Σ_i |w_i|·(τ_i + 2) rows),
  O(evaluations·(p·τ)³), where it is still feasible.

Table 2 (``--cpusmall``): cpusmall linear regression as PipeMare Fig. 5(b) trains it (features
as stored, plus an intercept: 13 parameters), P ∈ {2, 4, 8, 13} contiguous blocks, PipeMare and
uniform schedules (N = 1), rules sgd, momentum 0.9, lwp+sc (momentum 0.9): the coupled max lr,
the scalar bound at (λ_max, τ_max) and its ratio to the coupled one, the smallest per-stage
bound over the coupled one, and the trainer's
measured max lr (full batch, 20000 steps, bracket 1e-3: the midpoint) with measured/coupled
and whether the coupled lr lies inside the measured bracket [stable, unstable].

Run: ``.venv/bin/python benchmarks/bench_coupled.py [--quick] [--cpusmall]``.  BLAS threads
follow the environment (OPENBLAS_NUM_THREADS); on a shared machine 1 thread is often faster.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from stability.coupled.scan import scan_max_lr
from stability.coupled.system import coupled_system, dense_max_lr

DENSE_LIMIT = 1500  # state rows above which the dense search is skipped


def random_system(p: int, stages: int, tau_max: int, rule: str, seed: int = 0, **params):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((2 * p, p))
    H = A.T @ A / (2 * p)
    taus = np.round(np.linspace(tau_max, 2, stages)).astype(int)
    sizes = [p // stages + (i < p % stages) for i in range(stages)]
    return coupled_system(H, stage_sizes=sizes, rule=rule, tau_fwd=taus, **params)


def speed_table(cases) -> None:
    print(f"BLAS threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    head = (
        f"{'rule':<9}{'p':>5}{'P':>4}{'τmax':>6}{'state rows':>12}{'scan s':>9}{'eigs':>6}"
        f"{'dense s':>9}{'evals':>7}{'max lr (scan)':>16}{'rel. diff':>11}{'speedup':>9}"
    )
    print(head)
    for rule, p, P, tau_max, params in cases:
        system = random_system(p, P, tau_max, rule, **params)
        rows = system.state_size
        t0 = time.perf_counter()
        r = scan_max_lr(system)
        t_scan = time.perf_counter() - t0
        line = f"{rule:<9}{p:>5}{P:>4}{tau_max:>6}{rows:>12}{t_scan:>9.2f}{r.eigensolves:>6}"
        if rows <= DENSE_LIMIT:
            t0 = time.perf_counter()
            d = dense_max_lr(system)
            t_dense = time.perf_counter() - t0
            diff = r.max_lr / d.max_lr - 1
            line += (
                f"{t_dense:>9.2f}{d.eigensolves:>7}{r.max_lr:>16.10g}{diff:>11.1e}"
                f"{t_dense / t_scan:>9.1f}"
            )
        else:
            line += f"{'—':>9}{'—':>7}{r.max_lr:>16.10g}{'—':>11}{'—':>9}"
        print(line, flush=True)


def cpusmall_table() -> None:
    from stability.agreement.comparison import Protocol
    from stability.agreement.coupled_runs import measure, problem_system
    from stability.coupled.summary import analyze
    from stability.pipeline import pipeline, worst_delay
    from stability.trainer.linearize import linreg_linearization
    from stability.trainer.problems import ProblemOptions, build_problem

    problem, _ = build_problem(ProblemOptions(standardize="none", bias=True))
    setup = linreg_linearization(problem)
    rules = (("sgd", {}), ("momentum", {"momentum": 0.9}), ("lwp+sc", {"momentum": 0.9}))
    print(
        f"{'P':>3} {'schedule':<9}{'rule':<9}{'stage τ':<28}{'coupled':>12}{'scalar':>12}"
        f"{'scal/coup':>10}{'stage/coup':>11}{'measured':>12}{'meas/coup':>10}  in bracket"
    )
    for P in (2, 4, 8, 13):
        for schedule in ("pipemare", "uniform"):
            pipe = pipeline(schedule, P, 1, tau=worst_delay(schedule, P, 1))
            for rule, params in rules:
                built = problem_system(setup, pipe, rule, params)
                a = analyze(built.system)
                m = measure(built, setup, a.max_lr, Protocol())
                taus = ",".join(str(t) for t in a.stage_taus)
                print(
                    f"{P:>3} {schedule:<9}{rule:<9}{taus:<28}{a.max_lr:>12.6g}"
                    f"{a.scalar_bound:>12.6g}{a.scalar_ratio:>10.4f}{a.min_stage_ratio:>11.4f}"
                    f"{m.max_lr:>12.6g}"
                    f"{m.max_lr / a.max_lr:>10.4f}  {m.stable <= a.max_lr <= m.unstable}",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small cases only")
    parser.add_argument("--cpusmall", action="store_true", help="also the cpusmall table")
    parser.add_argument("--only-cpusmall", action="store_true", help="the cpusmall table only")
    args = parser.parse_args()
    cases = [
        ("sgd", 50, 10, 20, {}),
        ("momentum", 50, 10, 20, {"momentum": 0.9}),
        ("sgd", 100, 10, 20, {}),
    ]
    if not args.quick:
        cases.append(("sgd", 500, 50, 100, {}))
    if not args.only_cpusmall:
        speed_table(cases)
        print()
    if args.cpusmall or args.only_cpusmall:
        cpusmall_table()


if __name__ == "__main__":
    main()
