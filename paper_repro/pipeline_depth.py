"""Max stable step size against pipeline depth: PipeMare, PipeDream-2BW and uniform delays.

No paper or tool gives this table (issue 26, item 9): for P = 1 … 64 stages, the maximal
stable step size at λ = 1 of a pipeline whose stages each run the rule at their own delay on
the same curvature, with one common step size (`stability.analysis.depth`; the critical stage
decides).  Profiles: PipeMare's τ_i = 2(P − i) + 1 (Table 1), PipeDream-2BW's one step, and a
uniform τ = P.  Rules: sgd, heavy ball and Nesterov at m = 0.9, LWP + SC at m = 0.9, Adam with
β1 = 0.9 and its preconditioner frozen at P = 1.  The claims grade Giladi et al.'s (2020) 1/τ
scaling at large delay on each rule and check every pipeline value against independent
computations: PipeMare Lemma 1 for sgd, and the critical stage's rule analysed alone.
"""

from __future__ import annotations

import math
import time

import _common
import matplotlib.pyplot as plt
import numpy as np

from stability.analysis.boundary import max_lr
from stability.analysis.depth import DEPTHS, FIT_FROM, PROFILES, RULES, TOLERANCE, depth_table
from stability.claims import Claim, Range, Size
from stability.rules.registry import build_rule

NAME = "pipeline_depth"
STYLES = {"pipemare": "-", "uniform": "--", "pipedream-2bw": ":"}


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    table = depth_table()  # ~2 s of exact max lrs: the same in quick mode
    claims = _claims(table)
    fig = _figure(table)
    return _common.write(
        args,
        NAME,
        fig,
        source="Giladi et al. 2020 (1/τ at large delay); PipeMare Table 1, Lemma 1; "
        "PipeDream-2BW (one-step staleness)",
        claims=claims,
        data=table,
        started=started,
    )


def _alone(row: dict) -> list[float | None]:
    """The critical stage's rule analysed alone (its delay as the rule's own)."""
    out = []
    for tau in row["critical_tau"]:
        rule, model = build_rule(row["name"], tau=tau, **row["params"])
        out.append(max_lr(rule, model).max_lr)
    return out


