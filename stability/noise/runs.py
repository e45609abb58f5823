r"""The reference trainer's side: independent minibatch runs measured against the theory.

* `measure_loss`: R runs, each with its own batch stream (`stability.trainer.engine.train`
  with ``streams`` = 0 … R−1), from w₀ = 0; the excess loss f(w_t) − f* at chosen steps as
  mean and standard error over the runs, and the mean over a late window of steps (each run's
  window average is one sample, so the standard error is honest about the autocorrelation
  within a run).  Runs are trained in chunks that keep the recorded curves under ~64 MB.
  ``blowups`` counts runs stopped by the trainer's finite-horizon level criterion (loss >
  ``divergence`` × initial loss); means are over the other runs.
* `measure_almost_sure`: the bracket where the difference of two runs that share their
  batches starts to grow: at each lr P pairs (the two runs of a pair share a stream, start at
  w₀ = 0 and at a kick of 1e-3·‖w*‖), γ̂ = mean over pairs of ln(‖Δw_T‖/‖Δw₀‖)/T (a pair that
  overflows counts as growing); unstable if γ̂ > 0.  The bracket is bisected with
  `stability.trainer.measure.bisect_max_lr` (common random numbers: pair k uses stream k at
  every lr).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stability.trainer.engine import train
from stability.trainer.measure import bisect_max_lr, verdict_rounds

CURVE_BUDGET = 8_000_000
"""Recorded losses per training call (runs × steps)."""


@dataclass(frozen=True)
class LossMeasurement:
    """Mean and standard error of f(w_t) − f* over independent runs (module doc)."""

    times: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    window: tuple[int, int] | None
    window_mean: float | None
    window_se: float | None
    runs: int
    blowups: int


def measure_loss(
    problem,
    rule,
    lr: float,
    batch: int,
    times,
    *,
    runs: int,
    sampling: str = "iid",
    window: tuple[int, int] | None = None,
    seed: int = 0,
    divergence: float = 1e6,
) -> LossMeasurement:
    """Measured expected excess loss at ``times`` and over ``window`` = [start, end)."""
    times = np.asarray(times, dtype=np.int64)
    steps = int(max(times.max(), window[1] if window else 0))
    per_call = max(1, min(runs, CURVE_BUDGET // (steps + 1)))
    at, late, stopped = [], [], 0
    for first in range(0, runs, per_call):
        count = min(per_call, runs - first)
        res = train(
            problem,
            rule,
            np.full(count, lr),
            steps=steps,
            batch=batch,
            seed=seed,
            sampling=sampling,
            streams=np.arange(first, first + count),
            divergence=divergence,
            record_every=1,
        )
        excess = res.curve - problem.min_loss
        keep = ~res.diverged
        stopped += int(np.sum(res.diverged))
        at.append(excess[keep][:, times])
        if window:
            late.append(excess[keep][:, window[0] : window[1]].mean(axis=1))
    values = np.concatenate(at)
    n = values.shape[0]
    mean = values.mean(axis=0) if n else np.full(times.size, np.nan)  # n = 0: every run blew up
    se = values.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.full(times.size, np.nan)
    w_mean = w_se = None
    if window and n:
        w = np.concatenate(late)
        w_mean = float(w.mean())
        w_se = float(w.std(ddof=1) / np.sqrt(w.size)) if w.size > 1 else None
    return LossMeasurement(times, mean, se, window, w_mean, w_se, runs, stopped)


def blowup_warnings(blocks: list[tuple[str, dict]]) -> list[str]:
    """A warning for each measured block (its JSON: ``runs``, ``blowup_fraction``; the
    criterion is its ``blowup_criterion``) with runs that blew up: they are left out of its
    means, and where all did, its ``expected_loss`` rows and ``floor`` are null."""
    out = []
    for what, block in blocks:
        runs, fraction = block["runs"], block["blowup_fraction"]
        if fraction == 1:
            out.append(
                f"all {runs} measured {what} blew up (blowup_criterion): their expected_loss "
                "and floor are null; lower lr"
            )
        elif fraction > 0:
            blown = round(fraction * runs)
            out.append(
                f"{blown} of {runs} measured {what} blew up (blowup_criterion): their "
                f"expected_loss and floor are the means of the other {runs - blown}"
            )
    return out


@dataclass(frozen=True)
class AlmostSureMeasurement:
    """The measured almost-sure bracket [stable, unstable] and the runs it took."""

    stable: float | None
    unstable: float | None
    runs: int


def pair_growth(problem, rule, lrs, batch, *, pairs, steps, sampling="iid", seed=0):
    """γ̂ per lr: mean over pairs of ln(‖Δw_T‖/‖Δw₀‖)/T (module doc)."""
    lrs = np.asarray(lrs, dtype=float)
    L, d = lrs.size, problem.dim
    kick = np.random.default_rng([seed, 2]).standard_normal((pairs, d))
    kick *= (
        1e-3
        * max(np.linalg.norm(problem.minimizer), 1.0)
        / np.linalg.norm(kick, axis=1, keepdims=True)
    )
    w0 = np.zeros((L, pairs, 2, d))
    w0[:, :, 1] = kick
    streams = np.broadcast_to(np.arange(pairs)[None, :, None], (L, pairs, 2)).ravel()
    res = train(
        problem,
        rule,
        np.repeat(lrs, 2 * pairs),
        steps=steps,
        batch=batch,
        seed=seed,
        sampling=sampling,
        streams=streams,
        w0=w0.reshape(-1, d),
        divergence=1e250,
        check_every=max(1, steps // 10),
    )
    w = res.final_weights.reshape(L, pairs, 2, d)
    with np.errstate(all="ignore"):
        delta = np.linalg.norm(w[:, :, 1] - w[:, :, 0], axis=-1)
        # a pair contracted below rounding becomes one run (Δ = 0 exactly): contracting, not
        # diverged — its growth is at most ln(tiny/kick)/T; a non-finite Δ is a diverged pair
        delta = np.where(np.isfinite(delta), np.maximum(delta, np.finfo(float).tiny), np.inf)
        growth = np.log(delta / np.linalg.norm(kick, axis=1)) / steps
    return growth.mean(axis=1)


SPAN = 1.5
"""The bracket's first grid spans [guess/SPAN, SPAN·guess]."""


