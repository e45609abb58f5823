"""Network curvature side by side with curvlinops and PyHessian, each as a whole process.

Table 1: ``stability net curvature --problem P --k 5 --json`` (default flags) against

* ``curvlinops``: ``HessianLinearOperator(model, loss, params, [(inputs, targets)])`` and scipy's
  ``eigsh(k=5, which="LA", tol=1e-6)`` (benchmarks/baseline_eigs.py);
* ``PyHessian``: ``hessian(...).eigenvalues(top_n=5)``, power iteration with deflation to a
  relative change of 1e-6 per eigenvalue (at most 1000 iterations each; ``--pyhessian`` on the
  transformer, where it takes minutes),

each process timed whole — start Python, import torch, build the problem, solve — with one
thread (``OMP_NUM_THREADS=1``), in the same run, interleaved.  Problems: the shipped digits CNN
(float64) and benchmarks/curvature_transformer.py (a ≈1.4·10⁵-parameter float32 causal
transformer from ``nn.TransformerEncoderLayer``, one batch of 256 sequences of 32 tokens; the
stand-in for issue 24's held-out model).  Columns: wall and CPU seconds, ratios
(toolkit / baseline: ≤ 1.5 is issue 24's bar), and the largest relative difference of the top 5
from the toolkit's.

Table 0 (in this process, float64): one Hessian-vector product on a LayerNorm + residual block
(218 parameters, the LayerNorm after a Linear) against central differences of the gradient, by
the toolkit (`NetProblem.hvp`), curvlinops' ``HessianLinearOperator``, ``torch.func.hessian``
and ``torch.autograd.functional.hessian`` — the products are only as good as torch's batching
rules: in torch 2.13 the batched (vmap) double backward of ``layer_norm`` is wrong when its
input and its weight both depend on the parameters, and curvlinops vmaps its products.

Table 2: what float32 costs: ``net curvature --k 5 --dtype float32`` against ``--dtype float64``
on the same problems (the float64 values the reference; relative differences of the top 5).

Table 3 (not with ``--quick``): the shipped 1.07·10⁶-parameter examples/tiny_transformer.py
(float32, 8 stages, a DataLoader of 16 sequences in batches of 8): ``net curvature --k 5`` (a
process, two threads; issue 24's bar: ≤ 120 s on two cores) and ``st.net_max_lr`` at rank 5
(PipeMare schedule over the 8 stages, momentum 0.9 and lwp+sc; without the negative-eigenvalue
search).

Run: ``.venv/bin/python benchmarks/bench_curvature.py [--quick] [--pyhessian]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "benchmarks"
PROBLEMS = [
    ("digits CNN", "examples/digits_cnn.py:problem"),
    ("transformer", "benchmarks/curvature_transformer.py:problem"),
]


def run(argv: list[str], threads: int = 1) -> tuple[dict, float, float]:
    """(JSON output, wall seconds, CPU seconds) of one whole process."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), wall, cpu


def toolkit(spec: str, *extra: str, command: str = "curvature", threads: int = 1):
    argv = [sys.executable, "-m", "stability.cli.main", "net", command, "--problem", spec,
            *extra, "--json"]  # fmt: skip
    return run(argv, threads)


def baseline(method: str, spec: str, k: int):
    return run([sys.executable, str(HERE / "baseline_eigs.py"), method, spec, "--k", str(k)])


def side_by_side(k: int, with_pyhessian: bool) -> None:
    print(f"{'problem':<13}{'method':<12}{'wall s':>8}{'CPU s':>8}{'wall ratio':>12}"
          f"{'CPU ratio':>11}{'max rel diff':>14}  top eigenvalue")  # fmt: skip
    for name, spec in PROBLEMS:
        ours, wall, cpu = toolkit(spec, "--k", str(k))
        top = np.array(ours["eigenvalues"])
        rows = [("toolkit", wall, cpu, top, f"{ours['hvps']} HVPs")]
        methods = ["curvlinops"]
        if with_pyhessian or name != "transformer":
            methods.append("pyhessian")
        for method in methods:
            out, b_wall, b_cpu = baseline(method, spec, k)
            rows.append((method, b_wall, b_cpu, np.array(out["eigenvalues"]), ""))
        for method, w, c, values, note in rows:
            diff = float(np.max(np.abs(values - top) / np.abs(top)))
            ratio = "" if method == "toolkit" else f"{wall / w:>12.2f}{cpu / c:>11.2f}"
            ratio = ratio or f"{'':>12}{'':>11}"
            print(f"{name:<13}{method:<12}{w:>8.1f}{c:>8.1f}{ratio}{diff:>14.1e}  "
                  f"{values[0]:.6g} {note}")  # fmt: skip
    print(
        "ratios: toolkit / baseline (each a whole process, one thread); max rel diff: the "
        "top 5 against the toolkit's"
    )


