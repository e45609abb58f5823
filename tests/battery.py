"""The rule battery's machinery: examples drawn once by hypothesis, simulations batched over them.

A direct simulation of a rule's step is the oracle for the state matrix read off that step
(tests/test_rule_battery.py).  One run costs hundreds of steps of pure Python, so runs are
batched: the examples of one rule that share a *structure* (which parameters are given, and
the values of those that shape the rule's taps, see `UNBATCHED`) become one rule value whose
parameters are arrays with one entry per example — delays as integer arrays, read per run by
`BatchedHistory` — and are stepped together by `stability.rules.base.step`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import Phase, given, settings
from strategies import INTEGER_RANGES

from stability.rules.base import history_depth, step
from stability.rules.registry import RULES

UNBATCHED = {
    "ea": frozenset({"tau"}),  # selects the replica taps
    "wp": frozenset({"tau"}),  # weight prediction over a scalar horizon
    "random-delay": frozenset({"tau", "delay_rate"}),  # the delay distribution
}
"""Per rule, the parameters it needs as scalars; examples are grouped by their values.

Counts (`strategies.INTEGER_RANGES`: replicas, stages, ...) and choices are never batched.  A
new rule whose builder refuses arrays for a delay or a real parameter goes in here.
"""


def draw_examples(strategy, n: int) -> list:
    """``n`` examples of ``strategy`` drawn by hypothesis under the active profile.

    Under the ``ci`` profile (derandomized) the same examples every run; under ``explore``
    new ones.  Only the generation phase runs: the examples are checked afterwards, together.
    """
    out: list = []

    @settings(max_examples=n, phases=[Phase.generate], database=None)
    @given(strategy)
    def collect(example):
        out.append(example)

    collect()
    return out


class BatchedHistory:
    """A tap reader over a batch of runs (duck-typed `stability.rules.base.History`).

    Each variable's values sit in a ring buffer of shape ``(depth, runs)``; ``x(var, lag)[j]``
    is the value of ``var`` ``lag`` steps ago in run ``j``, ``lag`` an integer or one integer
    per run.  `push` writes in place and returns the history advanced by one step: the
    previous value must not be read afterwards (`stability.rules.base.step` never does).
    """

    def __init__(self, buffers: dict[str, np.ndarray]):
        self.buffers = buffers
        self.depth, runs = next(iter(buffers.values())).shape
        self.runs = np.arange(runs)
        self.t = 0
        self.head = 0  # row of the newest value

    def __call__(self, var: str, lag: Any = 0) -> np.ndarray:
        if isinstance(lag, np.ndarray):
            return self.buffers[var][(self.head + lag) % self.depth, self.runs]
        return self.buffers[var][(self.head + lag) % self.depth]

    def push(self, new: dict[str, Any]) -> BatchedHistory:
        self.head = (self.head - 1) % self.depth
        for var, buf in self.buffers.items():
            buf[self.head] = new[var]
        self.t += 1
        return self

    def norms(self) -> np.ndarray:
        """Euclidean norm of each run's whole history."""
        return np.sqrt(sum(np.sum(buf * buf, axis=0) for buf in self.buffers.values()))

    def scale(self, factor: np.ndarray) -> None:
        for buf in self.buffers.values():
            buf *= factor


def _batched(name: str, key: str, value: Any) -> bool:
    if key in UNBATCHED.get(name, ()) or key in INTEGER_RANGES:
        return False
    kind = {p.name: p.kind for p in RULES[name].params}.get(key)
    return isinstance(value, float) or kind == "delay"


def structure_groups(points: Sequence) -> dict[tuple, list[int]]:
    """Indices of ``points`` (``((name, params), lr)``) grouped by rule structure."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, ((name, params), _) in enumerate(points):
        fixed = tuple((k, v) for k, v in sorted(params.items()) if not _batched(name, k, v))
        groups[(name, tuple(sorted(params)), fixed)].append(i)
    return groups


def simulated_log_rates(
    points: Sequence, *, warmup: int = 300, window: int = 500, seed: int = 0
) -> np.ndarray:
    """Mean log growth per step of the full history state of each point, from a random start.

    Every run is rescaled every 25 steps (the dynamics are linear), so nothing over- or
    underflows; the rate is measured over ``window`` steps after ``warmup``, ``window``
    rounded up to whole periods for periodic rules (their norm swings within a period).
    A run that reaches exactly 0 has rate −inf.
    """
    rates = np.empty(len(points))
    rng = np.random.default_rng(seed)
    for (name, keys, _), idx in structure_groups(points).items():
        params = {
            k: np.array([points[i][0][1][k] for i in idx])
            if _batched(name, k, points[idx[0]][0][1][k])
            else points[idx[0]][0][1][k]
            for k in keys
        }
        rule, model = RULES[name].build(**params)
        lrs = np.array([points[i][1] for i in idx])
        period = int(getattr(rule, "period", 1))
        rates[idx] = _run(rule, model, lrs, rng, warmup, period * math.ceil(window / period))
    return rates


def _run(rule, model, lrs, rng, warmup: int, window: int) -> np.ndarray:
    depth, runs = history_depth(rule), lrs.size
    hist = BatchedHistory({v: rng.standard_normal((depth, runs)) for v in rule.variables})
    log_growth = np.zeros(runs)
    dead = np.zeros(runs, dtype=bool)
    for t in range(warmup + window):
        if t == warmup:
            log_growth[:] = 0.0
            s = hist.norms()
            dead |= s == 0
            hist.scale(1.0 / np.where(dead, 1.0, s))
        hist = step(rule, hist, model, lrs)
        if t % 25 == 24:
            s = hist.norms()
            dead |= s == 0
            s = np.where(dead, 1.0, s)
            log_growth += np.log(s)
            hist.scale(1.0 / s)
    final = np.where(dead, 1.0, hist.norms())
    return np.where(dead, -np.inf, (log_growth + np.log(final)) / window)
