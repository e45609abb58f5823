r"""Random delays beyond the first moment: mean-square stability and the almost-sure rate.

With delays drawn independently at every step (PipeMare App. E, `stability.rules.random_delay`)
the state X_t = (w_t, …, w_{t−τmax}, v_t) of heavy-ball SGD on the quadratic evolves by a
*random* matrix, X_{t+1} = A_{τ_t}·X_t, A_k the state matrix of the rule with the fixed delay k
(`delay_matrices`).  Three notions of stability, three thresholds on lr:

* **first moment** (mean): E[X_{t+1}] = Ā·E[X_t], Ā = Σ_k P(τ=k)·A_k, whose characteristic
  polynomial is the expected-delay kernel polynomial of the ``random-delay`` rule;
* **mean square**: E[X X^T] evolves by the linear map S ↦ Σ_k P(τ=k)·A_k·S·A_k^T, i.e.
  vec S ↦ (Σ_k P(τ=k)·A_k ⊗ A_k)·vec S; stable iff its spectral radius ρ₂ < 1
  (`mean_square_radius`; ρ₂^{1/2} is the per-step growth of the root-mean-square);
* **almost sure** (what one run does): the top Lyapunov exponent
  γ = lim (1/t)·ln‖A_{τ_t}⋯A_{τ_1}X_0‖, estimated by simulating many runs
  (`lyapunov_exponent`, common random numbers across lr).

Jensen's inequality orders two of them: γ ≤ ½·ln ρ₂ and ρ(Ā) ≤ ρ₂^{1/2} (‖E X‖² ≤ E‖X‖²), so
mean-square stability implies both others and its threshold is the most conservative.  The
first moment and a single run are not ordered in general, and **the first moment is not
enough** whenever the delays are spread out: the mean over a spread-out delay smooths the
gradient (a low-pass filter) and stays stable at step sizes where runs diverge.  For
P(τ=k) ∝ e^{−βk} with β = 0.5 on {0, …, 4} (λ = 1) the mean is stable up to lr ≈ 6.93, runs
(almost surely) up to ≈ 1.45 and the second moment up to ≈ 1.00.  When the distribution
concentrates on a narrow window (β ≪ 0: mass near τmax) the three thresholds approach each
other and the first moment predicts real runs; see
the README (seed systems section) for the measured numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.dynamics.linear import linearize
from stability.dynamics.random_products import Renormalised
from stability.quadratic import QuadraticModel
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.random_delay import check_distribution

_GRID = np.logspace(-6, 3, 91)


def delay_matrices(probs: Any, momentum: float, lam: float, lr: float) -> np.ndarray:
    """A_k for k = 0 … τmax on the common state (w_t … w_{t−τmax}, v_t), shape (K, S, S).

    Each A_k is read off `DelayedMomentum` with the fixed delay k by `stability.dynamics.linear`
    (probing the rule's own step), then placed in the common state.
    """
    probs = check_distribution(probs)
    tau_max = len(probs) - 1
    size = tau_max + 2  # w lags 0 … τmax, then v
    index = {("w", k): k for k in range(tau_max + 1)} | {("v", 0): tau_max + 1}
    model = QuadraticModel(lam)
    out = np.zeros((tau_max + 1, size, size))
    for k in range(tau_max + 1):
        dyn = linearize(DelayedMomentum(tau_fwd=k, momentum=momentum), model, lr)
        rows = {"w": 0, "v": tau_max + 1}
        for lag, matrix in dyn.matrices.items():
            for i, var_i in enumerate(dyn.variables):
                for j, var_j in enumerate(dyn.variables):
                    if matrix[i][j] != 0:  # only w is read at lags > 0
                        out[k, rows[var_i], index[(var_j, lag)]] += float(matrix[i][j])
        out[k, np.arange(1, tau_max + 1), np.arange(tau_max)] = 1.0  # shift the w history
    return out


def mean_matrix(probs: Any, momentum: float, lam: float, lr: float) -> np.ndarray:
    """Ā = Σ_k P(τ=k)·A_k: the first-moment dynamics."""
    p = np.asarray(check_distribution(probs))
    return np.einsum("k,kij->ij", p, delay_matrices(p, momentum, lam, lr))


def mean_square_radius(probs: Any, momentum: float, lam: float, lr: float) -> float:
    """ρ₂ = ρ(Σ_k P(τ=k)·A_k ⊗ A_k): mean-square stable iff ρ₂ < 1 (module doc).

    Dense eigenvalues of an S² × S² matrix (S = τmax + 2): practical up to τmax ≈ 40.
    """
    p = np.asarray(check_distribution(probs))
    A = delay_matrices(p, momentum, lam, lr)
    second = np.einsum("k,kij,kab->iajb", p, A, A).reshape(A.shape[1] ** 2, -1)
    return float(np.max(np.abs(np.linalg.eigvals(second))))


def lyapunov_exponent(
    probs: Any,
    momentum: float,
    lam: float,
    lr: Any,
    *,
    steps: int = 20_000,
    runs: int = 16,
    seed: int = 0,
) -> np.ndarray:
    """Top Lyapunov exponent γ per step for each lr (array), averaged over ``runs`` runs.

    Runs the random product A_{τ_t}⋯A_{τ_1}X_0 with the delays drawn from ``probs``
    (the same draws and starts for every lr: common random numbers, so γ(lr) is smooth),
    renormalized by `stability.dynamics.random_products.Renormalised` (every 4 steps, the
    first fifth of the steps discarded as transient).  Only the rows of A_k that are not a
    shift of the history (new w, new v) are applied as products: O(S) per run and step
    instead of O(S²).  A run that overflows counts as +inf, one that collapses to 0 as −inf.
    """
    p = np.asarray(check_distribution(probs))
    lrs = np.atleast_1d(np.asarray(lr, dtype=float))
    rng = np.random.default_rng(seed)
    delays = rng.choice(p.size, size=(steps, runs), p=p)
    A = np.stack([delay_matrices(p, momentum, lam, float(a)) for a in lrs])  # (L, K, S, S)
    size = A.shape[-1]
    rows = A[:, :, [0, size - 1], :]  # new w, new v: (L, K, 2, S)
    x = np.broadcast_to(rng.standard_normal((runs, size)), (lrs.size, runs, size)).copy()
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    exponent = Renormalised((lrs.size, runs), steps)
    cols = np.arange(lrs.size)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(steps):
            new = np.einsum("lrij,lrj->lri", rows[cols, delays[t][None, :]], x)
            x = np.concatenate([new[..., :1], x[..., : size - 2], new[..., 1:]], axis=-1)
            x = exponent(t, x)
    return exponent.exponents().mean(axis=1)


@dataclass(frozen=True)
class Thresholds:
    """Max stable lr by each notion (module doc); ``None``: stable on the whole search grid."""

    first_moment: float | None
    mean_square: float | None
    almost_sure: float | None


def thresholds(
    probs: Any,
    momentum: float,
    lam: float,
    *,
    almost_sure: bool = True,
    steps: int = 20_000,
    runs: int = 16,
    seed: int = 0,
) -> Thresholds:
    """First-moment, mean-square and (optionally) almost-sure max stable lr.

    Each is the first lr on a log grid where its stability measure reaches 1 (ρ(Ā), ρ₂,
    e^γ), refined by three rounds of 16-point grids in the bracket (relative precision
    ~1e-4).  The almost-sure one uses common random numbers: it is the threshold of the
    sampled delay sequences, within ≈ 1/√(runs·steps) of the true one in γ.
    """
    p = check_distribution(probs)

    def first(lrs):
        return [
            float(np.max(np.abs(np.linalg.eigvals(mean_matrix(p, momentum, lam, a))))) for a in lrs
        ]

    def second(lrs):
        return [mean_square_radius(p, momentum, lam, a) for a in lrs]

    def sure(lrs):
        gamma = lyapunov_exponent(p, momentum, lam, lrs, steps=steps, runs=runs, seed=seed)
        return np.exp(gamma)

    found = [_first_crossing(first), _first_crossing(second)]
    found.append(_first_crossing(sure) if almost_sure else None)
    return Thresholds(*found)


def _first_crossing(measure, rounds: int = 3, points: int = 16) -> float | None:
    """First lr of the log grid with ``measure`` ≥ 1, then refined in the bracket."""
    grid = _GRID
    for r in range(rounds + 1):
        unstable = np.flatnonzero(np.asarray(measure(grid)) >= 1.0)
        if unstable.size == 0:  # r > 0: the bracket's stable end now measures unstable
            return None if r == 0 else float(grid[-1])
        i = int(unstable[0])
        if i == 0:
            return 0.0 if r == 0 else float(grid[0])
        lo, hi = float(grid[i - 1]), float(grid[i])
        grid = np.geomspace(lo, hi, points + 2)  # both ends kept: lo stable, hi unstable
    return hi


__all__ = [
    "Thresholds",
    "delay_matrices",
    "lyapunov_exponent",
    "mean_matrix",
    "mean_square_radius",
    "thresholds",
]
