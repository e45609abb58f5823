"""Test helpers: compare polynomials up to a factor ω^k, simulate rules directly."""

from __future__ import annotations

import math

import numpy as np

from stability.polynomial import SparsePoly
from stability.rules.base import History, step


def dense_monic(p: SparsePoly) -> np.ndarray:
    c = p.normalized().dense()
    return c / c[0]


def assert_same_up_to_omega(p: SparsePoly, q: SparsePoly, rtol: float = 1e-11) -> None:
    """p = c·ω^k·q for some k (compared monic, highest degree first, right-padded)."""
    a, b = dense_monic(p), dense_monic(q)
    n = max(len(a), len(b))
    a, b = np.pad(a, (0, n - len(a))), np.pad(b, (0, n - len(b)))
    scale = 1 + np.maximum(np.abs(a), np.abs(b))
    assert np.all(np.abs(a - b) <= rtol * scale), f"\n{a}\n{b}"


def simulated_log_rate(rule, model, lr, *, warmup=300, window=500, seed=0) -> float:
    """Mean log growth per step of the full history state, from a random start.

    The run is rescaled every 25 steps (the dynamics are linear) so nothing over- or
    underflows; the rate is measured over ``window`` steps after ``warmup``.  Rescaling keeps
    the step index (the phase of periodic rules).
    """
    rng = np.random.default_rng(seed)
    hist = History.constant(rule, 0.0)
    hist = History({v: tuple(rng.standard_normal(len(vals))) for v, vals in hist.values.items()})

    def norm(h):
        return math.sqrt(sum(x * x for vals in h.values.values() for x in vals))

    log_growth = 0.0
    for t in range(warmup + window):
        if t == warmup:
            log_growth, start = 0.0, norm(hist)
            hist = History(
                {v: tuple(x / start for x in vals) for v, vals in hist.values.items()}, hist.t
            )
        hist = step(rule, hist, model, lr)
        if t % 25 == 24:
            s = norm(hist)
            if s == 0:
                return -math.inf
            log_growth += math.log(s)
            hist = History(
                {v: tuple(x / s for x in vals) for v, vals in hist.values.items()}, hist.t
            )
    return (log_growth + math.log(norm(hist))) / window
