"""The discrepancy sensitivity Δ real networks present, and the max lr predicted from it.

Without weight stashing (PipeMare: τ_bkwd = 0) the gradient is backpropagation with forward
weights u_fwd and current backward weights (`stability.nets.inconsistent`).  For each network
near a minimum: λ₁, the effective Δ₁ = −v₁ᵀH_b v₁ (`stability.nets.sensitivity`), and for
``stash`` (sgd, weight stashing), ``discrepancy`` (sgd without stashing) and ``t2`` (PipeMare
Sec. 3.2, default γ*): the scalar max lr at (λ₁, Δ₁, τ_fwd,max, τ_bkwd = 0), the coupled max lr
with the projected H_b, and the simulator's bracket (`stability.nets.bracket`).  Schedule:
PipeMare, P = 4, N = 1 (τ_fwd = 7, 5, 3, 1; τ_bkwd = 0).  One more row per network family reads
Δ₁ at the untrained initialisation (large residuals), where no bracket is taken: the Hessian has
negative eigenvalues there, which grow at every lr and defeat the linear protocol.

Networks (made up here, not shipped): ``wine_mlp`` and ``diabetes_mlp`` of
benchmarks/nets_agreement.py and ``wine_deep`` (13 → 16 → 16 → 3 softplus, cross-entropy with
label smoothing 0.05).  Run: ``.venv/bin/python benchmarks/nets_discrepancy.py``; writes
figures/nets_discrepancy.json and docs/nets_discrepancy.md (``--from-json``: the page only).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nets_agreement import _standardize, diabetes_mlp, wine_mlp  # noqa: E402

from stability.files import atomic_write, write_json  # noqa: E402
from stability.nets.bracket import NetProtocol, measure_max_lr  # noqa: E402
from stability.nets.curvature import curvature  # noqa: E402
from stability.nets.fitting import near_minimum  # noqa: E402
from stability.nets.prediction import net_rules, predict  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.nets.sensitivity import (  # noqa: E402
    effective_delta,
    predict_inconsistent,
    scalar_discrepancy_max_lr,
)
from stability.pipeline import Pipeline  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STAGES = 4
RULES = (("stash", "sgd", "stashed"), ("discrepancy", "discrepancy", "current"),
         ("t2", "t2", "current"))  # fmt: skip


def wine_deep(fit: bool = True):
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    inputs, targets = _standardize(X), torch.tensor(y)
    loss = torch.nn.CrossEntropyLoss(label_smoothing=0.05)
    nn = torch.nn

    def build():
        return nn.Sequential(
            nn.Linear(13, 16), nn.Softplus(), nn.Linear(16, 16), nn.Softplus(), nn.Linear(16, 3)
        )

    if fit:
        model = near_minimum(build, loss, inputs, targets, name="wine_deep", seed=1,
                             iterations=1500)  # fmt: skip
    else:
        torch.manual_seed(1)
        model = build()
    return {"model": model, "loss": loss, "inputs": inputs, "targets": targets}


def rows_for(name, net, protocol):
    curv = curvature(net, 20, stage_k=1, negative_k=5)
    lam1 = float(curv.eigenvalues[0])
    delta1 = float(effective_delta(net, curv, 1)[0])
    out = []
    for label, rule, backward in RULES:
        pipe = Pipeline.from_options("pipemare", stages=STAGES, backward=backward)
        rules = net_rules(rule, {}, pipe)
        pred = (
            predict(curv, rules)
            if backward == "stashed"
            else predict_inconsistent(net, curv, rules)
        )
        coupled = pred.analysis.max_lr
        tf = int(pipe.tau_fwd.max())
        scalar = scalar_discrepancy_max_lr(rule, {}, lam1, delta1, tf, 0 if backward != "stashed"
                                           else tf)  # fmt: skip
        start = time.perf_counter()
        m = measure_max_lr(net, rules, curv.eigenvectors[:, 0], coupled, protocol)
        row = {
            "network": name,
            "rule": label,
            "lambda1": lam1,
            "delta1": delta1,
            "delta_over_lambda": delta1 / lam1,
            "negative_eigenvalues": curv.negative_eigenvalues.tolist(),
            "scalar_max_lr": scalar,
            "coupled_max_lr": coupled,
            "measured_bracket": [m.stable, m.unstable],
            "measured_max_lr": m.max_lr,
            "measured_over_coupled": m.max_lr / coupled,
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(row, flush=True)
        out.append(row)
    return out


def init_row(name, net):
    curv = curvature(net, 4, stage_k=1, negative_k=3)
    lam1 = float(curv.eigenvalues[0])
    delta1 = float(effective_delta(net, curv, 1)[0])
    row = {"network": name, "lambda1": lam1, "delta1": delta1, "delta_over_lambda": delta1 / lam1,
           "negative_eigenvalues": curv.negative_eigenvalues.tolist()}  # fmt: skip
    print(row, flush=True)
    return row


def table(rows, inits) -> str:
    lines = [
        "# Network discrepancy sensitivity (generated by benchmarks/nets_discrepancy.py)",
        "",
        f"PipeMare schedule, P = {STAGES}, N = 1 (τ_fwd = 7, 5, 3, 1; τ_bkwd = 0 without "
        "stashing). Δ₁ = −v₁ᵀH_b v₁ at the network's near-minimum.",
        "",
        "| network | rule | λ₁ | Δ₁/λ₁ | scalar max lr | coupled max lr | measured "
        "[stable, unstable] | measured/coupled |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['network']} | {r['rule']} | {r['lambda1']:.4g} | {r['delta_over_lambda']:.2e} "
            f"| {r['scalar_max_lr']:.5g} | {r['coupled_max_lr']:.5g} | "
            f"[{r['measured_bracket'][0]:.5g}, {r['measured_bracket'][1]:.5g}] | "
            f"{r['measured_over_coupled']:.4f} |"
        )
    lines += [
        "",
        "At the untrained initialisation (no bracket: negative curvature):",
        "",
        "| network | λ₁ | Δ₁ | Δ₁/λ₁ | most negative eigenvalue |",
        "|---|---|---|---|---|",
    ]
    for r in inits:
        neg = min(r["negative_eigenvalues"], default=float("nan"))
        lines.append(f"| {r['network']} | {r['lambda1']:.4g} | {r['delta1']:.4g} | "
                     f"{r['delta_over_lambda']:.3f} | {neg:.4g} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main():
    torch.set_num_threads(1)
    target = ROOT / "figures" / "nets_discrepancy.json"
    if "--from-json" in sys.argv:
        data = json.loads(target.read_text())
        text = table(data["rows"], data["initialisation"])
        atomic_write(ROOT / "docs" / "nets_discrepancy.md", lambda fh: fh.write(text))
        return
    protocol = NetProtocol(steps=1000)
    nets = {
        "wine_mlp": lambda: wine_mlp(),
        "diabetes_mlp": lambda: diabetes_mlp(),
        "wine_deep": lambda: wine_deep(),
    }
    rows, inits = [], []
    for name, make in nets.items():
        net = problem_from_dict(make(), stages=STAGES, source=name)
        rows += rows_for(name, net, protocol)
    inits.append(init_row("wine_deep (init)", problem_from_dict(wine_deep(False), stages=STAGES)))
    data = {"rows": rows, "initialisation": inits, "protocol": protocol.describe()}
    write_json(target, data)
    text = table(rows, inits)
    atomic_write(ROOT / "docs" / "nets_discrepancy.md", lambda fh: fh.write(text))


if __name__ == "__main__":
    main()
