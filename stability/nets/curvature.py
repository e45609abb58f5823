r"""The Hessian of a network's loss from Hessian-vector products: Lanczos, overall and per stage.

At the model's weights w* (`stability.nets.problem.NetProblem.w_star`) the Hessian ∇²f is
never formed: `HessianOperator` applies it to a vector by reverse-over-reverse differentiation,

    ∇²f(w*)·v = ∇_w ⟨∇f(w), v⟩ |_{w=w*}     (plain ``torch.autograd``, twice),

one Hessian-vector product (HVP) costing about three gradient evaluations (forward-over-reverse,
d/dε ∇f(w* + εv), gives the same product and is slower here: `stability.nets.problem`), and
`lanczos` runs the implicitly restarted Lanczos method (ARPACK, ``scipy.sparse.linalg.eigsh``)
on it:

* the **top-k eigenpairs** (largest algebraic, ``which="LA"``) of ∇²f — the curvature the
  coupled analysis needs (`stability.nets.lowrank`);
* the **per-stage curvature**: the top eigenvalues of each diagonal block H_ii (stage i alone,
  the others frozen), from HVPs with vectors supported on stage i, read on stage i;
* the **negative end** (``which="SA"``): a network is rarely at an exact minimum, and the
  eigenvalues below −`NEGATIVE_TOL`·λ_max (saddle directions) are reported, never folded into
  the stability analysis (`stability.nets.lowrank` keeps the positive curvature only).

ARPACK stops when every wanted Ritz value has a residual ‖Hx − θx‖ ≤ tol·|θ|; with
``tol=1e-10`` (float64 problems) the eigenvalues agree with a dense Hessian (`dense_hessian`)
to ~1e-12·λ_max on small models (tests/test_nets.py); float32 problems use ``tol=1e-6`` (their
products carry ~1e-7 relative rounding; an eigenvalue's error is ~ residual²/gap).  ARPACK runs
in float64 on the host; each product converts its vector to the problem's dtype and device and
back — one transfer per product, as any eigensolver on a host needs.

**Cost.**  The per-stage blocks and the negative end are extra eigen-solves (each needs as many
products as the top-k one, the negative end several times more: near zero a network's spectrum
is dense); `curvature` runs them only when asked (``stage_blocks``, ``negative_k``).  The
products are the Hessian-vector products curvlinops' ``HessianLinearOperator`` makes, except
on models with a LayerNorm after a layer with parameters, where curvlinops' (``jvp`` of a
vmapped ``jacrev``) meet torch 2.13's wrong vmapped layer-norm second derivative and ours
(unbatched reverse-over-reverse, classic autograd) agree with differences of the gradient
(benchmarks/bench_curvature_reference.py, docs/your_model.md);
benchmarks/bench_curvature.py times both processes side by side.  ARPACK needs 33 products
for the top 5 at ``tol=1e-6`` on examples/tiny_transformer.py (``ncv=20``: one Krylov basis of
20 and one implicit restart), as many as scipy's ``eigsh`` does for curvlinops.

Blocks of at most `DENSE_BLOCK` parameters, and operators whose Lanczos basis would span the
whole space (2k + 1 ≥ n: k ≥ n/2, up to k = n), are formed densely (n HVPs, then
``numpy.linalg.eigh``): Lanczos needs k < n and gains nothing there.

The reference PyHessian uses — power iteration with deflation, one eigenvalue at a time — is
compared in benchmarks/bench_nets.py (HVP counts and times to the same tolerance).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

from stability.nets.problem import NetProblem

NEGATIVE_TOL = 1e-9
"""Eigenvalues below −NEGATIVE_TOL·λ_max count as negative (saddle directions)."""

DENSE_BLOCK = 64
"""Blocks (or whole models) of at most this many parameters are diagonalized densely."""

DENSE_NEGATIVE_MAX = 2000
"""Models of at most this many parameters have the negative end of their spectrum found from
the dense operator (`negative_end`: n products, 3.2 s on an 866-parameter MLP with 400 samples,
where 30 Lanczos restarts took 1.8 s and found none of its 322 negative eigenvalues)."""

DENSE_HESSIAN_MAX = 4000
"""Largest model `dense_hessian` forms (p² floats)."""

LANCZOS_TOL = 1e-10
"""ARPACK's tolerance on float64 problems."""

