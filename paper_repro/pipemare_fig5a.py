"""PipeMare Fig. 5(a): with α fixed, increasing the delay τ makes the noisy quadratic diverge.

Simulates w_{t+1} = w_t − α(λ·w_{t−τ} − η_t) (PipeMare eq. 1) with λ = 1, α = 0.2,
η_t ~ N(0, 1) using the `sgd` rule's own step, for several τ, and sets the trajectories
beside the theory: the spectral radius of the companion matrix (eq. 3) and Lemma 1's
threshold 2/λ·sin(π/(4τ+2)).
"""

from __future__ import annotations

import math
import time

import _common
import numpy as np

from stability.analysis.boundary import max_lr
from stability.claims import Claim, Size
from stability.plotting import LABELS
from stability.rules.registry import build_rule
from stability.spectrum import dominant_root_at

NAME = "pipemare_fig5a"
ALPHA, LAM = 0.2, 1.0


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    taus = [0, 5, 8, 10]
    steps = 400  # cheap: the same in quick mode
    runs = {}
    for tau in taus:
        rule, model = build_rule("sgd", tau=tau, lam=LAM)
        w = _common.noisy_trajectory(rule, model, ALPHA, steps, seed=tau)
        runs[tau] = {
            "w": w,
            "radius": dominant_root_at(rule, model, ALPHA).radius,
            "max_lr": max_lr(rule, model).max_lr,
            "lemma1": 2 / LAM * math.sin(math.pi / (4 * tau + 2)),
        }
    tail = steps // 2
    fast = runs[10]
    measured = _common.growth_rate(fast["w"], tail)
    bounded = [t for t in taus if np.max(np.abs(runs[t]["w"])) < 10]
    diverged = [t for t in taus if np.max(np.abs(runs[t]["w"])) > 1e3]
    predicted_unstable = [t for t in taus if ALPHA > runs[t]["lemma1"]]
    exact = max(abs(runs[t]["max_lr"] - runs[t]["lemma1"]) / runs[t]["lemma1"] for t in taus)
    scope = f"τ ∈ {{{', '.join(map(str, taus))}}}, α = {ALPHA}, λ = 1, {steps} steps"
    claims = [
        Claim(
            id="fig5a-delay-diverges",
            source="PipeMare Fig. 5(a), Sec. 3.1",
            statement="increasing τ can cause the quadratic model to diverge even when α remains "
            f"fixed; for τ = 10 the trajectory diverges quickly (|w| > 1e3): {scope}",
            direction="bounded at τ = 0, diverging at τ = 10",
            scope=scope,
            direction_holds=bool(
                runs[0]["radius"] < 1 < fast["radius"] and 10 in diverged and 0 in bounded
            ),
            size=Size(
                100.0 * (fast["radius"] - 1.0), "% per step", "the growth rate ρ − 1 at τ = 10"
            ),
            numbers={
                "bounded_below_10": bounded,
                "above_1e3": diverged,
                "radius": {str(t): runs[t]["radius"] for t in taus},
            },
        ),
        Claim(
            id="fig5a-lemma1-predicts",
            source="PipeMare Lemma 1, Fig. 5(a)",
            statement="Lemma 1 backs up the observation: the trajectories that diverge are "
            "exactly those with α > 2/λ·sin(π/(4τ+2)), equal to the exact max stable α of "
            f"delayed SGD: {scope}",
            direction="ρ ≥ 1 exactly where α exceeds Lemma 1's threshold; the threshold equals "
            "the exact max stable α",
            scope=scope,
            direction_holds=bool(
                sorted(predicted_unstable) == sorted(t for t in taus if runs[t]["radius"] >= 1)
                and exact < 1e-12
                and set(diverged) <= set(predicted_unstable)
                and set(bounded).isdisjoint(predicted_unstable)
            ),
            size=Size(
                exact, "relative", "the largest |exact max α − Lemma 1| / Lemma 1 over the delays"
            ),
            numbers={"lemma1_predicts_divergence_for": predicted_unstable},
        ),
        Claim(
            id="fig5a-growth-is-radius",
            source="PipeMare Sec. 3.1, Fig. 5(a)",
            statement="the divergence rate is the companion matrix's spectral radius: the "
            f"simulated growth factor per step of the τ = 10 run (last {tail} steps) matches ρ "
            "within 1 %",
            direction="measured growth factor = ρ (within 1 %)",
            scope=f"τ = 10, α = {ALPHA}, the last {tail} of {steps} steps",
            direction_holds=abs(measured / fast["radius"] - 1) < 0.01,
            size=Size(
                100.0 * (measured / fast["radius"] - 1.0),
                "%",
                "measured growth factor / ρ − 1",
            ),
            numbers={"measured": measured, "radius": fast["radius"]},
        ),
    ]

    fig = _common.trajectory_figure(
        [(f"τ = {t} (ρ = {runs[t]['radius']:.3f})", runs[t]["w"]) for t in taus],
        title="PipeMare Fig. 5(a): delayed SGD on the noisy quadratic, λ = 1, α = 0.2",
        legend_title=LABELS["tau"],
    )
    data = {
        "alpha": ALPHA,
        "lam": LAM,
        "steps": steps,
        "runs": {
            str(t): {k: (v.tolist() if k == "w" else v) for k, v in r.items()}
            for t, r in runs.items()
        },
        "measured_growth_tau10": measured,
    }
    return _common.write(
        args,
        NAME,
        fig,
        source="PipeMare Fig. 5(a), Sec. 3.1",
        claims=claims,
        data=data,
        started=started,
    )


if __name__ == "__main__":
    main()
