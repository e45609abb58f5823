"""The adaptive edge of stability under pipeline delay: where full-batch Adam's preconditioned
sharpness settles.

Cohen et al. 2022 ("Adaptive gradient methods at the edge of stability"): full-batch Adam at a
fixed lr η raises the preconditioned sharpness λ₁(P_t H_t), P_t = 1/(√v̂_t + ε), until it
reaches (2 + 2β1)/((1 − β1)·η) — 38/η at β1 = 0.9 — and hovers there.  With delays the
prediction tested here (issue 22) is the frozen-P edge λ_edge = max_lr(adam, delays; P = 1,
λ = 1)/η (`stability.nets.adam_edge`; the coupled edge for a per-stage schedule).

Setup: ``examples/cancer_mlp.py`` (breast cancer, 30 → 16 tanh → 1, 513 parameters, MSE, full
batch, PyTorch's standard initialisation, seed 0), real Adam (``net train --rule adam --update
real``: ``torch.optim.AdamW``'s step, β1 = 0.9, β2 = 0.999, ε = 1e-8, fresh state) at τ ∈ {0, 1,
2} and on a PipeMare 4-stage schedule (N = 1, weight stashing); the ``--quick`` MLP of
``edge_of_stability_delay.py`` (300 digits, 64 → 16 tanh → 10, MSE on one-hot) at τ ∈ {0, 2}, η
= 0.003; seven held-out MLPs (`_adam_edge_zoo`: chosen before any was run) at τ ∈ {0, 2}, η
0.002–0.005; six fresh runs of them (new seeds, τ ∈ {1, 2}, η 0.002–0.004, first run after
`oscillation_curvature` and its tolerance were fixed); and the digits MLP at τ = 2 against η
(0.001, 0.01) and β2 (0.99, 0.9999); six more held-out MLPs (`LR_MODELS`: GELU and SiLU among
them, first run after all of the above) at τ = 2 and η ∈ {0.002, 0.005}, the ends of the
acceptance's "a few 10⁻³". 3,000 steps (PipeMare 6,000). Claim per run: the plateau
(median λ₁(P_t H_t) over the last quarter, from the first reach on) is within 20 % of λ_edge
(the acceptance tolerance of issue 22). The cause of the excess under delay (docs/adam.md): a
claim per delayed run of the first table on its sign and the slope κ = d ln ρ/d ln λ of the
frozen-P growth rate at the edge (38 at τ = 0, ≈ 0.05 at τ = 1, 2); the sweeps (the excess grows
with η, on the digits MLP and on each model of the η sweep; a faster v̂ makes it larger, so it
is not v̂ lagging); and the linear twins of
`_adam_edge_twins` on the digits run (the frozen linearisation grows at its predicted rate;
along the run's own trajectory at a small fraction of it). Per delayed run (τ = 1, 2): the
oscillation's curvature (`oscillation_ratio` of `net train`, `stability.nets.oscillation`)
within 10 % of the edge. The dissection of `_adam_edge_orbit` (docs/adam.md): v̂ within the
oscillation's period on a scalar model, the digits run with P frozen from step 1,500, and on
three τ = 2 runs (the two 10-output misses and a single-output control) the near-critical
cluster, the top eigenvector's share of the oscillation, the single-mode normal-form shift and
the oscillation's Rayleigh quotient.
``--quick``: τ ∈ {1, 2} for 600 steps at η = 0.01 on the cancer MLP (the edge is reached in
the first hundred steps; at τ = 0 the sharpness needs ≈ 1,500 steps to reach 38/η).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _adam_edge_zoo as adam_edge_zoo
import _common
import matplotlib.pyplot as plt
import numpy as np
import torch

REQUIRES = ("torch", "sklearn")
"""Optional modules this script needs (`stability repro --all` skips it without them)."""
NAME = "adam_edge_delay"
SOURCE = "Cohen et al. 2022 (adaptive methods at the edge of stability) under delay, issue 22"
TOLERANCE = 0.20
OSCILLATION_TOLERANCE = 0.10
"""The issue's tolerance for a corrected reading (set before the held-out runs were read)."""
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cancer_mlp.py"

