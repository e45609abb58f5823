"""The edge of stability under pipeline delay: where full-batch training's sharpness settles.

Cohen et al. (ICLR 2021): full-batch gradient descent raises the sharpness λ₁ (top Hessian
eigenvalue) of a network until it reaches 2/η and hovers there; 2(1+m)/η with heavy-ball
momentum.  With delays the prediction tested here (issue 13) is the curvature at which η is
exactly the rule's max stable lr, λ_edge = max_lr(rule, delays; λ = 1)/η (PipeMare Lemma 1-3,
Kosson eq. 20-23; `stability.nets.sharpness`), the coupled edge for a per-stage schedule.

Setup as Cohen et al.: full batch, the first 1,000 digits of scikit-learn (pixels / 16), MSE on
one-hot targets (½‖out − y‖² averaged over samples), a tanh MLP 64 → 64 → 64 → 10 from PyTorch's
standard initialisation (seed 0), float64.  Runs (`stability.nets.public.net_train` with
``sharpness_every``): sgd at τ ∈ {0, 1, 2, 4}, momentum 0.9 at τ ∈ {0, 1}, lwp+sc and sc
(momentum 0.9) at τ = 2, and sgd on a PipeMare 4-stage schedule (N = 1, weight stashing).
Each η puts the edge near 20; each run is ≥ 2.5× as long as the step where the edge is first
reached (the JSON records that step).

**Without weight stashing** (issue 25): ``discrepancy`` (delayed sgd whose backward pass reads
the current weights, PipeMare eq. 5) and ``t2`` (its correction, PipeMare Sec. 3.2, γ* of
eq. 14) on the same PipeMare schedule (τ_fwd = 7, 5, 3, 1, τ_bkwd = 0), η = 0.03, from the same
standard initialisation.  Their edge includes the backward-weight Jacobian H_b measured at the
last sample (`stability.nets.sharpness.inconsistent_edge`); the JSON also records Δ₁/λ₁
(``edge_delta``) and the edge with H_b left out (``edge_without_delta``).

Claim per run: the plateau (median λ₁ over the last quarter) is within 10 % of λ_edge once
reached, read only from runs ≥ 2.5× as long as the step where the edge is first reached (else
the claim does not hold: the run is too short to tell). ``--quick``: a 16-unit MLP on 300
images (initial sharpness 10.8), sgd τ ∈ {0, 2} with the edge at ≈ 11.8 and discrepancy at
τ_fwd = 2, τ_bkwd = 0, 400 steps each.

**Resume.**  A full run keeps the rows of an existing ``<out-dir>/edge_of_stability_delay.json``
whose specification (label, rule, delays, η, steps, K, parameters) is unchanged (each such row
says ``"resumed": true``; the simulator is deterministic, so the run would repeat it); delete
the file to recompute every row.
"""

from __future__ import annotations

import json
import sys
import time

import _common
import matplotlib.pyplot as plt
import numpy as np
import torch

REQUIRES = ("torch",)
"""Optional modules this script needs (`stability repro --all` skips it without them)."""
NAME = "edge_of_stability_delay"
SOURCE = "Cohen et al. ICLR 2021 (edge of stability) under PipeMare/Kosson delays, issue 13"
TOLERANCE = 0.10
SETTLE = 2.5
"""A plateau is read only from runs ≥ SETTLE × the step where the edge is first reached."""