def almost_sure_runs(pairs: int, *, rel_tol: float = 0.01, per_round: int = 8) -> int:
    """Runs of `measure_almost_sure` when its first grid brackets the crossing: the verdict
    rounds (`stability.trainer.measure.verdict_rounds`) × ``per_round`` step sizes × 2·pairs."""
    rounds = verdict_rounds(rel_tol, per_round=per_round, span=SPAN)
    return rounds * per_round * 2 * pairs


def measure_almost_sure(
    problem,
    rule,
    guess: float,
    batch: int,
    *,
    pairs: int = 32,
    steps: int = 10_000,
    sampling: str = "iid",
    seed: int = 0,
    rel_tol: float = 0.01,
    per_round: int = 8,
) -> AlmostSureMeasurement:
    """The bracket where two runs sharing their batches start to drift apart (module doc)."""
    found = bisect_max_lr(
        lambda lrs: (
            pair_growth(
                problem, rule, lrs, batch, pairs=pairs, steps=steps, sampling=sampling, seed=seed
            )
            > 0
        ),
        guess,
        per_round=per_round,
        rel_tol=rel_tol,
        span=SPAN,
    )
    return AlmostSureMeasurement(found.stable, found.unstable, found.runs * 2 * pairs)


__all__ = [
    "SPAN",
    "AlmostSureMeasurement",
    "almost_sure_runs",
    "blowup_warnings",
    "LossMeasurement",
    "measure_almost_sure",
    "measure_loss",
    "pair_growth",
]
