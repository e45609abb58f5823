"""PipeMare Fig. 5(b): pipeline-parallel SGD on cpusmall linear regression, loss over α × τ.

Trains delayed minibatch SGD w_{t+1} = w_t − α·∇f_B(w_{t−τ}) (PipeMare eq. 1: the `sgd` rule's
own step, run by the reference trainer `stability.trainer.engine.train`, every (α, τ) run in
lockstep) on least squares over cpusmall, loaded and preprocessed as ``stability validate``
does (`stability.trainer.problems.ProblemOptions` defaults: features z-scored, target centred,
no intercept).  The heatmap shows the final loss; red marks the runs that diverged (loss above
10⁶ × its initial value, the trainer's test); the black curve is Lemma 1's threshold
2/λ_max·sin(π/(4τ+2)) with λ_max the largest eigenvalue of the problem's Hessian XᵀX/n.

The divergence boundary per τ is the bracket [last stable α, first diverged α] on the grid,
then narrowed by one more lockstep run of `Settings.refine_points` step sizes inside every
bracket.  A side study repeats the measurement at small delays for several batch sizes: at
τ ≤ 1 minibatch noise moves the threshold, which is why the main run uses B = 64 (the paper
gives no batch size).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import _common
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from stability.analysis.closed_forms import lemma1_threshold
from stability.claims import Claim, Qualifier, Size
from stability.plotting import axis_label, log_axis

NAME = "pipemare_fig5b"
BATCH = 64
"""Minibatch size of the main run: the smallest power of two whose τ = 0 threshold stays at
Lemma 1's (see the ``batch_sensitivity`` data; the paper does not give its batch size)."""
SEED = 0
TOLERANCE = 0.05
"""Relative band around Lemma 1 outside which every grid run is classified (the lexicon's
"precisely": within 5 %)."""
TAU_FIT_MIN = 8
"""The slope of log α_max vs log τ is fitted for τ ≥ this (Lemma 1 ≈ π/(2λτ) there)."""


@dataclass(frozen=True)
class Settings:
    """Grids and run lengths of one mode."""

    taus: tuple[int, ...]
    alphas: np.ndarray
    steps: int
    refine_points: int
    sensitivity_taus: tuple[int, ...]
    sensitivity_batches: tuple[int | None, ...]
    sensitivity_fractions: np.ndarray
    sensitivity_steps: int


def _log_delays(hi: int, n: int) -> tuple[int, ...]:
    return tuple(int(t) for t in np.unique(np.round(np.geomspace(1, hi, n))))


FULL = Settings(
    taus=_log_delays(128, 36),
    alphas=np.geomspace(1e-3, 1.0, 96),
    steps=200_000,
    refine_points=16,
    sensitivity_taus=(0, 1, 2, 4, 8),
    sensitivity_batches=(16, 32, 64, 256, None),
    sensitivity_fractions=np.round(np.arange(0.40, 1.1001, 0.01), 4),
    sensitivity_steps=100_000,
)
"""Full mode: 28 delays × 96 step sizes, T = 2·10⁵ steps (the paper runs 10⁶; 2·10⁵ already puts
the divergence test within ~1 % of the threshold at τ = 128 and decays the slowest mode at the
smallest α by e⁻¹⁷, in ~3 min on 2 shared cores; 10⁶ would take ~5× as long)."""
QUICK = Settings(
    taus=_log_delays(32, 8),
    alphas=np.geomspace(1e-3, 1.0, 32),
    steps=30_000,
    refine_points=8,
    sensitivity_taus=(0, 1, 4),
    sensitivity_batches=(16, 64, None),
    sensitivity_fractions=np.round(np.arange(0.40, 1.1001, 0.025), 4),
    sensitivity_steps=5_000,
)


def load_problem():
    """cpusmall least squares exactly as ``stability validate`` builds it (module doc)."""
    from stability.trainer.problems import ProblemOptions, build_problem

    return build_problem(ProblemOptions())


def train_pairs(problem, tau, alpha, *, steps: int, batch: int | None):
    """Delayed SGD for every pair (τ_r, α_r), all runs in one lockstep computation."""
    from stability.trainer.engine import train
    from stability.trainer.schedules import uniform_rule

    rule = uniform_rule("sgd", {}, np.asarray(tau, dtype=np.int64).reshape(-1, 1))
    return train(problem, rule, np.asarray(alpha, dtype=float), steps=steps, batch=batch, seed=SEED)