# (label, rule, delays, lr, steps, sharpness_every, params)
PIPEMARE = {"schedule": "pipemare", "stages": 4}
NO_STASH = {**PIPEMARE, "backward": "current"}
FULL = (
    ("sgd τ=0", "sgd", {"tau": 0}, 0.1, 3000, 50, {}),
    ("sgd τ=2", "sgd", {"tau": 2}, 0.03, 7000, 50, {}),
    ("momentum τ=1", "momentum", {"tau": 1}, 0.005, 10000, 50, {"momentum": 0.9}),
    ("sgd τ=1", "sgd", {"tau": 1}, 0.05, 4000, 50, {}),
    ("sgd τ=4", "sgd", {"tau": 4}, None, 12000, 50, {}),
    ("momentum τ=0", "momentum", {"tau": 0}, 0.19, 3000, 50, {"momentum": 0.9}),
    ("lwp+sc τ=2", "lwp+sc", {"tau": 2}, None, 6000, 50, {"momentum": 0.9}),
    ("sc τ=2", "sc", {"tau": 2}, None, 6000, 50, {"momentum": 0.9}),
    ("pipemare P=4", "sgd", PIPEMARE, 0.02, 19000, 50, {}),
    ("discrepancy P=4", "discrepancy", NO_STASH, 0.03, 16000, 50, {}),
    ("t2 P=4", "t2", NO_STASH, 0.03, 12000, 50, {}),
)
QUICK = (
    ("sgd τ=0", "sgd", {"tau": 0}, 0.17, 400, 20, {}),
    ("sgd τ=2", "sgd", {"tau": 2}, 0.0526, 400, 20, {}),
    ("discrepancy τ=2", "discrepancy", {"tau": 2, "backward": "current"}, 0.0526, 400, 20, {}),
)
TARGET_EDGE = 20.0
"""η for the runs given as None: max_lr(rule, delays; λ = 1)/TARGET_EDGE."""


def problem(quick: bool):
    """The problem dict (module doc); quick: 300 images, one hidden layer of 16."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    n = 300 if quick else 1000
    inputs = torch.tensor(X[:n] / 16.0, dtype=torch.float64)
    targets = torch.nn.functional.one_hot(torch.tensor(y[:n]), 10).double()
    torch.manual_seed(0)
    nn = torch.nn
    if quick:
        model = nn.Sequential(nn.Linear(64, 16), nn.Tanh(), nn.Linear(16, 10))
    else:
        model = nn.Sequential(
            nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10)
        )

    def loss(out, target):
        return 0.5 * ((out - target) ** 2).sum(dim=1).mean()

    return {"model": model, "loss": loss, "inputs": inputs, "targets": targets}


def scalar_max_lr(rule: str, tau: int, params: dict) -> float:
    from stability.analysis.boundary import max_lr
    from stability.rules.registry import build_rule

    return max_lr(*build_rule(rule, tau=tau, lam=1.0, **params)).max_lr


def run(label, rule, delays, lr, steps, every, params, quick):
    from stability.nets.problem import problem_from_dict
    from stability.nets.public import net_train

    stages = delays.get("stages", 1)
    net = problem_from_dict(problem(quick), stages=stages)
    if lr is None:
        lr = scalar_max_lr(rule, delays["tau"], params) / TARGET_EDGE
    kwargs = {k: v for k, v in delays.items() if k != "stages"}
    started = time.perf_counter()
    res = net_train(net, rule, lr=lr, steps=steps, sharpness_every=every, **kwargs, **params)
    return {
        "label": label,
        "rule": rule,
        "params": params,
        **_common.edge_run(res, delays, lr, steps, every),
        "first_reached": next((s for s, v in res.sharpness if v >= 0.9 * res.predicted_edge), None),
        "edge_delta": res.edge_delta,
        "edge_without_delta": res.edge_without_delta,
        "hvps": res.protocol["hvps"],
        "seconds": round(time.perf_counter() - started, 1),
        "sharpness": res.sharpness,
    }


def spec_key(label, rule, delays, lr, steps, every, params) -> str:
    """A row's specification (what `run` is given, η resolved) as a comparable string."""
    return json.dumps([label, rule, delays, lr, steps, every, params], sort_keys=True)


def previous_rows(path) -> dict:
    """{spec_key: row} of an earlier full run's JSON at ``path`` (module doc: Resume)."""
    if not path.exists():
        return {}
    rows = json.loads(path.read_text()).get("data", {}).get("rows", [])
    out = {}
    for r in rows:
        delays = {k: v for k, v in r["delays"].items() if k != "stage_taus"}
        spec = (r["label"], r["rule"], delays, r["lr"], r["steps"], r["sharpness_every"])
        out[spec_key(*spec, r["params"])] = r
    return out


def settled(row) -> bool:
    """The run lasted ≥ 2.5× the step where the edge was first reached (module doc)."""
    first = row["first_reached"]
    return first is not None and SETTLE * first <= row["steps"]