MODELS = {
    "cancer": "examples/cancer_mlp.py (breast cancer, 30 → 16 tanh → 1, 513 parameters, MSE)",
    "digits": "the --quick MLP of edge_of_stability_delay.py (300 digits, 64 → 16 tanh → 10, "
    "1,210 parameters, MSE on one-hot)",
}
# (model, label, delays, lr, steps, sharpness_every[, options])
FULL = (
    ("cancer", "τ=0", {"tau": 0}, 0.01, 3000, 25),
    ("cancer", "τ=1", {"tau": 1}, 0.003, 3000, 50),
    ("cancer", "τ=2", {"tau": 2}, 0.003, 3000, 50),
    ("cancer", "pipemare P=4", {"schedule": "pipemare", "stages": 4}, 0.003, 6000, 50),
    ("digits", "τ=0", {"tau": 0}, 0.003, 3000, 50),
    ("digits", "τ=2", {"tau": 2}, 0.003, 3000, 50),
)
HELDOUT = (  # chosen before any of them was run (_adam_edge_zoo.py); the acceptance's command
    ("wine-tanh16", "τ=0", {"tau": 0}, 0.003, 3000, 100),
    ("wine-tanh16", "τ=2", {"tau": 2}, 0.003, 3000, 100),
    ("wine-relu32", "τ=2 seed 1", {"tau": 2}, 0.002, 3000, 100, {"seed": 1}),
    ("iris-tanh16", "τ=0", {"tau": 0}, 0.005, 3000, 100),
    ("iris-tanh16", "τ=2", {"tau": 2}, 0.005, 3000, 100),
    ("cancer-relu32", "τ=2 seed 1", {"tau": 2}, 0.003, 3000, 100, {"seed": 1}),
    ("diabetes-tanh24", "τ=0", {"tau": 0}, 0.003, 3000, 100),
    ("diabetes-tanh24", "τ=2", {"tau": 2}, 0.003, 3000, 100),
    ("synthetic-tanh24", "τ=2 seed 2", {"tau": 2}, 0.002, 3000, 100, {"seed": 2}),
    ("digits500-relu32", "τ=0", {"tau": 0}, 0.003, 3000, 100),
    ("digits500-relu32", "τ=2", {"tau": 2}, 0.003, 3000, 100),
)
FRESH = (  # new seeds and step sizes, first run after oscillation_curvature and its tolerance
    ("digits500-relu32", "τ=2 seed 3", {"tau": 2}, 0.004, 3000, 100, {"seed": 3}),
    ("wine-tanh16", "τ=2 seed 4", {"tau": 2}, 0.004, 3000, 100, {"seed": 4}),
    ("cancer-relu32", "τ=1 seed 5", {"tau": 1}, 0.002, 3000, 100, {"seed": 5}),
    ("synthetic-tanh24", "τ=2 seed 6", {"tau": 2}, 0.003, 3000, 100, {"seed": 6}),
    ("iris-tanh16", "τ=1 seed 7", {"tau": 1}, 0.004, 3000, 100, {"seed": 7}),
    ("digits500-relu32", "τ=1 seed 8", {"tau": 1}, 0.002, 3000, 100, {"seed": 8}),
)
SWEEP = (  # the digits τ = 2 excess against lr and β2 (the cause: docs/adam.md)
    ("digits", "τ=2 η=0.001", {"tau": 2}, 0.001, 3000, 50),
    ("digits", "τ=2 η=0.01", {"tau": 2}, 0.01, 3000, 50),
    ("digits", "τ=2 β2=0.99", {"tau": 2}, 0.003, 3000, 50, {"beta2": 0.99}),
    ("digits", "τ=2 β2=0.9999", {"tau": 2}, 0.003, 3000, 50, {"beta2": 0.9999}),
)
LR_MODELS = (  # (held-out MLP, seed): the step-size sweep (_adam_edge_zoo.py)
    ("wine-tanh48", 5),
    ("iris-relu24", 7),
    ("cancer-gelu20", 3),
    ("diabetes-tanh40", 11),
    ("digits400-tanh12", 4),
    ("friedman-silu32", 2),
)
LR_SWEEP_LRS = (0.002, 0.005)


