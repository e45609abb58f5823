r"""Random (Hogwild!-style) delays: the expected-delay rule of the analysis, the sampled one of
the trainer.

PipeMare App. E (eq. 15-16): each stage i applies a gradient computed from weights τ_{i,t}
steps old, τ_{i,t} drawn independently at every step from a truncated exponential
distribution on {0, …, τ_max} (the maximum-entropy distribution with a given mean, Mitliagkas
et al. 2016)::

    w_{i,t+1} = w_{i,t} − α·[∇f(w_{t−τ_{i,t}})]_i,     P(τ = k) ∝ e^{−β·k},  k = 0 … τ_max.

The rate β sets the mean: β > 0 favours short delays, β = 0 is uniform, β < 0 favours delays
near τ_max (PipeMare uses "sampling distributions with different expectation values").

**First-moment analysis** (`ExpectedDelay`, registry name ``random-delay``).  The delay at step
t is independent of the past weights, so on the quadratic model the *mean* E[w_t] follows the
deterministic rule with the expected delay kernel, u_t = Σ_k P(τ = k)·w_{t−k}, whose
polynomial (derived here; PipeMare eq. 3 is the case P(τ = τ_max) = 1) is

    SGD:       ω^{τmax+1} − ω^{τmax} + lr·λ·Σ_k P(τ = k)·ω^{τmax−k}
    momentum:  (ω − 1)(ω − m)·ω^{τmax} + lr·λ·Σ_k P(τ = k)·ω^{τmax+1−k}.

It answers "does the *mean* converge", not "does a run converge": the second moment (and a
single run) can diverge while the mean contracts; `stability.analysis.random_delays` computes the
mean-square threshold and the almost-sure (Lyapunov) rate to say when the first moment is not
enough.

**Trainer** (`SampledDelays`): draws the delays — one per stage per step, the same
distribution for every stage — reproducibly from (seed, t).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.checks import check_real, check_scalar_delay
from stability.polynomial import SparsePoly
from stability.polynomial import term as W
from stability.quadratic import QuadraticModel
from stability.rules.base import Passes, TapReader, tap_sum
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.spec import LAM, ClosedForm, Param, RuleSpec, momentum_param


def truncated_exponential(tau_max: int, rate: float) -> tuple[float, ...]:
    """P(τ = k) ∝ e^{−β·k} for k = 0 … τ_max, β = ``rate`` (PipeMare App. E)."""
    tau_max = check_scalar_delay("tau_max", tau_max)
    if hasattr(rate, "free_symbols"):
        raise ValueError(
            "delay_rate cannot stay a symbol: the probabilities e^{−βk} are not polynomial in "
            "it, so there is no symbolic form of this rule's polynomial (drop symbolic)"
        )
    check_real("delay_rate", rate)
    logs = -np.multiply.outer(np.arange(tau_max + 1), np.asarray(rate, dtype=float))
    weights = np.exp(logs - logs.max(axis=0))
    return _entries(weights / weights.sum(axis=0))


def check_distribution(probs: Any) -> tuple[Any, ...]:
    """A delay distribution: nonnegative P(τ = k), k = 0 … τ_max, summing to 1.

    Each P(τ = k) may be an array (one distribution per grid point, e.g. a heatmap over the
    delay rate); they are returned as floats when they are numbers."""
    p = np.asarray(probs, dtype=float)
    if p.ndim == 0 or p.shape[0] == 0 or np.any(~np.isfinite(p)) or np.any(p < 0):
        raise ValueError("delay probabilities must be a nonempty list of numbers ≥ 0")
    total = p.sum(axis=0)
    if np.any(np.abs(total - 1.0) > 1e-9):
        worst = total.flat[np.argmax(np.abs(total - 1.0))]
        raise ValueError(f"delay probabilities must sum to 1, got {worst:.12g}")
    return _entries(p)


def _entries(p: np.ndarray) -> tuple[Any, ...]:
    return tuple(float(x) if x.ndim == 0 else x for x in p)


def mean_delay(probs: tuple[float, ...]) -> float:
    """E[τ] = Σ_k k·P(τ = k)."""
    return float(np.dot(np.arange(len(probs)), probs))


@dataclass(frozen=True)
class ExpectedDelay:
    """Heavy ball with the expected delay kernel u_t = Σ_k P(τ=k)·w_{t−k} (first moment)."""

    probs: tuple[float, ...] = (0.0, 1.0)
    momentum: Any = 0.0

    def __post_init__(self):
        object.__setattr__(self, "probs", check_distribution(self.probs))
        check_real("momentum", self.momentum, low=0.0, high=1.0)
        # the lags with P(τ = k) > 0, found once: a long-tailed kernel (τmax = 10⁵, most
        # probabilities underflowed to 0) would otherwise be scanned at every step
        probs = np.asarray(self.probs)
        lags = np.flatnonzero(probs.reshape(len(probs), -1).any(axis=1))
        object.__setattr__(self, "_kernel", (lags, probs[lags]))
        object.__setattr__(self, "_heavy_ball", DelayedMomentum(momentum=self.momentum))

    variables = ("w", "v")

    @property
    def tau_max(self) -> int:
        return len(self.probs) - 1

    def passes(self, x: TapReader, lr: Any) -> Passes:
        u = tap_sum(x, "w", *self._kernel)
        return Passes(u, u, u)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        return self._heavy_ball.update(x, g, lr)


@dataclass(frozen=True)
class SampledDelays:
    """The trainer's rule: each stage's delay drawn per step from ``probs`` (module doc).

    ``stage_sizes`` splits the parameters (last axis of w) into stages, in order.  The delays
    of step t are a pure function of (``seed``, t), so reruns and batched runs agree.  The
    forward (and backward: consistent weights) pass is

        u_t = Σ_k 1[τ_t = k]·w_{t−k}      (per parameter: its stage's indicator)

    — `ExpectedDelay` with the indicators in place of their expectations P(τ = k).  Every lag
    0 … τmax is read, so `stability.rules.base.history_depth` sees τmax.
    """

    probs: tuple[float, ...]
    stage_sizes: tuple[int, ...]
    momentum: Any = 0.0
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "probs", check_distribution(self.probs))
        sizes = tuple(int(s) for s in self.stage_sizes)
        if not sizes or min(sizes) < 1:
            raise ValueError("stage_sizes must be positive integers (one per stage)")
        object.__setattr__(self, "stage_sizes", sizes)
        check_real("momentum", self.momentum, low=0.0, high=1.0)
        object.__setattr__(self, "_heavy_ball", DelayedMomentum(momentum=self.momentum))

    variables = ("w", "v")

    @property
    def tau_max(self) -> int:
        return len(self.probs) - 1

    def delays(self, t: int) -> np.ndarray:
        """The per-stage delays of step ``t``, shape (stages,)."""
        rng = np.random.default_rng((self.seed, t))
        return rng.choice(len(self.probs), size=len(self.stage_sizes), p=self.probs)

    def passes(self, x: TapReader, lr: Any) -> Passes:
        lag = np.repeat(self.delays(x.t), self.stage_sizes)
        u = sum((lag == k) * x("w", k) for k in range(self.tau_max + 1))
        return Passes(u, u, u)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        return self._heavy_ball.update(x, g, lr)


def kernel_polynomial(rule: ExpectedDelay, model: QuadraticModel, lr: Any) -> SparsePoly:
    """(ω − 1)(ω − m)ω^{τmax} + lr·λ·Σ_k P(τ=k)·ω^{τmax+1−k} (derived here; module doc)."""
    t, el = rule.tau_max, lr * model.lam
    base = (W(1) - W(0)) * (W(1) - W(0, rule.momentum)) * W(t)
    return base + SparsePoly.from_terms((t + 1 - k, el * p) for k, p in enumerate(rule.probs))


def random_delay(*, tau, delay_rate, momentum):
    """Expected-delay rule for a truncated exponential on {0, …, τ} with rate β."""
    return ExpectedDelay(truncated_exponential(tau, delay_rate), momentum)


SPECS = (
    RuleSpec(
        name="random-delay",
        summary="Hogwild!-style random delays, truncated exponential on {0..τ}: first-moment "
        "(expected delay kernel) analysis",
        sources=("PipeMare App. E eq. 15-16", "PipeMare eq. 3", "derived here"),
        params=(
            Param("tau", "largest delay τ_max of the truncated exponential", 4, kind="delay"),
            Param(
                "delay_rate",
                "rate β of P(τ = k) ∝ e^{−βk} (0: uniform, < 0: long delays)",
                -1.0,
                low=-50.0,
                high=50.0,
            ),
            momentum_param(0.0),
            LAM,
        ),
        builder=random_delay,
        closed_forms=(ClosedForm("derived here (expected delay kernel)", kernel_polynomial),),
    ),
)