def first_divergence(alphas, diverged) -> tuple[float, float]:
    """(last stable α below the first diverged one, first diverged α) along one sorted row;
    0 / inf where the row has no stable / no diverged run."""
    hits = np.flatnonzero(diverged)
    if hits.size == 0:
        return float(alphas[-1]), float("inf")
    j = int(hits[0])
    return (float(alphas[j - 1]) if j else 0.0), float(alphas[j])


def refine(problem, taus, brackets, settings: Settings) -> list[tuple[float, float]]:
    """Narrow each finite bracket with ``refine_points`` geometric step sizes inside it."""
    k = settings.refine_points
    inner = [np.geomspace(lo, hi, k + 2)[1:-1] for lo, hi in brackets]
    runs = train_pairs(
        problem, np.repeat(taus, k), np.concatenate(inner), steps=settings.steps, batch=BATCH
    )
    out = []
    for i, (lo, hi) in enumerate(brackets):
        row = np.concatenate(([lo], inner[i], [hi]))
        flags = np.concatenate(([False], runs.diverged[i * k : (i + 1) * k], [True]))
        out.append(first_divergence(row, flags))
    return out


def batch_sensitivity(problem, lam_max: float, settings: Settings) -> list[dict]:
    """Measured boundary / Lemma 1 at small delays for several batch sizes (None: full)."""
    taus = np.array(settings.sensitivity_taus)
    fractions = settings.sensitivity_fractions
    lemma = np.array([lemma1_threshold(float(t), lam_max) for t in taus])
    rows = []
    for batch in settings.sensitivity_batches:
        runs = train_pairs(
            problem,
            np.repeat(taus, fractions.size),
            np.outer(lemma, fractions).ravel(),
            steps=settings.sensitivity_steps,
            batch=batch,
        )
        diverged = runs.diverged.reshape(taus.size, fractions.size)
        for t, row in zip(taus, diverged, strict=True):
            lo, hi = first_divergence(fractions, row)
            rows.append({"batch": batch, "tau": int(t), "ratio_low": lo, "ratio_high": hi})
    return rows


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    settings = QUICK if args.quick else FULL
    problem, data = load_problem()
    eigenvalues = problem.hessian_eigenvalues()
    lam_max = float(eigenvalues[-1])
    taus, alphas = np.array(settings.taus), settings.alphas
    lemma = np.array([lemma1_threshold(float(t), lam_max) for t in taus])

    grid = train_pairs(
        problem,
        np.repeat(taus, alphas.size),
        np.tile(alphas, taus.size),
        steps=settings.steps,
        batch=BATCH,
    )
    shape = (taus.size, alphas.size)
    diverged = grid.diverged.reshape(shape)
    final_loss = grid.final_loss.reshape(shape)
    coarse = [first_divergence(alphas, row) for row in diverged]
    refined = refine(problem, taus, coarse, settings)
    low = np.array([lo for lo, _ in refined])
    high = np.array([hi for _, hi in refined])
    boundary = np.sqrt(low * high)
    sensitivity = batch_sensitivity(problem, lam_max, settings)

    fit = taus >= TAU_FIT_MIN
    slope = float(np.polyfit(np.log(taus[fit]), np.log(boundary[fit]), 1)[0])
    lemma_slope = float(np.polyfit(np.log(taus[fit]), np.log(lemma[fit]), 1)[0])
    ratio_low, ratio_high = low / lemma, high / lemma
    below = alphas[None, :] <= (1 - TOLERANCE) * lemma[:, None]
    above = alphas[None, :] >= (1 + TOLERANCE) * lemma[:, None]
    claims = _claims(
        taus, slope, lemma_slope, ratio_low, ratio_high, diverged, below, above, settings
    )
    fig = _figure(
        taus,
        alphas,
        final_loss,
        problem.min_loss,
        diverged,
        lemma_curve(lam_max, taus),
        boundary,
        ratio_low,
        ratio_high,
        sensitivity,
        settings,
    )
    out = {
        "problem": {**data.describe(), **problem.describe()},
        "hessian_eigenvalues": eigenvalues,
        "lam_max": lam_max,
        "rule": "sgd (PipeMare eq. 1), every weight delayed by τ",
        "steps": settings.steps,
        "batch": BATCH,
        "seed": SEED,
        "divergence_factor": grid.divergence,
        "tau": taus,
        "alpha": alphas,
        "min_loss": problem.min_loss,
        "final_loss": final_loss,
        "diverged": diverged,
        "diverged_step": grid.diverged_step.reshape(shape),
        "lemma1_alpha": lemma,
        "boundary_coarse": coarse,
        "boundary_refined": refined,
        "refine_points": settings.refine_points,
        "ratio_to_lemma1": {"low": ratio_low, "high": ratio_high},
        "slope": {"fit_tau_min": TAU_FIT_MIN, "measured": slope, "lemma1": lemma_slope},
        "batch_sensitivity": {
            "steps": settings.sensitivity_steps,
            "fractions_of_lemma1": settings.sensitivity_fractions,
            "rows": sensitivity,
        },
    }
    return _common.write(
        args,
        NAME,
        fig,
        source="PipeMare Fig. 5(b), Sec. 3.1, Lemma 1",
        claims=claims,
        data=out,
        started=started,
    )