def lr_sweep_label(lr: float, seed: int) -> str:
    """The label of an `LR_SWEEP` run (after its model's name)."""
    return f"τ=2 η={lr:g} seed {seed}"


LR_SWEEP = tuple(  # where the acceptance's "a few 10⁻³" ends: the τ = 2 excess against η
    (model, lr_sweep_label(lr, seed), {"tau": 2}, lr, 3000, 100, {"seed": seed})
    for model, seed in LR_MODELS
    for lr in LR_SWEEP_LRS
)
QUICK = (
    ("cancer", "τ=1", {"tau": 1}, 0.01, 600, 25),
    ("cancer", "τ=2", {"tau": 2}, 0.01, 600, 25),
)


def problem(model: str, stages: int, seed: int = 0):
    """The `NetProblem` of ``model`` (`MODELS` or `_adam_edge_zoo.SPECS`) split into ``stages``."""
    from stability.nets.problem import load_problem, problem_from_dict

    if model == "cancer":
        return load_problem(f"{EXAMPLE}:problem", stages=stages)
    if model in adam_edge_zoo.SPECS:
        return problem_from_dict(adam_edge_zoo.problem(model, seed), stages=stages)
    import edge_of_stability_delay

    return problem_from_dict(edge_of_stability_delay.problem(True), stages=stages)


def describe(model: str) -> str:
    """The model's one-line description (`MODELS`, or a held-out MLP of `_adam_edge_zoo`)."""
    if model in MODELS:
        return MODELS[model]
    data, width, activation = adam_edge_zoo.SPECS[model]
    return f"held-out {data} MLP (one hidden layer of {width} {activation}, MSE)"


def edge_slope(tau: int, x: float, h: float = 1e-6) -> float:
    """κ = d ln ρ / d ln λ of the frozen-P adam rule (P = 1, β1 = 0.9) at lr·λ = ``x``: ρ the
    largest root modulus of `stability.rules.adam.frozen_adam_polynomial` apart from ω = 1."""
    return (log_rho(tau, x * (1 + h)) - log_rho(tau, x)) / h


def log_rho(tau: int, x: float) -> float:
    """ln ρ of the frozen-P adam rule (P = 1, β1 = 0.9) at lr·λ = ``x`` (see `edge_slope`)."""
    from stability.quadratic import QuadraticModel
    from stability.rules.adam import Adam, frozen_adam_polynomial

    poly = frozen_adam_polynomial(Adam(tau=tau, beta1=0.9), QuadraticModel(lam=x), 1.0)
    roots = np.roots(np.asarray(poly.dense(), dtype=complex))
    return float(np.log(np.max(np.abs(roots[np.abs(roots - 1) > 1e-9]))))


def run(model, label, delays, lr, steps, every, options=None) -> dict:
    from stability.nets.public import net_train

    options = options or {}
    net = problem(model, delays.get("stages", 1), options.get("seed", 0))
    kwargs = {k: v for k, v in delays.items() if k != "stages"}
    if "beta2" in options:
        kwargs["beta2"] = options["beta2"]
    res = net_train(
        net, "adam", lr=lr, steps=steps, sharpness_every=every, update="real", beta1=0.9, **kwargs
    )
    tau = delays.get("tau")
    return {
        "model": model,
        "label": f"{model} {label}",
        "options": options,
        **_common.edge_run(res, delays, lr, steps, every),
        "edge_slope": None if tau is None else edge_slope(tau, res.predicted_edge * lr),
        "plateau_log_rate": None
        if tau is None or res.plateau is None
        else log_rho(tau, res.plateau * lr),
        "first_reached": next((s for s, v in res.sharpness if v >= 0.9 * res.predicted_edge), None),
        "oscillation_curvature": res.oscillation_curvature,
        "oscillation_ratio": res.oscillation_ratio,
        "sharpness": res.sharpness,
    }


