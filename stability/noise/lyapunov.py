r"""The almost-sure threshold: the top Lyapunov exponent of the random linear system.

One run of minibatch training is one sample path of z_{t+1} = A(H_{B_t})·z_t + b_t.  The
difference of two runs that share their batches follows the homogeneous system
z_{t+1} = A(H_{B_t})·z_t, and grows or decays like e^{γt} with the top Lyapunov exponent

    γ(lr) = lim_{t→∞} (1/t)·ln‖A(H_{B_t}) ⋯ A(H_{B_1})·z₀‖        (almost surely).

A run is almost surely stable iff γ < 0.  Jensen's inequality gives γ ≤ ½·ln ρ(𝒯), so the
almost-sure threshold lies above the mean-square one; between them single runs converge while
E f − f* diverges (rare large excursions, heavy-tailed rows).  As for random delays
(`stability.analysis.random_delays.lyapunov_exponent`):

* γ is estimated by simulating R runs of the homogeneous system (iid batches from the
  trainer's `stability.trainer.engine.BatchStreams`) through the package's one estimator,
  `stability.dynamics.random_products.Renormalised` (renormalised every 4 steps, the first
  fifth of the steps discarded; a run that overflows counts as unstable, one that reaches
  exactly 0 as stable);
* every lr uses the same batches and starting vectors (common random numbers), so γ̂(lr) is
  smooth in lr and its zero crossing well defined;
* the confidence interval comes from the spread of the R runs' exponents: γ̂ ± z·s/√R
  (z = 2, about 95 %), and the threshold's bracket is where γ̂ + z·SE and γ̂ − z·SE cross 0.
  It covers the sampling error of the R paths of finite length, not the bias of the finite
  horizon (≈ 1/T from the start, which the burn-in removes to first order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stability.dynamics.random_products import Renormalised
from stability.noise.moments import Moments
from stability.noise.state import StateSpace
from stability.noise.threshold import Builder
from stability.trainer.engine import BatchStreams

Z_SCORE = 2.0
"""Half-width of the confidence interval in standard errors."""


def lyapunov_exponents(
    states: list[StateSpace],
    moments: Moments,
    batch: int,
    *,
    steps: int,
    runs: int,
    seed: int = 0,
) -> np.ndarray:
    """γ̂ per run for each state space (one per lr): shape (L, runs), common random numbers.

    ``moments``: the data's moments (`stability.noise.moments.SampleMoments` or
    `stability.noise.persample.PerSampleMoments`), whose ``batch_apply`` gives H_B·u."""
    K = np.stack([s.K for s in states])  # (L, d, s, s)
    beta = np.stack([s.beta for s in states])[:, None]  # (L, 1, d, s)
    phi = np.stack([s.phi for s in states])  # (L, d, s)
    L, d, size = K.shape[0], K.shape[1], K.shape[2]
    rng = np.random.default_rng([seed, 1])
    Z = np.broadcast_to(rng.standard_normal((runs, d, size)), (L, runs, d, size)).copy()
    Z /= np.linalg.norm(Z, axis=(2, 3), keepdims=True)
    stream = BatchStreams(moments.samples, batch, seed, "iid", runs)
    exponent = Renormalised((L, runs), steps)
    chunk = max(1, min(256, (1 << 21) // (runs * batch)))
    # z ← K̃ z per coordinate as one (runs × s)·(s × s) product per (lr, coordinate): BLAS
    KT, phi_runs = K.transpose(0, 1, 3, 2).copy(), phi[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, steps, chunk):
            indices = stream.take(min(chunk, steps - start))
            for k, idx in enumerate(indices):
                u = (Z * phi_runs).sum(axis=-1)  # Φ̃ z per run: (L, runs, d)
                g = moments.batch_apply(idx, u)  # H_B Φ̃ z
                KZ = np.matmul(Z.transpose(0, 2, 1, 3), KT).transpose(0, 2, 1, 3)
                Z = exponent(start + k, KZ + beta * g[..., None])
    return exponent.exponents()


@dataclass(frozen=True)
class AlmostSure:
    """The almost-sure threshold (module doc).

    ``max_lr``: where γ̂ crosses 0 (linear interpolation on the final grid); ``bracket``:
    where γ̂ ± `Z_SCORE`·SE cross 0; ``grid``, ``gamma``, ``se``: the final grid.
    """

    max_lr: float
    bracket: tuple[float, float]
    grid: np.ndarray
    gamma: np.ndarray
    se: np.ndarray


def _crossing(lrs: np.ndarray, values: np.ndarray) -> float:
    """First lr where ``values`` reaches 0 (linear interpolation; an end where a value
    is infinite or none reaches 0)."""
    up = np.flatnonzero(values >= 0)
    if up.size == 0:
        return float(lrs[-1])
    i = int(up[0])
    if i == 0:
        return float(lrs[0])
    a, b = values[i - 1], values[i]
    if not np.isfinite(b):
        return float(lrs[i])
    if not np.isfinite(a):  # −∞: a product that reached exactly 0
        return float(lrs[i - 1])
    return float(lrs[i - 1] + (lrs[i] - lrs[i - 1]) * (-a) / (b - a))


def almost_sure_max_lr(
    builder: Builder,
    moments: Moments,
    batch: int,
    low: float,
    high: float,
    *,
    steps: int = 4000,
    runs: int = 32,
    points: int = 12,
    seed: int = 0,
) -> AlmostSure:
    """γ̂(lr) = 0 between ``low`` (stable, e.g. ½·ms_max_lr) and ``high``, with its interval.

    A geometric grid of ``points`` step sizes over [low, high] (extended upwards ×2 while
    every point is stable), then one linear grid between the neighbours of the first γ̂ ≥ 0.
    """

    def evaluate(lrs):
        gam = lyapunov_exponents(
            [builder(float(a)) for a in lrs], moments, batch, steps=steps, runs=runs, seed=seed
        )
        finite = np.where(np.isfinite(gam), gam, np.nan)
        se = np.nanstd(finite, axis=1, ddof=1) / np.sqrt(runs)
        mean = np.where(np.any(gam == np.inf, axis=1), np.inf, gam.mean(axis=1))
        return mean, np.nan_to_num(se, nan=0.0)

    grid = np.geomspace(low, high, points)
    for _ in range(6):
        gamma, se = evaluate(grid)
        if np.any(gamma >= 0):
            break
        grid = np.geomspace(grid[-1], 2 * grid[-1], points)
    i = int(np.argmax(gamma >= 0))
    if i > 0:
        grid = np.linspace(grid[i - 1], grid[i], points)
        gamma, se = evaluate(grid)
    upper, lower = gamma + Z_SCORE * se, gamma - Z_SCORE * se
    bracket = (_crossing(grid, upper), _crossing(grid, lower))
    return AlmostSure(_crossing(grid, gamma), bracket, grid, gamma, se)


def bracket_note(runs: int, steps: int) -> str:
    """What the bracket of `almost_sure_max_lr` covers, as the results' notes say it."""
    return (
        f"as_bracket: ±{Z_SCORE:g} standard errors of the Lyapunov exponent over {runs} paths "
        f"of {steps} steps"
    )


__all__ = ["Z_SCORE", "AlmostSure", "almost_sure_max_lr", "bracket_note", "lyapunov_exponents"]
