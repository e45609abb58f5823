"""``net noise --rule adam --precond-from STATE`` on small networks near a minimum: the frozen-P
minibatch theory against the simulator's frozen-P runs, and against real ``torch.optim.Adam``.

Two networks not in the repository, brought to a minimum by full-batch L-BFGS
(`stability.nets.fitting.near_minimum`, seeded, one thread, cached): ``tiny9`` (2 → 2 → 1 tanh,
MSE, 9 parameters, n = 60: the tests' network) and ``teacher31`` (3 → 6 → 1 tanh, MSE, 31
parameters, n = 512, targets from a teacher of the same shape plus noise 0.1).  The optimizer
state is that of 200 minibatch ``torch.optim.Adam`` steps (B = 16, lr 10⁻³, β = (0.9, 0.999))
from w* on a copy of the model, so its v carries the minibatch gradient noise; the analysis
reads its P and starts from w*.  With k = p, B = 16, β1 = 0.9:

* ``frozen`` — ``--measure --runs 1024`` at lr = 0.25 × ms_max_lr, τ ∈ {0, 2}: predicted and
  measured E f − f* at t = 100, 1000 and the floor, ``as_max_lr`` against the measured bracket,
  how far the runs wandered (max ‖w − w*‖ / r₁₀);
* ``real`` — 128 runs of real ``torch.optim.Adam`` (no delay, the same lr, each its own
  seeded batches of B distinct rows) continuing the saved state with m = 0 from w*: the mean
  of f − f* over the last 200 of 1,000 steps (every 10th) against the predicted floor, at
  0.25 and 0.5 × ms_max_lr.  Real Adam keeps updating v, so its floor is the frozen-P one
  only where the state's v is the v of the run being predicted: beside the floors, the
  median over coordinates of the runs' final v̂ over the state's (mean over runs), and of the
  state's v̂ over the minibatch noise of the gradient at w*, p·Var_i(∇ℓ_i(w*)) with
  p = (n − B)/(B(n − 1)) — the v̂ of a run that does not move.

Run: ``.venv/bin/python benchmarks/net_noise_adam.py`` (about ten minutes on one core); writes
figures/net_noise_adam.json and docs/generated/net_noise_adam.md (``--from-json``: the page
from the stored rows).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import stability as st  # noqa: E402
from stability.nets.fitting import near_minimum  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402

BATCH, RUNS, REAL_RUNS, STEPS = 16, 1024, 128, 1000


def _mse():
    return torch.nn.MSELoss()


def tiny9() -> dict:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(60, 2, generator=g, dtype=torch.float64)
    noise = 0.2 * torch.randn(60, 1, generator=g, dtype=torch.float64)
    y = torch.sin(X @ torch.tensor([[1.0], [-0.7]], dtype=torch.float64)) + noise

    def build():
        return torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh(), torch.nn.Linear(2, 1))

    model = near_minimum(build, _mse(), X, y, name="bench_noise_adam_tiny9")
    return {"model": model, "loss": _mse(), "inputs": X, "targets": y}


def teacher31() -> dict:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(512, 3, generator=g, dtype=torch.float64)

    def build():
        return torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh(), torch.nn.Linear(6, 1))

    torch.manual_seed(100)
    teacher = build().double()
    with torch.no_grad():
        y = teacher(X) + 0.1 * torch.randn(512, 1, generator=g, dtype=torch.float64)
    model = near_minimum(build, _mse(), X, y, name="bench_noise_adam_teacher31")
    return {"model": model, "loss": _mse(), "inputs": X, "targets": y}


NETWORKS = {"tiny9": tiny9, "teacher31": teacher31}


def minibatch_state(d: dict, path: Path) -> dict:
    """200 minibatch Adam steps from w* on a copy of the model; the state saved to ``path``."""
    model = copy.deepcopy(d["model"])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(5)
    n = d["inputs"].shape[0]
    for _ in range(200):
        idx = torch.randperm(n, generator=g)[:BATCH]
        opt.zero_grad()
        d["loss"](model(d["inputs"][idx]), d["targets"][idx]).backward()
        opt.step()
    torch.save(opt.state_dict(), path)
    return opt.state_dict()


def _v_hat(entries, beta2: float) -> torch.Tensor:
    """Adam's bias-corrected second moment v̂ = v/(1 − β2^t) of the state ``entries`` (one per
    parameter, in the model's order), flat."""
    return torch.cat(
        [s["exp_avg_sq"].reshape(-1) / (1 - beta2 ** float(s["step"])) for s in entries]
    )