def _id(row) -> str:
    return row["label"].replace("pipemare ", "").replace(" ", "-").replace("=", "")


def claim(row) -> _common.Claim:
    ratio = row["edge_ratio"]
    ok = ratio is not None and abs(ratio - 1) <= TOLERANCE
    return _common.Claim(
        id=f"adam-eos-{_id(row)}",
        source=SOURCE,
        statement=f"real Adam (β1 = 0.9), {row['label']}, η = {row['lr']:.4g}: λ₁(P_t H_t) settles "
        f"within 20 % of λ_edge = max_lr(adam, delays; P = 1, λ = 1)/η = "
        f"{row['predicted_edge']:.4g}.",
        direction="|plateau / predicted_edge − 1| ≤ 0.20 (plateau: median λ₁(P_t H_t), last "
        "quarter of the steps, from the first reach on)",
        scope=f"{describe(row['model'])}, full batch, {row['steps']} steps from the standard "
        f"initialisation; edge first reached at step {row['first_reached']}",
        direction_holds=bool(ok),
        size=_common.Size(
            float("nan") if ratio is None else ratio,
            "× predicted_edge",
            "plateau / predicted_edge (null plateau: diverged or edge never reached)",
        ),
        numbers={
            k: row[k]
            for k in ("lr", "steps", "predicted_edge", "plateau", "reached", "first_reached")
        },
    )


def oscillation_claim(row) -> _common.Claim:
    """The frozen-P edge read on the run's oscillation (`stability.nets.oscillation`)."""
    ratio = row["oscillation_ratio"]
    return _common.Claim(
        id=f"adam-eos-oscillation-{_id(row)}",
        source=SOURCE,
        statement=f"{row['label']}, η = {row['lr']:.4g}: the Rayleigh quotient of P̄^1/2 H P̄^1/2 "
        "over the run's oscillation near the crossing angle (last quarter) lies within 10 % of "
        "the frozen-P edge, whatever λ₁ does",
        direction=f"|oscillation_ratio − 1| ≤ {OSCILLATION_TOLERANCE}",
        scope=f"{describe(row['model'])}, full batch, {row['steps']} steps; λ₁ plateau / edge "
        + ("—" if row["edge_ratio"] is None else f"{row['edge_ratio']:.3f}"),
        direction_holds=ratio is not None and abs(ratio - 1) <= OSCILLATION_TOLERANCE,
        size=_common.Size(
            float("nan") if ratio is None else ratio,
            "× predicted_edge",
            "oscillation_curvature / predicted_edge",
        ),
        numbers={k: row[k] for k in ("oscillation_curvature", "oscillation_ratio", "edge_ratio")},
    )


def excess_claim(row) -> _common.Claim:
    ratio, kappa = row["edge_ratio"], row["edge_slope"]
    slope = "" if kappa is None else f" (κ = d ln ρ/d ln λ = {kappa:.3g} at the edge, 38 at τ = 0)"
    return _common.Claim(
        id=f"adam-eos-excess-{_id(row)}",
        source=SOURCE,
        statement=f"{row['label']}: with delay the plateau lies above the frozen-P edge, where the "
        f"frozen-P growth rate rises slowly with λ{slope}.",
        direction="plateau / predicted_edge > 1",
        scope=f"{describe(row['model'])}, η = {row['lr']:.4g}, {row['steps']} steps",
        direction_holds=ratio is not None and ratio > 1,
        size=_common.Size(
            float("nan") if ratio is None else ratio - 1,
            "× predicted_edge",
            "(plateau − predicted_edge) / predicted_edge",
        ),
        numbers={k: row[k] for k in ("edge_slope", "edge_ratio", "plateau_log_rate")},
    )


