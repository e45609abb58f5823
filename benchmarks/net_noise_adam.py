"""``net noise --rule adam --precond-from STATE|stationary`` on small networks near a minimum:
the frozen-P minibatch theory against the simulator's frozen-P runs, and against real
``torch.optim.Adam``.

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
  p = (n − B)/(B(n − 1)) — the v̂ of a run that does not move;
* ``stationary`` — ``--precond-from stationary`` at the same step sizes
  (`stability.nets.stationary_adam`: the v̂ of real Adam's own stationary run, a fixed point)
  against 64 runs of real ``torch.optim.Adam`` of 4,000 steps started from w* with m = 0 and
  v̂ the minibatch noise alone (so real Adam has to find its v̂ itself, four memories
  1/(1 − β2) long): the mean of f − f* over the last 2,000 steps against the predicted floor,
  the median over coordinates of the runs' final v̂ over the predicted one (and the range over
  coordinates of its mean over runs), and how far the runs went (max ‖w − w*‖ over those steps,
  every 10th, / r₁₀ of ``net noise``).

Run: ``.venv/bin/python benchmarks/net_noise_adam.py`` (about half an hour on one core;
``--stationary-only``: the stationary rows alone, at the stored step sizes); writes
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
STATIONARY_RUNS, STATIONARY_STEPS, STATIONARY_STEP = 64, 4000, 2**40


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


def real_floor(
    d: dict, state: dict, lr: float, *, runs: int = REAL_RUNS, steps: int = STEPS,
    tail: int = 200, reference: torch.Tensor | None = None, spread: dict | None = None,
) -> tuple[float, float, float]:  # fmt: skip
    """Mean and standard error over ``runs`` real-Adam runs of f − f* over their last ``tail``
    steps (every 10th) of ``steps``, and the median over coordinates of their final v̂ over
    ``reference`` (default: the state's v̂; mean over runs; module doc).  ``spread``, if
    given, receives the min and max over coordinates of the runs' mean final v̂ over the
    reference (``v_range``) and the largest ‖w − w*‖ at the recorded steps (``distance``)."""
    X, Y, loss = d["inputs"], d["targets"], d["loss"]
    with torch.no_grad():
        f_star = float(loss(d["model"](X), Y))
    w_star = torch.cat([q.detach().reshape(-1) for q in d["model"].parameters()])
    tails, drift, ratios, distance = [], [], 0.0, 0.0
    for r in range(runs):
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
        v_start = _v_hat(entries, beta2) if reference is None else reference
        g = torch.Generator().manual_seed(1000 + r)
        recorded = []
        for t in range(steps):
            idx = torch.randperm(X.shape[0], generator=g)[:BATCH]
            opt.zero_grad()
            loss(model(X[idx]), Y[idx]).backward()
            opt.step()
            if t >= steps - tail and t % 10 == 0:
                with torch.no_grad():
                    recorded.append(float(loss(model(X), Y)) - f_star)
                    w = torch.cat([q.reshape(-1) for q in model.parameters()])
                    distance = max(distance, float(torch.linalg.vector_norm(w - w_star)))
        tails.append(np.mean(recorded))
        ratio = _v_hat(entries, beta2) / v_start
        drift.append(float(torch.median(ratio)))
        ratios = ratios + ratio / runs
    if spread is not None:
        spread.update(v_range=[float(ratios.min()), float(ratios.max())], distance=distance)
    return (
        float(np.mean(tails)),
        float(np.std(tails, ddof=1) / np.sqrt(runs)),
        float(np.mean(drift)),
    )


def noise_state(d: dict, v: torch.Tensor, path: Path) -> dict:
    """An Adam state with v = ``v`` (flat, the model's order), m = 0 and a step so large that
    no bias correction is left: the state of a run whose weights stood still at w*."""
    model = copy.deepcopy(d["model"])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sd = opt.state_dict()
    start = 0
    for i, q in enumerate(model.parameters()):
        size = q.numel()
        sd["state"][i] = {
            "step": torch.tensor(float(STATIONARY_STEP)),
            "exp_avg": torch.zeros_like(q),
            "exp_avg_sq": v[start : start + size].reshape(q.shape).clone(),
        }
        start += size
    torch.save(sd, path)
    return torch.load(path)


def stationary_rows(name: str, d: dict, net, lrs: list[float], folder: Path) -> list[dict]:
    """The stationary preconditioner's floor (`stability.nets.stationary_adam`) against real
    Adam started from the minibatch noise alone (module doc)."""
    from stability.nets.adaptive import adaptive_setup
    from stability.nets.noise_public import _pipeline
    from stability.nets.stationary_adam import stationary_preconditioner

    noise = noise_variance(net)
    state = noise_state(d, noise, folder / f"{name}_noise_state.pt")
    rules = adaptive_setup(net, "adam", {"beta1": 0.9}, "stationary", command="noise").rules(
        "adam", _pipeline(net, None, 0)
    )
    out = []
    for lr in lrs:
        start = time.perf_counter()
        r = st.net_noise(net, "adam", tau=0, lr=lr, steps=STEPS, beta1=0.9, batch=BATCH,
                         k=net.dim, precond_from="stationary")  # fmt: skip
        v_hat = stationary_preconditioner(
            net, rules, lr=lr, batch=BATCH, k=net.dim, uniform=True,
            beta2=0.999, eps=1e-8,
        ).exp_avg_sq  # fmt: skip
        spread: dict = {}
        mean, se, drift = real_floor(d, state, lr, runs=STATIONARY_RUNS,
                                     steps=STATIONARY_STEPS, tail=STATIONARY_STEPS // 2,
                                     reference=v_hat, spread=spread)  # fmt: skip
        out.append({
            "kind": "stationary", "network": name, "n_params": net.dim, "tau": 0, "lr": lr,
            "floor": [r.floor, mean, se], "ratio": mean / r.floor, "v_final_over_predicted": drift,
            "v_range": spread["v_range"],
            "wander": spread["distance"] / r.protocol["quadratic_radius"],
            "predicted_v_over_noise": float(torch.median(v_hat / noise)),
            "iterations": r.preconditioner["stationary"]["iterations"],
            "seconds": time.perf_counter() - start,
        })  # fmt: skip
        print(json.dumps(out[-1]), flush=True)
    return out


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
    lrs = [row["lr"] for row in out if row["kind"] == "real"]
    return out + stationary_rows(name, d, net, lrs, folder)


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
    lines += [
        "",
        f"**The stationary preconditioner against real `torch.optim.Adam`** (τ = 0, "
        f"{STATIONARY_RUNS} runs of {STATIONARY_STEPS:,} steps started from the minibatch noise "
        "alone, v̂ = p·Var(∇ℓ_i(w*)), m = 0, w*; the same step sizes as above; floor: predicted / "
        f"real ± se over the last {STATIONARY_STEPS // 2:,} steps; v̂ ratios: medians over "
        "coordinates):",
        "",
        "| network | lr | floor | real / predicted | runs' final v̂ / the predicted (min … max "
        "over coordinates) | the predicted v̂ / p·Var(∇ℓ_i(w*)) | wander | iterations | s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in rows if r["kind"] == "stationary"):
        lines.append(
            f"| {r['network']} ({r['n_params']}) | {f(r['lr'])} | {f(r['floor'][0])} / "
            f"{f(r['floor'][1])} ± {f(r['floor'][2], 2)} | {r['ratio']:.3f} | "
            f"{r['v_final_over_predicted']:.3f} ({r['v_range'][0]:.2f} … {r['v_range'][1]:.2f})"
            f" | {r['predicted_v_over_noise']:.2f} | {r['wander']:.2f} | {r['iterations']} | "
            f"{r['seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    import tempfile

    from stability.files import atomic_write, write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from-json", action="store_true", help="rewrite the page from the JSON")
    ap.add_argument(
        "--stationary-only",
        action="store_true",
        help="rerun the stationary rows alone, at the step sizes of the stored real rows",
    )
    ap.add_argument("--out", default=str(ROOT / "figures" / "net_noise_adam.json"))
    ap.add_argument("--md", default=str(ROOT / "docs" / "generated" / "net_noise_adam.md"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.from_json:
        rows = json.loads(Path(args.out).read_text())["rows"]
    elif args.stationary_only:
        rows = [r for r in json.loads(Path(args.out).read_text())["rows"]
                if r["kind"] != "stationary"]  # fmt: skip
        with tempfile.TemporaryDirectory() as folder:
            for name in NETWORKS:
                d = NETWORKS[name]()
                lrs = [r["lr"] for r in rows if r["kind"] == "real" and r["network"] == name]
                net = problem_from_dict(d, stages=1)
                rows += stationary_rows(name, d, net, lrs, Path(folder))
                write_json(args.out, {"rows": rows})
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