def claim(row) -> _common.Claim:
    ratio = row["edge_ratio"]
    ok = ratio is not None and abs(ratio - 1) <= TOLERANCE and settled(row)
    first = row["first_reached"]
    delta = row.get("edge_delta")
    with_delta = (
        ""
        if delta is None
        else f" (no weight stashing: H_b at the last sample, Δ₁/λ₁ = {delta:.3g}; without H_b "
        f"the edge would be {row['edge_without_delta']:.4g})"
    )
    return _common.Claim(
        id=f"eos-{row['rule']}-{row['label'].split()[-1].replace('=', '')}".replace("+", "-"),
        source=SOURCE,
        statement=f"{row['label']}, η = {row['lr']:.4g}: the sharpness settles within 10 % of "
        f"λ_edge = max_lr(rule, delays; λ = 1)/η = {row['predicted_edge']:.4g} once reached"
        + with_delta
        + ".",
        direction="|plateau / predicted_edge − 1| ≤ 0.10 (plateau: median λ₁, last quarter), "
        f"read only if the run lasts ≥ {SETTLE:g}× the step where the edge is first reached",
        scope=f"digits MLP, full batch, MSE, {row['steps']} steps; edge first reached at step "
        f"{first}" + ("" if settled(row) else " — too late for the last quarter to be a plateau"),
        direction_holds=bool(ok),
        size=_common.Size(
            float("nan") if ratio is None else ratio,
            "× predicted_edge",
            "plateau / predicted_edge (null plateau: diverged or edge never reached)",
        ),
        numbers={
            k: row[k]
            for k in ("lr", "steps", "predicted_edge", "plateau", "reached", "first_reached")
        }
        | ({} if delta is None else {k: row[k] for k in ("edge_delta", "edge_without_delta")}),
    )


def figure(rows):
    fig, ax = plt.subplots(figsize=(8, 5.2), layout="constrained")
    colors = plt.cm.tab20(np.linspace(0, 1, 20))[::2]
    for i, row in enumerate(rows):
        s = np.array(row["sharpness"])
        edge = row["predicted_edge"]
        style = "-" if row.get("edge_delta") is None else "--"
        ax.plot(s[:, 0], s[:, 1] / edge, color=colors[i % 10], ls=style, lw=1.0, label=row["label"])
    ax.axhline(1.0, color="black", lw=1.2, ls="--", label="predicted edge")
    ax.axhspan(1 - TOLERANCE, 1 + TOLERANCE, color="0.9", zorder=0)
    ax.set_xlabel("step")
    ax.set_ylabel("λ₁ / predicted edge  (max_lr(rule, delays; λ=1)/η)")
    ax.set_ylim(0, 2.0)
    ax.set_title(
        "edge of stability under delay: λ₁ over its predicted edge "
        "(dashed: no weight stashing, H_b in the edge)",
        fontsize=9,
    )
    text = "\n".join(
        f"{r['label']}: edge {r['predicted_edge']:.3g}, ratio "
        + ("—" if r["edge_ratio"] is None else f"{r['edge_ratio']:.3f}")
        + ("" if settled(r) else " (run too short to settle)")
        for r in rows
    )
    ax.text(0.99, 0.02, text, transform=ax.transAxes, ha="right", va="bottom", fontsize=7)
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    return fig


def main(argv=None) -> dict:
    args = _common.arguments(__doc__, argv)
    started = time.perf_counter()
    torch.set_num_threads(1)
    rows = []
    before = {} if args.quick else previous_rows(args.out_dir / f"{NAME}.json")
    for label, rule, delays, lr, steps, every, params in QUICK if args.quick else FULL:
        if lr is None:
            lr = scalar_max_lr(rule, delays["tau"], params) / TARGET_EDGE
        spec = (label, rule, delays, lr, steps, every, params)
        old = before.get(spec_key(*spec))
        rows.append({**old, "resumed": True} if old else run(*spec, args.quick))
        r = rows[-1]
        print(
            f"{r['label']}: edge {r['predicted_edge']:.4g} plateau {r['plateau']} ratio "
            f"{r['edge_ratio']} first reached {r['first_reached']}",
            file=sys.stderr,
            flush=True,
        )
    claims = [claim(r) for r in rows]
    data = {"problem": "digits[:1000]/16 (quick: [:300]), MSE on one-hot", "rows": rows}
    return _common.write(
        args, NAME, figure(rows), source=SOURCE, claims=claims, data=data, started=started
    )


if __name__ == "__main__":
    main()