def figure(rows, others, twins):
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 7.0), layout="constrained")
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    for row, color in zip(rows, colors, strict=False):
        s = np.array(row["sharpness"])
        ax.plot(s[:, 0], s[:, 1] / row["predicted_edge"], color=color, lw=1.0, label=row["label"])
    ax.axhline(1.0, color="black", lw=1.2, ls="--", label="predicted edge (frozen P)")
    ax.axhspan(1 - TOLERANCE, 1 + TOLERANCE, color="0.9", zorder=0)
    ax.set_xlabel("step")
    ax.set_ylabel("λ₁(P_t H_t) / predicted edge  (max_lr(adam, delays; P=1, λ=1)/η)")
    ax.set_ylim(0, 2.0)
    ax.set_title("Adam's preconditioned sharpness over its predicted edge", fontsize=10)
    text = "\n".join(
        f"{r['label']}: η {r['lr']:.3g}, edge {r['predicted_edge']:.4g}, ratio "
        + ("—" if r["edge_ratio"] is None else f"{r['edge_ratio']:.3f}")
        for r in rows
    )
    ax.text(0.99, 0.02, text, transform=ax.transAxes, ha="right", va="bottom", fontsize=7)
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    labels = [r["label"] for r in others]
    ratios = [np.nan if r["edge_ratio"] is None else r["edge_ratio"] for r in others]
    y = np.arange(len(others))
    bx.scatter(ratios, y, color=["C3" if abs(q - 1) > TOLERANCE else "C0" for q in ratios])
    osc = [np.nan if r["oscillation_ratio"] is None else r["oscillation_ratio"] for r in others]
    bx.scatter(osc, y, marker="x", color="C2", label="oscillation_curvature / edge")
    bx.legend(fontsize=7, loc="lower right")
    bx.axvline(1.0, color="black", ls="--", lw=1.2)
    bx.axvspan(1 - TOLERANCE, 1 + TOLERANCE, color="0.9", zorder=0)
    for k, q in enumerate(ratios):
        if np.isnan(q):
            bx.text(1 - TOLERANCE, k, " edge not reached", va="center", fontsize=7, color="C3")
    names = [
        lab if "η=" in lab else f"{lab} η={r['lr']:.3g}"
        for lab, r in zip(labels, others, strict=True)
    ]
    bx.set_yticks(y, names)
    bx.tick_params(axis="y", labelsize=7)
    bx.set_xlabel("plateau / predicted edge (dots; null: edge not reached in the run)")
    bx.set_title("held-out MLPs and the τ = 2 sweeps (the 20 % band shaded)", fontsize=10)
    if twins:
        rates = ", ".join(f"{k} {v:.4f}" for k, v in twins["rates"].items())
        bx.text(
            0.02,
            1.0 - 0.01,
            f"linear twins, digits τ=2 η=0.003 at step {twins['t0']} (λ₁/edge "
            f"{twins['lam_ratio']:.2f}): frozen-P ln ρ {twins['frozen_rate']:.4f}/step;\n"
            f"measured {rates}",
            transform=bx.transAxes,
            fontsize=7,
            va="top",
        )
        bx.set_ylim(-0.7, len(others) + 0.8)
    return fig


