"""Predicted vs simulated max stable lr and rate on networks (issue 12 acceptance tables).

Networks, each brought near a minimum by full-batch L-BFGS (seeded, cached), four stages:

* ``digits_mlp``, ``digits_cnn``: the shipped examples (examples/);
* ``wine_mlp`` (made up here, not shipped): 13 standardized features → 16 softplus → 3 classes,
  cross-entropy (label smoothing 0.05), 178 samples, 275 parameters;
* ``diabetes_mlp`` (made up here): 10 features → 16 tanh → 1, ``nn.MSELoss`` on the
  standardized target (torch has no forward-over-reverse for it: reverse-over-reverse HVPs),
  442 samples, 193 parameters.

Table 1, per network × rule (sgd, momentum 0.9, lwp+sc with momentum 0.9) × delays (uniform
τ = 0, uniform τ = 4, PipeMare with P = 4, N = 1, weight stashing): the coupled ``max_lr`` on
the rank-20 curvature, the simulator's bracket (`stability.nets.bracket`, ≤ 0.8 % wide) and
measured/predicted; the rate ratio measured ln ρ̂ / predicted ln ρ at 0.5 × max_lr.

Table 2 (truncation): on the two small made-up networks the dense Hessian
(``torch.func.hessian``) gives the exact coupled max lr on all positive curvature; the rank-k
reduction (k = 1, 5, 10, 20) is compared with it.

Run: ``.venv/bin/python benchmarks/nets_agreement.py [--quick] [--networks a,b]
[--acceptance]``; writes figures/nets_agreement.json and docs/generated/nets_agreement.md
(rows appended as they finish; included by docs/nets_agreement.md).  ``--acceptance``: only
issue 25's four (rule, delays) pairs — sgd and momentum 0.9 at uniform τ = 4, sgd and lwp+sc
(momentum 0.9) under PipeMare — the rows the larger networks are measured on.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from stability.coupled.system import CoupledSystem
from stability.files import atomic_write, write_json
from stability.nets.bracket import NetProtocol, measure_log_rate, measure_max_lr
from stability.nets.curvature import curvature, dense_hessian
from stability.nets.fitting import near_minimum
from stability.nets.lowrank import positive_part, reduced_system
from stability.nets.prediction import (
    coupled_analysis,
    net_rules,
    predict,
    predicted_log_rate,
)
from stability.nets.problem import load_problem, problem_from_dict
from stability.nets.rates import predict_rate
from stability.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[1]
RULES = (("sgd", {}), ("momentum", {"momentum": 0.9}), ("lwp+sc", {"momentum": 0.9}))
DELAYS = (("uniform τ=0", {"tau": 0}), ("uniform τ=4", {"tau": 4}), ("pipemare", {}))
ACCEPTANCE = frozenset(
    {("sgd", "uniform τ=4"), ("momentum", "uniform τ=4"), ("sgd", "pipemare"),
     ("lwp+sc", "pipemare")}
)  # fmt: skip
"""Issue 25's rate acceptance pairs (rule, delays)."""


def _standardize(X):
    X = torch.tensor(X, dtype=torch.float64)
    return (X - X.mean(0)) / X.std(0)


def wine_data():
    """scikit-learn's wine: 178 × 13 standardized features, 3 class labels."""
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    return _standardize(X), torch.tensor(y)


def fitted(name: str, seed: int, build, loss, inputs, targets) -> dict:
    """The problem dict of ``build()`` (seeded) after 1,500 full-batch L-BFGS iterations
    (`stability.nets.fitting.near_minimum`, cached under ``name``)."""
    model = near_minimum(build, loss, inputs, targets, name=name, seed=seed, iterations=1500)
    return {"model": model, "loss": loss, "inputs": inputs, "targets": targets}


def wine_mlp():
    nn = torch.nn

    def build():
        return nn.Sequential(nn.Linear(13, 16), nn.Softplus(), nn.Linear(16, 3))

    return fitted("wine_mlp", 1, build, nn.CrossEntropyLoss(label_smoothing=0.05), *wine_data())


