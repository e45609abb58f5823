r"""The baselines the seed papers compare against: weight stashing, GPipe, SpecTrain, shrinking.

``stash`` — PipeDream's weight stashing (PipeMare Table 1, App. A.1; Kosson App. F): the
backward pass uses the very weights of the forward pass, τ_bkwd = τ_fwd = τ.  The gradient is
(λ + Δ)·w_{t−τ} − Δ·w_{t−τ} = λ·w_{t−τ}: the discrepancy Δ cancels, and what is left is delayed
heavy ball, PipeMare eq. 13 (the stale gradient is not fixed, Kosson App. F, EA-Pipe Sec. II.A).

``gpipe`` — GPipe (PipeMare Table 1, App. A.1): synchronous, τ_fwd = τ_bkwd = 0, at the cost
of pipeline bubbles: utilization N/(N + P − 1) for P stages and N microbatches.  Its step is
the undelayed heavy ball; per unit of pipeline time a rate ρ per update becomes
ρ^{utilization} (`GPipe.rate_per_time`).

``spectrain`` — SpecTrain (Chen et al. 2018, Kosson App. G, Fig. 16): every stage predicts its
weights, with SGDM's velocity, to one common time — the update of the first stage, whose delay
is the largest, D_max.  A stage with delay D (Kosson's count: steps between its forward and
backward pass; D_i = 2(S − i) in Pipelined Backpropagation) predicts on the forward pass
T_f = D + (D_max − D)/2 steps ahead and on the backward pass T_b = (D_max − D)/2 steps ahead
(Fig. 16 left, green and blue)::

    u_fwd,t = w_{t−D} − lr·T_f·v_{t−D},    u_bkwd,t = w_t − lr·T_b·v_t

(derived here from Fig. 16; SpecTrain's prediction is the velocity form, Kosson eq. 11).  With
D_max = D it is LWP^v_D with a current-weight backward pass.  Its polynomial (derived here)::

    (ω − 1)(ω − m)ω^D + lr·(λ + Δ)·(ω + T_f(ω − 1)) − lr·Δ·ω^D·(ω + T_b(ω − 1))

``shrink`` — Gradient Shrinking (Zhuang et al. 2019, Kosson Fig. 13): the gradient of a stage
with delay τ is scaled by s^τ (s: the shrinking factor, 0.9-0.99 in Fig. 13), i.e. GSC with
a = s^τ, b = 0 (Kosson eq. 21): the max stable lr grows by exactly s^{−τ}.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from stability.checks import check_count, check_delay, check_order
from stability.polynomial import SparsePoly
from stability.polynomial import term as W
from stability.quadratic import QuadraticModel
from stability.rules.base import Passes, TapReader
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.discrepancy import eq13
from stability.rules.lwp_sc import eq21
from stability.rules.spec import DELTA, LAM, TAU, ClosedForm, Param, RuleSpec, momentum_param

# -- stash, shrink: presets of the engine ------------------------------------------------------


def stash(*, tau, momentum):
    """Weight stashing: forward and backward at w_{t−τ} (PipeMare Table 1, PipeDream)."""
    return DelayedMomentum(tau_fwd=tau, tau_bkwd=tau, momentum=momentum)


def shrink(*, tau, momentum, shrink_factor):
    """Gradient Shrinking: g ← s^τ·g (Kosson Fig. 13), GSC with a = s^τ, b = 0."""
    return DelayedMomentum(tau_fwd=tau, momentum=momentum, sc_a=shrink_factor**tau)


# -- gpipe -------------------------------------------------------------------------------------


def gpipe_utilization(stages: int, microbatches: int) -> float:
    """N/(N + P − 1): GPipe's pipeline utilization (PipeMare Table 1, App. A.1)."""
    return microbatches / (microbatches + stages - 1)


@dataclass(frozen=True)
class GPipe:
    """Synchronous pipeline (τ = 0) with its bubble cost; the step is the undelayed heavy ball."""

    stages: int = 4
    microbatches: int = 1
    momentum: Any = 0.9

    def __post_init__(self):
        for name in ("stages", "microbatches"):
            object.__setattr__(self, name, check_count(name, getattr(self, name)))
        self.engine  # noqa: B018 - builds (and so validates) the engine now

    @cached_property
    def engine(self) -> DelayedMomentum:
        """The undelayed heavy ball (not a field: rebuilt by `dataclasses.replace`)."""
        return DelayedMomentum(tau_fwd=0, momentum=self.momentum)

    variables = ("w", "v")
    tau_fwd = 0

    @property
    def utilization(self) -> float:
        return gpipe_utilization(self.stages, self.microbatches)

    def rate_per_time(self, rate_per_update: Any) -> Any:
        """ρ^{utilization}: the contraction per pipeline step when an update takes 1/util steps."""
        return rate_per_update**self.utilization

    def passes(self, x: TapReader, lr: Any) -> Passes:
        return self.engine.passes(x, lr)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        return self.engine.update(x, g, lr)