def twin_claims(tw) -> list:
    """The dissection of the excess (`_adam_edge_twins`): two graded claims."""
    rates, frozen = tw["rates"], tw["frozen_rate"]
    own = abs(rates["frozen H, P"] / frozen - 1)
    along = rates["H_t"] / frozen
    scope = (
        f"digits MLP, τ = 2, η = 0.003, linear twins from step {tw['t0']} over {tw['n']} steps "
        f"(λ₁(P H)/edge = {tw['lam_ratio']:.3f} there)"
    )
    numbers = {"frozen_rate": frozen, **{f"rate {k}": v for k, v in rates.items()}}
    return [
        _common.Claim(
            id="adam-eos-twin-frozen",
            source=SOURCE,
            statement="the frozen-P linearisation on the network (H and P held at one step) "
            "grows at ln ρ of the frozen-Adam polynomial at lr·λ₁(P H): the prediction's own "
            "assumption, checked on the network",
            direction="|measured rate / ln ρ − 1| ≤ 0.05",
            scope=scope,
            direction_holds=bool(own <= 0.05),
            size=_common.Size(own, "relative", "|rate/ln ρ − 1|"),
            numbers=numbers,
        ),
        _common.Claim(
            id="adam-eos-twin-trajectory",
            source=SOURCE,
            statement="the excess is not v̂ lagging: with the run's P_t and H frozen the "
            "perturbation grows at least as fast as frozen P predicts, while with H taken at "
            "the run's own (oscillating) weights it grows at under a quarter of that rate",
            direction="rate(P_t) ≥ 0.9 × ln ρ and rate(H_t) < 0.25 × ln ρ",
            scope=scope,
            direction_holds=bool(rates["P_t"] >= 0.9 * frozen and along < 0.25),
            size=_common.Size(along, "× ln ρ", "rate(H_t) / frozen-P ln ρ"),
            numbers=numbers,
        ),
    ]


SWEEP_CLAIMS = (  # (id, larger, smaller, statement, scope): claims ratio(larger) > ratio(smaller)
    (
        "adam-eos-excess-grows-with-lr",
        "digits τ=2",
        "digits τ=2 η=0.001",
        "digits MLP, τ = 2: the plateau's excess over the frozen-P edge is smaller at η = 0.001 "
        "than at η = 0.003 (the frozen-P edge is the small-η limit)",
        "digits MLP, 3,000 steps; at η = 0.01 a catapult in the last quarter makes the median a "
        "mixture (see the figure)",
    ),
    (
        "adam-eos-excess-not-a-lag",
        "digits τ=2 β2=0.99",
        "digits τ=2 β2=0.9999",
        "digits MLP, τ = 2, η = 0.003: a faster second moment (β2 = 0.99) gives a larger excess "
        "than a slower one (β2 = 0.9999) — the opposite of v̂ lagging the oscillation",
        "digits MLP, 3,000 steps (β2 = 0.999: the digits τ = 2 row)",
    ),
)


def lr_sweep_claims() -> tuple:
    """`SWEEP_CLAIMS` entries of `LR_SWEEP`: on each model the excess at the larger η is the
    larger."""
    small, large = LR_SWEEP_LRS
    return tuple(
        (
            f"adam-eos-excess-grows-with-lr-{model}",
            f"{model} {lr_sweep_label(large, seed)}",
            f"{model} {lr_sweep_label(small, seed)}",
            f"held-out {model} (seed {seed}), τ = 2: the plateau's excess over the frozen-P edge "
            f"is larger at η = {large:g} than at η = {small:g}",
            f"{describe(model)}, full batch, 3,000 steps from the standard initialisation",
        )
        for model, seed in LR_MODELS
    )