LANCZOS_TOL_FLOAT32 = 1e-6
"""ARPACK's tolerance on float32 problems (module doc)."""


def default_tol(problem: NetProblem) -> float:
    """`LANCZOS_TOL` in float64, `LANCZOS_TOL_FLOAT32` otherwise."""
    return LANCZOS_TOL if problem.dtype == torch.float64 else LANCZOS_TOL_FLOAT32


class HessianOperator(LinearOperator):
    """v ↦ ∇²f(w*)·v as a scipy `LinearOperator` on float64 arrays, counting HVPs.

    ``block``: a slice of the flat vector (a stage): the operator is then the diagonal block
    H_ii (v padded with zeros outside the block, the product read on it); ``w``: the point
    (default w*).
    """

    def __init__(
        self, problem: NetProblem, block: slice | None = None, w: torch.Tensor | None = None
    ):
        self.problem = problem
        self.block = block
        n = problem.dim if block is None else block.stop - block.start
        super().__init__(dtype=np.float64, shape=(n, n))
        self.hvps = 0
        self._w = (problem.w_star if w is None else w).detach()

    def _matvec(self, v):
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        self.hvps += 1
        problem = self.problem
        if self.block is None:
            full = problem.vector(v)
        else:
            full = torch.zeros(problem.dim, dtype=problem.dtype, device=problem.device)
            full[self.block] = problem.vector(v)
        out = problem.hvp(self._w, full).detach()
        out = out if self.block is None else out[self.block]
        return out.to(device="cpu", dtype=torch.float64).numpy().copy()

    def _rmatvec(self, v):  # symmetric
        return self._matvec(v)


@dataclass(frozen=True)
class Eigenpairs:
    """Eigenvalues (sorted descending) and unit eigenvectors (columns) of one operator."""

    values: np.ndarray
    vectors: np.ndarray
    hvps: int
    method: str


def dense_operator(op: HessianOperator) -> np.ndarray:
    """The symmetric matrix of ``op`` from its products with the unit vectors (n HVPs)."""
    n = op.shape[0]
    H = np.column_stack([op.matvec(e) for e in np.eye(n)])
    return 0.5 * (H + H.T)


def lanczos(
    op: HessianOperator,
    k: int,
    *,
    which: str = "LA",
    seed: int = 0,
    tol: float | None = None,
    maxiter: int | None = None,
) -> Eigenpairs:
    """The ``k`` extreme eigenpairs of ``op`` (``which``: ``"LA"`` largest, ``"SA"``
    smallest algebraic), by ARPACK's Lanczos from a seeded start vector.

    Operators of at most `DENSE_BLOCK` rows, or where the Krylov basis of 2k + 1 vectors would
    reach n, are formed densely.  With ``maxiter`` the pairs that converged are returned
    (possibly fewer than k).  ``tol``: default `default_tol`.
    """
    tol = default_tol(op.problem) if tol is None else tol
    n = op.shape[0]
    k = int(min(k, n))
    before = op.hvps
    ncv = krylov_basis(n, k)
    if n <= DENSE_BLOCK or ncv == n:
        return dense_pairs(op, k, which)
    v0 = np.random.default_rng(seed).standard_normal(n)
    try:
        lam, vecs = arpack(op, k=k, which=which, tol=tol, v0=v0, ncv=ncv, maxiter=maxiter)
    except ArpackNoConvergence as err:
        lam, vecs = err.eigenvalues, err.eigenvectors
    order = np.argsort(lam)[::-1]
    return Eigenpairs(
        lam[order], vecs[:, order], op.hvps - before, f"Lanczos (ARPACK eigsh, tol={tol:g})"
    )


def arpack(op: LinearOperator, *, k: int, v0: np.ndarray, **options) -> tuple:
    """scipy's ``eigsh(op, k=k, v0=v0, **options)``, and on an operator that maps the start
    vector to exactly 0 — where ARPACK stops with error −9, "starting vector is zero" — k zero
    eigenvalues and an orthonormal basis that starts at ``v0``: ``v0`` is Gaussian, so a
    symmetric operator with a nonzero eigenvalue maps it to 0 with probability 0 (the Hessian
    is 0 in its dtype, e.g. a float32 loss saturated at exactly 0)."""
    try:
        return eigsh(op, k=k, v0=v0, **options)
    except ArpackError:
        if np.any(op.matvec(v0)):
            raise
    rest = np.random.default_rng(1).standard_normal((v0.size, k - 1))
    return np.zeros(k), np.linalg.qr(np.column_stack([v0, rest]))[0]


