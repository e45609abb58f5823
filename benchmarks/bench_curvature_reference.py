"""Which top-5 is right on the stand-in transformers: the toolkit's or curvlinops'.

benchmarks/bench_curvature.py finds the toolkit's and curvlinops' float32 top-5 Hessian
eigenvalues of the stand-in transformers apart by ~1e-4 relative.  Here, per stand-in
(benchmarks/curvature_transformer.py), at the model's float32 weights:

Table A, the top-k eigenvalues, each against the reference ``toolkit f64``:

* ``toolkit f64``: the same weights converted (exactly) to float64, float64 products,
  ARPACK ``tol=1e-10`` — the reference (V: its eigenvectors);
* ``toolkit f32``: `stability.nets.curvature.curvature` as ``net curvature --k 5`` runs it
  (float32 products, ``tol=1e-6``);
* ``curvlinops f32``: ``HessianLinearOperator`` and scipy's ``eigsh(k, which="LA", tol=1e-6)``,
  issue 24's baseline (benchmarks/baseline_eigs.py); on models with a LayerNorm, also the same
  with ``F.layer_norm`` written out in elementary operations (`layer_norm_written_out`: the
  same function, without the kernel whose vmapped second derivative torch 2.13 gets wrong,
  benchmarks/bench_layernorm_hessian.py).

Table B, four float64 Hessian operators applied to the reference's eigenvectors V (k products
each): the toolkit's (``vjp`` of ``grad``), classic autograd's double backward
(``torch.autograd.grad`` of ⟨∇f, v⟩ with ``create_graph``: no ``torch.func`` transform, the
independent reference), central differences of the gradient (no second derivative; error
~ε²) and curvlinops' (``jvp`` of ``jacrev`` under ``vmap``; with LayerNorms also with the
layer norm written out).  Columns: the
largest residual ‖H v_i − λ_i v_i‖ / λ₁ (0 to rounding if V, Λ are eigenpairs of that operator),
the largest |v_iᵀ H v_i / λ_i − 1| and the asymmetry max |v_iᵀ H v_j − v_jᵀ H v_i| / λ₁ (a
Hessian is symmetric).  An operator off by δ·λ₁ moves the eigenvalues by up to δ·λ₁.  The
differences hold only where the gradient is smooth: across a ReLU's kink (``problem_postnorm``'s
MLP, 256·16 tokens × 384 units, some within ε of 0) the gradient jumps and they are not the
Hessian; autograd's double backward is the independent reference there.

Run: ``python benchmarks/bench_curvature_reference.py [FILE.py:FUNC ...] [--k 5]`` (one thread;
default: the two stand-ins with a LayerNorm, `STAND_INS`).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from contextlib import contextmanager, nullcontext

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator, eigsh
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from stability.nets.curvature import HessianOperator, curvature
from stability.nets.problem import load_problem

STAND_INS = [
    f"benchmarks/curvature_transformer.py:{name}" for name in ("problem", "problem_postnorm")
]
"""The stand-ins with a LayerNorm, where the two differ (on ``problem_rmsnorm`` they agree to
~1e-8 in benchmarks/bench_curvature.py; pass it to see its tables)."""


def _found(spec: str, dtype: torch.dtype) -> dict:
    path, _, func = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location("reference_problem", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    torch.manual_seed(0)
    found = getattr(module, func)()
    found["model"] = found["model"].to(dtype).eval()
    for key in ("inputs", "targets"):
        if found[key].is_floating_point():
            found[key] = found[key].to(dtype)
    return found


def curvlinops_operator(spec: str, dtype: torch.dtype, names: tuple[str, ...]):
    """curvlinops' Hessian of the problem as a scipy operator (its parameters in ``names``'
    order, the toolkit's flat order)."""
    from curvlinops import HessianLinearOperator

    found = _found(spec, dtype)
    model = found["model"]
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if tuple(n for n, _ in named) != names:
        raise SystemExit("curvlinops' parameter order differs from the toolkit's")
    data = [(found["inputs"], found["targets"])]
    with sdpa_kernel(SDPBackend.MATH):  # it checks its products once when built
        return HessianLinearOperator(model, found["loss"], [p for _, p in named], data).to_scipy()


@contextmanager
def layer_norm_written_out():
    """``F.layer_norm`` (hence ``nn.LayerNorm``) replaced by its elementary operations (mean,
    biased variance, square root): the same function, without torch's layer-norm kernels."""
    original = F.layer_norm

    def layer_norm(x, shape, weight=None, bias=None, eps=1e-5):
        dims = tuple(range(-len(shape), 0))
        mu, var = x.mean(dims, keepdim=True), x.var(dims, correction=0, keepdim=True)
        y = (x - mu) / torch.sqrt(var + eps)
        y = y if weight is None else y * weight
        return y if bias is None else y + bias

    F.layer_norm = layer_norm
    try:
        yield
    finally:
        F.layer_norm = original


class Counted(LinearOperator):
    """A scipy operator that counts its products (``with`` the math attention kernel, and the
    layer norm written out if ``written_out``)."""

    def __init__(self, op, written_out: bool = False):
        super().__init__(dtype=np.dtype(op.dtype), shape=op.shape)
        self.op, self.calls, self.written_out = op, 0, written_out

    def _matvec(self, v):
        self.calls += 1
        with (
            sdpa_kernel(SDPBackend.MATH),
            layer_norm_written_out() if self.written_out else nullcontext(),
        ):
            return np.asarray(self.op.matvec(v), dtype=np.float64).reshape(-1)


