"""What an update rule is: an immutable value with two pure functions on an explicit history.

A rule is a frozen dataclass of hyperparameters (delays, momentum, corrections) with

* ``variables`` — the names of its state variables, ``"w"`` (the weights) first, e.g.
  ``("w", "v", "delta")`` for weights, velocity and PipeMare's T2 accumulator;
* ``passes(x, lr) -> Passes`` — the weights the gradient oracle sees in the forward pass, the
  backward pass and the recomputation, built from past state values;
* ``update(x, g, lr) -> dict`` — the new value of every state variable, given the gradient.

``x`` is a *tap reader*: ``x("w", k)`` is the value of ``w`` k steps ago (``x("w")`` is the
current one), and ``x.t`` is the index of the current step (for periodic rules, such as
round-robin replicas; time-invariant rules ignore it).  Reading the history only through
``x`` is what lets one definition serve

* the reference trainer (``x`` reads a buffer of past weight vectors),
* the linear analysis (``x`` returns unit probes; `stability.dynamics.linear` reads the state matrix
  off the responses — the rule's dynamics are never typed by hand),
* exact and symbolic analysis (the same arithmetic runs on Fractions and sympy symbols).

Rules must therefore use only ``+ - * / **`` on tap values and hyperparameters (no NumPy
functions, no branching on values) so that every numeric type flows through.

`step` composes the two functions with a gradient oracle into one pure step on a `History`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class Passes:
    """Weights used to compute one gradient (PipeMare Sec. 2 and App. D.1).

    ``forward`` = u_fwd, ``backward`` = u_bkwd, ``recompute`` = u_recomp.
    """

    forward: Any
    backward: Any
    recompute: Any


class TapReader(Protocol):
    t: int

    def __call__(self, var: str, lag: int = 0) -> Any: ...


def tap_sum(x: TapReader, var: str, lags: np.ndarray, weights: np.ndarray) -> Any:
    """Σ_i weights_i·x(var, lags_i): a long delay kernel (random delays).

    ``lags`` (K,) ascending distinct integers; ``weights`` (K,) numbers or (K, …) arrays (one
    kernel per grid point).  A reader with a ``weighted(var, lags, weights)`` method sums at
    once: the trainer's ring buffers in one gather and one product, a `UnitTap` by reading
    off its one weight (the linearisation probes every tap: O(K) probes of O(log K), not
    O(K²)).  Any other reader (probes, exact and symbolic values) sees the plain sum of its
    taps, so the rule stays arithmetic."""
    fast = getattr(x, "weighted", None)
    if fast is not None:
        return fast(var, lags, weights)
    coefficients = weights.tolist() if weights.ndim == 1 else weights
    return sum(c * x(var, k) for k, c in zip(lags.tolist(), coefficients, strict=True))


Oracle = Callable[[Any, Any, Any], Any]
"""``oracle(u_fwd, u_bkwd, u_recomp) -> gradient``: the gradient backpropagation computes."""


class Rule(Protocol):
    variables: tuple[str, ...]

    def passes(self, x: TapReader, lr: Any) -> Passes: ...

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]: ...


class UnitTap:
    """A tap reader that is 1 at one ``(var, lag)`` and 0 elsewhere (``tap=None``: 0
    everywhere): a rule's response to a unit impulse in one slot of its state."""

    def __init__(self, tap: tuple[str, int] | None, t: int = 0):
        self.tap = tap
        self.t = t

    def __call__(self, var: str, lag: int = 0) -> int:
        return 1 if (var, lag) == self.tap else 0

    def weighted(self, var: str, lags: np.ndarray, weights: np.ndarray) -> Any:
        """The weight of this tap in Σ_i weights_i·x(var, lags_i) (`tap_sum`; ``lags``
        ascending and distinct); 0 if absent."""
        if self.tap is None or var != self.tap[0]:
            return 0
        i = int(np.searchsorted(lags, self.tap[1]))
        if i == lags.size or lags[i] != self.tap[1]:
            return 0
        return weights[i].item() if weights[i].ndim == 0 else weights[i]


class TapRecorder:
    """A tap reader that returns zeros and records which ``(var, lag)`` were read."""

    def __init__(self, variables: tuple[str, ...], t: int = 0):
        self.variables = variables
        self.t = t
        self.read: set[tuple[str, int]] = set()

    def __call__(self, var: str, lag: int = 0) -> Any:
        if var not in self.variables:
            raise KeyError(f"rule reads unknown state variable {var!r}")
        # per-coordinate lags (arrays, used by the trainer for per-stage delays) record their max
        self.read.add((var, int(np.max(lag))))
        return 0

    def weighted(self, var: str, lags: np.ndarray, weights: np.ndarray) -> Any:
        """Records every lag of a kernel (`tap_sum`) at once."""
        if var not in self.variables:
            raise KeyError(f"rule reads unknown state variable {var!r}")
        self.read.update((var, lag) for lag in lags.tolist())
        return 0


