r"""EA-Pipe (Jang et al.): N local replicas used round-robin, elastic averaging with a master.

Alg. 1: minibatch t (t = 0, 1, …) runs its forward and backward passes on local replica
i = t mod N; the backward pass updates that replica, and every τ_s-th round
(τ_s = ``sync_period``, the paper's τ: "if τ divides ⌈t_b/N⌉") it is pulled towards the master
x̄ and the master towards it by the elastic force α (eq. 1)::

    x ← x_i;   x_i ← x_i − lr·g(x) − α·(x − x̄);   x̄ ← x̄ + α·(x − x̄).

State in this project's history form: ``w`` is the value of the replica updated last, so
replica t mod N, last updated N steps ago, is w_{t−N+1}, and ``center`` is x̄.  With pipeline
delay τ (Kosson's D: the forward pass of minibatch t ran τ steps before its update) the
forward pass read the replica as it was then, N·⌈(τ+1)/N⌉ − 1 steps ago; the backward pass
uses the replica's current value (Alg. 1: x ← x_i at the backward pass)::

    u_fwd,t  = w_{t−N⌈(τ+1)/N⌉+1},   u_bkwd,t = w_{t−N+1},   x = w_{t−N+1}
    w_{t+1}  = x − lr·g_t − a_t·(x − x̄_t),   x̄_{t+1} = x̄_t + a_t·(x − x̄_t),
    a_t      = α if (⌊t/N⌋ + 1) is a multiple of τ_s else 0.

With N ≥ τ + 1 replicas (the default N = τ + 1, one per minibatch in flight) both passes read
the replica's current value: no staleness, no inconsistency — EA-Pipe's point.

**Periodic dynamics.**  a_t repeats with period P = N·τ_s (``period``), so the rule is not
time-invariant and has no characteristic polynomial.  `stability.dynamics.monodromy` analyses it
through the monodromy matrix M (the product of the P per-step state matrices): the state contracts
by ρ(M) per period, ρ(M)^{1/P} per step, and the max lr is the first lr with ρ(M) = 1.

**How App. A's mixing matrix enters.**  Over one round the N replicas are synchronized one after
the other, each sync the doubly-stochastic M^l of App. A Lemma 1 (replica l ↔ master); the
round's product is the mixing matrix W = M^1⋯M^N (Lemma 1, eq. 15).  The per-step updates
above are App. A's "alternative rule" (Remark 1), X_{k+1} = X_k·S_k − η·G_k with
S_k = W on sync rounds and I otherwise, k counting rounds; on the quadratic G_k = λ·X_k·E
(E = diag(1, …, 1, 0): the master has no gradient).  Hence, without staleness (N ≥ τ + 1),
the monodromy matrix is similar to the period matrix

    R = (I − lr·λ·E)^{τ_s − 1}·(W − lr·λ·E)

(rounds commute cyclically in the spectrum), and at lr = 0 it *is* W: ρ = 1, the consensus
eigenvalue of W1 = 1 (App. A Assumption 5 / Lemma 3), and the other eigenvalues of W set how
fast the replicas reach consensus.  `ea_period_polynomial` (the characteristic polynomial of R)
is the closed form the derived monodromy is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.checks import check_count, check_real, check_scalar_delay
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.base import Passes, TapReader
from stability.rules.spec import LAM, TAU, ClosedForm, Param, RuleSpec


@dataclass(frozen=True)
class ElasticAveraging:
    """EA-Pipe with N replicas, elastic force α, sync period τ_s (module doc).  Periodic."""

    tau: Any = 1
    replicas: Any = None
    elastic: Any = 0.5
    sync_period: Any = 1

    def __post_init__(self):
        object.__setattr__(self, "tau", check_scalar_delay("tau", self.tau))
        if self.replicas is None:  # one replica per minibatch in flight (τ + 1 may be 10⁵ + 1)
            object.__setattr__(self, "replicas", self.tau + 1)
        else:
            object.__setattr__(self, "replicas", check_count("replicas", self.replicas))
        object.__setattr__(self, "sync_period", check_count("sync_period", self.sync_period))
        check_real("elastic", self.elastic, low=0.0, high=1.0)

    variables = ("w", "center")

    tap_period = 1
    """The taps are the same at every phase (a non-syncing step reads the master with force 0):
    `stability.rules.base.tap_phases` need not scan the N·τ_s phases."""

    @property
    def period(self) -> int:
        """P = N·τ_s steps: after P steps every replica has been synced once (module doc)."""
        return self.replicas * self.sync_period

    @property
    def replica_lag(self) -> int:
        """Lag of the replica updated at this step: N − 1."""
        return self.replicas - 1

    @property
    def forward_lag(self) -> int:
        """Lag of the replica as the forward pass read it: N·⌈(τ+1)/N⌉ − 1."""
        n = self.replicas
        return n * (-(-(self.tau + 1) // n)) - 1

    @property
    def marginal(self) -> bool:
        """With elastic force α = 0 the master never moves: a Floquet multiplier exactly 1 at
        every lr, so no lr > 0 is asymptotically stable (`stability.analysis.boundary` answers
        0 without a bisection, which float64 could not certify on a multiplier at 1)."""
        return bool(np.all(np.asarray(self.elastic) == 0))

    def single_replica(self) -> ElasticAveraging:
        """One replica with the same per-replica dynamics: its forward pass reads it m − 1 of
        its own updates back, m = ⌈(τ+1)/N⌉, and it syncs every τ_s-th round.  N of these
        used in turn, chained through the master, make this rule: the structure
        `stability.dynamics.round_robin` analyses in O(τ) instead of O(τ³)."""
        rounds = -(-(self.tau + 1) // self.replicas)
        return ElasticAveraging(rounds - 1, 1, self.elastic, self.sync_period)

    def syncs(self, t: int) -> bool:
        """True when step ``t`` syncs its replica with the master (Alg. 1: τ_s | ⌈t_b/N⌉)."""
        return (t // self.replicas + 1) % self.sync_period == 0

    def passes(self, x: TapReader, lr: Any) -> Passes:
        backward = x("w", self.replica_lag)
        return Passes(x("w", self.forward_lag), backward, backward)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        replica, center = x("w", self.replica_lag), x("center")
        a = self.elastic if self.syncs(x.t) else 0
        pull = a * (replica - center)  # EA-Pipe eq. 1
        return {"w": replica - lr * g - pull, "center": center + pull}


# -- App. A: mixing matrix and period matrix --------------------------------------------------


def sync_matrix(replicas: int, replica: int, elastic: float) -> np.ndarray:
    """M^l of App. A Lemma 1: replica l (0-based) ↔ master (last index), doubly stochastic."""
    n = replicas + 1
    m = np.eye(n)
    m[replica, replica] = m[-1, -1] = 1 - elastic
    m[replica, -1] = m[-1, replica] = elastic
    return m


def mixing_matrix(replicas: int, elastic: float) -> np.ndarray:
    """W = M^1 × ⋯ × M^N (App. A Lemma 1): one round-robin round of syncs."""
    w = np.eye(replicas + 1)
    for replica in range(replicas):
        w = w @ sync_matrix(replicas, replica, elastic)
    return w


def period_matrix(rule: ElasticAveraging, model: QuadraticModel, lr: float) -> np.ndarray:
    """R = (I − lr·λ·E)^{τ_s − 1}·(W − lr·λ·E): App. A Remark 1 over one period (module doc)."""
    n = rule.replicas
    E = np.diag([1.0] * n + [0.0])
    grad = lr * float(model.lam) * E
    R = mixing_matrix(n, rule.elastic) - grad
    step = np.eye(n + 1) - grad
    for _ in range(rule.sync_period - 1):
        R = step @ R
    return R


def ea_period_polynomial(rule: ElasticAveraging, model: QuadraticModel, lr: Any) -> SparsePoly:
    """det(μI − R), R the App. A period matrix (numeric coefficients, highest degree first)."""
    return SparsePoly.from_dense(np.poly(period_matrix(rule, model, float(lr))))


def no_staleness(rule: ElasticAveraging) -> bool:
    """App. A's model has no gradient delay: it applies when N ≥ τ + 1 (module doc)."""
    return rule.replicas >= rule.tau + 1


# -- registry ----------------------------------------------------------------------------------

SPECS = (
    RuleSpec(
        name="ea",
        summary="EA-Pipe: N replicas used round-robin, elastic averaging (force α) with a "
        "master every sync_period rounds; periodic, analysed by Floquet (monodromy)",
        sources=("EA-Pipe eq. 1", "EA-Pipe Alg. 1-3", "EA-Pipe App. A (mixing matrix, Remark 1)"),
        params=(
            TAU,
            Param(
                "replicas",
                "local replicas N ≥ 1 (default τ + 1: no staleness)",
                None,
                kind="delay",
                low=1,
            ),
            Param("elastic", "elastic force α (eq. 1)", 0.5, low=0.0, high=1.0),
            Param(
                "sync_period", "rounds between syncs ≥ 1 (the paper's τ)", 1, kind="delay", low=1
            ),
            LAM,
        ),
        builder=lambda *, tau, replicas, elastic, sync_period: ElasticAveraging(
            tau, replicas, elastic, sync_period
        ),
        closed_forms=(
            ClosedForm(
                "EA-Pipe App. A eq. 13-14 (Remark 1 form), W = M^1⋯M^N (Lemma 1)",
                ea_period_polynomial,
                no_staleness,
            ),
        ),
    ),
)
