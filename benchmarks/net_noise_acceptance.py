"""Issue 23 acceptance: ``net noise`` on small networks near a minimum, against independent oracles.

Four networks not in the repository, fitted here (L-BFGS, seeded, one thread): ``teacher31``
(3 → 6 → 1 tanh, MSE, 31 parameters, n = 512, targets from a teacher of the same architecture
plus noise 0.1; Hessian eigenvalues 1.5e-7 … 25), ``tiny9`` (the tests' 2 → 2 → 1 tanh network,
9 parameters, n = 60), ``diabetes37`` (sklearn's diabetes, 10 → 3 → 1 tanh, MSE, 37 parameters,
n = 442) and ``iris27`` (sklearn's iris, sepal length and width, 2 → 4 → 3 ReLU, cross-entropy,
27 parameters, n = 150).  With k = p (the whole parameter space):

* ``kronecker`` — ``ms_max_lr`` against the dense second-moment operator E[A(H_B) ⊗ A(H_B)] on
  symmetric matrices from per-sample ``torch.func.hessian`` (hand-written delayed-SGD state
  matrices, τ ∈ {0, 1} and {0, 2}): the dense operator must be stable at ms·(1 − 1e-6) and
  unstable at ms·(1 + 1e-6);
* ``measured`` — ``--measure --runs 1024`` at lr = 0.25 × ms_max_lr, B ∈ {16, 32}: sgd at
  τ ∈ {0, 2}, momentum 0.9 at τ = 2 and PipeMare P = 4 (teacher31): ``as_max_lr`` inside
  ``measured.as_bracket`` widened by 5 %, ``expected_loss`` at t = 10², 10³ and ``floor``
  within max(5 %, 3 se) of the measured means, how far both sets of runs wandered;
* ``almost_sure`` — the same ``--measure`` on the sklearn networks with 2 loss runs (only the
  almost-sure bracket is checked);
* ``cause`` — why runs that carry the offsets ξ_B cannot measure the almost-sure threshold
  (`stability.nets.minibatch_lyapunov`): 64 training runs of 4000 steps from the start at
  0.25 × ms_max_lr, ms_max_lr and 0.97 × as_max_lr, their largest ‖w − w*‖ / r₁₀ and the
  fraction of runs that went beyond r₁₀;
* ``shipped`` — ``subspace_change`` and wall time of ``net noise`` (no --measure) on the shipped
  examples at the default k (sgd, B = 32), and the MLP at k = 20.

Results are appended to ``figures/net_noise_acceptance.json`` as each case finishes (resumable;
the most informative cases first) and printed as a table.  ``--quick``: 256 runs, teacher31
only, B = 16, into figures/quick/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import stability as st  # noqa: E402
from stability.files import write_json  # noqa: E402
from stability.nets.problem import load_problem, problem_from_dict  # noqa: E402
from stability.pipeline import pipeline  # noqa: E402

SHIPPED = ("examples/diabetes_linear.py:problem", "examples/digits_mlp.py:problem",
           "examples/digits_cnn.py:problem")  # fmt: skip


NETWORKS = {  # name: (hidden, activation, stages)
    "teacher31": (6, torch.nn.Tanh, 4),
    "tiny9": (2, torch.nn.Tanh, 2),
    "diabetes37": (3, torch.nn.Tanh, 2),
    "iris27": (4, torch.nn.ReLU, 2),
}


def _data(name: str):
    """(X, y, loss): synthetic for teacher31/tiny9, sklearn's diabetes (regression, features
    and target standardised) and iris (sepal length and width, standardised: 3 classes that
    overlap, so the cross-entropy minimum is finite)."""
    if name in ("diabetes37", "iris27"):
        from sklearn import datasets

        if name == "diabetes37":
            X, y = datasets.load_diabetes(return_X_y=True)
            y = ((y - y.mean()) / y.std())[:, None]
        else:
            X, y = datasets.load_iris(return_X_y=True)
            X = X[:, :2]
        X = torch.tensor((X - X.mean(0)) / X.std(0), dtype=torch.float64)
        if name == "iris27":
            return X, torch.tensor(y, dtype=torch.long), torch.nn.CrossEntropyLoss()
        return X, torch.tensor(y, dtype=torch.float64), torch.nn.MSELoss()
    inputs, n, noise = {"teacher31": (3, 512, 0.1), "tiny9": (2, 60, 0.2)}[name]
    g = torch.Generator().manual_seed(1 if name == "teacher31" else 0)
    X = torch.randn(n, inputs, generator=g, dtype=torch.float64)
    if name == "teacher31":  # a teacher of the same architecture, plus noise
        torch.manual_seed(1)
        with torch.no_grad():
            y = _mlp(3, 6, 1, torch.nn.Tanh)(X) + noise * torch.randn(
                n, 1, generator=g, dtype=torch.float64
            )
    else:  # tests/test_nets_noise.py's network
        w = torch.tensor([[1.0], [-0.7]], dtype=torch.float64)
        y = torch.sin(X @ w) + noise * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return X, y, torch.nn.MSELoss()


def _mlp(inputs: int, hidden: int, outputs: int, activation):
    return torch.nn.Sequential(
        torch.nn.Linear(inputs, hidden), activation(), torch.nn.Linear(hidden, outputs)
    ).double()


def network(name: str):
    """The networks (module doc), fitted by L-BFGS from seed 0 (one thread)."""
    hidden, activation, stages = NETWORKS[name]
    X, y, loss = _data(name)
    outputs = 3 if name == "iris27" else 1
    torch.manual_seed(0)
    model = _mlp(X.shape[1], hidden, outputs, activation)
    tight = name != "tiny9"
    opt = torch.optim.LBFGS(model.parameters(), max_iter=3000 if tight else 2000,
                            tolerance_grad=1e-14 if tight else 1e-13,
                            tolerance_change=1e-18 if tight else 1e-16,
                            history_size=50, line_search_fn="strong_wolfe")  # fmt: skip

    def closure():
        opt.zero_grad()
        value = loss(model(X), y)
        value.backward()
        return value

    opt.step(closure)
    return problem_from_dict({"model": model, "loss": loss, "inputs": X, "targets": y},
                             stages=stages, source=name)  # fmt: skip


def dense_ms_radius(net, batch, lr, tau):
    """ρ of E[A(H_B) ⊗ A(H_B)] on symmetric matrices (delayed SGD, dense per-sample Hessians)."""
    w = net.w_star.detach()
    Hs = [torch.func.hessian(lambda u, i=i: net.loss(u, torch.tensor([i])))(w).numpy()
          for i in range(net.samples)]  # fmt: skip
    n, p = net.samples, net.dim
    s = tau + 1
    q = (n - batch) / (batch * (n - 1))

    def A(H):
        out = np.zeros((p * s, p * s))
        out[:p, :p] = np.eye(p)
        out[:p, tau * p : (tau + 1) * p] -= lr * H
        for lag in range(1, s):
            out[lag * p : (lag + 1) * p, (lag - 1) * p : lag * p] = np.eye(p)
        return out

    N = p * s
    a, b = np.triu_indices(N)
    weight = np.where(a == b, 1.0, np.sqrt(0.5))

    def restrict(K):  # Eᵀ(K)E on the orthonormal symmetric basis, K = Σ c·(X ⊗ X)
        cols = K[:, a * N + b] + np.where(a == b, 0.0, 1.0) * K[:, b * N + a]
        cols *= weight
        rows = cols[a * N + b] + np.where(a == b, 0.0, 1.0)[:, None] * cols[b * N + a]
        return rows * weight[:, None]

    As = [A(H) for H in Hs]
    Abar = sum(As) / n
    mix = (1 - q) * np.kron(Abar, Abar) + q * sum(np.kron(x, x) for x in As) / n
    return float(np.max(np.abs(np.linalg.eigvals(restrict(mix)))))


def kronecker_case(net, tau, batch=16):
    r = st.net_noise(net, "sgd", batch=batch, k=net.dim, tau=tau, steps=10)
    below = dense_ms_radius(net, batch, r.ms_max_lr * (1 - 1e-6), tau)
    above = dense_ms_radius(net, batch, r.ms_max_lr * (1 + 1e-6), tau)
    return {"ms_max_lr": r.ms_max_lr, "dense_below": below, "dense_above": above,
            "holds": below < 1 < above}  # fmt: skip


def within(pred, mean, se, tol=0.05):
    return (
        pred is not None
        and mean is not None
        and abs(pred - mean) <= max(tol * abs(mean), 3 * (se or 0))
    )


def measured_case(net, rule, params, batch, runs, pipe=None):
    started = time.perf_counter()
    r = st.net_noise(net, rule, batch=batch, k=net.dim, pipeline=pipe, at=[0, 10, 100, 1000],
                     measure=True, runs=runs, **params)  # fmt: skip
    m = r.measured
    rows = []
    for (t, pred), (_, mean, se) in zip(r.expected_loss, m["expected_loss"], strict=True):
        if t in (100, 1000):
            rows.append({"t": t, "predicted": pred, "measured": mean, "se": se,
                         "holds": within(pred, mean, se)})  # fmt: skip
    lo, hi = m["as_bracket"] or (None, None)
    inside = lo is not None and hi is not None and 0.95 * lo <= r.as_max_lr <= 1.05 * hi
    return {
        "ms_max_lr": r.ms_max_lr, "full_batch_max_lr": r.full_batch_max_lr, "lr": r.lr,
        "as_max_lr": r.as_max_lr, "as_bracket": r.as_bracket, "measured_as_bracket": [lo, hi],
        "as_holds": inside, "times": rows,
        "floor": {"predicted": r.floor, "measured": m["floor"][0], "se": m["floor"][1],
                  "holds": within(r.floor, m["floor"][0], m["floor"][1])},
        "wander_ratio": r.protocol.get("runs_max_distance_ratio"),
        "as_wander_ratio": r.protocol.get("as_max_distance_ratio"),
        "as_exponents": m["as_exponents"], "warnings": r.warnings,
        "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip


def almost_sure_case(net, rule, params, batch):
    """`measured_case` without the loss runs' statistics (2 runs of 10 steps)."""
    started = time.perf_counter()
    r = st.net_noise(net, rule, batch=batch, k=net.dim, steps=10, measure=True, runs=2,
                     **params)  # fmt: skip
    lo, hi = r.measured["as_bracket"] or (None, None)
    return {
        "ms_max_lr": r.ms_max_lr, "full_batch_max_lr": r.full_batch_max_lr,
        "as_max_lr": r.as_max_lr, "as_bracket": r.as_bracket, "measured_as_bracket": [lo, hi],
        "as_holds": lo is not None and hi is not None and 0.95 * lo <= r.as_max_lr <= 1.05 * hi,
        "as_wander_ratio": r.protocol.get("as_max_distance_ratio"),
        "as_exponents": r.measured["as_exponents"], "dropped": r.dropped,
        "warnings": r.warnings, "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip


def cause_case(net, source, runs=64, steps=4000):
    """Training runs (offsets ξ_B included) at 0.25·ms, ms and 0.97·as of case ``source``:
    their largest ‖w − w*‖ / r₁₀ and the fraction beyond r₁₀ (module doc)."""
    from stability.nets.curvature import curvature
    from stability.nets.lockstep import RunSetup
    from stability.nets.minibatch_runs import lockstep, quadratic_radius, start_weights
    from stability.nets.noise_public import _pipeline
    from stability.nets.prediction import net_rules

    v1 = curvature(net, 1, stage_blocks=False, negative_k=0).eigenvectors[:, 0]
    r10 = quadratic_radius(net, v1)
    rules = net_rules("sgd", {}, _pipeline(net, None, 0))
    w0 = start_weights(net, v1, 1e-3)
    out = {"source": source["key"], "r10": r10, "runs": runs, "steps": steps, "rows": []}
    for name, lr in (("0.25 ms", 0.25 * source["ms_max_lr"]), ("ms", source["ms_max_lr"]),
                     ("0.97 as", 0.97 * source["as_max_lr"])):  # fmt: skip
        res = lockstep(RunSetup(net, rules, 16), np.full(runs, lr),
                       torch.broadcast_to(w0, (runs, net.dim)), np.arange(runs), steps=steps,
                       divergence=1e12)  # fmt: skip
        ratio = np.where(res.blown, np.inf, res.wander / r10)
        out["rows"].append({"lr": name, "value": lr, "max_ratio": float(ratio.max()),
                            "median_ratio": float(np.median(ratio)),
                            "beyond_r10": float(np.mean(ratio > 1))})  # fmt: skip
    return out


def shipped_case(spec, k=None):
    net = load_problem(spec)
    started, cpu = time.perf_counter(), time.process_time()
    r = st.net_noise(net, "sgd", batch=32, **({} if k is None else {"k": k}))
    return {"n_params": net.dim, "k": r.k, "subspace_change": r.subspace_change,
            "ms_max_lr": r.ms_max_lr, "floor": r.floor,
            "seconds": round(time.perf_counter() - started, 1),
            "cpu_seconds": round(time.process_time() - cpu, 1)}  # fmt: skip


def _num(x, digits=4):
    return "—" if x is None else f"{x:.{digits}g}"


def crossing(rows) -> float | None:
    """Where the measured mean exponent first changes sign (linear interpolation between the
    neighbouring step sizes of ``as_exponents``)."""
    for (a, ga, *_), (b, gb, *_) in zip(rows, rows[1:], strict=False):
        if ga < 0 <= gb and np.isfinite(gb):
            return a + (b - a) * (-ga) / (gb - ga)
    return None


def write_doc(done: dict, target: Path) -> None:
    """docs/net_noise_acceptance.md from the results (the numbers the docs quote)."""
    from stability.files import atomic_write

    lines = ["<!-- generated by benchmarks/net_noise_acceptance.py; do not edit -->", "",
             "**ms_max_lr against the dense Kronecker operator** (k = p; ρ of the dense operator "
             "at ms·(1 ∓ 1e-6)):", "", "| case | ms_max_lr | ρ below | ρ above | holds |",
             "|---|---|---|---|---|"]  # fmt: skip
    for key, r in done.items():
        if r["kind"] == "kronecker":
            lines.append(f"| {key} | {_num(r['ms_max_lr'], 8)} | {r['dense_below']:.12f} | "
                         f"{r['dense_above']:.12f} | {r['holds']} |")  # fmt: skip
    lines += ["", "**Measured runs** (k = p, lr = 0.25 × ms_max_lr, 1,024 runs; loss and floor: "
              "predicted / measured ± se; wander: max ‖w − w*‖ / r₁₀ of the loss runs):", "",
              "| case | E f − f* at 10² | at 10³ | floor | wander | s |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for key, r in done.items():
        if r["kind"] != "measured":
            continue
        cells = [f"{_num(t['predicted'])} / {_num(t['measured'])} ± {_num(t['se'], 2)}"
                 + ("" if t["holds"] else " ✗") for t in r["times"]]  # fmt: skip
        f = r["floor"]
        cells.append(f"{_num(f['predicted'])} / {_num(f['measured'])} ± {_num(f['se'], 2)}"
                     + ("" if f["holds"] else " ✗"))  # fmt: skip
        lines.append(f"| {key} | {' | '.join(cells)} | {_num(r['wander_ratio'], 3)} | "
                     f"{r['seconds']} |")  # fmt: skip
    lines += ["", "**The almost-sure threshold** (k = p; predicted `as_max_lr` with its ±2 se "
              "`as_bracket`, against `measured.as_bracket` from 32 offset-free runs per step size "
              "(`stability.nets.minibatch_lyapunov`) widened by 5 %; position: as_max_lr / the "
              "bracket's ends; measured γ̄ = 0: where the runs' mean exponent changes sign; "
              "wander: max ‖w − w*‖ / r₁₀ of those runs):", "",
              "| case | ms_max_lr | as_max_lr | predicted bracket | measured bracket | position "
              "| holds | measured γ̄ = 0 | wander |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for key, r in done.items():
        if r["kind"] not in ("measured", "almost_sure"):
            continue
        lo, hi = r["measured_as_bracket"]
        a, (plo, phi) = r["as_max_lr"], r["as_bracket"]
        where = "—" if lo is None or hi is None else f"{a / lo:.3f}, {a / hi:.3f}"
        lines.append(f"| {key} | {_num(r['ms_max_lr'])} | {_num(a)} | [{_num(plo)}, {_num(phi)}] "
                     f"| [{_num(lo)}, {_num(hi)}] | {where} | {r['as_holds']} | "
                     f"{_num(crossing(r.get('as_exponents', [])))} | "
                     f"{_num(r.get('as_wander_ratio'), 2)} |")  # fmt: skip
    for key, r in done.items():
        if r["kind"] != "cause":
            continue
        lines += ["", f"**Why training runs cannot measure it** ({key}: {r['runs']} runs of "
                  f"{r['steps']} steps with the offsets ξ_B, sgd, B = 16, from the start; "
                  f"r₁₀ = {_num(r['r10'])}):", "",
                  "| lr | value | max ‖w − w*‖ / r₁₀ | median | runs beyond r₁₀ |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for row in r["rows"]:
            lines.append(f"| {row['lr']} | {_num(row['value'])} | {_num(row['max_ratio'], 3)} | "
                         f"{_num(row['median_ratio'], 3)} | {row['beyond_r10']:.0%} |")  # fmt: skip
    lines += ["", "**Shipped examples** (sgd, B = 32, default k = 10, no --measure):", "",
              "| problem | p | subspace_change | ms_max_lr | floor | wall s | CPU s |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for key, r in done.items():
        if r["kind"] == "shipped":
            row = (key, r["n_params"], f"{r['subspace_change']:.2%}", _num(r["ms_max_lr"]),
                   _num(r["floor"]), r["seconds"], r.get("cpu_seconds", "—"))  # fmt: skip
            lines.append("| " + " | ".join(str(x) for x in row) + " |")
    atomic_write(target, lambda fh: fh.write("\n".join(lines) + "\n"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("kronecker", "measured", "almost_sure", "cause", "shipped"),
                    default=None)  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default figures/)")
    ap.add_argument("--keys", nargs="*", default=None, help="only these cases (by key)")
    ap.add_argument("--doc-only", action="store_true", help="only rewrite the doc from the JSON")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = (
        args.out or ROOT / "figures" / ("quick" if args.quick else "") / "net_noise_acceptance.json"
    )
    done = json.loads(out.read_text()) if out.exists() else {}
    runs = 256 if args.quick else 1024
    kron = []
    for name, taus in (("teacher31", (0, 1)), ("tiny9", (0, 2))):
        for tau in taus:
            kron.append(("kronecker", f"{name} sgd tau={tau}", name,
                         lambda n, t=tau: kronecker_case(n, t)))  # fmt: skip
    rules = {"sgd tau=0": ("sgd", {"tau": 0}), "sgd tau=2": ("sgd", {"tau": 2}),
             "momentum tau=2": ("momentum", {"momentum": 0.9, "tau": 2})}  # fmt: skip

    def measured(name, rule, batch):
        r, params = rules[rule]
        return ("measured", f"{name} {rule} B={batch}", name,
                lambda n: measured_case(n, r, params, batch, runs))  # fmt: skip

    pipe4 = pipeline("pipemare", 4)
    pipemare = ("measured", "teacher31 sgd pipemare P=4 B=16", "teacher31",
                lambda n: measured_case(n, "sgd", {}, 16, runs, pipe4))  # fmt: skip
    source = "teacher31 sgd tau=0 B=16"
    cause = ("cause", "teacher31 offsets in the runs", "teacher31",
             lambda n: cause_case(n, {"key": source, **done[source]}))  # fmt: skip
    if args.quick:
        cases = [*kron, measured("teacher31", "sgd tau=0", 16), pipemare]
    else:  # the most informative first: a run may be cut short
        cases = [measured("teacher31", "sgd tau=2", 32), pipemare,
                 measured("teacher31", "sgd tau=0", 16), cause,
                 measured("teacher31", "momentum tau=2", 16),
                 measured("tiny9", "sgd tau=0", 16)]  # fmt: skip
        for name, rule, batch in (("diabetes37", "sgd tau=0", 16), ("iris27", "sgd tau=2", 32),
                                  ("diabetes37", "momentum tau=2", 32),
                                  ("iris27", "momentum tau=2", 16), ("diabetes37", "sgd tau=2", 16),
                                  ("iris27", "sgd tau=0", 32)):  # fmt: skip
            r, params = rules[rule]
            cases.append(("almost_sure", f"{name} {rule} B={batch}", name,
                          lambda n, r=r, p=params, b=batch:
                          almost_sure_case(n, r, p, b)))  # fmt: skip
        for batch in (16, 32):
            for name in ("teacher31", "tiny9"):
                cases += [measured(name, rule, batch) for rule in rules]
        cases += kron
        cases += [("shipped", spec, None, lambda n, s=spec: shipped_case(s)) for spec in SHIPPED]
        cases.append(
            ("shipped", f"{SHIPPED[1]} k=20", None, lambda n: shipped_case(SHIPPED[1], 20))
        )
    seen, unique = set(), []
    for case in cases:  # a case listed twice runs once
        if case[1] not in seen:
            seen.add(case[1])
            unique.append(case)
    cases = unique
    built = {}
    for kind, key, name, run in [] if args.doc_only else cases:
        if (args.only and kind != args.only) or key in done or (args.keys and key not in args.keys):
            continue
        if name is not None and name not in built:
            built[name] = network(name)
        print(f"{kind:10} {key} ...", flush=True)
        done[key] = {"kind": kind, **run(built.get(name))}
        write_json(out, done)
    for key, row in done.items():
        print(f"{key:40} {json.dumps({k: v for k, v in row.items() if k != 'kind'})[:400]}")
    if not args.quick:
        write_doc(done, ROOT / "docs" / "net_noise_acceptance.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
