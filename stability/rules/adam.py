r"""Delayed Adam / AdamW, optionally with PipeOptim's weight prediction; real and linearised.

The reference trainer runs the **real** optimizer (Kingma & Ba Alg. 1; AdamW: Loshchilov &
Hutter, decoupled decay, as in PyTorch), with the gradient computed from delayed weights::

    u_fwd,t = w_{t−τ} − lr·s·ΔW_{t−τ}                    PipeOptim eq. 5 (s = 0: plain Adam)
    g_t     = ∇f(u_fwd,t, u_bkwd,t)                     u_bkwd,t = w_{t−τb} (PipeOptim Alg. 1
                                                        line 14: τb = 0) or = u_fwd,t
    m_{t+1} = β1·m_t + (1 − β1)·g_t                      PipeOptim Table I (Adam, AdamW)
    s_{t+1} = β2·s_t + (1 − β2)·g_t²
    ΔW_t    = m̂/(√ŝ + ε),  m̂ = m_{t+1}/(1 − β1^{t+1}),  ŝ = s_{t+1}/(1 − β2^{t+1})
    w_{t+1} = w_t − lr·(ΔW_t + wd·w_t)                   wd: AdamW's decoupled weight decay

ΔW_{t−τ} in the prediction is the step that produced w_{t−τ} (the optimizer state at the time
of the forward pass), as LWP^v uses v_{t−D} (Kosson eq. 11).

The **analysis** cannot probe this step: √ŝ makes it nonlinear in the gradient.  It uses the
linearisation with a *frozen second-moment preconditioner* P ≈ 1/(√ŝ + ε), held constant (a
parameter, ``precond``), and without bias correction (its factors tend to 1)::

    m_{t+1} = β1·m_t + (1 − β1)·g_t,    w_{t+1} = w_t − lr·(P·m_{t+1} + wd·w_t),
    u_fwd,t = w_{t−τ} − lr·s·P·m_{t−τ}.

Its characteristic polynomial (derived here with the z-transform, c = 1 − lr·wd) is

    (ω − β1)(ω − c)ω^τ + (1 − β1)·lr·P·λ·((1 + s)ω − s·c),

affine in lr only without weight decay.  Without decay it is heavy-ball SGD at step size
lr·(1 − β1)·P: the `DelayedMomentum` engine with momentum β1, a = (1 − β1)P and velocity-form
LWP horizon s(1 − β1)P (the tests check this), so the frozen analysis inherits the engine's
results.  `Adam.trainer_rule` returns the real (nonlinear) rule of the same hyperparameters.

.. warning:: PipeOptim Table I prints ΔW = m̂/√(v̂ + ε); the optimizers it names (Adam, AdamW as
   implemented in PyTorch) divide by √v̂ + ε.  We predict with the optimizer's own step, which
   is PipeOptim's stated intent ("ΔW according to the update rule of the used optimizer"); the
   two differ only where v̂ ≲ ε.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from stability.checks import check_delay, check_order, check_real, is_literal_zero
from stability.polynomial import SparsePoly
from stability.polynomial import term as W
from stability.quadratic import QuadraticModel
from stability.rules.base import Passes, TapReader
from stability.rules.spec import LAM, TAU, ClosedForm, Param, RuleSpec


@dataclass(frozen=True)
class Adam:
    """Delayed Adam/AdamW with PipeOptim prediction horizon ``horizon`` (module doc).

    Attributes:
        tau: forward delay τ.
        tau_bkwd: backward delay (``None``: the backward pass uses the forward weights).
        beta1, beta2, eps: Adam's hyperparameters (β2, ε only matter for the real update).
        weight_decay: AdamW's decoupled decay wd (0: Adam).
        horizon: PipeOptim's version difference s (0: no prediction).
        precond: frozen preconditioner P (the analysis), or ``None``: the real update.
    """

    tau: Any = 0
    tau_bkwd: Any = None
    beta1: Any = 0.9
    beta2: Any = 0.999
    eps: Any = 1e-8
    weight_decay: Any = 0.0
    horizon: Any = 0.0
    precond: Any = 1.0

    def __post_init__(self):
        object.__setattr__(self, "tau", check_delay("tau", self.tau))
        if self.tau_bkwd is not None:
            object.__setattr__(self, "tau_bkwd", check_delay("tau_bkwd", self.tau_bkwd))
            check_order("tau_bkwd", self.tau_bkwd, "tau", self.tau)
        check_real("beta1", self.beta1, low=0.0, high=1.0, high_open=True)
        check_real("beta2", self.beta2, low=0.0, high=1.0, high_open=True)
        check_real("eps", self.eps, low=0.0, low_open=True)
        check_real("weight_decay", self.weight_decay, low=0.0)
        check_real("horizon", self.horizon, low=0.0)
        if self.precond is not None:
            check_real("precond", self.precond, low=0.0, low_open=True)

    @property
    def linearised(self) -> bool:
        return self.precond is not None

    @property
    def momentum(self) -> Any:
        """β1, the momentum of the first moment (for code that reads ``rule.momentum``)."""
        return self.beta1

    @property
    def variables(self) -> tuple[str, ...]:
        return ("w", "m") if self.linearised else ("w", "m", "s")

    def trainer_rule(self) -> Adam:
        """The rule the reference trainer runs: the real (nonlinear) Adam update."""
        return replace(self, precond=None)

    def step_direction(self, x: TapReader, lag: int) -> Any:
        """ΔW of the step that produced w_{t−lag} (PipeOptim Table I; frozen: P·m)."""
        if self.linearised:
            return self.precond * x("m", lag)
        # updates applied before w_{t−lag}; before the first one m = s = 0 and ΔW = 0 anyway
        count = np.maximum(x.t - np.asarray(lag), 1)
        m_hat = x("m", lag) / (1 - self.beta1**count)
        s_hat = x("s", lag) / (1 - self.beta2**count)
        return m_hat / (s_hat**0.5 + self.eps)

    def passes(self, x: TapReader, lr: Any) -> Passes:
        forward = x("w", self.tau)
        if not is_literal_zero(self.horizon):  # PipeOptim eq. 5
            forward = forward - lr * self.horizon * self.step_direction(x, self.tau)
        backward = forward if self.tau_bkwd is None else x("w", self.tau_bkwd)
        return Passes(forward, backward, backward)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        m_new = self.beta1 * x("m") + (1 - self.beta1) * g
        w = x("w")
        new = {"m": m_new}
        if self.linearised:
            direction = self.precond * m_new
        else:
            s_new = self.beta2 * x("s") + (1 - self.beta2) * g * g
            count = x.t + 1
            m_hat = m_new / (1 - self.beta1**count)
            s_hat = s_new / (1 - self.beta2**count)
            direction = m_hat / (s_hat**0.5 + self.eps)
            new["s"] = s_new
        new["w"] = w - lr * (direction + self.weight_decay * w)
        return new


# -- closed form (derived here) ----------------------------------------------------------------


def frozen_adam_polynomial(rule: Adam, model: QuadraticModel, lr: Any) -> SparsePoly:
    """The frozen-preconditioner polynomial (derived here with the z-transform), c = 1 − lr·wd::

        (ω − β1)(ω − c)ω^τ + (1 − β1)·lr·P·[(λ + Δ)((1 + s)ω − s·c) − Δ·ω^{τ+1−τb}]

    With consistent weights (``tau_bkwd=None``) the backward pass sees the forward weights,
    the Δ terms cancel and λ + Δ becomes λ.
    """
    b1, P, s, t = rule.beta1, rule.precond, rule.horizon, rule.tau
    c = 1 - lr * rule.weight_decay
    k = (1 - b1) * lr * P
    base = (W(1) - W(0, b1)) * (W(1) - W(0, c)) * W(t)
    if rule.tau_bkwd is None:
        lam_f, inconsistency = model.lam, SparsePoly({}, {})
    else:
        lam_f = model.lam + model.delta
        inconsistency = W(t + 1 - rule.tau_bkwd, k * model.delta)
    return base + W(1, k * lam_f * (1 + s)) - W(0, k * lam_f * s * c) - inconsistency


# -- registry ----------------------------------------------------------------------------------

BETA1 = Param(
    "beta1",
    "Adam's first-moment decay β1 (PipeOptim Table I)",
    0.9,
    low=0.0,
    high=1.0,
    high_open=True,
)
BETA2 = Param(
    "beta2",
    "Adam's second-moment decay β2 (real update, trainer only)",
    0.999,
    low=0.0,
    high=1.0,
    high_open=True,
)
EPS = Param("eps", "Adam's ε (real update, trainer only)", 1e-8, low=0.0, low_open=True)
PRECOND = Param(
    "precond",
    "frozen second-moment preconditioner P ≈ 1/(√v̂ + ε) of the linearised analysis",
    1.0,
    low=0.0,
    low_open=True,
)
WEIGHT_DECAY = Param("weight_decay", "AdamW's decoupled weight decay wd", 0.0, low=0.0)


def adam(*, tau, beta1, beta2, eps, precond, weight_decay):
    """Delayed Adam/AdamW, linearised with a frozen preconditioner (module doc)."""
    return Adam(
        tau=tau, beta1=beta1, beta2=beta2, eps=eps, precond=precond, weight_decay=weight_decay
    )


SPECS = (
    RuleSpec(
        name="adam",
        summary="delayed Adam/AdamW, analysed with a frozen second-moment preconditioner P "
        "(linearised; `stability train --update real` runs the real update)",
        sources=("PipeOptim Table I (Adam, AdamW)", "Kingma & Ba Alg. 1", "derived here"),
        params=(TAU, BETA1, PRECOND, WEIGHT_DECAY, BETA2, EPS, LAM),
        builder=adam,
        closed_forms=(ClosedForm("derived here (frozen P, z-transform)", frozen_adam_polynomial),),
    ),
)