def noise_variance(net) -> torch.Tensor:
    """p·Var_i(∇ℓ_i(w*)) per coordinate (module doc): the minibatch gradient's variance at w*,
    from the per-sample gradients of `stability.nets.minibatch_moments` (flat, in the
    model's parameter order)."""
    from stability.nets.minibatch_moments import per_sample_gradients

    n = net.samples
    grads = per_sample_gradients(net, torch.eye(net.dim, dtype=net.dtype))
    return (n - BATCH) / (BATCH * (n - 1)) * torch.from_numpy(grads).var(dim=0)


def real_floor(d: dict, state: dict, lr: float) -> tuple[float, float, float]:
    """Mean and standard error over `REAL_RUNS` real-Adam runs of f − f* over their last 200
    steps, and the median over coordinates of their final v̂ over the state's (mean over
    runs; module doc)."""
    X, Y, loss = d["inputs"], d["targets"], d["loss"]
    with torch.no_grad():
        f_star = float(loss(d["model"](X), Y))
    tails, drift = [], []
    for r in range(REAL_RUNS):
        model = copy.deepcopy(d["model"])
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        resumed = copy.deepcopy(state)
        for group in resumed["param_groups"]:
            group["lr"] = lr
        opt.load_state_dict(resumed)
        for q in model.parameters():  # m = 0: the first moment of a stationary point
            opt.state[q]["exp_avg"].zero_()
        entries = [opt.state[q] for q in model.parameters()]
        beta2 = opt.param_groups[0]["betas"][1]
        v_start = _v_hat(entries, beta2)
        g = torch.Generator().manual_seed(1000 + r)
        tail = []
        for t in range(STEPS):
            idx = torch.randperm(X.shape[0], generator=g)[:BATCH]
            opt.zero_grad()
            loss(model(X[idx]), Y[idx]).backward()
            opt.step()
            if t >= STEPS - 200 and t % 10 == 0:
                with torch.no_grad():
                    tail.append(float(loss(model(X), Y)) - f_star)
        tails.append(np.mean(tail))
        drift.append(float(torch.median(_v_hat(entries, beta2) / v_start)))
    return (
        float(np.mean(tails)),
        float(np.std(tails, ddof=1) / np.sqrt(REAL_RUNS)),
        float(np.mean(drift)),
    )


def rows_of(name: str, folder: Path) -> list[dict]:
    d = NETWORKS[name]()
    path = folder / f"{name}_state.pt"
    state = minibatch_state(d, path)
    net = problem_from_dict(d, stages=1)
    group = state["param_groups"][0]
    state_v = _v_hat([state["state"][i] for i in group["params"]], group["betas"][1])
    over_noise = float(torch.median(state_v / noise_variance(net)))
    common = dict(beta1=0.9, batch=BATCH, k=net.dim, precond_from=str(path))
    out = []
    for tau in (0, 2):
        start = time.perf_counter()
        r = st.net_noise(net, "adam", tau=tau, measure=True, runs=RUNS, steps=STEPS,
                         at=[0, 100, STEPS], **common)  # fmt: skip
        m = r.measured
        out.append({
            "kind": "frozen", "network": name, "n_params": net.dim, "tau": tau, "lr": r.lr,
            "ms_max_lr": r.ms_max_lr, "P": [r.preconditioner["min"], r.preconditioner["max"]],
            "loss": [[t, p, mean, se] for (t, p), (_, mean, se) in
                     zip(r.expected_loss, m["expected_loss"], strict=True)],
            "floor": [r.floor, *m["floor"]], "as_max_lr": r.as_max_lr,
            "measured_as_bracket": m["as_bracket"],
            "wander": r.protocol["runs_max_distance_ratio"],
            "seconds": time.perf_counter() - start,
        })  # fmt: skip
        print(json.dumps(out[-1]), flush=True)
    for fraction in (0.25, 0.5):
        start = time.perf_counter()
        lr = fraction * out[0]["ms_max_lr"]
        r = st.net_noise(net, "adam", tau=0, lr=lr, steps=STEPS, **common)
        mean, se, drift = real_floor(d, state, lr)
        out.append({
            "kind": "real", "network": name, "n_params": net.dim, "tau": 0, "lr": lr,
            "fraction": fraction, "floor": [r.floor, mean, se], "ratio": mean / r.floor,
            "v_drift": drift, "state_v_over_noise": over_noise,
            "seconds": time.perf_counter() - start,
        })  # fmt: skip
        print(json.dumps(out[-1]), flush=True)
    return out