def krylov_basis(n: int, k: int) -> int:
    """ARPACK's basis size ``ncv`` for ``k`` eigenpairs of an n × n operator as `lanczos`
    runs it: 2k + 1, at least 20, at most n."""
    return min(n, max(2 * k + 1, 20))


def dense_pairs(op: HessianOperator, k: int, which: str = "LA") -> Eigenpairs:
    """The ``k`` extreme eigenpairs of ``op`` (``which`` as in `lanczos`) from its dense
    matrix (n HVPs, ``numpy.linalg.eigh``): exact, and no more products than a Lanczos search
    that would take n or more."""
    before = op.hvps
    lam, vecs = np.linalg.eigh(dense_operator(op))
    order = (np.argsort(lam)[::-1] if which == "LA" else np.argsort(lam))[:k]
    return Eigenpairs(lam[order], vecs[:, order], op.hvps - before, "dense (n HVPs, eigh)")


@dataclass(frozen=True)
class Curvature:
    """A network's curvature at w*: the top-k eigenpairs of ∇²f, per-stage top eigenvalues,
    the negative eigenvalues found (``negative_complete``: whether that search converged,
    `negative_end`), the cost (HVPs, seconds), and a warning on how they were evaluated (None:
    as documented)."""

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    stage_eigenvalues: tuple[np.ndarray, ...]
    negative_eigenvalues: np.ndarray
    stage_sizes: tuple[int, ...]
    hvps: int
    seconds: float
    method: str
    warning: str | None = None
    negative_complete: bool = True

    @property
    def lam_max(self) -> float:
        return float(self.eigenvalues[0])


