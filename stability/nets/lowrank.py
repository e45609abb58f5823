r"""A network's curvature as a small coupled system: top-k eigenpairs projected onto the stages.

The coupled analysis (`stability.coupled`) needs, around w*, the gradient's response to the
per-stage weights, g = ∇²f·(u − w*), with every stage i running its own rule on its block w_i.
Its closed loop on the unit circle is det(I + lr·H·S(ω)), S = diag(s_i(ω)) constant on each
stage's block (`stability.coupled.scan`).  A network has 10⁴–10⁸ parameters; the dense p×p
path is out of reach beyond a few hundred.

**Rank-k curvature.**  Keep the k largest eigenpairs, H_k = V Λ Vᵀ (Lanczos,
`stability.nets.curvature`), B = V Λ^{1/2} (p × k), H_k = B Bᵀ.  By Sylvester's identity
det(I + lr·B Bᵀ S) = det(I + lr·Bᵀ S B) and, S being constant per stage,

    Bᵀ S B = Σ_i s_i(ω)·B_iᵀ B_i = Σ_i s_i(ω)·R_iᵀ R_i,    B_i = Q_i R_i (thin QR, stage i's rows)

with R_i of size r_i × k, r_i = min(|w_i|, k).  Stacking R = [R_1; …; R_P] (Σ r_i × k),
Rᵀ S R has the nonzero spectrum of R Rᵀ·S̃ with S̃ = diag(s_i) on blocks of r_i rows.  Hence
the **reduced system** — Hessian H̃ = R Rᵀ (at most P·k rows), stage sizes r_i — has *exactly*
the closed-loop characteristic polynomial of H_k on the network, up to roots ω = 1 of flat
directions; in particular the same max stable lr, crossing angle and stage shares.  Its nonzero
eigenvalues are Λ, and its diagonal blocks R_i R_iᵀ have the spectra of (H_k)_ii, the stages'
own curvature.  Every pipeline rule, delay and T1 factor of `stability.coupled` applies
unchanged (`reduced_system`).

**What is approximated.**  Only the truncation H ≈ H_k: the eigen-directions below λ_k are
left out.  With one stage (or equal delays) they decouple and each is stable up to a larger
step size than λ_1's (the scalar max lr falls with λ); with per-stage delays they couple to the
top directions through the stage projections, which can move the threshold.  docs/nets.md
reports the measured effect against the dense Hessian on small models and the change from k/2
to k on the examples; `net_max_lr` reports the latter (``truncation_change``).

**Negative eigenvalues** (saddle directions of a network not exactly at a minimum) are not
part of H_k: a direction with λ < 0 grows like 1 + lr·|λ| per step at *any* lr — the escape from
a saddle, not the delay-induced instability — and with it the coupled analysis would answer
"max lr 0".  They are reported separately (`stability.nets.curvature`).
"""

from __future__ import annotations

import numpy as np

from stability.rules.base import Rule


def stage_factors(
    eigenvalues: np.ndarray, eigenvectors: np.ndarray, stage_sizes: tuple[int, ...]
) -> tuple[np.ndarray, tuple[int, ...]]:
    """(H̃, r): the reduced Hessian R Rᵀ and its stage sizes r_i (module doc).

    Only the positive eigenvalues enter.  ``eigenvectors``: (p, k) orthonormal columns.
    """
    lam = np.asarray(eigenvalues, dtype=float)
    V = np.asarray(eigenvectors, dtype=float)
    keep = lam > 0
    if not np.any(keep):
        raise ValueError(
            f"problem: the Hessian has no positive eigenvalue among those computed (the "
            f"largest is {lam.max():.3g}): no step size is limited by curvature at these weights"
        )
    B = V[:, keep] * np.sqrt(lam[keep])
    ends = np.cumsum((0, *stage_sizes))
    if ends[-1] != B.shape[0]:
        raise ValueError(f"stage sizes add up to {ends[-1]}, eigenvectors have {B.shape[0]} rows")
    blocks = [np.linalg.qr(B[a:b], mode="r") for a, b in zip(ends[:-1], ends[1:], strict=True)]
    R = np.vstack(blocks)
    H = R @ R.T
    return 0.5 * (H + H.T), tuple(int(r.shape[0]) for r in blocks)


def reduced_system(
    rules: tuple[Rule, ...],
    eigenvalues: np.ndarray,
    eigenvectors: np.ndarray,
    stage_sizes: tuple[int, ...],
    lr_scales: tuple[float, ...] = (),
):
    """The `CoupledSystem` of the stage ``rules`` on the rank-k curvature (module doc)."""
    from stability.coupled.system import CoupledSystem

    H, sizes = stage_factors(eigenvalues, eigenvectors, stage_sizes)
    return CoupledSystem(tuple(rules), sizes, {"forward": H}, lr_scales)


def positive_part(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All positive eigenpairs of a dense symmetric H (descending): the reference H₊."""
    lam, V = np.linalg.eigh(0.5 * (H + H.T))
    keep = lam > 0
    order = np.argsort(lam[keep])[::-1]
    return lam[keep][order], V[:, keep][:, order]


__all__ = ["positive_part", "reduced_system", "stage_factors"]
