r"""Periodic linear dynamics (Floquet): monodromy matrix, per-step rate, max stable lr.

A rule with a ``period`` attribute P > 1 (e.g. EA-Pipe's round-robin replicas,
`stability.rules.eapipe`) steps with a different linear map at each phase t mod P:
x_{t+1} = A_{t mod P}·x_t.  It has no time-invariant characteristic polynomial; what decides
its stability is the **monodromy matrix** M = A_{P−1}⋯A_1·A_0, the map over one period
(Floquet theory for discrete time): x_{t+P} = M·x_t, so the state contracts by ρ(M) per period
and by

    ρ_step = ρ(M)^{1/P}

per step on average, the rate a long run measures.  The eigenvalues μ of M are the Floquet
multipliers; μ^{1/P} (principal root) plays the role of the dominant root of a time-invariant
rule (`dominant_root`).  For P = 1 everything reduces to the time-invariant analysis (the
tests check `max_lr` against `stability.boundary.max_lr` there).

**State.**  Phases may read different lags, so all phases act on one common state: for each
variable the lags 0 … L_v, L_v the largest lag it is read at in any phase (`state_layout`).  This
is the minimal history, so M has no spurious zero eigenvalues from unread history slots.

**Computation.**  M is obtained by running the rule's own `stability.rules.base.step` P times on
the basis vectors of the state, all at once (values are arrays with one column per basis vector
and one row per step size), on the quadratic model: O(P·S·depth) per step size for S state
entries, not O(P·S³) dense products.  Step sizes may be arrays (a batch of lrs).

**Max lr.**  The first lr with ρ(M(lr)) ≥ 1, found on a log grid (one batched evaluation),
bisected to ~4 ulp and certified by evaluating just below (ρ < 1) and just above (ρ ≥ 1).
ρ(M) is computed from float64 eigenvalues of M; products over long periods can lose relative
accuracy ~P·eps·cond(eigenvectors) near a defective multiplier, which the certificate reports
by raising instead of returning a wrong bracket.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from stability.boundary import MaxLr
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.base import History, Rule, step, taps_read
from stability.spectrum import DominantRoot

_GRID = np.logspace(-8, 8, 161)
_EPS = np.finfo(float).eps


def period_of(rule: Rule) -> int:
    """The rule's period P (1 for time-invariant rules)."""
    return int(getattr(rule, "period", 1))


def state_layout(rule: Rule) -> tuple[tuple[str, int], ...]:
    """The common state: ``(variable, lag)`` for lags 0 … L_v of each variable (module doc)."""
    deepest = {v: 0 for v in rule.variables}
    for t in range(period_of(rule)):
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


def multipliers(rule: Rule, model: QuadraticModel, lr: Any) -> np.ndarray:
    """Floquet multipliers: the eigenvalues of the monodromy matrix."""
    return np.linalg.eigvals(monodromy(rule, model, lr))


def step_radius(rule: Rule, model: QuadraticModel, lr: Any) -> np.ndarray:
    """ρ(M)^{1/P}: the average contraction per step (batched over ``lr``)."""
    rho = np.max(np.abs(multipliers(rule, model, lr)), axis=-1)
    return rho ** (1.0 / period_of(rule))


def dominant_multiplier(rule: Rule, model: QuadraticModel, lr: float) -> complex:
    """The Floquet multiplier μ of largest modulus (upper half-plane member of a pair)."""
    mu = multipliers(rule, model, float(lr))
    return complex(mu[np.lexsort((mu.imag, np.abs(mu)))[-1]])


def dominant_root(rule: Rule, model: QuadraticModel, lr: float) -> DominantRoot:
    """The per-step dominant root μ^{1/P} (principal branch) of the largest multiplier μ."""
    best = dominant_multiplier(rule, model, lr)
    period = period_of(rule)
    root = best ** (1.0 / period) if best != 0 else 0j
    return DominantRoot(
        root, abs(best) ** (1.0 / period), f"Floquet monodromy (period {period}), ρ(M)^(1/P)"
    )


def monodromy_polynomial(rule: Rule, model: QuadraticModel, lr: float) -> SparsePoly:
    """det(μI − M) in the per-period multiplier μ, highest degree first; zero roots divided out.

    Coefficients come from the eigenvalues of M (`numpy.poly`): accurate to ~eps·‖M‖ per
    coefficient for well-separated multipliers, not exact.
    """
    coeffs = np.real_if_close(np.poly(monodromy(rule, model, float(lr))), tol=1e6)
    return SparsePoly.from_dense(np.asarray(coeffs, dtype=float))


def max_lr(rule: Rule, model: QuadraticModel) -> MaxLr:
    """First lr > 0 with ρ(M(lr)) ≥ 1 (None: stable on the whole grid up to 1e8; 0.0: not
    stable even at lr = 1e-8), bisected and certified (module doc).

    ``crossing_angle`` is the argument of the per-period multiplier μ = e^{iθ} that reaches
    the unit circle (π: a period-doubling flip, 0: a real multiplier at 1).
    """
    rho = np.max(np.abs(multipliers(rule, model, _GRID)), axis=-1)
    unstable = np.flatnonzero(rho >= 1.0)
    if unstable.size == 0:
        return MaxLr(None, None, "Floquet bisection")
    i = unstable[0]
    if i == 0:
        return MaxLr(0.0, None, "Floquet bisection (not stable for small lr > 0)")
    lo, hi = float(_GRID[i - 1]), float(_GRID[i])
    while hi - lo > 4 * _EPS * hi:
        mid = 0.5 * (lo + hi)
        if _radius(rule, model, mid) >= 1.0:
            hi = mid
        else:
            lo = mid
    below = _radius(rule, model, lo * (1 - 1e-9))
    above = dominant_multiplier(rule, model, hi * (1 + 1e-9))
    if not (below < 1.0 <= abs(above)):
        raise ArithmeticError("Floquet bisection could not certify the stability threshold")
    return MaxLr(hi, abs(math.atan2(above.imag, above.real)), "Floquet bisection (certified)")


def _radius(rule: Rule, model: QuadraticModel, lr: float) -> float:
    return float(np.max(np.abs(multipliers(rule, model, lr))))


__all__ = [
    "dominant_multiplier",
    "dominant_root",
    "max_lr",
    "monodromy",
    "monodromy_polynomial",
    "multipliers",
    "period_of",
    "state_layout",
    "step_radius",
]
