r"""Measurements on trainer runs: asymptotic rate and empirical maximal stable step size.

**Asymptotic rate** (deterministic runs).  For a linear recurrence the error decays (or grows)
like ‖e_t‖ ∝ ρ^t·(bounded oscillation), ρ the spectral radius of the dynamics.  From the block
energies E_j = Σ_{t ∈ block j} ‖e_t‖² recorded by `stability.trainer.engine.train`:

1. the *valid* blocks are those before divergence and before the energy first falls
   `FLOOR_DECADES` decades (of the norm) below its running maximum — below that, float64
   rounding of w and of the gradient (≈ eps·κ·‖w*‖) would flatten the curve;
2. the *window* is the last half of the valid blocks (the transients of the faster modes have
   decayed by then), cut into at most `WINDOW_BLOCKS` equal sub-blocks of m blocks;
3. ln ρ̂ = slope of log(sub-block energy) against the sub-block index, / (2·m·block).

For a pure geometric sequence consecutive equal-length sums have the exact ratio ρ^{2·length},
so the estimate is exact; an oscillating dominant pair e^{±iθ} adds an error that falls like
1/(length·θ).  Fewer than 4 valid steps: not measurable (NaN).

Tracks (see the engine): ``"error"`` measures ‖w_t − w*‖ (the issue's definition of the rate);
``"increment"`` measures ‖w_t − w_{t−1}‖, whose modes are the same except ω = 1, each scaled by
|ω − 1|: a mode creeping away from ω = 1 (slow decay, ρ ≈ 1 − δ) is damped by δ, so near the
stability threshold the critical mode's growth or decay is seen within a few thousand steps
even on ill-conditioned problems.  The empirical max lr decides stability on it.

**Empirical maximal stable lr** (`bisect_max_lr`).  Rounds of batched runs: each round trains
``per_round`` step sizes spread over the current bracket [stable, unstable] in one array
computation (× seeds for minibatch runs), and the bracket shrinks to the neighbours of the
first unstable one.  A run is unstable if it diverged (loss > ``divergence`` × initial loss) or,
for deterministic runs, if its measured ln ρ̂ of the increments is > 0.  For minibatch runs
(no asymptotic rate: the noise sets a floor) only the divergence test applies, over all seeds:
an lr is stable if no seed diverges within ``steps`` steps.  The starting bracket is verified
(extended by factors of 4) before it is trusted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

FLOOR_DECADES = 9.0
WINDOW_BLOCKS = 8


def log_rate(
    energies: np.ndarray, block: int, *, decades: float | None = FLOOR_DECADES
) -> np.ndarray:
    """Measured ln ρ̂ per run from block energies (R, J) (module doc); NaN if unmeasurable.

    ``decades``: the rounding floor, in decades of the norm below its running maximum;
    ``None`` when there is none (error recursions run directly), then only underflow
    (energy < `TINY`) ends the valid range.
    """
    E = np.atleast_2d(np.asarray(energies, dtype=float))
    out = np.full(E.shape[0], np.nan)
    with np.errstate(divide="ignore"):
        for r in range(E.shape[0]):
            out[r] = _log_rate_one(E[r], block, decades)
    return out


TINY = 1e-280
"""Energies below this are treated as underflowed."""


def valid_blocks(E: np.ndarray, decades: float | None) -> np.ndarray:
    """The blocks of one run the rate may use: before divergence (NaN), from the first
    nonzero one, and before the floor (module doc)."""
    finite = np.isfinite(E)
    n = E.size if finite.all() else int(np.argmin(finite))
    E = E[:n]
    positive = np.flatnonzero(E > TINY)
    if positive.size == 0:
        return E[:0]
    E = E[positive[0] :]  # blocks before the first motion carry no information
    logE = np.log(np.maximum(E, TINY))
    floor = np.full(E.size, np.log(TINY))
    if decades is not None:
        floor = np.maximum(floor, np.maximum.accumulate(logE) - 2 * np.log(10.0) * decades)
    below = np.flatnonzero(logE <= floor)
    return E[: below[0]] if below.size else E


def _log_rate_one(E: np.ndarray, block: int, decades: float | None) -> float:
    E = valid_blocks(E, decades)
    n = E.size
    if n * block < 4:
        return np.nan
    window = E[n // 2 :]
    k = min(WINDOW_BLOCKS, window.size)
    m = window.size // k
    sums = window[window.size - k * m :].reshape(k, m).sum(axis=1)
    slope = np.polyfit(np.arange(k), np.log(sums), 1)[0] if k > 1 else np.nan
    return float(slope / (2 * m * block))


@dataclass(frozen=True)
class RateMeasurement:
    """Result of `converged_log_rate`: ln ρ̂ per run, the steps of the last run, whether each
    estimate settled (two doublings agreed, or the valid range ended inside the run), and its
    relative change over the last doubling (NaN where the first run was the last)."""

    log_rate: np.ndarray
    steps: int
    converged: np.ndarray
    change: np.ndarray


def converged_log_rate(
    run: Callable[[int], object],
    steps: int,
    *,
    track: str = "error",
    decades: float | None = FLOOR_DECADES,
    rel_tol: float = 1e-3,
    max_doublings: int = 5,
) -> RateMeasurement:
    """ln ρ̂ from runs of doubling length until it settles (module doc).

    ``run(steps)`` trains the runs (deterministically) and returns a `TrainResult` tracking
    ``track``.  An estimate is final when the valid range ended before the run did (floor,
    underflow or divergence: a longer run adds nothing) or when it moved by ≤ ``rel_tol``
    (relative) from the previous length; at most ``max_doublings`` doublings.
    """
    previous = None
    for k in range(max_doublings + 1):
        T = steps * 2**k
        res = run(T)
        E = res.energies[track]
        rate = log_rate(E, res.block, decades=decades)
        ended = np.array([valid_blocks(e, decades).size * res.block < T - res.block for e in E])
        settled = ended | ~np.isfinite(rate)
        change = np.full(rate.shape, np.nan)
        if previous is not None:
            settled |= np.abs(rate - previous) <= rel_tol * np.abs(rate)
            with np.errstate(divide="ignore", invalid="ignore"):
                change = np.abs(rate - previous) / np.abs(rate)
        if np.all(settled):
            break
        previous = rate
    return RateMeasurement(rate, T, settled, change)


# -- empirical max stable lr -----------------------------------------------------------------


@dataclass(frozen=True)
class MaxLrMeasurement:
    """Result of `bisect_max_lr`.

    ``max_lr``: midpoint of the final bracket [``stable``, ``unstable``] (``None`` if no
    unstable lr was found up to the search limit, 0 if none was stable); ``runs``: total runs
    trained; ``rounds``: the (lr, unstable) pairs of every round, for inspection.
    """

    max_lr: float | None
    stable: float | None
    unstable: float | None
    runs: int
    rounds: list = field(default_factory=list)

    @property
    def relative_width(self) -> float | None:
        if self.stable is None or self.unstable is None or self.stable == 0:
            return None
        return (self.unstable - self.stable) / self.stable


Verdict = Callable[[np.ndarray], np.ndarray]
"""``verdict(lrs) -> unstable`` (bool array): train runs at these step sizes and judge them."""


PER_ROUND = 16
"""Step sizes `bisect_max_lr` tries in one round (one batched verdict)."""
SPAN = 4.0
"""`bisect_max_lr`'s first grid spans [guess/SPAN, SPAN·guess]."""
MAX_ROUNDS = 8
"""Most rounds `bisect_max_lr` shrinks the bracket by."""


