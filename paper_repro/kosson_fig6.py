"""Kosson Fig. 6: |r_max| over the normalized rate ηλ and the momentum m, delay 0 and 1.

Heatmaps of the dominant root magnitude of Kosson eq. 20-23 (GDM and Nesterov without delay;
GDM, Nesterov, SC_D, LWP_D and LWP_D + SC_D with D = 1), computed by
`stability.analysis.radius_grid` (ηλ axis: λ = 1), unstable region black, with the exact max
stable ηλ per m (`stability.analysis.boundary.max_lr_grid`) as the white curve.
"""

from __future__ import annotations

import time

import _common
import matplotlib.pyplot as plt
import numpy as np

from stability.analysis.boundary import max_lr_grid
from stability.analysis.radius_grid import heatmap, parse_axis
from stability.plotting import axis_label, colorbar, heatmap_axes
from stability.rules.registry import build_rule

NAME = "kosson_fig6"
CLAIM_IDS = (
    "nesterov-equals-sc",
    "delay-shrinks-region",
    "compensation-high-momentum",
    "sc-enlarges-region",
    "lwp-shrinks-small-momentum",
    "nesterov-marginal-larger-delays",
)
"""The claims of Fig. 6 and its text (Sec. 3.4), checked in `stability.claims.kosson`."""
PANELS = (  # (title, rule, delay)
    ("GDM, D = 0", "momentum", 0),
    ("Nesterov, D = 0", "nesterov", 0),
    ("GDM, D = 1", "momentum", 1),
    ("Nesterov, D = 1", "nesterov", 1),
    ("SC_D, D = 1", "sc", 1),
    ("LWP_D, D = 1", "lwp", 1),
    ("LWP_D + SC_D, D = 1", "lwp+sc", 1),
)


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    n = 64 if args.quick else 256
    x = parse_axis(f"lam*lr:1e-3:10:{n}:log")
    y = parse_axis(f"momentum:0:0.999:{n}")
    maps = {title: heatmap(rule, x, y, tau=tau) for title, rule, tau in PANELS}
    m = np.linspace(0.0, 0.999, 200 if args.quick else 1000)
    top = {
        title: max_lr_grid(*build_rule(rule, tau=tau, momentum=m))[0] for title, rule, tau in PANELS
    }
    claims = [_common.paper_claim(claim_id, args.quick) for claim_id in CLAIM_IDS]
    lwp = next(c for c in claims if c.id == "lwp-shrinks-small-momentum").numbers

    fig, axes = plt.subplots(2, 4, figsize=(15, 7.2), layout="constrained", sharey=True)
    for ax, (title, rule, _) in zip(axes.flat, PANELS, strict=False):
        hm = maps[title]
        mesh = heatmap_axes(
            ax, x.values, y.values, hm.radius, hm.stable, x_log=True, metric="radius"
        )
        ax.plot(top[title], m, color="white", lw=1.2)
        if rule in lwp:  # where the decrease stops being more than slight, and where it ends
            for key, style in (("momentum_where_the_decrease_is_slight", ":"),
                               ("momentum_where_it_stops_shrinking", "--")):  # fmt: skip
                if lwp[rule][key] is not None:
                    ax.axhline(lwp[rule][key], color="cyan", lw=1.0, ls=style)
        ax.set_xlim(x.values[0], x.values[-1])
        ax.set_title(title, fontsize=10)
    for ax in axes[1]:
        ax.set_xlabel(axis_label("lam*lr", True))
    for ax in axes[:, 0]:
        ax.set_ylabel(axis_label("momentum"))
    axes.flat[-1].axis("off")
    colorbar(fig, mesh, axes, "radius")
    axes.flat[-1].text(
        0.05,
        0.5,
        "black: unstable (|r_max| ≥ 1)\nwhite: exact max stable ηλ\n"
        "cyan (LWP panels): the max stable ηλ is\nbelow GDM's for m under the dashed line,\n"
        "by more than 10 % (not 'slightly')\nunder the dotted line",
        transform=axes.flat[-1].transAxes,
        fontsize=11,
    )
    fig.suptitle("Kosson Fig. 6: magnitude of the dominant root |r_max| (eq. 20-23)")
    step = max(1, n // 64)  # the maps at 64 × 64 (every step-th point) keep the JSON small
    data = {
        "eta_lambda": x.values[::step],
        "momentum": y.values[::step],
        "radius_every": step,
        "radius": {title: hm.radius[::step, ::step].round(8) for title, hm in maps.items()},
        "max_stable_eta_lambda": {"momentum": m[::5], **{k: v[::5] for k, v in top.items()}},
    }
    return _common.write(
        args,
        NAME,
        fig,
        source="Kosson Fig. 6, Sec. 3.4",
        claims=claims,
        data=data,
        started=started,
    )


if __name__ == "__main__":
    main()