class AutogradHessian(LinearOperator):
    """∇²f·v by classic autograd: the gradient of ⟨∇f(w), v⟩, ``create_graph=True``."""

    def __init__(self, problem):
        super().__init__(dtype=np.float64, shape=(problem.dim, problem.dim))
        self.problem = problem

    def _matvec(self, v):
        p = self.problem
        w = p.w_star.detach().clone().requires_grad_()
        v = p.vector(np.asarray(v).reshape(-1))
        total = torch.zeros(p.dim, dtype=p.dtype)
        for x, y, weight in p.data:
            (g,) = torch.autograd.grad(p.batch_loss(w, x, y), w, create_graph=True)
            total += weight * torch.autograd.grad(g @ v, w)[0]
        return total.double().numpy()


class GradientDifferences(LinearOperator):
    """∇²f·v ≈ (∇f(w + εv) − ∇f(w − εv)) / 2ε: no second derivative at all (error ~ε²)."""

    def __init__(self, problem, eps: float = 1e-4):
        super().__init__(dtype=np.float64, shape=(problem.dim, problem.dim))
        self.problem, self.eps = problem, eps

    def _matvec(self, v):
        p, w = self.problem, self.problem.w_star
        v = p.vector(np.asarray(v).reshape(-1))
        diff = p.gradient(w + self.eps * v) - p.gradient(w - self.eps * v)
        return (diff / (2 * self.eps)).double().numpy()


def one_problem(spec: str, k: int) -> None:
    f32 = load_problem(spec)
    f64 = load_problem(spec, dtype="float64")
    if not torch.equal(f64.w_star, f32.w_star.double()):
        raise SystemExit("the float64 weights are not the float32 ones")
    layer_norms = any(isinstance(m, torch.nn.LayerNorm) for m in f32.model.modules())
    print(f"{spec}: {f32.dim} parameters, {f32.samples} samples")
    rows = []

    def timed(name, fn):
        start = time.process_time()
        values, vectors, hvps = fn()
        rows.append((name, np.asarray(values, dtype=float), hvps, time.process_time() - start))
        return vectors

    def ours(problem, tol=None):
        c = curvature(problem, k, stage_blocks=False, negative_k=0, tol=tol)
        return c.eigenvalues, c.eigenvectors, c.hvps

    def theirs(written_out=False):
        op = Counted(curvlinops_operator(spec, f32.dtype, f32.names), written_out)
        return np.sort(eigsh(op, k=k, which="LA", tol=1e-6)[0])[::-1], None, op.calls

    V = timed("toolkit f64, tol 1e-10 (reference)", lambda: ours(f64, 1e-10))
    timed(f"toolkit {str(f32.dtype)[6:]}, default tol", lambda: ours(f32))
    timed(f"curvlinops {str(f32.dtype)[6:]}, eigsh tol 1e-6", theirs)
    if layer_norms:
        timed("  the same, layer norm written out", lambda: theirs(written_out=True))
    lam = rows[0][1]
    print(f"{'A: method':<38}{'HVPs':>6}{'CPU s':>8}{'max rel diff from reference':>29}"
          "  top eigenvalue")  # fmt: skip
    for name, values, hvps, cpu in rows:
        diff = float(np.max(np.abs(values / lam - 1)))
        print(f"{name:<38}{hvps:>6}{cpu:>8.1f}{diff:>29.2e}  {values[0]:.8g}")
    operators = [
        ("toolkit (NetProblem.hvp)", HessianOperator(f64)),
        ("autograd double backward", AutogradHessian(f64)),
        ("central differences of ∇f, ε 1e-4", GradientDifferences(f64)),
        ("curvlinops (jvp of jacrev, vmap)", Counted(curvlinops_operator(spec, torch.float64,
                                                                         f64.names))),
    ]  # fmt: skip
    if layer_norms:
        operators.append(("  the same, layer norm written out", Counted(
            curvlinops_operator(spec, torch.float64, f64.names), written_out=True)))  # fmt: skip
    print(f"{'B: float64 operator on V':<38}{'residual / λ₁':>16}{'Rayleigh rel':>14}"
          f"{'asymmetry / λ₁':>16}")  # fmt: skip
    for name, op in operators:
        HV = np.column_stack([op.matvec(V[:, i]) for i in range(k)])
        residual = np.linalg.norm(HV - V * lam, axis=0).max() / lam[0]
        G = V.T @ HV
        rayleigh = np.abs(np.diag(G) / lam - 1).max()
        asym = np.abs(G - G.T).max() / lam[0]
        print(f"{name:<38}{residual:>16.2e}{rayleigh:>14.2e}{asym:>16.2e}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="*", default=STAND_INS, metavar="FILE.py:FUNC")
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for spec in args.problems:
        one_problem(spec, args.k)
    print("reference: the toolkit's float64 top-k (tol 1e-10) at the float32 weights; V its "
          "eigenvectors, Λ its eigenvalues")  # fmt: skip


if __name__ == "__main__":
    main()