def verdict_rounds(
    rel_tol: float, *, per_round: int = PER_ROUND, span: float = SPAN, max_rounds: int = MAX_ROUNDS
) -> int:
    """Rounds of `bisect_max_lr` when its first grid brackets the crossing: the log grid over
    [guess/span, span·guess] leaves a relative width span^(2/(per_round − 1)) − 1 (0.203 at
    the defaults), and every further round divides it by per_round + 1 until ≤ ``rel_tol``
    (3 rounds at rel_tol 0.01, 5 at 2e-5)."""
    width = span ** (2 / (per_round - 1)) - 1
    more = math.ceil(math.log(width / rel_tol) / math.log(per_round + 1)) if rel_tol < width else 0
    return 1 + min(max_rounds, more)


def bisect_max_lr(
    verdict: Verdict,
    guess: float,
    *,
    per_round: int = PER_ROUND,
    rel_tol: float = 1e-3,
    span: float = SPAN,
    max_rounds: int = MAX_ROUNDS,
    extend: int = 6,
) -> MaxLrMeasurement:
    """Empirical max stable lr by rounds of batched verdicts (module doc).

    ``guess`` centres the first round's log-spaced grid over [guess/span, span·guess]; the
    bracket is then shrunk until its relative width is ≤ ``rel_tol``.
    """
    if not guess > 0:
        raise ValueError(f"guess must be > 0, got {guess}")
    if not span > 1:
        raise ValueError(f"span must be > 1, got {span}")
    rounds, runs = [], 0
    lo, hi = guess / span, guess * span
    grid = np.geomspace(lo, hi, per_round)
    for _ in range(extend + 1):
        unstable = np.asarray(verdict(grid), dtype=bool)
        runs += grid.size
        rounds.append((grid.tolist(), unstable.tolist()))
        if not unstable[-1]:  # everything stable so far: look higher
            grid = np.geomspace(grid[-1], grid[-1] * 16, per_round)
            continue
        if unstable[0]:  # nothing stable: look lower
            grid = np.geomspace(grid[0] / 16, grid[0], per_round)
            continue
        break
    else:
        if not unstable[-1]:
            return MaxLrMeasurement(None, float(grid[-1]), None, runs, rounds)
        return MaxLrMeasurement(0.0, None, float(grid[0]), runs, rounds)
    first = int(np.argmax(unstable))
    stable_lr, unstable_lr = float(grid[first - 1]), float(grid[first])
    for _ in range(max_rounds):
        if (unstable_lr - stable_lr) / stable_lr <= rel_tol:
            break
        grid = np.linspace(stable_lr, unstable_lr, per_round + 2)[1:-1]
        unstable = np.asarray(verdict(grid), dtype=bool)
        runs += grid.size
        rounds.append((grid.tolist(), unstable.tolist()))
        if unstable.any():
            first = int(np.argmax(unstable))
            unstable_lr = float(grid[first])
            stable_lr = float(grid[first - 1]) if first > 0 else stable_lr
        else:
            stable_lr = float(grid[-1])
    return MaxLrMeasurement(0.5 * (stable_lr + unstable_lr), stable_lr, unstable_lr, runs, rounds)


