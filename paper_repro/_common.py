"""Shared plumbing of the paper reproductions: arguments, claims, atomic outputs.

Every script in ``paper_repro/`` reproduces one figure or table: it computes the numbers with
the `stability` library, draws them with `stability.plotting`, and writes

* ``<out-dir>/<name>.png`` — the figure, with the boundary where a claim stops holding marked;
* ``<out-dir>/<name>.json`` — the numbers plotted and the paper's claims, each a graded
  `stability.claims.Claim` (direction, size read through the lexicon, scope, ``grade``,
  ``range_where_it_holds``, optima) computed from those numbers, never typed in.

``--quick`` uses coarse grids (seconds; what CI runs); the default full mode produces the
committed figures when run with ``--out-dir figures`` (``make figures``).  ``--out-dir``
defaults to ``out/repro`` of the working directory (git-ignored), so a run never overwrites
the committed figures by accident.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from stability.claims import Claim, Range, Size

OUT_DIR = Path("out") / "repro"


def arguments(doc: str, argv=None) -> argparse.Namespace:
    """``--quick`` and ``--out-dir`` for a reproduction script (``doc``: its docstring)."""
    parser = argparse.ArgumentParser(
        description=doc.strip().splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="coarse grids (seconds)")
    parser.add_argument(
        "--out-dir", type=Path, default=OUT_DIR, help=f"where to write (default {OUT_DIR})"
    )
    return parser.parse_args(argv)


def write(
    args: argparse.Namespace,
    name: str,
    fig,
    *,
    source: str,
    claims: list[Claim],
    data: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    """Write ``<name>.png`` and ``<name>.json`` atomically and print where they are."""
    from stability.files import write_json
    from stability.plotting import save_figure

    png = save_figure(fig, args.out_dir / f"{name}.png")
    record = {
        "name": name,
        "source": source,
        "quick": bool(args.quick),
        "holds": all(c.holds for c in claims),
        "claims": [c.as_dict() for c in claims],
        "png": png.name,  # next to this file
        "seconds": round(time.perf_counter() - started, 2),
        "data": data,
    }
    out = write_json(args.out_dir / f"{name}.json", record)
    verdict = "the paper's claims hold" if record["holds"] else "the paper's claim does not hold"
    lines = [f"{name}: {verdict}", *(f"  {c.id}: {c.summary()}" for c in claims), f"  {png}"]
    sys.stdout.write("\n".join([*lines, f"  {out}", ""]))
    return record


def noisy_trajectory(rule, model, lr: float, steps: int, *, seed: int = 0, w0: float = 1.0):
    """w_t of the rule's own step on the noisy quadratic, gradient ∇f(u) − η_t, η_t ~ N(0, 1).

    PipeMare eq. 1 and 5 (Figs. 5(a), 6(a)): the gradient oracle is the quadratic model
    (`stability.quadratic`) minus standard normal noise; the step is
    `stability.rules.base.step`, the same one the analysis linearizes.
    """
    import numpy as np

    from stability.rules.base import History, step

    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(steps)
    history = History.constant(rule, w0)
    out = [w0]
    for t in range(steps):
        history = step(rule, history, lambda f, b, r, t=t: model(f, b, r) - noise[t], lr)
        out.append(history.weights)
    return np.array(out)


def growth_rate(w, tail: int) -> float:
    """Per-step growth factor of |w| over the last ``tail`` steps (least-squares slope)."""
    import numpy as np

    logs = np.log(np.abs(np.asarray(w[-tail:])) + 1e-300)
    return float(np.exp(np.polyfit(np.arange(tail), logs, 1)[0]))


COLORS = ("tab:blue", "tab:green", "tab:orange", "tab:red", "tab:purple", "tab:brown")


def trajectory_figure(curves, *, title: str, legend_title: str):
    """|w_t| on a log axis for labelled trajectories ``[(label, w), ...]``."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
    for (label, w), color in zip(curves, COLORS, strict=False):
        ax.semilogy(np.abs(w) + 1e-12, color=color, lw=1.3, label=label)
    ax.set_xlabel("iteration t")
    ax.set_ylabel("|w_t| (log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, title=legend_title, title_fontsize=8)
    return fig


def radius_over_lr(name: str, lrs, **params):
    """Spectral radius of rule ``name`` at each step size of ``lrs`` and its exact max lr."""
    from stability.analysis.boundary import max_lr
    from stability.dynamics.linear import characteristic_polynomial
    from stability.rules.registry import build_rule
    from stability.spectrum import spectral_radius

    rule, model = build_rule(name, **params)
    poly = characteristic_polynomial(rule, model).at(lrs).normalized()
    return spectral_radius(poly.dense()), max_lr(rule, model).max_lr


def radius_figure(alphas, curves, *, title: str, boundaries=()):
    """Largest eigenvalue magnitude vs α for ``[(label, radii, max_lr, colour), ...]``
    (colours as in the paper's caption); ``boundaries`` ``[(α, label), ...]`` are marked as
    vertical lines (where a claim starts holding), the range below the first one shaded."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
    for label, radii, top, color in curves:
        ax.plot(alphas, radii, color=color, lw=1.6, label=f"{label} (max stable α = {top:.4f})")
    for i, ((alpha, label), style) in enumerate(zip(boundaries, (":", "-."), strict=False)):
        ax.axvline(alpha, color="black", lw=1.2, ls=style, label=label)
        if i == 0:
            ax.axvspan(alphas[0], alpha, color="0.9", zorder=0)
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.text(alphas[0], 1.002, " unstable above", fontsize=8, va="bottom")
    ax.set_xlabel("step size α")
    ax.set_ylabel("largest eigenvalue magnitude ρ")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return fig


def claim_boundaries(*marked) -> list[tuple[float, str]]:
    """``[(α, label), ...]`` for the figure: the lower end of each ``(claim, label)``'s range
    where it holds (the step size from which it holds), when it holds only there."""
    return [
        (c.range_where_it_holds.low, f"{label} {c.range_where_it_holds.low:.5g}")
        for c, label in marked
        if c.range_where_it_holds is not None
    ]


def paper_claim(claim_id: str, quick: bool) -> Claim:
    """A claim checked by `stability.claims` (on the grids of ``stability claims`` or
    ``stability claims --quick``): one claim, one verdict, wherever it is shown."""
    from stability.claims import check_claims

    return check_claims([claim_id], quick=quick)[0]


def correction_claims(figure: str, claim_id: str, quick: bool, alphas, raised: dict, t2, none):
    """The claims of PipeMare Figs. 6(b) and 16 about delay discrepancy and T2, one verdict each.

    ``raised`` maps labels to the (rule, parameters) of the curves with delay discrepancy
    (the first is the one T2 corrects), ``t2`` and ``none`` are those of the corrected curve
    and of the one without discrepancy.  Returns ``(claims, radii, max_lrs)`` (radii and
    exact max lr per label, and for "t2" and "none"):

    * the correction claim ("T2 with D = 0.1 reduces the largest eigenvalue magnitude, which
      comes closer to the no-discrepancy one") is `stability.claims`' ``claim_id``;
    * "delay discrepancy increases the largest eigenvalue magnitude", for every curve of
      ``raised``: at small α it does not, and the α where it starts is the root of
      ρ(discrepancy) − ρ(none), refined by Brent's method (`stability.claims.locate`);
    * "T2 increases the range of step sizes over which the model is stable": the exact max
      stable α with and without T2.
    """
    import numpy as np

    from stability.claims import locate

    cases = {**raised, "t2": t2, "none": none}
    radii, max_lrs = {}, {}
    for label, (name, params) in cases.items():
        radii[label], max_lrs[label] = radius_over_lr(name, alphas, **params)

    def raise_over_none(label: str, alpha: float) -> float:
        name, params = raised[label]
        at = np.array([alpha])
        return float(
            radius_over_lr(name, at, **params)[0][0] - radius_over_lr(none[0], at, **none[1])[0][0]
        )

    holding = {
        label: locate.positive_intervals(
            lambda a, k=label: raise_over_none(k, a), alphas, radii[label] - radii["none"]
        )
        for label in raised
    }
    starts = [
        found[-1][0] if found and found[-1][1] == alphas[-1] else None for found in holding.values()
    ]
    everywhere = all(found == [(alphas[0], alphas[-1])] for found in holding.values())
    part = None
    if not everywhere and None not in starts:
        part = Range("lr", max(starts), float(alphas[-1]))
    first = next(iter(raised))
    gain = 100.0 * (max_lrs["t2"] / max_lrs[first] - 1.0)
    scope = f"α ∈ [{alphas[0]:.4g}, {alphas[-1]:.4g}] ({len(alphas)} plotted values)"
    claims = [
        paper_claim(claim_id, quick),
        Claim(
            id=f"{claim_id}-discrepancy-raises-radius",
            source=f"PipeMare {figure}",
            statement=f"{figure}: forward-backward delay discrepancy ({'; '.join(raised)}) "
            "increases the largest magnitude eigenvalue of the companion matrix (checked at "
            f"each plotted α; where it starts, refined by root-finding): {scope}",
            direction="ρ with discrepancy > ρ without, at every α",
            scope=scope,
            direction_holds=everywhere,
            size=Size(
                float(max(np.max(radii[k] - radii["none"]) for k in raised)),
                "spectral radius",
                "the largest raise ρ(discrepancy) − ρ(none) over the scope",
            ),
            range_where_it_holds=part,
            numbers={"holds_on": holding, "alpha_from": dict(zip(raised, starts, strict=True))},
        ),
        Claim(
            id=f"{claim_id}-t2-widens-range",
            source=f"PipeMare {figure}",
            statement=f"{figure}: T2 increases the range of step sizes over which the quadratic "
            "model is stable (exact max stable α with and without T2)",
            direction="max stable α with T2 > without",
            scope="the exact max stable α (every α > 0)",
            direction_holds=bool(max_lrs["t2"] > max_lrs[first]),
            size=Size(gain, "%", "the gain of the max stable α with T2 over without"),
            numbers={"max_stable_alpha": max_lrs},
        ),
    ]
    return claims, radii, max_lrs


def momentum_grid(quick: bool):
    """The momenta scanned before the optimum is zoomed in on (coarser in quick mode)."""
    import numpy as np

    from stability.analysis.conditioning import parameter_grid

    if quick:
        return np.concatenate((np.linspace(0.0, 0.9, 10), 1.0 - np.logspace(-1, -4, 16)[1:]))
    return parameter_grid("momentum", 1)


def edge_run(res, delays: dict, lr: float, steps: int, every: int) -> dict[str, Any]:
    """The fields both edge-of-stability scripts store of one `stability.net_train` run with
    ``sharpness_every``: its delays, protocol, outcome and edge reading (predicted edge,
    plateau, ratio; `stability.nets.sharpness`)."""
    return {
        "delays": {**delays, "stage_taus": res.stage_taus},
        "lr": lr,
        "steps": steps,
        "sharpness_every": every,
        "diverged": res.diverged,
        "final_loss": res.final_loss,
        "predicted_edge": res.predicted_edge,
        "plateau": res.plateau,
        "reached": res.reached,
        "edge_ratio": res.edge_ratio,
    }