def curvature(
    problem: NetProblem,
    k: int = 10,
    *,
    stage_k: int | None = None,
    negative_k: int = 5,
    negative_maxiter: int = 30,
    seed: int = 0,
    stage_blocks: bool = True,
    tol: float | None = None,
) -> Curvature:
    """Top-``k`` eigenpairs of ∇²f(w*), the top ``stage_k`` (default k) of each stage's
    diagonal block (``stage_blocks``; else ``stage_eigenvalues`` is empty), and up to
    ``negative_k`` negative eigenvalues (module doc); ``tol``: ARPACK's (`default_tol`).

    The negative end is searched as `negative_end` does, with at most ``negative_maxiter``
    ARPACK restarts above `DENSE_NEGATIVE_MAX` parameters (0: skip the search).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer ≥ 1, got {k!r}")
    start = time.perf_counter()
    op = HessianOperator(problem)
    top = lanczos(op, k, seed=seed, tol=tol)
    hvps = top.hvps
    stage_vals = []
    for block in problem.blocks if stage_blocks else ():
        stage_op = HessianOperator(problem, block)
        pairs = lanczos(stage_op, stage_k or k, seed=seed, tol=tol)
        hvps += pairs.hvps
        stage_vals.append(pairs.values)
    negative, low_hvps, complete = negative_end(
        op, top.values[0], negative_k, negative_maxiter, seed + 1
    )
    hvps += low_hvps
    return Curvature(
        eigenvalues=top.values,
        eigenvectors=top.vectors,
        stage_eigenvalues=tuple(stage_vals),
        negative_eigenvalues=negative,
        stage_sizes=problem.stage_sizes,
        hvps=hvps,
        seconds=time.perf_counter() - start,
        method=f"{top.method} on {problem.hvp_mode} HVPs",
        negative_complete=complete,
    )


def negative_end(
    op: HessianOperator, lam_max: float, k: int = 5, maxiter: int = 30, seed: int = 1
) -> tuple[np.ndarray, int, bool]:
    """(the eigenvalues below −`NEGATIVE_TOL`·λ_max among the ``k`` smallest, ascending;
    HVPs; whether the search is complete): ARPACK's ``which="SA"`` with at most ``maxiter``
    restarts (`curvature`'s negative end; ``k`` or ``maxiter`` 0: no search).  Near zero a
    network's spectrum is dense and Lanczos converges slowly there: the capped search had
    reported none on a 91-parameter model with 25 eigenvalues below the cut (the smallest
    −4.8e-8·λ_max) and on an 866-parameter one with 322 (the smallest −6.1e-4·λ_max).  So the
    operator is formed densely (n products, nothing missed) where that budget — a basis of ncv
    products, then ncv − k per restart — would reach n products, or n ≤ `DENSE_NEGATIVE_MAX`;
    above, the eigenvalues not converged in the budget are not reported and the search is
    complete only if all ``k`` converged (an incomplete search that found none below the cut
    says nothing about negative curvature: `stability.nets.minimum.nearness`)."""
    if not k or not maxiter:
        return np.zeros(0), 0, True
    n = op.shape[0]
    ncv = krylov_basis(n, k)
    if n <= max(ncv + maxiter * (ncv - min(k, n)), DENSE_NEGATIVE_MAX):
        low = dense_pairs(op, k, which="SA")
    else:
        low_tol = max(1e-8, default_tol(op.problem))
        low = lanczos(op, k, which="SA", seed=seed, tol=low_tol, maxiter=maxiter)
    cut = -NEGATIVE_TOL * max(float(lam_max), 0.0)
    return np.sort(low.values[low.values < cut]), low.hvps, low.values.size >= min(k, n)


def top_eigenpair(
    problem: NetProblem, w: torch.Tensor, v0: np.ndarray | None = None, tol: float = 1e-4
) -> tuple[float, np.ndarray, int]:
    """(λ₁, v₁, HVPs): the largest algebraic eigenvalue of ∇²f(w) by Lanczos, warm-started
    from ``v0`` (the previous eigenvector along a trajectory), to relative residual ``tol``."""
    return operator_top_eigenpair(HessianOperator(problem, w=w), v0, tol)


def operator_top_eigenpair(
    op: HessianOperator, v0: np.ndarray | None = None, tol: float = 1e-4
) -> tuple[float, np.ndarray, int]:
    """(λ₁, v₁, HVPs) of a symmetric operator ``op`` (`top_eigenpair`; also a preconditioned
    one): dense below `DENSE_BLOCK` rows, else ARPACK's Lanczos warm-started from ``v0``."""
    n = op.shape[0]
    if n <= DENSE_BLOCK:
        pairs = lanczos(op, 1)
        return float(pairs.values[0]), pairs.vectors[:, 0], pairs.hvps
    start = np.random.default_rng(0).standard_normal(n) if v0 is None else np.asarray(v0)
    lam, vec = arpack(op, k=1, which="LA", tol=tol, v0=start, ncv=min(n, 12))
    return float(lam[0]), vec[:, 0], op.hvps


def dense_hessian(problem: NetProblem) -> np.ndarray:
    """∇²f(w*) formed by ``torch.autograd.functional.hessian`` (the reference for small
    models: classic autograd, p reverse passes over the gradient's graph).

    Not ``torch.func.hessian``: in torch 2.13 it is wrong when a ``layer_norm``'s input and
    affine weight both depend on w (any LayerNorm after a layer with parameters) — the (γ, W)
    block, 21 % of the largest entry on a 20-parameter example, because it differentiates a
    vmapped first backward (``jacrev``); ``torch.autograd.functional.hessian`` and the
    one-vector-at-a-time products here agree with central differences of the gradient to
    5e-11 (benchmarks/bench_layernorm_hessian.py; docs/your_model.md).
    """
    if problem.dim > DENSE_HESSIAN_MAX:
        raise ValueError(
            f"the dense Hessian needs p ≤ {DENSE_HESSIAN_MAX} parameters, got {problem.dim}"
        )
    problem.needs_second_derivative()
    H = torch.autograd.functional.hessian(problem.loss, problem.w_star.detach()).detach()
    H = H.to(device="cpu", dtype=torch.float64).numpy()
    return 0.5 * (H + H.T)


__all__ = [
    "DENSE_BLOCK",
    "DENSE_NEGATIVE_MAX",
    "NEGATIVE_TOL",
    "Curvature",
    "Eigenpairs",
    "HessianOperator",
    "curvature",
    "default_tol",
    "dense_hessian",
    "dense_operator",
    "dense_pairs",
    "arpack",
    "krylov_basis",
    "lanczos",
    "negative_end",
    "top_eigenpair",
]
