"""The simulator's measured max lr against the prediction on a small transformer.

examples/tiny_transformer.py:problem_small (≈1.2·10⁵ parameters: embeddings, 4 pre-norm
blocks of LayerNorm, causal attention and a GELU MLP; 4 pipeline stages by blocks; AdamW for 400
steps, then near a minimum of its 16 analysis sequences by float64 L-BFGS) under PipeMare's
schedule:
``net max-lr --measure`` predicts the max stable lr on the rank-k curvature and brackets it by
simulation (`stability.nets.bracket`: tilted full-batch gradients from w* + ε·v₁, bisection to
``rel_tol``).  Printed per rule: the prediction, the measured bracket and their ratio; the check
is that the prediction falls inside the bracket widened by ``--slack`` (default 5 %).

Run: ``.venv/bin/python benchmarks/bench_transformer_bracket.py [--steps 400] [--k 5]
[--rules sgd momentum lwp+sc]``.
"""

from __future__ import annotations

import argparse
import time

CASES = {"sgd": {}, "momentum": {"momentum": 0.9}, "lwp+sc": {"momentum": 0.9}}


def main() -> int:
    import stability as st
    from stability.nets.bracket import NetProtocol

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400, help="simulator steps per run")
    ap.add_argument("--k", type=int, default=5, help="rank of the curvature")
    ap.add_argument("--slack", type=float, default=0.05)
    ap.add_argument("--rules", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = ap.parse_args()
    spec = "examples/tiny_transformer.py:problem_small"
    print(f"{'rule':<10}{'predicted':>11}{'bracket':>24}{'pred/mid':>10}{'inside':>8}{'s':>7}")
    failures = 0
    for rule in args.rules:
        params = CASES[rule]
        start = time.perf_counter()
        res = st.net_max_lr(spec, rule, schedule="pipemare", k=args.k, measure=True,
                            protocol=NetProtocol(steps=args.steps, rate_steps=args.steps),
                            **params)  # fmt: skip
        lo, hi = res.measured_bracket
        inside = lo * (1 - args.slack) <= res.max_lr <= hi * (1 + args.slack)
        failures += not inside
        print(f"{rule:<10}{res.max_lr:>11.4g}   [{lo:.4g}, {hi:.4g}]{'':>4}"
              f"{res.max_lr / res.measured_max_lr:>10.3f}{'yes' if inside else 'NO':>8}"
              f"{time.perf_counter() - start:>7.0f}")  # fmt: skip
    print(f"stage taus (PipeMare, 4 stages): {res.stage_taus}; stage sizes {res.stage_sizes}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