def markdown(rows: list[dict]) -> str:
    def f(x, digits=4):
        return "—" if x is None else f"{x:.{digits}g}"

    lines = [
        "<!-- generated by benchmarks/net_noise_adam.py; do not edit -->",
        "",
        f"**Frozen-P theory against the simulator's frozen-P runs** (k = p, B = {BATCH}, "
        f"β1 = 0.9, lr = 0.25 × ms_max_lr, {RUNS:,} runs; predicted / measured ± se; wander: "
        "max ‖w − w*‖ / r₁₀):",
        "",
        "| network | τ | P min … max | E f − f* at 10² | at 10³ | floor | as_max_lr vs the "
        "measured bracket | wander | s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in rows if r["kind"] == "frozen"):
        at = {row[0]: row for row in r["loss"]}
        cells = [f"{f(at[t][1])} / {f(at[t][2])} ± {f(at[t][3], 2)}" for t in (100, STEPS)]
        lo, hi = r["measured_as_bracket"]
        lines.append(
            f"| {r['network']} ({r['n_params']}) | {r['tau']} | {f(r['P'][0], 3)} … "
            f"{f(r['P'][1], 3)} | {cells[0]} | {cells[1]} | {f(r['floor'][0])} / "
            f"{f(r['floor'][1])} ± {f(r['floor'][2], 2)} | {f(r['as_max_lr'])} vs "
            f"[{f(lo)}, {f(hi)}] | {f(r['wander'], 3)} | {r['seconds']:.0f} |"
        )
    lines += [
        "",
        f"**Frozen-P theory against real `torch.optim.Adam`** (τ = 0, {REAL_RUNS} runs "
        "continuing the saved state with m = 0; floor: predicted / real ± se; v̂ ratios: "
        "medians over coordinates):",
        "",
        "| network | lr / ms_max_lr | lr | floor | real / predicted | runs' final v̂ / the "
        "state's | the state's v̂ / p·Var(∇ℓ_i(w*)) | s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in rows if r["kind"] == "real"):
        lines.append(
            f"| {r['network']} ({r['n_params']}) | {r['fraction']:g} | {f(r['lr'])} | "
            f"{f(r['floor'][0])} / {f(r['floor'][1])} ± {f(r['floor'][2], 2)} | "
            f"{r['ratio']:.2f} | {r['v_drift']:.2f} | {r['state_v_over_noise']:.2f} | "
            f"{r['seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    import tempfile

    from stability.files import atomic_write, write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from-json", action="store_true", help="rewrite the page from the JSON")
    ap.add_argument("--out", default=str(ROOT / "figures" / "net_noise_adam.json"))
    ap.add_argument("--md", default=str(ROOT / "docs" / "generated" / "net_noise_adam.md"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.from_json:
        rows = json.loads(Path(args.out).read_text())["rows"]
    else:
        rows = []
        with tempfile.TemporaryDirectory() as folder:
            for name in NETWORKS:
                rows += rows_of(name, Path(folder))
                write_json(args.out, {"rows": rows})
    atomic_write(args.md, lambda fh: fh.write(markdown(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