def lemma_curve(lam_max: float, taus) -> tuple[np.ndarray, np.ndarray]:
    """Lemma 1's threshold on a fine τ grid spanning ``taus`` (for the black curve)."""
    fine = np.geomspace(taus[0] * 0.9, taus[-1] * 1.1, 400)
    return fine, np.asarray(lemma1_threshold(fine, lam_max), dtype=float)


def _claims(taus, slope, lemma_slope, ratio_low, ratio_high, diverged, below, above, settings):
    deviation = np.maximum(np.abs(ratio_low - 1), np.abs(ratio_high - 1))
    worst = int(np.argmax(deviation))
    wrong_below = int(np.sum(diverged & below))
    wrong_above = int(np.sum(~diverged & above))
    scope = f"τ ∈ [{taus[0]}, {taus[-1]}] ({len(taus)} delays), {settings.steps} steps, B = {BATCH}"
    return [
        Claim(
            id="fig5b-slope",
            source="PipeMare Sec. 3.1, Fig. 5(b)",
            statement="pipeline-parallel SGD on cpusmall diverges at precisely an α ∝ τ^{-1} "
            f"slope: the slope of log α_max vs log τ, fitted for τ ≥ {TAU_FIT_MIN}, {scope}",
            direction="the measured max stable α falls with τ (negative slope)",
            scope=scope,
            direction_holds=slope < 0,
            size=Size(
                slope,
                "log-log slope",
                f"the fitted slope of the measured boundary for τ ≥ {TAU_FIT_MIN}",
                Qualifier("precisely", -1.0),
            ),
            numbers={"lemma1_slope_on_the_same_delays": lemma_slope},
        ),
        Claim(
            id="fig5b-lemma1-boundary",
            source="PipeMare Fig. 5(b), Lemma 1",
            statement="the divergence is exactly what Lemma 1 predicts (read: precisely) with the "
            "largest curvature in place of λ, 2/λ_max·sin(π/(4τ+2)): the refined divergence "
            f"bracket against it at every τ, {scope}",
            direction="at every τ the runs stay bounded below some α and diverge above it",
            scope=scope,
            direction_holds=bool(np.all(np.isfinite(ratio_high) & (ratio_low > 0))),
            size=Size(
                float(
                    ratio_high[worst]
                    if ratio_high[worst] - 1 > 1 - ratio_low[worst]
                    else ratio_low[worst]
                ),
                "× Lemma 1",
                f"the bracket end farthest from Lemma 1 (at τ = {taus[worst]})",
                Qualifier("precisely", 1.0),
            ),
            numbers={
                "ratio_low_min": float(ratio_low.min()),
                "ratio_high_max": float(ratio_high.max()),
                "outside_the_band_at_tau": taus[deviation > TOLERANCE].tolist(),
            },
        ),
        Claim(
            id="fig5b-diverged-region",
            source="PipeMare Fig. 5(b)",
            statement="the diverged (red) region is the region above Lemma 1's curve (every grid "
            f"run more than {100 * TOLERANCE:g} % from the curve), {scope}",
            direction="no run below the band diverges, every run above it does",
            scope=scope,
            direction_holds=wrong_below == 0 and wrong_above == 0,
            size=Size(
                100.0 * (wrong_below + wrong_above) / max(int(below.sum() + above.sum()), 1),
                "% of the runs",
                "the share of the runs outside the band on the wrong side",
            ),
            numbers={
                "runs_below_the_band": int(below.sum()),
                "diverged_below": wrong_below,
                "runs_above_the_band": int(above.sum()),
                "not_diverged_above": wrong_above,
            },
        ),
    ]


