"""The baselines of benchmarks/bench_curvature.py, one process each: top-k Hessian eigenvalues
of a problem file's model by curvlinops or PyHessian, as their users would call them.

* ``curvlinops``: ``HessianLinearOperator(model, loss, params, [(inputs, targets)])`` and
  scipy's ``eigsh(k, which="LA", tol=1e-6)`` on its ``to_scipy()`` operator;
* ``pyhessian``: ``hessian(model, loss, data=(inputs, targets)).eigenvalues(top_n=k)``
  (power iteration with deflation, ``tol`` relative change between iterations).

Both inside ``sdpa_kernel(SDPBackend.MATH)`` (the fused attention kernels have no second
derivatives).  Prints one JSON line: eigenvalues (descending) and the solver's seconds.

Run: ``python benchmarks/baseline_eigs.py curvlinops FILE.py:FUNC [--k 5]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time

import numpy as np
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def load(spec: str) -> dict:
    path, _, func = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location("baseline_problem", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, func)()


def curvlinops_top(found: dict, k: int, tol: float) -> np.ndarray:
    from curvlinops import HessianLinearOperator
    from scipy.sparse.linalg import eigsh

    model = found["model"].eval()
    params = [p for p in model.parameters() if p.requires_grad]
    data = [(found["inputs"], found["targets"])]
    H = HessianLinearOperator(model, found["loss"], params, data).to_scipy()
    return np.sort(eigsh(H, k=k, which="LA", tol=tol)[0])[::-1]


def pyhessian_top(found: dict, k: int, tol: float) -> np.ndarray:
    from pyhessian import hessian

    model = found["model"].eval()
    h = hessian(model, found["loss"], data=(found["inputs"], found["targets"]), cuda=False)
    values, _ = h.eigenvalues(maxIter=1000, tol=tol, top_n=k)
    return np.sort(np.array(values))[::-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("method", choices=("curvlinops", "pyhessian"))
    ap.add_argument("problem", metavar="FILE.py:FUNC")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--tol", type=float, default=1e-6)
    args = ap.parse_args()
    torch.manual_seed(0)
    found = load(args.problem)
    start = time.perf_counter()
    with sdpa_kernel(SDPBackend.MATH):
        top = (curvlinops_top if args.method == "curvlinops" else pyhessian_top)(
            found, args.k, args.tol
        )
    seconds = time.perf_counter() - start
    print(json.dumps({"eigenvalues": top.tolist(), "seconds": seconds}))


if __name__ == "__main__":
    main()