def products_against_differences() -> None:
    import torch
    from curvlinops import HessianLinearOperator

    from stability.nets.problem import problem_from_dict

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp, self.ln = torch.nn.Linear(4, 8), torch.nn.LayerNorm(8)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8)
            )
            self.out = torch.nn.Linear(8, 2)

        def forward(self, x):
            a = self.inp(x)
            return self.out(a + self.mlp(self.ln(a)))

    torch.manual_seed(0)
    x = torch.randn(160, 4, dtype=torch.float64)
    y = torch.sin(x[:, :2]) + 0.5 * x[:, 2:4]
    loss = torch.nn.MSELoss()
    net = problem_from_dict({"model": Block().double(), "loss": loss, "inputs": x, "targets": y})
    w, v = net.w_star, torch.randn(net.dim, dtype=torch.float64)
    eps = 1e-5
    fd = (net.gradient(w + eps * v) - net.gradient(w - eps * v)) / (2 * eps)
    params = list(net.model.parameters())  # one stage: the model's order, as net.names
    curv = HessianLinearOperator(net.model, loss, params, [(x, y)], check_deterministic=False)
    products = {
        "toolkit (torch.func jvp of grad)": net.hvp(w, v),
        "curvlinops HessianLinearOperator": torch.as_tensor(curv.to_scipy() @ v.numpy()),
        "torch.func.hessian": torch.func.hessian(net.loss)(w) @ v,
        "torch.autograd.functional.hessian": torch.autograd.functional.hessian(net.loss, w) @ v,
    }
    print(f"LayerNorm + residual block, {net.dim} parameters, float64: one product H·v")
    print(f"{'method':<36}{'max |Hv − FD| / max |FD|':>26}")
    for name, hv in products.items():
        print(f"{name:<36}{float((hv - fd).abs().max() / fd.abs().max()):>26.1e}")
    print("(FD: central differences of the gradient, step 1e-5: error ~1e-9)")


def float32_cost(k: int) -> None:
    print(f"{'problem':<13}{'float64 s':>10}{'float32 s':>10}{'max rel diff of the top 5':>27}")
    for name, spec in PROBLEMS:
        runs = {}
        for dtype in ("float64", "float32"):
            out, wall, _ = toolkit(spec, "--k", str(k), "--dtype", dtype)
            runs[dtype] = (np.array(out["eigenvalues"]), wall)
        diff = float(np.max(np.abs(runs["float32"][0] / runs["float64"][0] - 1)))
        print(f"{name:<13}{runs['float64'][1]:>10.1f}{runs['float32'][1]:>10.1f}{diff:>27.1e}")


def shipped_transformer(k: int) -> None:
    spec = "examples/tiny_transformer.py:problem"
    out, wall, cpu = toolkit(spec, "--k", str(k), threads=2)
    print(f"tiny_transformer ({out['n_params']} parameters, {len(out['stage_sizes'])} stages), "
          f"two threads:")  # fmt: skip
    print(f"  net curvature --k {k}: {wall:.1f} s wall ({cpu:.1f} s CPU), {out['hvps']} HVPs, "
          f"top {k}: {', '.join(f'{v:.5g}' for v in out['eigenvalues'])}")  # fmt: skip
    import torch

    import stability as st
    from stability.nets.problem import load_problem

    torch.set_num_threads(2)
    net = load_problem(spec)
    for rule in ("momentum", "lwp+sc"):
        start = time.perf_counter()
        res = st.net_max_lr(net, rule, schedule="pipemare", k=k, negative=False, momentum=0.9)
        print(f"  st.net_max_lr({rule!r}, momentum=0.9, schedule='pipemare', k={k}; stage taus "
              f"{res.stage_taus}): max_lr {res.max_lr:.5g}, scalar bound "
              f"{res.scalar_bound:.5g}, critical stage {res.critical_stage}; "
              f"{time.perf_counter() - start:.1f} s wall")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tables 1 and 2 only")
    ap.add_argument("--pyhessian", action="store_true", help="PyHessian on the transformer too")
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    products_against_differences()
    print()
    side_by_side(args.k, args.pyhessian)
    print()
    float32_cost(args.k)
    if not args.quick:
        print()
        shipped_transformer(args.k)


if __name__ == "__main__":
    main()
