r"""Round-robin replicas: the Floquet characteristic function of N replicas in O(N·m) per point.

EA-Pipe (`stability.rules.eapipe`) updates N identical replicas in turn, and they interact
only through one shared variable c (the master) when each is synced.  Its monodromy matrix M
(`stability.dynamics.monodromy`) has N·m + 1 rows — m = ⌈(τ+1)/N⌉ values per replica and c —
so dense eigenvalues cost O((N·m)³), ~τ³ with the default N = τ + 1.  But M is a product of
N local maps, one per replica, each acting on that replica's m values s_i and on c:

    (s_i, c) ← T·(s_i, c),    T = [[A, B], [C, D]]    (A: m×m, D: 1×1),

where T is the period map of a *one-replica* instance of the rule (`single_replica`, same
per-replica delays and sync period), found by running the rule's own step on it.

**Theorem.**  det(μI − M) = μ·d(μ)^N − n(μ)^N with d(μ) = det(μI − A) and
n(μ) = μ·d(μ) − det(μI − T) = d(μ)·(D + C(μI − A)^{-1}B).

*Why*: an eigenvector of M with multiplier μ satisfies μ·s_i = A·s_i + B·c_{i−1} and
c_i = C·s_i + D·c_{i−1} as c passes from replica to replica, so c_i = G(μ)·c_{i−1} with the
transfer function G = n/d, and closing the round c_N = μ·c_0 gives μ = G(μ)^N; both sides of
the identity are monic of degree N·m + 1 (the tests check it against dense monodromy
eigenvalues, also for stale replicas, m > 1, and sync periods > 1).

So the Floquet multipliers are the zeros of F(μ) = μ·d(μ)^N − n(μ)^N, evaluated without
expanding the powers (in logarithms: no overflow for N up to 10⁵): O(m) per point, O(N·m) per
circle of the argument principle (`stability.winding`), whose bisection finds ρ(M) and whose
count on the unit circle decides stability — O(τ) instead of O(τ³), with no eigensolver
(the multipliers cluster in modulus, ~1e-5 apart at τ = 100, which defeats Krylov methods).

Cost of building T: the one-replica instance runs τ_s (sync period) steps on m + 1 basis
vectors; its characteristic polynomials come from eigenvalues of matrices of size ≤ m + 1,
hence the limit `EA_MAX_REPLICA_LAGS` on m.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stability.dynamics.monodromy import monodromy, state_layout
from stability.limits import EA_MAX_REPLICA_LAGS, EA_MAX_REPLICA_VALUES, EA_MAX_SYNC_PERIOD
from stability.quadratic import QuadraticModel
from stability.rules.base import Rule
from stability.winding import SAMPLES_PER_DEGREE


def has_round_robin(rule: Rule) -> bool:
    """True for a periodic rule of identical replicas used in turn (it has ``single_replica``)."""
    return getattr(rule, "period", 1) > 1 and hasattr(rule, "single_replica")


def replica_lags(rule: Rule) -> int:
    """m: the values of one replica the rule keeps (the state of `single_replica`, minus c)."""
    return len(state_layout(rule.single_replica())) - 1


class RoundRobinColumns:
    """The multipliers of a round-robin rule for M step sizes or curvatures (module doc): the
    zeros of F(μ) = μ·d(μ)^N − n(μ)^N, a `stability.winding.CircleFunction` of degree N·m + 1
    per column.

    F is evaluated without expanding the powers: μ·d^N and n^N as exp(log μ + N·log d) and
    exp(N·log n), both divided by the larger (no overflow for N up to 10⁵).  (Sampling
    h = F/d^N = μ − (n/d)^N instead would save a logarithm but not work: h has N-fold poles at
    the zeros of d, where its phase turns too fast for samples spaced by the degree.)

    ``d``, ``n``: coefficients highest first, shape (m + 1, M); ``replicas``: N; ``norm``:
    ‖T‖_∞ per column (M,), for the upper bound ρ(M) ≤ ‖M‖_∞ ≤ max(‖T‖_∞, 1)^N; ``overflow``:
    columns whose T overflowed float64 (a huge lr: growth beyond 1e308 over one period),
    which the callers report as unstable with ρ = ∞ (their d, n are placeholders).
    """

    def __init__(self, d, n, replicas: int, norm, overflow):
        self.d, self.n, self.replicas = d, n, replicas
        self.norm, self.overflow = norm, overflow
        m = d.shape[0] - 1
        self.degree = np.full(d.shape[1], replicas * m + 1)
        points = SAMPLES_PER_DEGREE * int(self.degree[0]) + 64
        self.theta = np.linspace(0.0, np.pi, points)

    def _parts(self, z, cols, log_z=None):
        """μ·d^N and n^N divided by the larger, d'/d, n'/n, and the log of the larger's
        modulus, at paired (z, cols)."""
        d_val, d_der = _horner(self.d[:, cols], z)
        n_val, n_der = _horner(self.n[:, cols], z)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            a = (np.log(z) if log_z is None else log_z) + self.replicas * np.log(d_val)
            b = self.replicas * np.log(n_val)
            top = np.maximum(a.real, b.real)
            top = np.where(np.isfinite(top), top, 0.0)
            return np.exp(a - top), np.exp(b - top), d_der / d_val, n_der / n_val, top

    def at(self, z, cols):
        lead, tail, *_ = self._parts(z, cols)
        return lead - tail

    def _on_circle(self, r, cols):
        z = np.multiply.outer(np.exp(1j * self.theta), r)  # (n, L)
        log_z = np.add.outer(1j * self.theta, np.log(r))
        lead, tail, _, _, top = self._parts(z, np.broadcast_to(cols, z.shape), log_z)
        return lead - tail, top

    def samples(self, r, cols):
        """F at the samples, each divided by its own scale (phases only)."""
        return self._on_circle(r, cols)[0]

    def log_modulus(self, r, cols):
        values, top = self._on_circle(r, cols)
        with np.errstate(divide="ignore"):
            return top + np.log(np.abs(values))

    def newton_step(self, z, cols):
        """F/F' with F' = d^N + N·μ·d^{N−1}·d' − N·n^{N−1}·n' (all scaled alike)."""
        lead, tail, d_ratio, n_ratio, _ = self._parts(z, cols)
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = lead * (1 / z + self.replicas * d_ratio) - tail * self.replicas * n_ratio
            return (lead - tail) / slope

    def at_and_phase_rate(self, z, cols):
        """F and |d arg F(r·e^{iθ})/dθ| = |Re(z·F'(z)/F(z))| at paired (z, cols), from one
        evaluation of the parts: how fast the phase turns (`stability.winding.winding_turns`
        refines where it may alias — the multipliers of a small elastic force and a small lr
        cluster near 1, closer than the samples — and needs F at the same points)."""
        lead, tail, d_ratio, n_ratio, _ = self._parts(z, cols)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            zf = lead * (1 + self.replicas * z * d_ratio) - tail * self.replicas * z * n_ratio
            speed = np.abs((zf / (lead - tail)).real)
        return lead - tail, np.where(np.isfinite(speed), speed, np.inf)

    def bounds(self):
        """Lower: |F(0)|^{1/deg} = |n(0)|^{N/deg} (the geometric mean of the multipliers, if
        none is 0); upper: ‖M‖_∞ ≤ max(‖T‖_∞, 1)^N (each local map leaves the other
        replicas alone)."""
        with np.errstate(divide="ignore"):
            log_lo = self.replicas * np.log(np.abs(self.n[-1])) / self.degree
        lo = np.exp(np.maximum(log_lo, -700.0))
        hi = np.exp(np.minimum(self.replicas * np.log(np.maximum(self.norm, 1.0)), 700.0))
        return np.minimum(lo, hi), np.maximum(hi * (1 + 1e-9), lo * (1 + 1e-9))


def _horner(c: np.ndarray, z: np.ndarray):
    """p(z) and p'(z) for coefficient columns c (k+1, L), highest first, at paired z (…, L)."""
    p = np.zeros(np.shape(z), dtype=complex)
    dp = np.zeros(np.shape(z), dtype=complex)
    for row in c:
        dp = dp * z + p
        p = p * z + row
    return p, dp


def check_size(rule: Rule) -> None:
    """Refuse (one-line `ValueError` naming the parameter) a round-robin rule above the
    documented limits `EA_MAX_REPLICA_LAGS`, `EA_MAX_REPLICA_VALUES`, `EA_MAX_SYNC_PERIOD`."""
    m = replica_lags(rule)
    if m > EA_MAX_REPLICA_LAGS:
        raise ValueError(
            f"replicas must be ≥ (tau+1)/{EA_MAX_REPLICA_LAGS} for the Floquet analysis, got "
            f"{rule.replicas} at tau = {rule.tau} (each replica would keep {m} values)"
        )
    if rule.replicas * m > EA_MAX_REPLICA_VALUES:
        raise ValueError(
            f"tau must be ≤ {EA_MAX_REPLICA_VALUES - 1} for the Floquet analysis (replicas × "
            f"⌈(tau+1)/replicas⌉ ≤ {EA_MAX_REPLICA_VALUES}), got tau = {rule.tau} with "
            f"replicas = {rule.replicas}"
        )
    if rule.sync_period > EA_MAX_SYNC_PERIOD:
        raise ValueError(
            f"sync_period must be ≤ {EA_MAX_SYNC_PERIOD} for the Floquet analysis, "
            f"got {rule.sync_period}"
        )


def round_robin_function(rule: Rule, model: QuadraticModel, lr: Any) -> RoundRobinColumns:
    """F(μ) of a round-robin rule on ``model`` at step sizes ``lr`` (number or 1-D array;
    the model's parameters may be 1-D arrays instead, e.g. one column per curvature).
    Refused above the size limits (`check_size`)."""
    check_size(rule)
    single = rule.single_replica()
    layout = state_layout(single)
    m = len(layout) - 1
    if layout[-1][0] == "w" or any(v == layout[-1][0] for v, _ in layout[:-1]):
        raise ValueError("a round-robin rule shares exactly one scalar variable besides w")
    lrs = np.atleast_1d(np.asarray(lr, dtype=float))
    fields = (model.lam, model.delta, model.phi)
    params = [np.atleast_1d(np.asarray(v, dtype=float)) for v in fields]
    size = np.broadcast_shapes(lrs.shape, *(p.shape for p in params))[0]
    with np.errstate(all="ignore"):  # huge step sizes overflow: flagged below
        if all(p.size == 1 for p in params):  # one model: the step sizes are a batch
            T = monodromy(single, model, np.broadcast_to(lrs, (size,)))
        else:
            lrs, *params = (np.broadcast_to(a, (size,)) for a in (lrs, *params))
            models = [QuadraticModel(*(float(p[j]) for p in params)) for j in range(size)]
            pairs = zip(models, lrs, strict=True)
            T = np.stack([monodromy(single, mj, float(lr)) for mj, lr in pairs])
    overflow = ~np.all(np.isfinite(T), axis=(1, 2))
    T[overflow] = np.eye(m + 1)  # a stand-in: these columns are reported as overflowed
    d = np.stack([np.poly(t[:m, :m]) for t in T], axis=1).real
    full = np.stack([np.poly(t) for t in T], axis=1).real
    n = np.vstack([d, np.zeros((1, size))]) - full  # μ·d − det(μI − T): degree ≤ m
    norm = np.max(np.sum(np.abs(T), axis=2), axis=1)
    return RoundRobinColumns(d, n[1:], int(rule.replicas), norm, overflow)


__all__ = [
    "RoundRobinColumns",
    "check_size",
    "has_round_robin",
    "replica_lags",
    "round_robin_function",
]
