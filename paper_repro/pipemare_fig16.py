"""PipeMare Fig. 16 (App. D.1): discrepancy correction with recompute.

Largest eigenvalue magnitude of the companion matrix vs α for Δ = 10, Φ = −5, τ_fwd = 10,
τ_bkwd = 1, τ_recomp = 4, λ = 1: recompute with delay discrepancy (App. D.1 polynomial
without T2), recompute with T2 and T2-for-recompute at D = 0.1, the no-recompute
discrepancy model (PipeMare eq. 5, Δ = 10) and no discrepancy at all.  The correction claim
is `stability.claims`' ``fig16-correction`` (one claim, one verdict); it and "discrepancy
raises ρ" hold only above a step size, refined by root-finding and marked on the figure.
"""

from __future__ import annotations

import time

import _common
import numpy as np

NAME = "pipemare_fig16"
DELAYS = {"tau_fwd": 10, "tau_bkwd": 1, "lam": 1.0}
DELTA, PHI, TAU_RECOMP, DECAY = 10.0, -5.0, 4, 0.1
RECOMPUTE, PLAIN = "recompute, Δ = 10, Φ = −5", "no recompute, Δ = 10"


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    alphas = np.linspace(1e-4, 0.05, 200 if args.quick else 1000)
    recompute = {**DELAYS, "tau_recomp": TAU_RECOMP, "delta": DELTA, "phi": PHI}
    claims, rho, top = _common.correction_claims(
        "Fig. 16",
        "fig16-correction",
        args.quick,
        alphas,
        {
            RECOMPUTE: ("recompute", recompute),
            PLAIN: ("discrepancy", {**DELAYS, "delta": DELTA}),
        },
        ("recompute", {**recompute, "decay": DECAY}),
        ("discrepancy", {**DELAYS, "delta": 0.0}),
    )
    correction, raised = claims[0], claims[1]
    fig = _common.radius_figure(
        alphas,
        [
            ("recompute, delay discrepancy", rho[RECOMPUTE], top[RECOMPUTE], "tab:blue"),
            ("no recompute, delay discrepancy", rho[PLAIN], top[PLAIN], "tab:green"),
            ("no delay discrepancy", rho["none"], top["none"], "tab:orange"),
            ("recompute + T2 (and T2 for recompute), D = 0.1", rho["t2"], top["t2"], "tab:red"),
        ],
        title="PipeMare Fig. 16: Δ = 10, Φ = −5, τ_fwd = 10, τ_bkwd = 1, τ_recomp = 4, λ = 1",
        boundaries=_common.claim_boundaries(
            (correction, "T2 lowers ρ (closer to no discrepancy) for α >"),
            (raised, "discrepancy raises ρ for α >"),
        ),
    )
    data = {
        **recompute,
        "decay": DECAY,
        "alpha": alphas,
        "radius_recompute": rho[RECOMPUTE],
        "radius_recompute_t2": rho["t2"],
        "radius_discrepancy_no_recompute": rho[PLAIN],
        "radius_no_discrepancy": rho["none"],
        "max_lr": {
            "recompute": top[RECOMPUTE],
            "recompute_t2": top["t2"],
            "discrepancy_no_recompute": top[PLAIN],
            "no_discrepancy": top["none"],
        },
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