def _claims(table: dict) -> list[Claim]:
    rows = table["rows"]
    growing = [r for r in rows if r["profile"] != "pipedream-2bw"]
    follows = [r for r in growing if r["follows_1_over_tau"]]
    slopes = {f"{r['rule']} / {r['profile']}": r["slope_in_tau"] for r in growing}
    worst = max(growing, key=lambda r: abs(r["slope_in_tau"] + 1))
    sgd = [r for r in growing if r["name"] == "sgd"]
    lemma1 = max(
        abs(v / (2 * math.sin(math.pi / (4 * t + 2))) - 1)
        for r in sgd
        for v, t in zip(r["max_lr"], r["critical_tau"], strict=True)
    )
    alone_gap = max(
        abs(a / v - 1) for r in rows for v, a in zip(r["max_lr"], _alone(r), strict=True)
    )
    flat = [r for r in rows if r["profile"] == "pipedream-2bw"]
    flat_gap = max(max(r["max_lr"]) / min(r["max_lr"]) - 1 for r in flat)
    depths = [P for P in DEPTHS if P >= FIT_FROM]
    scope = f"P = {depths[0]} … {depths[-1]} (slopes fitted there), λ = 1"
    ordered = sorted(growing, key=lambda r: abs(r["slope_in_tau"] + 1))
    return [
        Claim(
            id="depth-max-lr-follows-1-over-tau",
            source="Giladi et al. 2020 (asynchronous SGD: stable step size ∝ 1/τ at large "
            "delay); this table",
            statement="the pipeline's max stable step size falls like 1/τ of its critical "
            "delay for every rule (sgd, momentum 0.9, Nesterov 0.9, LWP + SC 0.9, Adam β1 = "
            "0.9 with P = 1 frozen) under PipeMare and uniform delays: least-squares slope of "
            f"ln max_lr in ln τ within ±{TOLERANCE} of −1, {scope}",
            direction="slope in τ = −1 for every rule and growing-delay profile",
            scope=scope,
            direction_holds=len(follows) == len(growing),
            size=Size(
                float(worst["slope_in_tau"]),
                "",
                f"the slope farthest from −1 ({worst['rule']}, {worst['profile']})",
            ),
            range_where_it_holds=None
            if len(follows) in (0, len(growing))
            else Range(
                "|slope in τ + 1|",
                0.0,
                float(max(abs(r["slope_in_tau"] + 1) for r in follows)),
            ),
            numbers={
                "slopes_in_tau": slopes,
                "rows_that_follow": [f"{r['rule']} / {r['profile']}" for r in follows],
                "closest_first": [f"{r['rule']} / {r['profile']}" for r in ordered],
            },
        ),
        Claim(
            id="depth-sgd-is-lemma-1",
            source="PipeMare Lemma 1",
            statement="sgd's pipeline max lr at depth P is Lemma 1 at its critical delay, "
            "2·sin(π/(4τ + 2)) with τ = 2P − 1 (PipeMare) or P (uniform): relative error < "
            f"1e-9, {len(DEPTHS)} depths",
            direction="the pipeline value equals the closed form at every depth",
            scope=f"P ∈ {list(DEPTHS)}, λ = 1",
            direction_holds=lemma1 < 1e-9,
            size=Size(float(lemma1), "relative", "largest relative error"),
            numbers={"max_relative_error": lemma1},
        ),
        Claim(
            id="depth-critical-stage-decides",
            source="this table (stability.analysis.stages)",
            statement="every row's max lr is that of its critical stage's rule analysed alone "
            "(the rule with the critical delay as its own delay): relative error < 1e-9",
            direction="pipeline value = critical stage alone, every row and depth",
            scope=f"{len(rows)} rows × {len(DEPTHS)} depths",
            direction_holds=alone_gap < 1e-9,
            size=Size(float(alone_gap), "relative", "largest relative difference"),
            numbers={"max_relative_difference": alone_gap},
        ),
        Claim(
            id="depth-2bw-independent-of-depth",
            source="PipeDream-2BW (double-buffered weights: one step stale at any depth)",
            statement="with PipeDream-2BW's one-step staleness the max stable lr does not "
            f"depend on the depth: max/min over P ∈ {list(DEPTHS)} minus 1 below 1e-12",
            direction="one value per rule at every depth",
            scope=f"{len(flat)} rules",
            direction_holds=flat_gap < 1e-12,
            size=Size(float(flat_gap), "relative", "largest max/min − 1 over the depths"),
            numbers={"values": {r["rule"]: r["max_lr"][0] for r in flat}},
        ),
    ]


def _figure(table: dict):
    fig, ax = plt.subplots(figsize=(7.4, 4.8), layout="constrained")
    colors = dict(zip((r[0] for r in RULES), _common.COLORS, strict=False))
    for row in table["rows"]:
        ax.loglog(
            row["depths"],
            row["max_lr"],
            STYLES[row["profile"]],
            marker="o",
            ms=3,
            color=colors[row["rule"]],
            label=f"{row['rule']}, {row['profile']}",
        )
    P = np.array(DEPTHS, dtype=float)
    ax.loglog(P, 0.5 / P, color="0.5", lw=0.8, label="∝ 1/P (Giladi et al. 2020)")
    ax.set_xlabel("pipeline depth P (stages)")
    ax.set_ylabel("max stable step size at λ = 1")
    ax.set_title(
        "Max stable lr vs depth: PipeMare (—), uniform τ = P (– –), PipeDream-2BW (···)",
        fontsize=9,
    )
    ax.legend(fontsize=6, ncol=2, loc="lower left")
    assert set(STYLES) == set(PROFILES)
    return fig


if __name__ == "__main__":
    main()