def _edges(values: np.ndarray) -> np.ndarray:
    """Cell edges of a geometric grid (midpoints in log space)."""
    logs = np.log(values.astype(float))
    mids = 0.5 * (logs[1:] + logs[:-1])
    return np.exp(np.concatenate(([2 * logs[0] - mids[0]], mids, [2 * logs[-1] - mids[-1]])))


def _figure(
    taus, alphas, final_loss, min_loss, diverged, curve, boundary, low, high, sensitivity, settings
):
    fig, (ax, ax_ratio, ax_batch) = plt.subplots(
        1, 3, figsize=(16, 5.4), layout="constrained", width_ratios=(2.2, 1, 1)
    )
    x_edges, y_edges = _edges(taus), _edges(alphas)
    excess = np.ma.masked_where(~(final_loss.T > min_loss), final_loss.T - min_loss)
    mesh = ax.pcolormesh(
        x_edges, y_edges, excess, cmap="viridis", norm=LogNorm(excess.min(), excess.max())
    )
    ax.pcolormesh(
        x_edges,
        y_edges,
        np.ma.masked_where(~diverged.T, np.ones(diverged.T.shape)),
        cmap=ListedColormap(["#d62728"]),
    )
    ax.plot(*curve, color="black", lw=2.2)
    ax.plot(taus, boundary, "o", ms=4, mfc="white", mec="black", mew=0.8)
    for axis in (ax.xaxis, ax.yaxis):
        log_axis(axis)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_edges[0], x_edges[-1])
    ax.set_ylim(y_edges[0], y_edges[-1])
    ax.set_xlabel(axis_label("tau", True))
    ax.set_ylabel("step size α (log scale)")
    bar = fig.colorbar(mesh, ax=ax, pad=0.01)
    bar.set_label("final excess loss f(w_T) − f* (log scale)")
    ax.legend(
        handles=[
            Patch(color="#d62728", label="diverged (loss > 10⁶ × initial)"),
            Line2D([], [], color="black", lw=2.2, label="Lemma 1 with λ_max"),
            Line2D([], [], ls="", marker="o", mfc="white", mec="black", label="measured boundary"),
        ],
        loc="lower left",
        fontsize=8,
    )
    ax.set_title(f"delayed SGD on cpusmall: T = {settings.steps:,} steps, B = {BATCH}", fontsize=10)

    ax_ratio.axhspan(1 - TOLERANCE, 1 + TOLERANCE, color="0.9", label=f"±{100 * TOLERANCE:g} %")
    ax_ratio.vlines(taus, low, high, color="black", lw=3)
    ax_ratio.plot(taus, np.sqrt(low * high), "o", ms=3, color="black", label="measured bracket")
    ax_ratio.axhline(1.0, color="black", lw=0.8, ls="--")
    ax_ratio.set_xscale("log")
    log_axis(ax_ratio.xaxis)
    ax_ratio.set_ylim(1 - 3 * TOLERANCE, 1 + 3 * TOLERANCE)
    ax_ratio.set_xlabel(axis_label("tau", True))
    ax_ratio.set_ylabel("measured max stable α / Lemma 1")
    ax_ratio.set_title(f"boundary vs Lemma 1 (B = {BATCH})", fontsize=10)
    ax_ratio.legend(fontsize=8, loc="upper right")

    for batch in settings.sensitivity_batches:
        rows = [r for r in sensitivity if r["batch"] == batch]
        label = "full batch" if batch is None else f"B = {batch}"
        style = {"ls": "--", "marker": "s", "mfc": "none", "ms": 8} if batch is None else {}
        stable = [r["ratio_low"] for r in rows]
        ax_batch.plot(
            [r["tau"] for r in rows],
            stable,
            **{"marker": "o", "ms": 4, "lw": 1.4, **style},
            label=label,
        )
    ax_batch.axhline(1.0, color="black", lw=0.8, ls="--")
    ax_batch.set_xlabel(axis_label("tau"))
    ax_batch.set_ylabel("largest stable α / Lemma 1")
    ax_batch.set_title(f"batch size at small τ ({settings.sensitivity_steps:,} steps)", fontsize=10)
    ax_batch.legend(fontsize=8)
    fig.get_layout_engine().set(wspace=0.06)
    fig.suptitle(
        "PipeMare Fig. 5(b): final excess loss over step size α and delay τ; red: diverged; "
        "black: Lemma 1 with the largest Hessian eigenvalue"
    )
    return fig


if __name__ == "__main__":
    main()