def taps_read(rule: Rule, lr: Any = 1.0, t: int = 0) -> frozenset[tuple[str, int]]:
    """The ``(variable, lag)`` pairs a rule reads in step ``t`` (passes and update).

    Rules read a fixed set of taps whatever the values, so one call with zeros finds them.
    """
    recorder = TapRecorder(rule.variables, t)
    p = rule.passes(recorder, lr)
    rule.update(recorder, p.forward + p.backward + p.recompute, lr)
    for var in rule.variables:
        recorder.read.add((var, 0))
    return frozenset(recorder.read)


class TapProbe:
    """A tap reader returning a distinct number for every ``(var, lag)``; a per-coordinate
    lag (an array: the trainer's) gets a new number at every read, so it never counts as
    equal to another read (`consistent_passes`)."""

    def __init__(self, t: int = 0):
        self.t = t
        self.seen: dict[tuple, float] = {}

    def __call__(self, var: str, lag: Any = 0) -> float:
        key = (var, int(lag)) if np.ndim(lag) == 0 else (var, "array", len(self.seen))
        return self.seen.setdefault(key, 1.0 + math.pi * (len(self.seen) + 1) ** 1.5)


def consistent_passes(rule: Rule) -> bool:
    """True when the forward, backward and recompute passes read the same weights (at every
    phase of `tap_phases`): then the gradient (λ + Δ)·u_f − (Δ − Φ)·u_b − Φ·u_r is λ·u, and Δ
    and Φ do not enter the dynamics (PipeMare eq. 5; e.g. delayed SGD, EA-Pipe with N ≥ τ + 1
    replicas).  Decided on generic values: the taps read as distinct numbers (`TapProbe`), the
    passes must agree exactly (two different expressions of one weight count as different,
    which only costs a caller its shortcut)."""
    for t in tap_phases(rule):
        p = rule.passes(TapProbe(t), 0.371)
        if not (np.array_equal(p.forward, p.backward) and np.array_equal(p.forward, p.recompute)):
            return False
    return True


def tap_phases(rule: Rule) -> range:
    """The phases at which a rule's taps must be read: ``range(tap_period)`` for a periodic
    rule that declares the period of its taps (EA-Pipe reads the same taps at every phase,
    only a coefficient changes: 1), else ``range(period)``, every phase."""
    return range(getattr(rule, "tap_period", getattr(rule, "period", 1)))


def history_depth(rule: Rule) -> int:
    """Number of past values per variable a rule needs: 1 + the largest lag it reads.

    Periodic rules (attribute ``period``) are asked at every phase of `tap_phases`.
    """
    return 1 + max(lag for t in tap_phases(rule) for _, lag in taps_read(rule, t=t))


@dataclass(frozen=True)
class History:
    """The explicit state of a rule: for each variable its values, newest first.

    Pushing a new state shares the stored arrays (only the tuples of references are rebuilt),
    so a step costs O(depth) pointer copies and no array copies.
    """

    values: Mapping[str, tuple[Any, ...]]
    t: int = 0

    @staticmethod
    def constant(rule: Rule, w0: Any, **initial: Any) -> History:
        """A history in which the weights were ``w0`` forever and every other variable 0.

        ``initial`` overrides the starting value of other variables (e.g. ``v=...``).
        """
        depth = history_depth(rule)
        zero = np.zeros_like(w0) if isinstance(w0, np.ndarray) else 0 * w0
        values = {}
        for var in rule.variables:
            start = w0 if var == "w" else initial.get(var, zero)
            values[var] = (start,) * depth
        return History(values)

    def __call__(self, var: str, lag: int = 0) -> Any:
        return self.values[var][lag]

    def push(self, new: Mapping[str, Any]) -> History:
        values = {var: (new[var],) + past[:-1] for var, past in self.values.items()}
        return History(values, self.t + 1)

    @property
    def weights(self) -> Any:
        return self.values["w"][0]


def with_backward_delay(rule: Rule, name: str, tau_bkwd: Any) -> Rule:
    """``rule`` with its backward pass reading w_{t−tau_bkwd} (a pipeline whose backward weights
    differ from the forward ones, PipeMare Sec. 2); `ValueError` if the rule has no such delay."""
    fields = {f.name for f in dataclasses.fields(rule)} if dataclasses.is_dataclass(rule) else ()
    if "tau_bkwd" not in fields:
        raise ValueError(
            f"rule {name!r} has no backward delay: use consistent delays (a schedule whose "
            "backward pass reads the forward weights: pipedream, uniform)"
        )
    return dataclasses.replace(rule, tau_bkwd=tau_bkwd)


def step(rule: Rule, history: History, oracle: Oracle, lr: Any) -> History:
    """One training step: gradient from the rule's pass weights, then the rule's update."""
    p = rule.passes(history, lr)
    g = oracle(p.forward, p.backward, p.recompute)
    return history.push(rule.update(history, g, lr))