def diabetes_mlp():
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    nn = torch.nn

    def build():
        return nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 1))

    return fitted("diabetes_mlp", 2, build, nn.MSELoss(), _standardize(X), _standardize(y[:, None]))


def networks():
    return {
        "wine_mlp": lambda: problem_from_dict(wine_mlp(), stages=4, source="wine_mlp"),
        "diabetes_mlp": lambda: problem_from_dict(diabetes_mlp(), stages=4, source="diabetes"),
        "digits_mlp": lambda: load_problem(str(ROOT / "examples/digits_mlp.py:problem"), stages=4),
        "digits_cnn": lambda: load_problem(str(ROOT / "examples/digits_cnn.py:problem")),
    }


def agreement_rows(name, net, protocol, rank=20, done=frozenset(), only=None):
    """Rows of table 1 for ``name``, skipping the (rule, delays) pairs in ``done`` (and those
    not in ``only`` when given)."""
    wanted = {(rule, label) for rule, _ in RULES for label, _ in DELAYS}
    if only is not None:
        wanted &= only
    if wanted <= done:
        return
    curv = curvature(net, rank, stage_k=1, negative_k=5)
    base = {
        "network": name,
        "n_params": net.dim,
        "lam_max": curv.lam_max,
        "negative_eigenvalues": curv.negative_eigenvalues.tolist(),
        "hvp_mode": net.hvp_mode,
    }
    for rule, values in RULES:
        for label, delays in DELAYS:
            if (rule, label) in done or (rule, label) not in wanted:
                continue
            start = time.perf_counter()
            pipe = Pipeline.from_options(
                stages=len(net.stage_sizes), default="pipemare", backward="stashed", **delays
            )
            rules = net_rules(rule, values, pipe)
            pred = predict(curv, rules)
            lr = pred.analysis.max_lr
            v1 = curv.eigenvectors[:, 0]
            m = measure_max_lr(net, rules, v1, lr, protocol)
            rp = predict_rate(net, curv, rules, 0.5 * lr, protocol.rate_steps)
            pl = rp.log_rate
            ml = float(measure_log_rate(net, rules, v1, [0.5 * lr], protocol)[0])
            yield {
                **base,
                "rule": rule,
                "delays": label,
                "stage_taus": pipe.tau_fwd.tolist(),
                "max_lr": lr,
                "scalar_bound": pred.analysis.scalar_bound,
                "truncation_change": pred.truncation_change,
                "measured_bracket": [m.stable, m.unstable],
                "measured_max_lr": m.max_lr,
                "ratio": None if m.max_lr is None else m.max_lr / lr,
                "bracket_width": m.relative_width,
                "predicted_log_rate": pl,
                "measured_log_rate": ml,
                "rate_ratio": ml / pl if math.isfinite(ml) and pl else None,
                "rate_mode": rp.mode(),
                "rank1_log_rate": predicted_log_rate(curv, rules, 0.5 * lr),
                "seconds": time.perf_counter() - start,
            }


def truncation_rows(name, net):
    """Rank-k vs the dense Hessian's positive part (exact coupled max lr)."""
    H = dense_hessian(net)
    lam, V = positive_part(H)
    neg = np.linalg.eigvalsh(H)
    for rule, values in RULES:
        pipe = Pipeline.from_options("pipemare", stages=len(net.stage_sizes), backward="stashed")
        rules = net_rules(rule, values, pipe)
        exact = coupled_analysis(
            CoupledSystem(rules, net.stage_sizes, {"forward": V * lam @ V.T})
        ).max_lr
        row = {
            "network": name,
            "rule": rule,
            "delays": "pipemare",
            "dense_max_lr": exact,
            "lowest_eigenvalue": float(neg[0]),
            "lam_max": float(lam[0]),
        }
        for k in (1, 5, 10, 20):
            lr = coupled_analysis(reduced_system(rules, lam[:k], V[:, :k], net.stage_sizes)).max_lr
            row[f"rank_{k}"] = (lr - exact) / exact
        yield row


