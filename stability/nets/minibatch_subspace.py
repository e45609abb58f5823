r"""The projected minibatch problem of a network at one preconditioner: basis, moments, states.

`stability.nets.noise_public` (and the stationary Adam preconditioner,
`stability.nets.stationary_adam`) keep minibatch training in the span of the top eigenvectors
of the curvature — of H, or for Adam of H̃ = P^{1/2}HP^{1/2} — and Galerkin-project the
per-sample moments onto it (`stability.nets.minibatch_moments`).  `project` builds that
problem from the eigenpairs: it leaves out the flat or negative directions (λ ≤ `FLAT`·λ_max:
no step size is stable along them, so they carry no threshold), builds the basis
(`subspace_basis`: block diagonal per stage with per-stage delays), projects the moments
onto its weight-space directions P^{1/2}Q (Q for SGD-type rules, where P = 1), checks the size
limits, and keeps both the basis of the first k eigenvectors and the larger one it is nested in
(``subspace_change``).  `subspace` turns moments into the state builder and the full-batch
threshold of `stability.noise` (one rule with uniform delays, the coupled per-stage analysis
otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.nets.minibatch_moments import (
    nested_columns,
    projected_moments,
    restrict,
    subspace_basis,
)
from stability.nets.problem import NetProblem
from stability.noise.persample import PerSampleMoments

FLAT = 1e-9
"""Eigen-directions with λ ≤ FLAT·λ_max are left out of the subspace (flat or saddle: no
step size is stable along them, so they carry no threshold; reported as ``dropped``)."""


@dataclass(frozen=True)
class Subspace:
    """The projected problem at one basis: moments, state builder, full-batch lr, start."""

    moments: Any
    builder: Any
    full_batch: float | None
    e0: np.ndarray


def subspace(moments, rules, sizes, e0, uniform: bool) -> Subspace:
    """The `Subspace` of ``moments`` for the stage ``rules`` (block ``sizes``) from ``e0``."""
    from stability.noise.state import state_space, uniform_state
    from stability.noise.threshold import uniform_full_batch

    m = moments.dim
    if uniform:
        rule = rules[0]
        fb = uniform_full_batch(rule, np.linalg.eigvalsh(moments.hessian))
        return Subspace(moments, lambda lr: uniform_state(rule, lr, m), fb, e0)
    from stability.coupled.system import CoupledSystem
    from stability.nets.prediction import coupled_analysis

    system = CoupledSystem(tuple(rules), tuple(sizes), {"forward": moments.hessian}, ())
    fb = coupled_analysis(system).max_lr
    return Subspace(moments, lambda lr: state_space(rules, lr, sizes), fb, e0)


@dataclass(frozen=True)
class Projection:
    """The top-k problem (``moments``, basis columns ``cols`` of ``Q``, block ``sizes``) nested
    in the larger one (``moments2`` on all of ``Q``, ``sizes2``); ``k_kept``: of the first k
    eigenvectors, those kept; ``directions``: the weight-space directions P^{1/2}Q."""

    Q: np.ndarray
    directions: np.ndarray
    sizes2: tuple[int, ...]
    moments2: PerSampleMoments
    cols: np.ndarray
    moments: PerSampleMoments
    sizes: tuple[int, ...]
    k_kept: int

    def weight_directions(self) -> np.ndarray:
        """P^{1/2}Q of the top-k basis (p × m): y ↦ w − w* in weight space."""
        return self.directions[:, self.cols]


def project(
    evaluated: NetProblem,
    eigenvalues: np.ndarray,
    eigenvectors: np.ndarray,
    scale: np.ndarray,
    *,
    k: int,
    batch: int,
    curvature: str,
    rules,
    uniform: bool,
) -> Projection:
    """The `Projection` (module doc) of the ``eigenvectors`` (of H̃ = sHs, ``scale`` s = P^{1/2};
    ones for a rule without a preconditioner), the first ``k`` of them for the analysis, all of
    them for the larger basis; the moments evaluated on ``evaluated``."""
    lam = np.asarray(eigenvalues, dtype=float)
    keep = lam > FLAT * max(float(lam[0]), 0.0)
    if not keep[0]:
        raise ValueError("the Hessian has no positive eigenvalue: not near a minimum")
    V = eigenvectors[:, keep]
    k_kept = int(np.sum(keep[:k]))
    Q, sizes2 = subspace_basis(V, evaluated.stage_sizes, not uniform)
    return _projected(
        evaluated, Q, sizes2, scale, k_kept, float(lam[0]), batch=batch, curvature=curvature,
        rules=rules, uniform=uniform, all_kept=k_kept == V.shape[1],
    )  # fmt: skip


def _projected(
    evaluated, Q, sizes2, scale, k_kept, lam_max, *, batch, curvature, rules, uniform, all_kept
) -> Projection:
    from stability.limits import (
        NET_NOISE_MAX_STAGED_SUBSPACE,
        NET_NOISE_MAX_STAGED_WORK,
        NET_NOISE_MAX_SUBSPACE,
    )
    from stability.noise.minibatch import check_staged_work
    from stability.noise.state import state_space

    stage_sizes = evaluated.stage_sizes
    limit = NET_NOISE_MAX_SUBSPACE if uniform else NET_NOISE_MAX_STAGED_SUBSPACE
    if Q.shape[1] > limit:
        raise ValueError(
            f"k: the subspace at min(2k, p) has {Q.shape[1]} dimensions, at most {limit} "
            f"{'' if uniform else 'with per-stage delays '}are supported; lower k"
        )
    directions = scale[:, None] * Q
    moments2 = projected_moments(evaluated, directions, batch, curvature)
    if not uniform:  # the per-stage loop's cost (dense Gramians or matrix-free)
        check_staged_work(
            state_space(rules, 1.0, sizes2), moments2.hessian, "k", NET_NOISE_MAX_STAGED_WORK
        )
    cols = nested_columns(sizes2, stage_sizes, k_kept)
    moments = restrict(moments2, cols)
    if not uniform:
        _check_block_curvature(moments.hessian, lam_max)
    sizes = sizes2 if all_kept else _sizes(sizes2, stage_sizes, k_kept)
    return Projection(Q, directions, sizes2, moments2, cols, moments, sizes, k_kept)


def _check_block_curvature(hessian: np.ndarray, lam_max: float) -> None:
    """Refuse, naming ``k``, a per-stage basis along which the Hessian is not positive definite
    (an eigenvalue ≤ `FLAT`·λ_max).  The top eigenvectors cut into stage blocks span more than
    the kept directions; where they reach a flat or negative direction (a minimum that is not
    strict, or a saddle), no step size is mean-square stable and there is no threshold."""
    least = float(np.linalg.eigvalsh(hessian)[0])
    if not least > FLAT * lam_max:
        raise ValueError(
            f"k: the per-stage basis (the top-k eigenvectors cut into stage blocks) reaches "
            f"curvature {least:.3g} ≤ {FLAT:g}·λ_max, a flat or negative direction (not a "
            "strict minimum along it): no step size is stable there; lower k"
        )


def _sizes(sizes2, stage_sizes, k) -> tuple[int, ...]:
    """Per-stage columns of the k-basis inside the 2k one (`nested_columns`)."""
    if len(sizes2) == 1:
        return (min(k, sizes2[0]),)
    return tuple(min(p, k, r) for p, r in zip(stage_sizes, sizes2, strict=True))


__all__ = [
    "FLAT",
    "Projection",
    "Subspace",
    "project",
    "subspace",
]
