"""Max stable step size: boundary locus vs numpy-roots bisection vs python-control `margin`.

One table, measured in one run, for delayed SGD (PipeMare eq. 3) at τ = 10, 100, 1000, where
the exact answer is Lemma 1's 2/λ·sin(π/(4τ+2)):

* ``stability``: `stability.analysis.boundary.max_lr` (boundary locus on the sparse polynomial,
  mpmath-refined) — median over repeats;
* ``bisection``: bisection on lr of the spectral radius from `numpy.roots` (dense companion
  eigenvalues), to 1e-12 relative, the way one would do it by hand;
* ``control``: python-control's `margin` on the loop λ/(z^τ(z−1)) (its gain margin is the
  max lr), as a new user would call it.

Run: ``.venv/bin/python benchmarks/bench_max_lr.py [--taus 10,100,1000]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings

import numpy as np

from stability.analysis.boundary import max_lr
from stability.rules.registry import build_rule


def exact(tau: int, lam: float) -> float:
    return 2 / lam * math.sin(math.pi / (4 * tau + 2))


def ours(tau: int, lam: float) -> float:
    rule, model = build_rule("sgd", tau=tau, lam=lam)
    return max_lr(rule, model).max_lr


def numpy_bisection(tau: int, lam: float) -> float:
    def radius(lr):
        c = np.zeros(tau + 2)
        c[0], c[1], c[-1] = 1.0, -1.0, lr * lam
        return np.max(np.abs(np.roots(c)))

    lo, hi = 0.0, 2.0 / lam  # SGD is unstable at lr·λ ≥ 2 for every τ
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if radius(mid) < 1 else (lo, mid)
    return hi


def control_margin(tau: int, lam: float) -> float:
    import control

    den = np.zeros(tau + 2)
    den[0], den[1] = 1.0, -1.0
    loop = control.tf([lam], den, dt=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm, _, _, _ = control.margin(loop)
    return float(gm)


def timed(fn, *args, repeats: int = 1):
    times, value = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn(*args)
        times.append(time.perf_counter() - t0)
    return value, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taus", default="10,100,1000")
    ap.add_argument("--lam", type=float, default=1.0)
    args = ap.parse_args()
    taus = [int(t) for t in args.taus.split(",")]
    ours(10, args.lam), control_margin(3, args.lam)  # warm imports outside the timings
    header = (
        f"{'tau':>6} | {'stability ms':>12} {'rel err':>9} | {'bisect ms':>10} {'rel err':>9}"
        f" {'ratio':>7} | {'control ms':>10} {'rel err':>9} {'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    for tau in taus:
        truth = exact(tau, args.lam)
        v0, t0 = timed(ours, tau, args.lam, repeats=7)
        v1, t1 = timed(numpy_bisection, tau, args.lam)
        v2, t2 = timed(control_margin, tau, args.lam)
        e = [abs(v / truth - 1) if math.isfinite(v) else math.inf for v in (v0, v1, v2)]
        print(
            f"{tau:>6} | {t0 * 1e3:>12.2f} {e[0]:>9.1e} | {t1 * 1e3:>10.0f} {e[1]:>9.1e}"
            f" {t1 / t0:>6.0f}x | {t2 * 1e3:>10.1f} {e[2]:>9.1e} {t2 / t0:>6.1f}x"
        )


if __name__ == "__main__":
    main()
