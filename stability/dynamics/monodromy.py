r"""Periodic linear dynamics (Floquet): the monodromy matrix of a periodic rule.

A rule with a ``period`` attribute P > 1 (e.g. EA-Pipe's round-robin replicas,
`stability.rules.eapipe`) steps with a different linear map at each phase t mod P:
x_{t+1} = A_{t mod P}·x_t.  It has no time-invariant characteristic polynomial; what decides
its stability is the **monodromy matrix** M = A_{P−1}⋯A_1·A_0, the map over one period
(Floquet theory for discrete time): x_{t+P} = M·x_t, so the state contracts by ρ(M) per period
and by ρ_step = ρ(M)^{1/P} per step on average, the rate a long run measures.  The eigenvalues
μ of M are the Floquet multipliers (`stability.spectrum.floquet_multipliers`); the max stable lr
is bisected on ρ(M) (`stability.analysis.boundary.max_lr`).

**State.**  Phases may read different lags, so all phases act on one common state: for each
variable the lags 0 … L_v, L_v the largest lag it is read at in any phase (`state_layout`).  This
is the minimal history, so M has no spurious zero eigenvalues from unread history slots.

**Computation.**  M is obtained by running the rule's own `stability.rules.base.step` P times on
the basis vectors of the state, all at once (values are arrays with one column per basis vector
and one row per step size), on the quadratic model: O(P·S·depth) per step size for S state
entries, not O(P·S³) dense products.  Step sizes may be arrays (a batch of lrs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.base import History, Rule, step, tap_phases, taps_read


def period_of(rule: Rule) -> int:
    """The rule's period P (1 for time-invariant rules)."""
    return int(getattr(rule, "period", 1))


def state_layout(rule: Rule) -> tuple[tuple[str, int], ...]:
    """The common state: ``(variable, lag)`` for lags 0 … L_v of each variable (module doc)."""
    deepest = {v: 0 for v in rule.variables}
    for t in tap_phases(rule):
        for var, lag in taps_read(rule, t=t):
            deepest[var] = max(deepest[var], lag)
    return tuple((v, k) for v in rule.variables for k in range(deepest[v] + 1))


def monodromy(rule: Rule, model: QuadraticModel, lr: Any) -> np.ndarray:
    """M = A_{P−1}⋯A_0 on the `state_layout`, shape ``(*np.shape(lr), S, S)``.

    Column j is the state after one period started from basis vector e_j at phase 0.
    """
    layout = state_layout(rule)
    size = len(layout)
    lrs = np.asarray(lr, dtype=float)
    batch = lrs.reshape(-1, 1)
    depth = 1 + max(k for _, k in layout)
    zero = np.zeros((batch.shape[0], size))
    values = {v: [zero] * depth for v in rule.variables}
    for j, (var, lag) in enumerate(layout):
        e = np.zeros((batch.shape[0], size))
        e[:, j] = 1.0
        values[var][lag] = e
    history = History({v: tuple(vals) for v, vals in values.items()}, t=0)
    for _ in range(period_of(rule)):
        history = step(rule, history, model, batch)
    out = np.stack([np.broadcast_to(history(v, k), zero.shape) for v, k in layout], axis=-2)
    return out.reshape(*lrs.shape, size, size)


def monodromy_polynomial(rule: Rule, model: QuadraticModel, lr: float) -> SparsePoly:
    """det(μI − M) in the per-period multiplier μ, highest degree first; zero roots divided out.

    Coefficients come from the eigenvalues of M (`numpy.poly`): accurate to ~eps·‖M‖ per
    coefficient for well-separated multipliers, not exact.
    """
    coeffs = np.real_if_close(np.poly(monodromy(rule, model, float(lr))), tol=1e6)
    return SparsePoly.from_dense(np.asarray(coeffs, dtype=float))


__all__ = ["monodromy", "monodromy_polynomial", "period_of", "state_layout"]
