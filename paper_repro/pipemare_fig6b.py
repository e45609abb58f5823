"""PipeMare Fig. 6(b): discrepancy correction T2 shrinks the largest eigenvalue magnitude.

Largest eigenvalue magnitude of the companion matrix vs α for τ_fwd = 10, τ_bkwd = 6, λ = 1:
delay discrepancy with Δ = 5 (PipeMare eq. 5), the same with T2 at D = 0.1 (Sec. 3.2,
App. B.4 polynomial), and no discrepancy (Δ = 0).  The correction claim is
`stability.claims`' ``fig6b-correction`` (one claim, one verdict); it and "discrepancy raises
ρ" hold only above a step size, refined by root-finding and marked on the figure.
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
    claims, rho, top = _common.correction_claims(
        "Fig. 6(b)",
        "fig6b-correction",
        args.quick,
        alphas,
        {"Δ = 5": ("discrepancy", {**SETUP, "delta": DELTA})},
        ("t2", {**SETUP, "delta": DELTA, "decay": DECAY}),
        ("discrepancy", {**SETUP, "delta": 0.0}),
    )
    correction, raised = claims[0], claims[1]
    fig = _common.radius_figure(
        alphas,
        [
            ("delay discrepancy, Δ = 5", rho["Δ = 5"], top["Δ = 5"], "tab:blue"),
            ("discrepancy correction T2, D = 0.1", rho["t2"], top["t2"], "tab:orange"),
            ("no delay discrepancy, Δ = 0", rho["none"], top["none"], "tab:green"),
        ],
        title="PipeMare Fig. 6(b): τ_fwd = 10, τ_bkwd = 6, λ = 1",
        boundaries=_common.claim_boundaries(
            (correction, "T2 lowers ρ (closer to Δ = 0) for α >"),
            (raised, "discrepancy raises ρ for α >"),
        ),
    )
    data = {
        **SETUP,
        "delta": DELTA,
        "decay": DECAY,
        "alpha": alphas,
        "radius_discrepancy": rho["Δ = 5"],
        "radius_t2": rho["t2"],
        "radius_no_discrepancy": rho["none"],
        "max_lr": {"discrepancy": top["Δ = 5"], "t2": top["t2"], "no_discrepancy": top["none"]},
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
