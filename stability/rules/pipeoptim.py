r"""PipeOptim (Guan et al.): optimizer-dependent weight prediction on the forward pass.

Each stage predicts, before its forward pass, the weights the minibatch will meet at its
backward pass (PipeOptim eq. 3-5, Alg. 1)::

    Ŵ_{t+s} = W_t − lr·s·ΔW_t,          s = D − rank − 1   (eq. 4; D stages, rank = 0 … D−1)

and runs the backward pass on the current weights (Alg. 1 line 14).  In the delay notation of
this project a stage whose forward weights are τ steps old computes its gradient from

    u_fwd,t = w_{t−τ} − lr·s·ΔW_{t−τ},    u_bkwd,t = w_t   (τ_bkwd = 0),

and in the 1F1B schedule τ = s = D − rank − 1 (`version_difference`), so the default horizon
is s = τ.  ΔW comes from the optimizer (Table I):

* **SGDM** (momentum u, dampening d): v_t = u·v_{t−1} + (1 − d)·g_t, ΔW = v.  This *is* the
  `DelayedMomentum` engine: with v' = v/(1 − d), v' ← u·v' + g and w ← w − lr·(1 − d)·v', the
  prediction lr·s·v = lr·s(1 − d)·v'; so PipeOptim-SGDM = engine(momentum u, a = 1 − d,
  velocity-form LWP horizon s(1 − d)).  Without dampening it is Kosson's LWP^v with T = s:
  ``max-lr pipeoptim --optimizer sgdm`` equals ``max-lr lwp-v --horizon s`` (Δ = 0 model, where
  the backward weights do not enter).  With dampening, lr·(1 − d) is the effective step:
  max lr(d) = max lr(0)/(1 − d) (tested).
* **Adam, AdamW**: `stability.rules.adam.Adam`, linearised with a frozen second-moment
  preconditioner for the analysis, real in the trainer (see that module).

Characteristic polynomial of the SGDM case (derived here from Table I and eq. 5 with the
z-transform; it is Kosson eq. 22 with ηλ → (1 − d)·lr·λ and T → s)::

    (ω − 1)(ω − u)ω^τ + (1 − d)·lr·λ·((1 + s)ω − s)

With the discrepancy model (Δ ≠ 0) the current-weight backward pass adds
−(1 − d)·lr·Δ·ω^{τ+1} and λ becomes λ + Δ in the forward term.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from stability.checks import check_choice, check_delay, check_real, is_literal_zero
from stability.polynomial import SparsePoly
from stability.polynomial import term as W
from stability.quadratic import QuadraticModel
from stability.rules.adam import (
    BETA1,
    BETA2,
    EPS,
    PRECOND,
    WEIGHT_DECAY,
    Adam,
    frozen_adam_polynomial,
)
from stability.rules.base import Passes, TapReader
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.spec import DELTA, LAM, TAU, ClosedForm, Param, RuleSpec, momentum_param

OPTIMIZERS = ("sgdm", "adam", "adamw")


def version_difference(stages: int, rank: int) -> int:
    """s = D − rank − 1: updates between a stage's forward and backward pass (PipeOptim eq. 4).

    ``stages`` D ≥ 1, ``rank`` ∈ {0, …, D − 1} (stage 0 first).
    """
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise ValueError(f"stages must be an integer ≥ 1, got {stages!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < stages:
        raise ValueError(f"rank must be an integer in [0, {stages - 1}], got {rank!r}")
    return stages - rank - 1


@dataclass(frozen=True)
class PipeOptim:
    """PipeOptim's stage update for one optimizer (module doc); delegates to its engine.

    ``engine`` is the `DelayedMomentum` preset (SGDM) or the `Adam` rule (Adam, AdamW) that
    carries out the step; the fields keep the paper's parameters for the closed forms.
    """

    tau: Any = 1
    horizon: Any = 1
    optimizer: str = "sgdm"
    momentum: Any = 0.9
    dampening: Any = 0.0
    beta1: Any = 0.9
    beta2: Any = 0.999
    eps: Any = 1e-8
    precond: Any = 1.0
    weight_decay: Any = 0.0

    def __post_init__(self):
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        object.__setattr__(self, "tau", check_delay("tau", self.tau))
        check_real("horizon", self.horizon, low=0.0)
        check_real("dampening", self.dampening, low=0.0, high=1.0, high_open=True)
        if self.optimizer == "adam" and not is_literal_zero(self.weight_decay):
            raise ValueError(
                "weight_decay is AdamW's decoupled decay: use optimizer adamw "
                "(Adam's L2 penalty belongs to the loss)"
            )
        self.engine  # noqa: B018 - builds (and so validates) the engine now

    @cached_property
    def engine(self) -> DelayedMomentum | Adam:
        """The rule that carries out the step (not a field: rebuilt by `dataclasses.replace`)."""
        if self.optimizer == "sgdm":
            scale = 1 - self.dampening
            return DelayedMomentum(
                tau_fwd=self.tau,
                tau_bkwd=0,
                momentum=self.momentum,
                sc_a=scale,
                horizon=self.horizon * scale,
                prediction="velocity",
            )
        return Adam(
            tau=self.tau,
            tau_bkwd=0,
            beta1=self.beta1,
            beta2=self.beta2,
            eps=self.eps,
            weight_decay=self.weight_decay,
            horizon=self.horizon,
            precond=self.precond,
        )

    @property
    def variables(self) -> tuple[str, ...]:
        return self.engine.variables

    @property
    def tau_bkwd(self) -> int:
        return 0

    def trainer_rule(self):
        """The rule the reference trainer runs: the engine, with the real Adam update."""
        return self.engine if self.optimizer == "sgdm" else self.engine.trainer_rule()

    def passes(self, x: TapReader, lr: Any) -> Passes:
        return self.engine.passes(x, lr)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        return self.engine.update(x, g, lr)


# -- closed forms (derived here) ---------------------------------------------------------------


def sgdm_polynomial(rule: PipeOptim, model: QuadraticModel, lr: Any) -> SparsePoly:
    """SGDM PipeOptim, derived here (Kosson eq. 22 form plus the current-weight backward)::

    (ω − 1)(ω − u)ω^τ + (1 − d)·lr·[(λ + Δ)((1 + s)ω − s) − Δ·ω^{τ+1}]
    """
    t, u, s = rule.tau, rule.momentum, rule.horizon
    k = (1 - rule.dampening) * lr
    lam_f = model.lam + model.delta
    return (
        (W(1) - W(0)) * (W(1) - W(0, u)) * W(t)
        + W(1, k * lam_f * (1 + s))
        - W(0, k * lam_f * s)
        - W(t + 1, k * model.delta)
    )


def adam_polynomial(rule: PipeOptim, model: QuadraticModel, lr: Any) -> SparsePoly:
    """The frozen-preconditioner polynomial of `stability.rules.adam` with horizon s."""
    return frozen_adam_polynomial(rule.engine, model, lr)


def _uses(optimizers):
    def applies(rule) -> bool:
        return rule.optimizer in optimizers

    return applies


# -- registry ----------------------------------------------------------------------------------


def pipeoptim(
    *, tau, optimizer, horizon, momentum, dampening, beta1, precond, weight_decay, beta2, eps
):
    """PipeOptim stage with delay τ and horizon s (default s = τ, PipeOptim eq. 4)."""
    return PipeOptim(
        tau=tau,
        horizon=tau if horizon is None else horizon,
        optimizer=optimizer,
        momentum=momentum,
        dampening=dampening,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        precond=precond,
        weight_decay=weight_decay,
    )


OPTIMIZER = Param(
    "optimizer",
    "optimizer whose step ΔW PipeOptim predicts with (Table I)",
    "sgdm",
    kind="choice",
    choices=OPTIMIZERS,
)
HORIZON_S = Param(
    "horizon", "prediction horizon s (default τ: s = D − rank − 1 in 1F1B, eq. 4)", None, low=0.0
)
DAMPENING = Param(
    "dampening", "SGDM dampening d (Table I's τ)", 0.0, low=0.0, high=1.0, high_open=True
)

SPECS = (
    RuleSpec(
        name="pipeoptim",
        summary="PipeOptim: forward weights predicted as w − lr·s·ΔW with ΔW from SGDM, Adam or "
        "AdamW (Adam/AdamW linearised with a frozen preconditioner P)",
        sources=("PipeOptim eq. 3-5", "PipeOptim Table I", "PipeOptim Alg. 1", "derived here"),
        params=(
            TAU,
            OPTIMIZER,
            HORIZON_S,
            momentum_param(0.9),
            DAMPENING,
            BETA1,
            PRECOND,
            WEIGHT_DECAY,
            BETA2,
            EPS,
            DELTA,
            LAM,
        ),
        builder=pipeoptim,
        closed_forms=(
            ClosedForm(
                "derived here from Table I (SGDM) and eq. 5", sgdm_polynomial, _uses(("sgdm",))
            ),
            ClosedForm(
                "derived here from Table I (Adam/AdamW, frozen P) and eq. 5",
                adam_polynomial,
                _uses(("adam", "adamw")),
            ),
        ),
    ),
)