def sweep_claims(rows) -> list:
    """Graded claims over the τ = 2 sweeps (`SWEEP_CLAIMS`, `lr_sweep_claims`)."""
    by = {r["label"]: r["edge_ratio"] for r in rows}
    out = []
    for name, larger, smaller, statement, scope in SWEEP_CLAIMS + lr_sweep_claims():
        a, b = by.get(larger), by.get(smaller)
        if a is None or b is None:
            continue
        out.append(
            _common.Claim(
                id=name,
                source=SOURCE,
                statement=statement,
                direction=f"ratio({larger}) > ratio({smaller})",
                scope=scope,
                direction_holds=bool(a > b),
                size=_common.Size(a - b, "× predicted_edge", "difference of the ratios"),
                numbers={larger: a, smaller: b},
            )
        )
    return out


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    torch.set_num_threads(1)
    rows, others = [], []
    specs = QUICK if args.quick else FULL + HELDOUT + FRESH + SWEEP + LR_SWEEP
    for spec in specs:
        r = run(*spec)
        (rows if spec in FULL + QUICK else others).append(r)
        print(
            f"{r['label']}: edge {r['predicted_edge']:.4g} plateau {r['plateau']} ratio "
            f"{r['edge_ratio']} first reached {r['first_reached']}",
            file=sys.stderr,
            flush=True,
        )
    claims = [claim(r) for r in rows + others if r["options"].get("beta2") is None]
    claims += [excess_claim(r) for r in rows if r["delays"].get("tau") != 0]
    claims += [
        oscillation_claim(r)
        for r in rows + others
        if r["delays"].get("tau", 0) > 0 and r["options"].get("beta2") is None
    ]
    claims += sweep_claims(rows + others)
    twins = dissection = None
    if not args.quick:
        twins = dissect_digits()
        claims += twin_claims(twins)
        dissection = dissect_excess()
        claims += dissection_claims(dissection)
    data = {
        "models": MODELS,
        "rows": rows,
        "heldout_and_sweeps": others,
        "twins": twins,
        "dissection": dissection,
    }
    return _common.write(
        args,
        NAME,
        figure(rows, others, twins),
        source=SOURCE,
        claims=claims,
        data=data,
        started=started,
    )


def dissect_digits(t0: int = 2250, n: int = 300) -> dict:
    """`_adam_edge_twins.dissect` on the digits MLP at τ = 2, η = 0.003, inside the plateau."""
    import _adam_edge_twins as adam_edge_twins
    import edge_of_stability_delay

    tau, lr = 2, 0.003
    out = adam_edge_twins.dissect(edge_of_stability_delay.problem(True), tau, lr, t0, n)
    from stability.analysis.boundary import max_lr
    from stability.rules.registry import build_rule

    edge = max_lr(*build_rule("adam", tau=tau, lam=1.0, beta1=0.9)).max_lr / lr
    return {
        **out,
        "t0": t0,
        "n": n,
        "edge": edge,
        "lam_ratio": out["lam"] / edge,
        "mean_ratio": out["mean_lam"] / edge,
        "frozen_rate": log_rho(tau, out["lam"] * lr),
    }


ORBITS = (  # the two 10-output misses and a single-output control, τ = 2, η = 0.003
    ("digits", 0),
    ("digits500-relu32", 0),
    ("diabetes-tanh24", 0),
)


def dissect_excess() -> dict:
    """`_adam_edge_orbit` on the τ = 2 runs of `ORBITS`: v̂ within the period (scalar model),
    P frozen on the network, the single-mode normal form and the oscillation as a whole."""
    import _adam_edge_orbit as adam_edge_orbit
    import edge_of_stability_delay

    def spec(model, seed):
        if model == "digits":
            return edge_of_stability_delay.problem(True)
        return adam_edge_zoo.problem(model, seed)

    return {
        "unpreconditioned": unpreconditioned(),
        "scalar": {str(b2): adam_edge_orbit.scalar_ratio(2, b2) for b2 in (0.99, 0.999)},
        "frozen_P": adam_edge_orbit.frozen_continuation(
            spec("digits", 0), 2, 0.003, 1500, 3000, 50
        ),
        "orbits": {m: adam_edge_orbit.orbit(spec(m, s), 2, 0.003, 3000, 750) for m, s in ORBITS},
    }


CONTROLS = (("sgd", {}, 0.045), ("momentum", {"momentum": 0.9}, 0.0045))
"""The digits MLP at τ = 2 without a preconditioner: (rule, parameters, η), η putting the edge
near 12 (the initial sharpness is 10.8)."""


def unpreconditioned() -> dict:
    """λ₁(H) plateau and oscillation over the edge for `CONTROLS` (3,000 steps, K = 50)."""
    import edge_of_stability_delay

    from stability.nets.problem import problem_from_dict
    from stability.nets.public import net_train

    out = {}
    for rule, params, lr in CONTROLS:
        net = problem_from_dict(edge_of_stability_delay.problem(True), stages=1)
        res = net_train(net, rule, lr=lr, steps=3000, sharpness_every=50, tau=2, **params)
        out[rule] = {
            "lr": lr,
            "edge_ratio": res.edge_ratio,
            "oscillation_ratio": res.oscillation_ratio,
        }
    return out


