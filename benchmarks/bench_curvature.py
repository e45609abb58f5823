"""Network curvature side by side with curvlinops and PyHessian, each as a whole process.

Table 1 (in this process, one thread): CPU seconds per Hessian-vector product, reverse-over-reverse
(``vjp`` of ``grad``, the toolkit's default) against forward-over-reverse (``jvp`` of ``grad``),
interleaved, on the shipped transformer, the stand-in and the CNN, and how far apart the two
products are.  (The torch 2.13 LayerNorm second-derivative bug that makes ``torch.func.hessian``
and curvlinops differ from us on LayerNorm models: benchmarks/bench_layernorm_hessian.py.)

Table 2 (not with ``--quick``): the shipped 1.07·10⁶-parameter examples/tiny_transformer.py
(float32, 8 stages, a DataLoader of its 16 analysis sequences in batches of 8), whole processes
with ``uptime``'s load beside each: ``net curvature --k 5`` on two threads (issue 24's bar:
≤ 120 s on two cores; ``OMP_NUM_THREADS=2``, the CLI's default ``OMP_WAIT_POLICY=PASSIVE``)
and on one; ``net max-lr --k 5`` under the PipeMare schedule over the 8 stages (P = 8) for
momentum 0.9, lwp+sc (momentum 0.9) and adam (β1 0.9) with ``--precond-from`` the training's
cached AdamW state (`tiny_transformer.adamw_state`), each on two threads (with ``--spinning``
also the curvature with spinning threads, ``OMP_WAIT_POLICY=ACTIVE``, for comparison: it holds
both cores for minutes).

Table 3: ``stability net curvature --problem P --k 5 --json`` (default flags) against

* ``curvlinops``: ``HessianLinearOperator(model, loss, params, [(inputs, targets)])`` and scipy's
  ``eigsh(k=5, which="LA", tol=1e-6)`` (benchmarks/baseline_eigs.py);
* ``PyHessian``: ``hessian(...).eigenvalues(top_n=5)``, power iteration with deflation to a
  relative change of 1e-6 per eigenvalue (at most 1000 iterations each; ``--pyhessian`` on the
  transformer, where it takes minutes),

each process timed whole — start Python, import torch, build the problem, solve — with one
thread (``OMP_NUM_THREADS=1``), in the same run, interleaved.  Problems: the shipped digits CNN
(float64) and the three ≈1.4·10⁵-parameter float32 causal transformers of
benchmarks/curvature_transformer.py, each one batch of 256 sequences (stand-ins for issue 24's
held-out model, built differently: ``transformer`` from ``nn.TransformerEncoderLayer``,
``post-norm`` around ``nn.MultiheadAttention``, ``RMSNorm`` with hand-written attention).
Which side is right where they differ: benchmarks/bench_curvature_reference.py.  Columns:
wall and CPU seconds, ratios
(toolkit / baseline: ≤ 1.5 is issue 24's bar), and the largest relative difference of the top 5
from the toolkit's.

Table 4: what float32 costs: ``net curvature --k 5 --dtype float32`` against ``--dtype float64``
on the CNN and the first stand-in (the float64 values the reference; relative differences of
the top 5).

Run: ``.venv/bin/python benchmarks/bench_curvature.py [--quick] [--spinning] [--pyhessian]``.
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
    ("post-norm", "benchmarks/curvature_transformer.py:problem_postnorm"),
    ("RMSNorm", "benchmarks/curvature_transformer.py:problem_rmsnorm"),
]
"""Table 3's problems (Table 4: the first two)."""


