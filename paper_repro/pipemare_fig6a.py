"""PipeMare Fig. 6(a): a nonzero discrepancy sensitivity Δ makes the noisy quadratic diverge.

Simulates PipeMare eq. 5, w_{t+1} = w_t − α[(λ+Δ)w_{t−τf} − Δw_{t−τb} − η_t], with
τ_fwd = 10, τ_bkwd = 6, λ = 1, η_t ~ N(0, 1) and a fixed α at which Δ = 0 (PipeDream-style,
no discrepancy) converges, for several Δ, using the `discrepancy` rule's own step; beside
each run the spectral radius and the exact max stable α.
"""

from __future__ import annotations

import time

import _common
import numpy as np

from stability.analysis.boundary import max_lr
from stability.claims import Claim, Size
from stability.plotting import LABELS
from stability.rules.registry import build_rule
from stability.spectrum import dominant_root_at

NAME = "pipemare_fig6a"
TAU_FWD, TAU_BKWD, LAM, ALPHA = 10, 6, 1.0, 0.1


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    deltas = [0.0, 0.5, 2.0, 5.0]
    steps = 400  # cheap: the same in quick mode
    runs = {}
    for i, delta in enumerate(deltas):
        rule, model = build_rule(
            "discrepancy", tau_fwd=TAU_FWD, tau_bkwd=TAU_BKWD, delta=delta, lam=LAM
        )
        runs[delta] = {
            "w": _common.noisy_trajectory(rule, model, ALPHA, steps, seed=i),
            "radius": dominant_root_at(rule, model, ALPHA).radius,
            "max_lr": max_lr(rule, model).max_lr,
        }
    tail = steps // 2
    diverging = [d for d in deltas if runs[d]["radius"] > 1]
    grows = {d: _common.growth_rate(runs[d]["w"], tail) for d in diverging}
    top = [runs[d]["max_lr"] for d in deltas]
    scope = f"Δ ∈ {{{', '.join(f'{d:g}' for d in deltas)}}}, τ_fwd = {TAU_FWD}, τ_bkwd = {TAU_BKWD}"
    scope += f", λ = 1, α = {ALPHA}, {steps} steps"
    claims = [
        Claim(
            id="fig6a-discrepancy-diverges",
            source="PipeMare Fig. 6(a), Sec. 3.2",
            statement="a nonzero Δ can cause divergence even for α and τ where Δ = 0 "
            f"(PipeDream-style, no discrepancy) converges: {scope}",
            direction="bounded at Δ = 0 (ρ < 1), some Δ > 0 diverges (|w| > 1e3)",
            scope=scope,
            direction_holds=bool(
                runs[0.0]["radius"] < 1
                and np.max(np.abs(runs[0.0]["w"])) < 10
                and any(np.max(np.abs(runs[d]["w"])) > 1e3 for d in deltas if d > 0)
            ),
            size=Size(
                100.0 * (runs[deltas[-1]]["radius"] - 1.0),
                "% per step",
                f"the growth rate ρ − 1 at the largest Δ = {deltas[-1]:g}",
            ),
            numbers={"radius": {f"{d:g}": runs[d]["radius"] for d in deltas}},
        ),
        Claim(
            id="fig6a-lemma2-decreasing",
            source="PipeMare Lemma 2, Fig. 6(a)",
            statement="larger Δ makes the largest stable α smaller (the exact max stable α "
            f"decreases with Δ ≥ 0): {scope}",
            direction="the exact max stable α decreases with Δ",
            scope=scope,
            direction_holds=bool(np.all(np.diff(top) < 0)),
            size=Size(
                100.0 * (top[-1] / top[0] - 1.0),
                "%",
                f"the change of the max stable α from Δ = 0 to Δ = {deltas[-1]:g}",
            ),
            numbers={"max_stable_alpha": {f"{d:g}": runs[d]["max_lr"] for d in deltas}},
        ),
        Claim(
            id="fig6a-growth-is-radius",
            source="PipeMare Sec. 3.2, Fig. 6(a)",
            statement="the diverging runs grow at the companion matrix's spectral radius "
            f"(within 1 %, last {tail} steps)",
            direction="measured growth factor = ρ (within 1 %) for every diverging run",
            scope=f"the diverging Δ of {{{', '.join(f'{d:g}' for d in deltas)}}}",
            direction_holds=all(abs(grows[d] / runs[d]["radius"] - 1) < 0.01 for d in diverging),
            size=Size(
                100.0 * max(abs(grows[d] / runs[d]["radius"] - 1.0) for d in diverging),
                "%",
                "the largest |measured growth factor / ρ − 1| over the diverging runs",
            ),
            numbers={"measured_growth": {f"{d:g}": grows[d] for d in diverging}},
        ),
    ]
    fig = _common.trajectory_figure(
        [(f"Δ = {d:g} (ρ = {runs[d]['radius']:.3f})", runs[d]["w"]) for d in deltas],
        title=f"PipeMare Fig. 6(a): discrepancy, τ_fwd = {TAU_FWD}, τ_bkwd = {TAU_BKWD}, "
        f"λ = 1, α = {ALPHA}",
        legend_title=LABELS["delta"],
    )
    data = {
        "alpha": ALPHA,
        "tau_fwd": TAU_FWD,
        "tau_bkwd": TAU_BKWD,
        "lam": LAM,
        "runs": {
            str(d): {k: (v.tolist() if k == "w" else v) for k, v in r.items()}
            for d, r in runs.items()
        },
    }
    return _common.write(
        args,
        NAME,
        fig,
        source="PipeMare Fig. 6(a), Sec. 3.2",
        claims=claims,
        data=data,
        started=started,
    )


if __name__ == "__main__":
    main()