def markdown(agreement, truncation) -> str:
    def f(x, d=4):
        return "–" if x is None else f"{x:.{d}g}"

    lines = [
        "<!-- generated by benchmarks/nets_agreement.py; do not edit -->",
        "| network | p | rule | delays | predicted max lr | measured bracket | measured/"
        "predicted | ρ predicted | ρ measured | ln ρ measured/predicted at 0.5× | rate mode "
        "(modulus, stage, λ) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in agreement:
        lo, hi = r["measured_bracket"]
        mode = r.get("rate_mode")
        where = (
            "–" if not mode else f"{mode['modulus']:.4f}, {mode['stage']}, {mode['eigenvalue']:.3g}"
        )
        rates = [math.exp(r[k]) if r.get(k) is not None and math.isfinite(r[k]) else None
                 for k in ("predicted_log_rate", "measured_log_rate")]  # fmt: skip
        lines.append(
            f"| {r['network']} | {r['n_params']} | {r['rule']} | {r['delays']} | "
            f"{f(r['max_lr'], 6)} | [{f(lo, 6)}, {f(hi, 6)}] | {f(r['ratio'])} | "
            f"{f(rates[0], 5)} | {f(rates[1], 5)} | {f(r['rate_ratio'])} | {where} |"
        )
    lines += (
        []
        if not truncation
        else [
            "",
            "| network | rule (pipemare) | dense max lr | rank 1 | rank 5 | rank 10 | rank 20 |",
            "|---|---|---|---|---|---|---|",
        ]
    )
    for r in truncation:
        ranks = " | ".join(f"{r[f'rank_{k}']:+.2e}" for k in (1, 5, 10, 20))
        lines.append(f"| {r['network']} | {r['rule']} | {f(r['dense_max_lr'], 6)} | {ranks} |")
    return "\n".join(lines) + "\n"


def save(args, protocol, agreement, truncation) -> None:
    write_json(
        args.out,
        {"protocol": protocol.describe(), "agreement": agreement, "truncation": truncation},
    )
    atomic_write(args.md, lambda fh: fh.write(markdown(agreement, truncation)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps, wine only")
    ap.add_argument("--networks", default=None, help="comma-separated subset")
    ap.add_argument("--truncation", action="store_true", help="also table 2 (dense reference)")
    ap.add_argument("--truncation-only", action="store_true", help="table 2 only")
    ap.add_argument("--out", default=str(ROOT / "figures" / "nets_agreement.json"))
    ap.add_argument("--md", default=str(ROOT / "docs" / "generated" / "nets_agreement.md"))
    ap.add_argument("--acceptance", action="store_true", help="issue 25's four pairs only")
    ap.add_argument("--from-json", action="store_true", help="rewrite the page from the JSON")
    args = ap.parse_args()
    torch.set_num_threads(1)
    nets = networks()
    chosen = args.networks.split(",") if args.networks else list(nets)
    if args.quick:
        chosen = ["wine_mlp"]
    protocol = NetProtocol(steps=600, rate_steps=600) if args.quick else NetProtocol()
    agreement, truncation = [], []
    previous = Path(args.out)
    if args.from_json:
        old = json.loads(previous.read_text())
        atomic_write(args.md, lambda fh: fh.write(markdown(old["agreement"], old["truncation"])))
        return 0
    if previous.exists() and not args.quick:  # resume: keep the rows measured before
        old = json.loads(previous.read_text())
        if old.get("protocol") == protocol.describe():
            agreement, truncation = old["agreement"], old["truncation"]
    for name in chosen:
        done = frozenset((r["rule"], r["delays"]) for r in agreement if r["network"] == name)
        net = nets[name]()
        measured = {r["network"] for r in truncation}
        if (args.truncation or args.truncation_only) and net.dim <= 500 and name not in measured:
            truncation += list(truncation_rows(name, net))
            save(args, protocol, agreement, truncation)
        for row in (
            []
            if args.truncation_only
            else agreement_rows(
                name, net, protocol, done=done, only=ACCEPTANCE if args.acceptance else None
            )
        ):
            agreement.append(row)
            print(json.dumps(row), flush=True)
            save(args, protocol, agreement, truncation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
