r"""A network's per-sample curvatures and gradients, projected onto a subspace (Galerkin).

Near w* a minibatch gradient is g_B(w) = H_B·(w − w*) + ξ_B with H_B and ξ_B the batch means
of the per-sample Hessians H_i = ∇²ℓ_i(w*) and gradients ∇ℓ_i(w*)
(`stability.noise.persample`).  For p parameters E[H_i ⊗ H_i] has p⁴ entries; the minibatch
analysis keeps the dynamics in an m-dimensional subspace with orthonormal basis Q (p × m) and
uses the **Galerkin projection**

    Ĥ_i = Qᵀ H_i Q   (m × m),       ĝ_i = Qᵀ ∇ℓ_i(w*)   (m),

each column of H_i Q a per-sample Hessian-vector product
(`stability.nets.problem.NetProblem.transformable_batch_hvp`), all samples at once with
``torch.func.vmap`` (one at a time for a model vmap cannot batch, by plain ``torch.autograd``
for a model torch.func cannot transform: `stability.nets.vectorize`).  With
``curvature="ggn"`` the Gauss–Newton part J_iᵀ ∇²_o L J_i (J_i the Jacobian of the model's
output on sample i, ∇²_o L the loss's Hessian in the output) replaces H_i: Ĥ_i = (J_iQ)ᵀ∇²_o L
(J_iQ), positive semidefinite when the loss is convex in the output (Martens 2020, Sec. 8).

**The subspace** (`subspace_basis`).  Q spans the top-k eigenvectors V of H
(`stability.nets.curvature`).  With one rule on every parameter (uniform delays), Q = V.  With
per-stage rules the dynamics act per stage, and span(V) is not invariant under them; the basis
is then block diagonal, Q = diag(Q_1, …, Q_P) with Q_i an orthonormal basis of stage i's rows of
V (thin QR, r_i = min(p_i, k) columns) — the smallest subspace containing span(V) that every
stage's rule maps to itself, so per-stage rules act on contiguous blocks of sizes r_i as in
`stability.noise.state`.  k = p gives the whole parameter space (Q orthogonal): the projection
is then exact.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.func import grad, hessian, jvp

from stability.nets.batches import map_leaves, rows, sample
from stability.nets.problem import NetProblem
from stability.nets.vectorize import vectorized
from stability.noise.persample import PerSampleMoments

CURVATURES = ("hessian", "ggn")
CHUNK_FLOATS = 20_000_000
"""Samples are processed in chunks of at most this many floats (chunk × p per vector)."""


def subspace_basis(
    eigenvectors: np.ndarray, stage_sizes: tuple[int, ...], per_stage: bool
) -> tuple[np.ndarray, tuple[int, ...]]:
    """(Q, sizes): the basis of module doc and the columns per stage (one block if uniform).

    The QR of each stage's rows is nested (its first j columns span the first j columns of
    V_i), so the basis of the first k' < k eigenvectors is `nested_columns` of this one.
    """
    V = np.asarray(eigenvectors, dtype=float)
    if not per_stage:
        return V, (V.shape[1],)
    ends = np.cumsum((0, *stage_sizes))
    bounds = zip(ends[:-1], ends[1:], strict=True)
    blocks = [np.linalg.qr(V[a:b], mode="reduced")[0] for a, b in bounds]
    Q = np.zeros((V.shape[0], sum(q.shape[1] for q in blocks)))
    col = 0
    for a, q in zip(ends[:-1], blocks, strict=True):
        Q[a : a + q.shape[0], col : col + q.shape[1]] = q
        col += q.shape[1]
    return Q, tuple(q.shape[1] for q in blocks)


def nested_columns(sizes: tuple[int, ...], stage_sizes: tuple[int, ...], k: int) -> np.ndarray:
    """Column indices of the basis of the first ``k`` eigenvectors inside a `subspace_basis`
    built from more: per stage block, its first min(p_i, k) columns."""
    starts = np.cumsum((0, *sizes))[:-1]
    if len(sizes) == 1:
        return np.arange(min(k, sizes[0]))
    return np.concatenate(
        [s + np.arange(min(p, k, r)) for s, p, r in zip(starts, stage_sizes, sizes, strict=True)]
    )


def _chunks(problem: NetProblem, columns: int):
    """(inputs, targets) of consecutive samples, at most `CHUNK_FLOATS` / (p·columns) at a time."""
    X, Y = problem.inputs, problem.targets
    size = max(1, CHUNK_FLOATS // max(1, problem.dim * max(1, columns)))
    for a in range(0, problem.samples, size):
        yield rows(X, slice(a, a + size)), rows(Y, slice(a, a + size))


def _sample_gradients(problem: NetProblem, x, y) -> torch.Tensor:
    """∇ℓ_i(w*) of the samples of a chunk, (chunk, p)."""
    w = problem.w_star.detach()

    def one(x, y):
        return grad(problem.batch_loss)(w, sample(x), sample(y))

    def looped(x, y):
        return problem.batch_gradient(w, sample(x), sample(y))

    return vectorized(problem, one, x, y, looped=looped).detach()


def _sample_hvps(problem: NetProblem, x, y, v: torch.Tensor) -> torch.Tensor:
    """H_i·v of the samples of a chunk, (chunk, p)."""
    w = problem.w_star.detach()

    def hvp(x, y, v):
        return problem.transformable_batch_hvp(w, v, sample(x), sample(y))

    def looped(x, y, v):
        return problem.batch_hvp(w, v, sample(x), sample(y))

    return vectorized(problem, hvp, x, y, v, in_dims=(0, 0, None), looped=looped).detach()


def per_sample_gradients(problem: NetProblem, Q: torch.Tensor) -> np.ndarray:
    """ĝ_i = Qᵀ∇ℓ_i(w*) (n, m)."""
    return np.concatenate(
        [(_sample_gradients(problem, x, y) @ Q).cpu().numpy() for x, y in _chunks(problem, 1)]
    )


def _hessian_columns(problem: NetProblem, Q: torch.Tensor) -> np.ndarray:
    out = []
    for x, y in _chunks(problem, 1):
        cols = [_sample_hvps(problem, x, y, Q[:, j]) @ Q for j in range(Q.shape[1])]
        out.append(torch.stack(cols, dim=-1).cpu().numpy())  # (chunk, m, m): [i, a, j]
    return np.concatenate(out)


def gradient_noise(problem: NetProblem, batch: int) -> np.ndarray:
    """p·diag Σ_ξ (p,): the mean square of each coordinate of the minibatch gradient at w*
    (`stability.noise.persample`: E[ξ_Bξ_Bᵀ] = p·Σ_ξ), Σ_ξ's diagonal the population variance
    of the per-sample gradients (sums shifted by the first chunk's mean, which keeps it
    accurate)."""
    from stability.noise.moments import sampling_factor

    n = problem.samples
    total = square = shift = None
    for x, y in _chunks(problem, 1):
        g = _sample_gradients(problem, x, y)
        shift = g.mean(dim=0) if shift is None else shift
        g = g - shift
        total = g.sum(dim=0) if total is None else total + g.sum(dim=0)
        square = (g * g).sum(dim=0) if square is None else square + (g * g).sum(dim=0)
    variance = (square / n - (total / n) ** 2).clamp(min=0)
    return sampling_factor(n, int(batch)) * variance.cpu().numpy().astype(float)


def gradient_square_mean(
    problem: NetProblem, M: np.ndarray, S: np.ndarray, batch: int, noise: np.ndarray
) -> np.ndarray:
    r"""diag E[g_B g_Bᵀ] (p,): the mean square of each coordinate of the minibatch gradient
    g_B = H_B·u + ξ_B at weights u − w* = M·y with E[yyᵀ] = ``S`` (m × m), y independent of the
    batch and E y = 0 — the stationary state of minibatch training (`stability.noise.gramian`)
    seen in weight space along the directions ``M`` (p × m, columns need not be orthonormal);
    ``noise``: p·diag Σ_ξ (`gradient_noise`).

    By the moments of `stability.noise.persample` with X = M S Mᵀ and p the sampling factor,

        E[g_B g_Bᵀ] = (1 − p)·H X H + p·(1/n) Σ_i H_i X H_i + p·Σ_ξ

    (the cross term E[H_B u ξ_Bᵀ] = p·J(E u) vanishes with E u = 0), whose diagonal is
    accumulated over the samples from S = LLᵀ: (H X H)_jj = Σ_a (H M L)_ja², and likewise per
    sample — m per-sample Hessian-vector products each, in full p-space, never a p × p matrix."""
    from stability.noise.moments import sampling_factor

    n, p = problem.samples, problem.dim
    factor = sampling_factor(n, int(batch))
    lam, U = np.linalg.eigh(0.5 * (S + S.T))
    keep = lam > 0
    C = problem.vector(np.asarray(M, dtype=float) @ (U[:, keep] * np.sqrt(lam[keep])))
    mean_hvp = torch.zeros(p, C.shape[1], dtype=C.dtype, device=C.device)
    hvp_square = torch.zeros(p, dtype=C.dtype, device=C.device)
    for x, y in _chunks(problem, 1):
        for j in range(C.shape[1]):
            h = _sample_hvps(problem, x, y, C[:, j])
            mean_hvp[:, j] += h.sum(dim=0)
            hvp_square += (h * h).sum(dim=0)
    mean_hvp /= n
    square = (1 - factor) * (mean_hvp**2).sum(dim=1) + factor * hvp_square / n
    return square.cpu().numpy().astype(float) + noise


def output_leaves(out: Any) -> tuple[list, Callable[[list], Any]]:
    """The leaves of a model's output (`stability.nets.batches.map_leaves`: tensors, pytrees and
    dataclasses of them) and the function that builds the same structure from new leaves."""
    leaves: list = []
    map_leaves(lambda leaf: leaves.append(leaf), out)

    def rebuild(new: list) -> Any:
        taken = iter(new)
        return map_leaves(lambda _: next(taken), out)

    return leaves, rebuild


def _plain_jacobian_columns(function, w: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """(J Q)ᵀ (m, C), J the Jacobian of ``function`` at ``w``, by plain ``torch.autograd``:
    J·q = ∇_u ⟨Jᵀu, q⟩, the derivative of a vector-Jacobian product in its (dummy) vector u,
    one backward pass per column of Q."""
    u_w = w.detach().requires_grad_(True)
    with torch.enable_grad():
        out = function(u_w)
        dummy = torch.zeros_like(out, requires_grad=True)
        (transposed,) = torch.autograd.grad(out, u_w, dummy, create_graph=True)  # Jᵀu
        columns = [torch.autograd.grad(transposed, dummy, q, retain_graph=True)[0] for q in Q.T]
    return torch.stack(columns).detach()


def _ggn_blocks(problem: NetProblem, Q: torch.Tensor) -> np.ndarray:
    """(J_iQ)ᵀ ∇²_o L (J_iQ) per sample (module doc); the output o is every floating tensor of
    the model's output (a tensor, a tuple, a dict of them) flattened into one vector."""
    w = problem.w_star.detach()

    def one(x, y, plain=False):
        def output(u):
            return problem.output(u, sample(x))

        leaves, rebuild = output_leaves(output(w))
        floating = [i for i, t in enumerate(leaves) if torch.is_tensor(t) and t.is_floating_point()]

        def flat(found):
            return torch.cat([found[i].reshape(-1) for i in floating])

        def flat_output(u):
            return flat(output_leaves(output(u))[0])

        def loss_out(o):
            parts = torch.split(o, [leaves[i].numel() for i in floating])
            filled = list(leaves)
            for i, part in zip(floating, parts, strict=True):
                filled[i] = part.reshape(leaves[i].shape)
            return problem.loss_fn(rebuild(filled), sample(y))

        if plain:  # the loop for a model torch.func cannot transform
            JQ = _plain_jacobian_columns(flat_output, w, Q)
            H_out = torch.autograd.functional.hessian(loss_out, flat(leaves).detach())
        else:
            JQ = vectorized(problem, lambda v: jvp(flat_output, (w,), (v,))[1], Q, in_dims=1)
            H_out = hessian(loss_out)(flat(leaves))  # (C, C), reverse-over-reverse
        return JQ @ H_out @ JQ.T  # JQ: (m, C)

    return np.concatenate(
        [
            vectorized(problem, one, x, y, looped=functools.partial(one, plain=True))
            .detach()
            .cpu()
            .numpy()
            for x, y in _chunks(problem, Q.shape[1])
        ]
    )


def projected_moments(
    problem: NetProblem, Q: np.ndarray, batch: int, curvature: str = "hessian"
) -> PerSampleMoments:
    """`PerSampleMoments` of Ĥ_i, ĝ_i (module doc) for the basis ``Q`` (p, m)."""
    from stability.checks import check_choice

    check_choice("curvature", curvature, CURVATURES)
    Qt = problem.vector(np.asarray(Q, dtype=float))
    H = _hessian_columns(problem, Qt) if curvature == "hessian" else _ggn_blocks(problem, Qt)
    H = 0.5 * (H + H.transpose(0, 2, 1))
    return PerSampleMoments(H, per_sample_gradients(problem, Qt), int(batch))


def restrict(moments: PerSampleMoments, columns: np.ndarray) -> PerSampleMoments:
    """The moments on the sub-basis ``columns`` (Galerkin onto a subspace of the subspace)."""
    c = np.asarray(columns)
    return PerSampleMoments(moments.hessians[:, c][:, :, c], moments.gradients[:, c], moments.batch)


__all__ = [
    "CURVATURES",
    "gradient_noise",
    "gradient_square_mean",
    "nested_columns",
    "per_sample_gradients",
    "projected_moments",
    "restrict",
    "subspace_basis",
]
