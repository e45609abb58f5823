"""Shared plumbing of the paper reproductions: arguments, claims, atomic outputs.

Every script in ``paper_repro/`` reproduces one figure or table: it computes the numbers with
the `stability` library, draws them with `stability.plotting`, and writes

* ``<out-dir>/<name>.png`` — the figure;
* ``<out-dir>/<name>.json`` — the numbers plotted, the paper's claims in words, and for each
  claim whether it holds, computed from those numbers (``holds``), never typed in.

``--quick`` uses coarse grids (seconds; what CI runs); the default full mode produces the
committed figures when run with ``--out-dir figures`` (``make figures``).  ``--out-dir``
defaults to ``out/repro`` of the working directory (git-ignored), so a run never overwrites
the committed figures by accident.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT_DIR = Path("out") / "repro"


@dataclass(frozen=True)
class Claim:
    """A claim of the paper (quoted or paraphrased, with its figure) and its verdict."""

    text: str
    holds: bool
    evidence: str

    def as_dict(self) -> dict[str, Any]:
        return {"claim": self.text, "holds": bool(self.holds), "evidence": self.evidence}


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
    verdict = "holds" if record["holds"] else "DOES NOT HOLD"
    sys.stdout.write(f"{name}: {verdict}\n  {png}\n  {out}\n")
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


def radius_figure(alphas, curves, *, title: str):
    """Largest eigenvalue magnitude vs α for ``[(label, radii, max_lr, colour), ...]``
    (colours as in the paper's caption)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
    for label, radii, top, color in curves:
        ax.plot(alphas, radii, color=color, lw=1.6, label=f"{label} (max stable α = {top:.4f})")
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.text(alphas[0], 1.002, " unstable above", fontsize=8, va="bottom")
    ax.set_xlabel("step size α")
    ax.set_ylabel("largest eigenvalue magnitude ρ")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return fig


def where(x, mask) -> str:
    """The ranges of ``x`` where ``mask`` holds, in words (e.g. "α ∈ [0.01, 0.02]")."""
    import numpy as np

    mask = np.asarray(mask, bool)
    if not mask.any():
        return "nowhere"
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(int), [0]))))
    return ", ".join(
        f"[{x[a]:.4g}, {x[b - 1]:.4g}]" for a, b in zip(edges[::2], edges[1::2], strict=True)
    )


def paper_claim(claim_id: str, quick: bool) -> Claim:
    """A claim checked by `stability.claims` (its statement, verdict and numbers, on the grids
    of ``stability claims`` or ``stability claims --quick``): one claim, one verdict."""
    from stability.claims import check_claims

    checked = check_claims([claim_id], quick=quick)[0]
    numbers = checked.numbers
    evidence = "; ".join(
        f"{key.replace('_', ' ')}: {value}"
        for key, value in numbers.items()
        if key != "radius_at_lr"
    )
    return Claim(f"{checked.source}: {checked.statement}", checked.holds, evidence)


def correction_claims(
    figure: str, claim_id: str, quick: bool, alphas, raised: dict, t2, none, max_lrs
) -> tuple[list[Claim], dict]:
    """The claims of PipeMare Figs. 6(b) and 16 about delay discrepancy and T2, one verdict each.

    * the correction claim ("T2 with D = 0.1 reduces the largest eigenvalue magnitude, which
      comes closer to the no-discrepancy one") is `stability.claims`' ``claim_id``, taken as
      it is (`paper_claim`);
    * "delay discrepancy increases the largest eigenvalue magnitude" is checked as stated, at
      every plotted α, for each curve of ``raised`` (label → radii);
    * "T2 increases the range of stable step sizes": the exact max stable α, ``max_lrs`` =
      (with discrepancy, with T2, without discrepancy).

    The comparisons restricted to α ≥ α* (where ρ without discrepancy is smallest, the fastest
    step: the regime that decides stability) are returned as numbers (``scoped``), not as
    verdicts: below α* the curves cross.
    """
    import numpy as np

    tol = 1e-9
    start = int(np.argmin(none))
    sel = slice(start, None)
    disc_max, t2_max, none_max = max_lrs
    below = {label: rho < none - tol for label, rho in raised.items()}
    first = next(iter(raised.values()))
    claims = [
        paper_claim(claim_id, quick),
        Claim(
            f"{figure}: forward-backward delay discrepancy ({'; '.join(raised)}) increases the "
            f"largest magnitude eigenvalue of the companion matrix (checked at each of the "
            f"{len(alphas)} plotted α ∈ [{alphas[0]:.4g}, {alphas[-1]:.4g}]).",
            not any(mask.any() for mask in below.values()),
            "; ".join(
                f"{label}: ρ below the no-discrepancy ρ for α ∈ {where(alphas, mask)}"
                for label, mask in below.items()
            ),
        ),
        Claim(
            f"{figure}: T2 increases the range of step sizes over which the quadratic model "
            "is stable.",
            bool(t2_max > disc_max),
            f"max stable α: with discrepancy {disc_max:.5f}, with T2 {t2_max:.5f}, "
            f"without discrepancy {none_max:.5f}",
        ),
    ]
    scoped = {
        "what": "the same comparisons restricted to α ≥ α* (numbers, not verdicts)",
        "alpha_star": float(alphas[start]),
        "min_radius_raise_over_no_discrepancy": {
            label: float(np.min(rho[sel] - none[sel])) for label, rho in raised.items()
        },
        "max_radius_t2_minus_discrepancy": float(np.max(t2[sel] - first[sel])),
        "max_distance_gain_t2_vs_discrepancy": float(
            np.max(np.abs(t2[sel] - none[sel]) - np.abs(first[sel] - none[sel]))
        ),
    }
    return claims, scoped


def momentum_grid(quick: bool):
    """The momenta scanned before the optimum is zoomed in on (coarser in quick mode)."""
    import numpy as np

    from stability.analysis.conditioning import parameter_grid

    if quick:
        return np.concatenate((np.linspace(0.0, 0.9, 10), 1.0 - np.logspace(-1, -4, 16)[1:]))
    return parameter_grid("momentum", 1)
