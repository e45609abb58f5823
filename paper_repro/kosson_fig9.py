"""Kosson Fig. 9: optimal half-life over momentum m and LWP horizon T, D = 5, κ = 10³.

Each cell is the half-life −ln2/ln r* of linear weight prediction (weight form, Kosson eq.
22) with momentum m and horizon T, minimised over the step size (r*: worst spectral radius
over λ ∈ [λ_min, 10³λ_min]; `stability.analysis.conditioning.optimal_half_life`).  T = 0 is GDM with
delay; T = D is LWP_D.  The optimum of LWP_D + SC_D (momentum optimised) is the reference.
"""

from __future__ import annotations

import time

import _common
import matplotlib.pyplot as plt
import numpy as np

from stability.analysis.conditioning import optimal_half_life
from stability.plotting import axis_label, heatmap_axes

NAME = "kosson_fig9"
DELAY, KAPPA = 5, 1e3


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    # momentum rows dense towards 1 (the optimum with LWP is m ≈ 0.99), shown on a 1 − m log axis
    m = 1.0 - np.geomspace(1.0, 1e-3, 16 if args.quick else 61)
    T = np.linspace(0.0, 4.0 * DELAY, 9 if args.quick else 81)
    table = optimal_half_life("lwp", KAPPA, tau=DELAY, momentum=m[:, None], horizon=T[None, :])
    h = table.half_life
    grid = _common.momentum_grid(args.quick)
    curve_t = np.linspace(0.0, 4.0 * DELAY, 5 if args.quick else 41)
    best = optimal_half_life(
        "lwp", KAPPA, tau=DELAY, horizon=curve_t, optimize="momentum", grid=grid
    )
    combo = optimal_half_life("lwp+sc", KAPPA, tau=DELAY, optimize="momentum", grid=grid)
    gdm = optimal_half_life("momentum", KAPPA, tau=DELAY, optimize="momentum", grid=grid)
    k = int(np.argmin(best.half_life))
    best_t = curve_t[k]
    at_d = int(np.argmin(np.abs(T - DELAY)))
    m_at_d = m[np.argmin(h[:, at_d])]
    claims = [
        _common.Claim(
            "Fig. 9: horizons close to T = 2D are optimal (the best T, momentum and step "
            "optimised, within 1.5D … 2.5D).",
            bool(1.5 * DELAY <= best_t <= 2.5 * DELAY),
            f"best T = {best_t:g} (= {best_t / DELAY:.2f}·D) with m* = "
            f"{best.values['momentum'][k]:.4f}, half-life {best.half_life[k]:.1f}",
        ),
        _common.Claim(
            "… but do not outperform the combination LWP_D + SC_D.",
            bool(np.min(best.half_life) >= float(combo.half_life)),
            f"best LWP {np.min(best.half_life):.1f} vs LWP_D + SC_D "
            f"{float(combo.half_life):.1f} (m* = {float(combo.values['momentum']):.4f})",
        ),
        _common.Claim(
            "Without mitigation (T = 0 is GDM with delay) the optimal momentum is zero.",
            bool(np.argmin(h[:, 0]) == 0 and float(gdm.values["momentum"]) < 1e-3),
            f"best m on the T = 0 column: {m[np.argmin(h[:, 0])]:g}; refined optimum for GDM: "
            f"m* = {float(gdm.values['momentum']):.2e}, half-life {float(gdm.half_life):.1f}",
        ),
        _common.Claim(
            "The compensation restores the benefits of momentum: with LWP_D (T = D) the best "
            "momentum is nonzero (above 0.5) and beats the best T = 0 half-life.",
            bool(m_at_d > 0.5 and np.min(h[:, at_d]) < np.min(h[:, 0])),
            f"T = D: best m = {m_at_d:.3f}, half-life {np.min(h[:, at_d]):.1f} vs "
            f"{np.min(h[:, 0]):.1f} at T = 0",
        ),
    ]
    fig, ax = plt.subplots(figsize=(7, 5.2), layout="constrained")
    finite = np.isfinite(h)
    mesh = heatmap_axes(ax, T, m, h, finite, metric="half-life")
    bar = fig.colorbar(mesh, ax=ax)
    bar.set_label("optimal half-life over η (steps, log scale)")
    ax.set_yscale("function", functions=(_to_axis, _from_axis))
    ax.set_yticks([0.0, 0.5, 0.9, 0.99, 0.999])
    ax.set_ylim(m[0], m[-1])
    ax.axvline(2 * DELAY, color="white", ls="--", lw=1, label="T = 2D")
    ax.plot(curve_t, best.values["momentum"], color="red", lw=1.4, label="optimal m for each T")
    ax.plot(
        [best_t],
        [best.values["momentum"][k]],
        marker="*",
        color="red",
        ms=12,
        ls="",
        label=f"optimum T = {best_t:g}",
    )
    ax.set_xlabel(axis_label("horizon"))
    ax.set_ylabel(axis_label("momentum") + " (axis: −log₁₀(1 − m))")
    ax.set_title(f"Kosson Fig. 9: LWP^w, D = {DELAY}, κ = 10³ (black: no stable η)", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    data = {
        "delay": DELAY,
        "kappa": KAPPA,
        "momentum": m,
        "horizon": T,
        "half_life": h,
        "optimal_over_momentum": {
            "horizon": curve_t,
            "half_life": best.half_life,
            "momentum": best.values["momentum"],
        },
        "lwp_sc_optimum": {
            "half_life": float(combo.half_life),
            "momentum": float(combo.values["momentum"]),
        },
        "gdm_optimum": {
            "half_life": float(gdm.half_life),
            "momentum": float(gdm.values["momentum"]),
        },
    }
    return _common.write(
        args,
        NAME,
        fig,
        source="Kosson Fig. 9, Sec. 3.4",
        claims=claims,
        data=data,
        started=started,
    )


def _to_axis(m):
    return -np.log10(np.maximum(1.0 - np.asarray(m), 1e-12))


def _from_axis(u):
    return 1.0 - 10.0 ** (-np.asarray(u))


if __name__ == "__main__":
    main()