def deterministic_verdict(run: Callable[[np.ndarray], object]) -> Verdict:
    """Unstable ⇔ diverged or ln ρ̂(increments) > 0, for full-batch runs.

    ``run(lrs)`` returns a `TrainResult` tracking ``"increment"``.
    """

    def verdict(lrs: np.ndarray) -> np.ndarray:
        res = run(lrs)
        rate = log_rate(res.energies["increment"], res.block)
        return res.diverged | (rate > 0)

    return verdict


def minibatch_verdict(run: Callable[[np.ndarray, int], object], seeds: Sequence[int]) -> Verdict:
    """Unstable ⇔ some seed diverged (loss > divergence × initial) within the run.

    ``run(lrs, seed)`` returns a `TrainResult`.
    """

    def verdict(lrs: np.ndarray) -> np.ndarray:
        out = np.zeros(len(lrs), dtype=bool)
        for seed in seeds:
            out |= run(lrs, seed).diverged
        return out

    return verdict


__all__ = [
    "FLOOR_DECADES",
    "MAX_ROUNDS",
    "PER_ROUND",
    "SPAN",
    "MaxLrMeasurement",
    "RateMeasurement",
    "converged_log_rate",
    "bisect_max_lr",
    "deterministic_verdict",
    "log_rate",
    "minibatch_verdict",
    "verdict_rounds",
]
