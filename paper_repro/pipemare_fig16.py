"""PipeMare Fig. 16 (App. D.1): discrepancy correction with recompute.

Largest eigenvalue magnitude of the companion matrix vs α for Δ = 10, Φ = −5, τ_fwd = 10,
τ_bkwd = 1, τ_recomp = 4, λ = 1: recompute with delay discrepancy (App. D.1 polynomial
without T2), recompute with T2 and T2-for-recompute at D = 0.1, the no-recompute
discrepancy model (PipeMare eq. 5, Δ = 10) and no discrepancy at all.  The correction claim
is `stability.claims`' ``fig16-correction`` (one claim, one verdict); the comparisons for
α ≥ α* only are in the JSON's ``scoped`` numbers.
"""

from __future__ import annotations

import time

import _common
import numpy as np

NAME = "pipemare_fig16"
DELAYS = {"tau_fwd": 10, "tau_bkwd": 1, "lam": 1.0}
DELTA, PHI, TAU_RECOMP, DECAY = 10.0, -5.0, 4, 0.1


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    alphas = np.linspace(1e-4, 0.05, 200 if args.quick else 1000)
    recompute = {**DELAYS, "tau_recomp": TAU_RECOMP, "delta": DELTA, "phi": PHI}
    disc, disc_max = _common.radius_over_lr("recompute", alphas, **recompute)
    t2, t2_max = _common.radius_over_lr("recompute", alphas, decay=DECAY, **recompute)
    plain, plain_max = _common.radius_over_lr("discrepancy", alphas, delta=DELTA, **DELAYS)
    none, none_max = _common.radius_over_lr("discrepancy", alphas, delta=0.0, **DELAYS)
    claims, scoped = _common.correction_claims(
        "Fig. 16",
        "fig16-correction",
        args.quick,
        alphas,
        {"recompute, Δ = 10, Φ = −5": disc, "no recompute, Δ = 10": plain},
        t2,
        none,
        (disc_max, t2_max, none_max),
    )
    fig = _common.radius_figure(
        alphas,
        [
            ("recompute, delay discrepancy", disc, disc_max, "tab:blue"),
            ("no recompute, delay discrepancy", plain, plain_max, "tab:green"),
            ("no delay discrepancy", none, none_max, "tab:orange"),
            ("recompute + T2 (and T2 for recompute), D = 0.1", t2, t2_max, "tab:red"),
        ],
        title="PipeMare Fig. 16: Δ = 10, Φ = −5, τ_fwd = 10, τ_bkwd = 1, τ_recomp = 4, λ = 1",
    )
    data = {
        **recompute,
        "decay": DECAY,
        "alpha": alphas,
        "radius_recompute": disc,
        "radius_recompute_t2": t2,
        "radius_discrepancy_no_recompute": plain,
        "radius_no_discrepancy": none,
        "max_lr": {
            "recompute": disc_max,
            "recompute_t2": t2_max,
            "discrepancy_no_recompute": plain_max,
            "no_discrepancy": none_max,
        },
        "scoped": scoped,
    }
    return _common.write(
        args,
        NAME,
        fig,
        source="PipeMare Fig. 16, App. D.1",
        claims=claims,
        data=data,
        started=started,
    )


if __name__ == "__main__":
    main()