def run(argv: list[str], threads: int = 1, wait: str = "") -> tuple[dict, float, float]:
    """(JSON output, wall seconds, CPU seconds) of one whole process (``wait``: an
    ``OMP_WAIT_POLICY``, else the CLI's default)."""
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY" or not wait}
    base = {**base, "OMP_WAIT_POLICY": wait} if wait else base
    env = {**base, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
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


def toolkit(spec: str, *extra: str, command: str = "curvature", threads: int = 1, wait: str = ""):
    argv = [sys.executable, "-m", "stability.cli.main", "net", command, "--problem", spec,
            *extra, "--json"]  # fmt: skip
    return run(argv, threads, wait)


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
        if with_pyhessian or name == "digits CNN":
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


def hvp_modes(repeats: int = 4) -> None:
    import dataclasses

    import torch

    from stability.nets.problem import (
        FORWARD_OVER_REVERSE,
        REVERSE_OVER_REVERSE,
        load_problem,
    )

    torch.set_num_threads(1)
    print(f"{'problem':<18}{'params':>9}{'reverse-over-reverse s':>24}"
          f"{'forward-over-reverse s':>24}{'ratio':>7}{'rel diff':>10}")  # fmt: skip
    shipped = [("tiny_transformer", "examples/tiny_transformer.py:problem")]
    for name, spec in shipped + PROBLEMS:
        net = load_problem(spec)
        w = net.w_star
        v = torch.randn(net.dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        v = v.to(net.dtype)
        modes = (REVERSE_OVER_REVERSE, FORWARD_OVER_REVERSE)
        nets = {m: dataclasses.replace(net, hvp_mode=m) for m in modes}
        seconds = dict.fromkeys(modes, 0.0)
        out = {m: p.hvp(w, v) for m, p in nets.items()}  # warm-up (forward mode scripts once)
        for _ in range(repeats):
            for mode, p in nets.items():
                start = time.process_time()
                p.hvp(w, v)
                seconds[mode] += (time.process_time() - start) / repeats
        rr, fr = seconds[REVERSE_OVER_REVERSE], seconds[FORWARD_OVER_REVERSE]
        diff = float((out[modes[0]] - out[modes[1]]).norm() / out[modes[1]].norm())
        print(f"{name:<18}{net.dim:>9}{rr:>24.4f}{fr:>24.4f}{rr / fr:>7.2f}{diff:>10.1e}")
    print(f"(CPU seconds per product, mean of {repeats}, interleaved; ratio: reverse / forward)")


def float32_cost(k: int) -> None:
    print(f"{'problem':<13}{'float64 s':>10}{'float32 s':>10}{'max rel diff of the top 5':>27}")
    for name, spec in PROBLEMS[:2]:
        runs = {}
        for dtype in ("float64", "float32"):
            out, wall, _ = toolkit(spec, "--k", str(k), "--dtype", dtype)
            runs[dtype] = (np.array(out["eigenvalues"]), wall)
        diff = float(np.max(np.abs(runs["float32"][0] / runs["float64"][0] - 1)))
        print(f"{name:<13}{runs['float64'][1]:>10.1f}{runs['float32'][1]:>10.1f}{diff:>27.1e}")


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]


def shipped_transformer(k: int, spinning: bool) -> None:
    import importlib.util

    spec = "examples/tiny_transformer.py:problem"
    module_spec = importlib.util.spec_from_file_location(
        "tiny", ROOT / "examples/tiny_transformer.py"
    )
    tiny = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(tiny)
    state = tiny.adamw_state("large")  # trains (and caches) first if needed
    print(f"examples/tiny_transformer.py (large), net ... --k {k}, whole processes:")
    print(f"{'command':<58}{'threads':>8}{'load':>6}{'wall s':>8}{'CPU s':>8}{'HVPs':>6}  result")
    runs = [
        ("curvature", [], 2),
        ("curvature", [], 1),
        *([("curvature", ["ACTIVE"], 2)] if spinning else []),
        ("max-lr", ["--rule", "momentum", "--momentum", "0.9"], 2),
        ("max-lr", ["--rule", "lwp+sc", "--momentum", "0.9"], 2),
        ("max-lr", ["--rule", "adam", "--beta1", "0.9", "--precond-from", state], 2),
    ]
    for command, flags, threads in runs:
        load = _load()
        wait = flags.pop() if flags == ["ACTIVE"] else ""
        extra = [] if command == "curvature" else ["--schedule", "pipemare"]
        out, wall, cpu = toolkit(spec, "--k", str(k), *extra, *flags, command=command,
                                 threads=threads, wait=wait)  # fmt: skip
        shown = [f if f != state else "STATE" for f in flags] + (
            [f"(OMP_WAIT_POLICY={wait})"] if wait else []
        )
        label = f"net {command} {' '.join(shown + extra)}".strip()
        if command == "curvature":
            result = "top 5: " + ", ".join(f"{v:.5g}" for v in out["eigenvalues"])
            hvps = out["hvps"]
        else:
            result = (f"max_lr {out['max_lr']:.5g}, scalar bound {out['scalar_bound']:.5g}, "
                      f"critical stage {out['critical_stage']}")  # fmt: skip
            taus = out["stage_taus"]
            hvps = out.get("hvps", "")
        print(f"{label:<58}{threads:>8}{load:>6}{wall:>8.1f}{cpu:>8.1f}{hvps!s:>6}  {result}")
    print(f"PipeMare stage delays (stage 1 first): {taus}; stage sizes {out['stage_sizes']}")
    print("load: the 1-minute load average at the start (2 cores shared with other sessions)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="without table 2")
    ap.add_argument(
        "--spinning", action="store_true", help="table 2: also with OMP_WAIT_POLICY=ACTIVE"
    )
    ap.add_argument("--pyhessian", action="store_true", help="PyHessian on the transformer too")
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    hvp_modes()
    if not args.quick:
        print()
        shipped_transformer(args.k, args.spinning)
    print()
    side_by_side(args.k, args.pyhessian)
    print()
    float32_cost(args.k)


if __name__ == "__main__":
    main()
