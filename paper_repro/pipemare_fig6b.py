"""PipeMare Fig. 6(b): discrepancy correction T2 shrinks the largest eigenvalue magnitude.

Largest eigenvalue magnitude of the companion matrix vs α for τ_fwd = 10, τ_bkwd = 6, λ = 1:
delay discrepancy with Δ = 5 (PipeMare eq. 5), the same with T2 at D = 0.1 (Sec. 3.2,
App. B.4 polynomial), and no discrepancy (Δ = 0).  The correction claim is
`stability.claims`' ``fig6b-correction`` (one claim, one verdict); the comparisons for
α ≥ α* only are in the JSON's ``scoped`` numbers.
"""

from __future__ import annotations

import time

import _common
import numpy as np

NAME = "pipemare_fig6b"
SETUP = {"tau_fwd": 10, "tau_bkwd": 6, "lam": 1.0}
DELTA, DECAY = 5.0, 0.1


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    alphas = np.linspace(1e-4, 0.2, 200 if args.quick else 1000)
    disc, disc_max = _common.radius_over_lr("discrepancy", alphas, delta=DELTA, **SETUP)
    t2, t2_max = _common.radius_over_lr("t2", alphas, delta=DELTA, decay=DECAY, **SETUP)
    none, none_max = _common.radius_over_lr("discrepancy", alphas, delta=0.0, **SETUP)
    claims, scoped = _common.correction_claims(
        "Fig. 6(b)",
        "fig6b-correction",
        args.quick,
        alphas,
        {"Δ = 5": disc},
        t2,
        none,
        (disc_max, t2_max, none_max),
    )
    fig = _common.radius_figure(
        alphas,
        [
            ("delay discrepancy, Δ = 5", disc, disc_max, "tab:blue"),
            ("discrepancy correction T2, D = 0.1", t2, t2_max, "tab:orange"),
            ("no delay discrepancy, Δ = 0", none, none_max, "tab:green"),
        ],
        title="PipeMare Fig. 6(b): τ_fwd = 10, τ_bkwd = 6, λ = 1",
    )
    data = {
        **SETUP,
        "delta": DELTA,
        "decay": DECAY,
        "alpha": alphas,
        "radius_discrepancy": disc,
        "radius_t2": t2,
        "radius_no_discrepancy": none,
        "max_lr": {"discrepancy": disc_max, "t2": t2_max, "no_discrepancy": none_max},
        "scoped": scoped,
    }
    return _common.write(
        args,
        NAME,
        fig,
        source="PipeMare Fig. 6(b), Sec. 3.2",
        claims=claims,
        data=data,
        started=started,
    )


if __name__ == "__main__":
    main()
