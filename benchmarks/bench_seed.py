"""Seed systems: theory vs the reference trainer on cpusmall, and the cost of the analyses.

Part 1 (``--validate``): for every seed rule and τ ∈ {1, 4, 16}, the predicted max stable lr
(min over the Hessian's modes of `stability.analysis.boundary.max_lr`, Floquet for EA-Pipe) against
the trainer's measured one (`stability.agreement.comparison.measure_max_lr`, full batch, the
default protocol).  Rules the trainer runs differently from the analysis are reported as gaps:
real DC_λ (outer product) against the q-model, the sampled random delays against the first
moment (with the almost-sure scalar threshold beside it).

Part 2 (always): timings of the analyses, as ratios against baselines measured in the same
run: the Floquet monodromy by stepping the rule on the basis (ours) against the product of
the per-phase dense state matrices (baseline); the first-moment threshold (boundary locus on
the kernel polynomial) against the mean-square one (dense Kronecker eigenvalues).

    MPLBACKEND=Agg .venv/bin/python benchmarks/bench_seed.py [--validate] [--quick]
                                                            [--json figures/seed_validation.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from stability.analysis.boundary import max_lr
from stability.analysis.random_delays import mean_square_radius, thresholds
from stability.dynamics.linear import linearize
from stability.dynamics.monodromy import monodromy, state_layout
from stability.files import write_json
from stability.quadratic import QuadraticModel
from stability.rules.random_delay import ExpectedDelay, SampledDelays, truncated_exponential
from stability.rules.registry import build_rule

CPUSMALL = "cpusmall"  # the shipped copy
TAUS = (1, 4, 16)
CASES = (
    ("pipeoptim", {"optimizer": "sgdm"}),
    ("pipeoptim", {"optimizer": "sgdm", "dampening": 0.5}),
    ("pipeoptim", {"optimizer": "adam"}),
    ("pipeoptim", {"optimizer": "adamw", "weight_decay": 0.01}),
    ("adam", {}),
    ("pipesgd", {}),
    ("pipesgd", {"stale_fraction": 0.5, "momentum": 0.9}),
    ("dc", {}),
    ("wp", {"option": "1", "momentum": 0.9}),
    ("wp", {"option": "2"}),
    ("wp", {"option": "3", "workers": 4.0, "hessian_estimate": 1.0}),
    ("ea", {}),
    ("ea", {"replicas": 2, "elastic": 0.3, "sync_period": 2}),
    ("stash", {}),
    ("gpipe", {}),
    ("spectrain", {"tau_max": 32}),
    ("shrink", {}),
)


def predicted(rule, lams) -> float:
    """min_k max_lr(rule, λ_k): the exact threshold of a rule with scalar delays on least
    squares (the modes decouple)."""
    return min(max_lr(rule, QuadraticModel(float(lam))).max_lr for lam in lams)


def validate(quick: bool) -> list[dict]:
    from stability.agreement.comparison import Protocol, measure_max_lr
    from stability.trainer.data import load_regression
    from stability.trainer.linearize import linreg_linearization
    from stability.trainer.linreg import LinearRegression

    problem = LinearRegression.from_dataset(load_regression(CPUSMALL))
    setup = linreg_linearization(problem)
    lams = setup.hessian_eigenvalues
    protocol = Protocol(steps=6000, per_round=8, rel_tol=5e-3) if quick else Protocol()
    rows = []

    def row(label, tau, rule, guess, *, prediction=None, **extra):
        start = time.perf_counter()
        m = measure_max_lr(setup, rule, guess, protocol, None)
        out = {
            "rule": label,
            "tau": tau,
            "predicted_max_lr": prediction,
            "measured_max_lr": m.max_lr,
            "ratio": None if prediction is None else m.max_lr / prediction,
            "seconds": time.perf_counter() - start,
            **extra,
        }
        rows.append(out)
        ratio = "" if out["ratio"] is None else f"{out['ratio']:.4f}"
        pred = "" if prediction is None else f"{prediction:.6g}"
        print(f"{label:<48}{tau:>4}{pred:>14}{m.max_lr:>14.6g}{ratio:>9}", flush=True)

    print(f"{'rule':<48}{'τ':>4}{'predicted':>14}{'measured':>14}{'ratio':>9}")
    for name, kw in CASES:
        label = name + "".join(f" {k}={v}" for k, v in kw.items())
        for tau in (0,) if name == "gpipe" else TAUS:
            rule, _ = build_rule(name, **kw, **({} if name == "gpipe" else {"tau": tau}))
            p = predicted(rule, lams)
            row(label, tau, rule, p, prediction=p)
            if name == "dc":  # the trainer's real DC_λ against the q-model
                real = rule.trainer_rule("outer")
                q0, _ = build_rule("dc", tau=tau, quality=0.0)
                row(
                    "dc real outer-product (gap to q-model)",
                    tau,
                    real,
                    p,
                    prediction=p,
                    q0_prediction=predicted(q0, lams),
                )
    for tau, beta in ((16, 0.0), (16, -1.0), (4, -1.0), (4, 0.5), (1, 0.0)):
        probs = truncated_exponential(tau, beta)
        p = predicted(ExpectedDelay(probs), lams)
        sure = thresholds(probs, 0.0, float(lams.max()), steps=4000, runs=16).almost_sure
        for stages in (1, 4):
            rule = SampledDelays(probs, tuple(problem.stage_sizes(stages)), seed=0)
            row(
                f"random delays β={beta} stages={stages} (first moment)",
                tau,
                rule,
                p,
                prediction=p,
                almost_sure_scalar=sure,
            )
    return rows


def timings() -> list[tuple[str, float, float]]:
    """(what, ours seconds, baseline seconds)."""
    out = []
    for tau, period in ((4, 2), (16, 1), (32, 2)):
        rule, model = build_rule("ea", tau=tau, sync_period=period)
        ours = _time(lambda r=rule, m=model: monodromy(r, m, 0.1))
        base = _time(lambda r=rule, m=model: _dense_monodromy(r, m, 0.1))
        out.append((f"EA monodromy, τ={tau}, P={rule.period}", ours, base))
    for tau in (4, 16, 24):
        probs = truncated_exponential(tau, 0.0)
        ours = _time(lambda p=probs: max_lr(ExpectedDelay(p), QuadraticModel(1.0)))
        base = _time(lambda p=probs: mean_square_radius(p, 0.0, 1.0, 0.05))
        out.append((f"first moment max lr vs ONE mean-square radius, τmax={tau}", ours, base))
    return out


def _dense_monodromy(rule, model, lr) -> np.ndarray:
    """Baseline: the product of the per-phase block-companion matrices (common depth)."""
    depth = 1 + max(k for _, k in state_layout(rule))
    n = len(rule.variables)
    M = np.eye(n * depth)
    for t in range(rule.period):
        dyn = linearize(rule, model, lr, t=t)
        A = np.zeros((n * depth, n * depth))
        for k, m in dyn.matrices.items():
            A[:n, k * n : (k + 1) * n] = np.array(m, dtype=float)
        A[np.arange(n, n * depth), np.arange(n * depth - n)] = 1.0
        M = A @ M
    return M


def _time(f, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--validate", action="store_true", help="theory vs trainer on cpusmall")
    parser.add_argument("--quick", action="store_true", help="a shorter trainer protocol")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    args = parser.parse_args()
    result = {}
    if args.validate:
        result["validation"] = validate(args.quick)
    print(f"\n{'analysis':<58}{'ours [s]':>10}{'baseline [s]':>14}{'speed-up':>10}")
    rows = timings()
    for what, ours, base in rows:
        print(f"{what:<58}{ours:>10.4f}{base:>14.4f}{base / ours:>10.1f}")
    result["timings"] = [{"what": w, "ours": o, "baseline": b} for w, o, b in rows]
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