# -- spectrain ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecTrain:
    """Forward and backward weights predicted to the first stage's update (module doc)."""

    tau: Any = 1
    tau_max: Any = None
    momentum: Any = 0.9

    def __post_init__(self):
        object.__setattr__(self, "tau", check_delay("tau", self.tau))
        if self.tau_max is None:
            object.__setattr__(self, "tau_max", self.tau)
        object.__setattr__(self, "tau_max", check_delay("tau_max", self.tau_max))
        check_order("tau", self.tau, "tau_max", self.tau_max)
        self.engine  # noqa: B018 - builds (and so validates) the engine now

    @cached_property
    def engine(self) -> DelayedMomentum:
        """LWP^v with horizon T_f and a current-weight backward (not a field)."""
        return DelayedMomentum(
            tau_fwd=self.tau,
            tau_bkwd=0,
            momentum=self.momentum,
            horizon=self.forward_horizon,
            prediction="velocity",
        )

    variables = ("w", "v")

    @property
    def backward_horizon(self) -> float:
        """T_b = (D_max − D)/2: from this stage's backward pass to the first stage's update."""
        return (self.tau_max - self.tau) / 2

    @property
    def forward_horizon(self) -> float:
        """T_f = D + T_b: from this stage's forward pass to the first stage's update."""
        return self.tau + self.backward_horizon

    def passes(self, x: TapReader, lr: Any) -> Passes:
        backward = x("w") - lr * self.backward_horizon * x("v")
        return Passes(self.engine.passes(x, lr).forward, backward, backward)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        return self.engine.update(x, g, lr)


def spectrain_polynomial(rule: SpecTrain, model: QuadraticModel, lr: Any) -> SparsePoly:
    """SpecTrain's polynomial (module doc), derived here with the z-transform."""
    D, m = rule.tau, rule.momentum
    Tf, Tb = rule.forward_horizon, rule.backward_horizon
    lf, d = lr * (model.lam + model.delta), lr * model.delta
    w1 = W(1) - W(0)
    return w1 * (W(1) - W(0, m)) * W(D) + (W(1) + w1 * Tf) * lf - (W(1) + w1 * Tb) * W(D) * d


# -- registry ----------------------------------------------------------------------------------

MOMENTUM = momentum_param(0.9)

SPECS = (
    RuleSpec(
        name="stash",
        summary="PipeDream weight stashing: forward and backward at the same stale w_{t−τ} "
        "(Δ cancels; the gradient stays stale)",
        sources=("PipeMare Table 1", "PipeMare App. A.1", "Kosson App. F", "PipeMare eq. 13"),
        params=(TAU, MOMENTUM, DELTA, LAM),
        builder=stash,
        closed_forms=(ClosedForm("PipeMare eq. 13 (Δ cancels)", eq13),),
    ),
    RuleSpec(
        name="gpipe",
        summary="GPipe: synchronous (τ = 0), utilization N/(N + P − 1) from pipeline bubbles",
        sources=("PipeMare Table 1", "PipeMare App. A.1", "PipeOptim Fig. 1(b)"),
        params=(
            Param("stages", "pipeline stages P ≥ 1 (bubble cost only)", 4, kind="delay", low=1),
            Param("microbatches", "microbatches N ≥ 1 (bubble cost only)", 1, kind="delay", low=1),
            MOMENTUM,
            LAM,
        ),
        builder=lambda *, stages, microbatches, momentum: GPipe(stages, microbatches, momentum),
        closed_forms=(ClosedForm("PipeMare eq. 13 at τ = 0 (undelayed heavy ball)", eq13),),
    ),
    RuleSpec(
        name="spectrain",
        summary="SpecTrain: velocity prediction of forward (T_f) and backward (T_b) weights to "
        "the common time of the first stage's update",
        sources=("Kosson App. G", "Kosson Fig. 16", "Kosson eq. 11", "derived here"),
        params=(
            TAU,
            Param(
                "tau_max",
                "largest delay D_max in the pipeline (first stage); default τ",
                None,
                kind="delay",
            ),
            MOMENTUM,
            DELTA,
            LAM,
        ),
        builder=lambda *, tau, tau_max, momentum: SpecTrain(tau, tau_max, momentum),
        closed_forms=(ClosedForm("derived here from Kosson Fig. 16", spectrain_polynomial),),
    ),
    RuleSpec(
        name="shrink",
        summary="Gradient Shrinking: the gradient of a stage with delay τ scaled by s^τ",
        sources=("Kosson Fig. 13", "Zhuang et al. 2019", "Kosson eq. 21"),
        params=(
            TAU,
            MOMENTUM,
            Param(
                "shrink_factor",
                "shrinking factor s (Kosson Fig. 13: 0.9-0.99)",
                0.97,
                low=0.0,
                high=1.0,
                low_open=True,
            ),
            LAM,
        ),
        builder=shrink,
        closed_forms=(ClosedForm("Kosson eq. 21 with a = s^τ, b = 0", eq21),),
    ),
)
