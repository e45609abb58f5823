"""Kosson Fig. 17 (App. J): convergence speed vs the prediction scale α of LWP, T = αD.

Optimal half-life −ln2/ln r* (worst spectral radius over λ ∈ [λ_min, κλ_min], minimised over
the step size and the momentum) of linear weight prediction (weight form, Kosson eq. 22)
with horizon T = αD, for κ = 10³ with D = 4 and D = 10, and κ = 10⁵ with D = 4.
"""

from __future__ import annotations

import time

import _common
import matplotlib.pyplot as plt
import numpy as np

from stability.analysis.conditioning import optimal_half_life
from stability.plotting import axis_label

NAME = "kosson_fig17"
SETTINGS = (  # (label, κ, D, colour)
    ("κ = 10³, D = 4", 1e3, 4, "tab:blue"),
    ("κ = 10³, D = 10", 1e3, 10, "tab:orange"),
    ("κ = 10⁵, D = 4", 1e5, 4, "tab:green"),
)


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    scales = np.array([0.0, 1.0, 2.0, 3.0]) if args.quick else np.linspace(0, 10, 41)
    grid = _common.momentum_grid(args.quick)
    h, m_opt, best = {}, {}, {}
    for label, kappa, delay, _ in SETTINGS:
        r = optimal_half_life(
            "lwp", kappa, tau=delay, horizon=scales * delay, optimize="momentum", grid=grid
        )
        h[label], m_opt[label] = r.half_life, r.values["momentum"]
        best[label] = float(scales[np.argmin(r.half_life)])
    claims = [
        _common.Claim(
            "App. J / Fig. 17: overcompensating helps; predicting T ≈ 2D steps ahead is optimal "
            "(best α within 1.5 … 2.5 for every κ and D).",
            all(1.5 <= a <= 2.5 for a in best.values()),
            "best α: " + ", ".join(f"{k}: {a:g}" for k, a in best.items()),
        ),
        _common.Claim(
            "The default horizon T = D (α = 1) is better than no prediction (α = 0) and worse "
            "than the optimum.",
            all(
                h[k][scales == 1][0] < h[k][scales == 0][0] and np.min(h[k]) < h[k][scales == 1][0]
                for k in h
            ),
            ", ".join(
                f"{k}: α=0 {h[k][scales == 0][0]:.0f}, α=1 {h[k][scales == 1][0]:.0f}, "
                f"best {np.min(h[k]):.0f}"
                for k in h
            ),
        ),
    ]
    fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
    for label, _, _, color in SETTINGS:
        ax.semilogy(scales, h[label], color=color, marker=".", lw=1.6, label=label)
    ax.axvline(2.0, color="gray", ls="--", lw=0.8)
    ax.set_xlabel(axis_label("horizon_scale"))
    ax.set_ylabel("optimal half-life (steps, log scale)")
    ax.set_title("Kosson Fig. 17: LWP^w with T = αD (lr and momentum optimised)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    data = {"scale": scales, "half_life": h, "optimal_momentum": m_opt, "best_scale": best}
    return _common.write(
        args,
        NAME,
        fig,
        source="Kosson Fig. 17, App. J",
        claims=claims,
        data=data,
        started=started,
    )


if __name__ == "__main__":
    main()