def dissection_claims(d) -> list:
    """Graded claims of `dissect_excess`."""
    scalar = max(abs(v - 1) for v in d["scalar"].values())
    frozen = d["frozen_P"]["ratio"]
    out = [
        _common.Claim(
            id="adam-eos-not-v-within-period",
            source=SOURCE,
            statement="v̂ reacting to the oscillation within its period does not make the "
            "excess: real Adam at τ = 2 on w²/2, where the oscillation alone drives v, settles "
            "within 1 % of the frozen-P edge (β2 = 0.99 and 0.999)",
            direction="|mean lr·P_t / edge − 1| ≤ 0.01",
            scope="scalar quadratic, β1 = 0.9, 100,000 steps, mean over the last fifth",
            direction_holds=bool(scalar <= 0.01),
            size=_common.Size(scalar, "relative", "largest |ratio − 1|"),
            numbers=d["scalar"],
        ),
        _common.Claim(
            id="adam-eos-not-v-frozen",
            source=SOURCE,
            statement="with P frozen from step 1,500 (v no longer updated) the digits MLP's "
            "preconditioned sharpness still settles ≥ 20 % above the frozen-P edge: the excess "
            "is the frozen-P rule's on the network, not Adam's adaptation",
            direction="median λ₁(P H_t)/edge over steps 2,250–3,000 ≥ 1.2",
            scope="digits MLP, τ = 2, η = 0.003",
            direction_holds=bool(frozen >= 1.2),
            size=_common.Size(frozen, "× predicted_edge", "median λ₁(P H_t) / edge"),
            numbers=d["frozen_P"],
        ),
    ]
    control = d["unpreconditioned"]
    worst = max(abs(r["edge_ratio"] - 1) for r in control.values() if r["edge_ratio"])
    out.append(
        _common.Claim(
            id="adam-eos-control-unpreconditioned",
            source=SOURCE,
            statement="the same digits MLP under delayed SGD and heavy-ball (no preconditioner, "
            "τ = 2) settles within 10 % of its edge: the excess comes with Adam's whitened "
            "spectrum",
            direction="|plateau / predicted_edge − 1| ≤ 0.10 for sgd and momentum 0.9",
            scope="digits MLP, τ = 2, 3,000 steps, η putting the edge near 12",
            direction_holds=bool(len(control) == 2 and worst <= 0.10),
            size=_common.Size(worst, "relative", "largest |plateau / edge − 1|"),
            numbers=control,
        )
    )
    for model, r in d["orbits"].items():
        single = r["single_mode_edge_ratio"]
        out.append(
            _common.Claim(
                id=f"adam-eos-orbit-{model}",
                source=SOURCE,
                statement=f"{model}, τ = 2: a single mode's nonlinearity (third-order harmonic "
                "balance along q at the measured amplitude) moves its neutral λ₁ by < 2 %; "
                "the oscillation spans the near-critical modes (λ within 20 % of the edge) and "
                "its Rayleigh quotient is within 10 % of the edge",
                direction="|single-mode λ₁*/edge − 1| < 0.02 and |R/edge − 1| ≤ 0.10",
                scope=f"{describe(model)}, η = 0.003, the last {r['window']} of 3,000 steps; "
                f"λ₁(centre)/edge {r['lam_centre'][0]:.3f}, {r['near_critical']} near-critical "
                f"modes, top eigenvector's share of the oscillation {r['top_share']:.3f}",
                direction_holds=bool(
                    abs(single - 1) < 0.02
                    and abs(r["oscillation_ratio"] - 1) <= OSCILLATION_TOLERANCE
                ),
                size=_common.Size(r["oscillation_ratio"], "× predicted_edge", "R / edge"),
                numbers=r,
            )
        )
    return out


if __name__ == "__main__":
    main()
