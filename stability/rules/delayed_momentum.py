r"""Delayed heavy-ball SGD with every PipeMare and Kosson mitigation: one engine, many rules.

The rules ``sgd``, ``momentum``, ``nesterov``, ``discrepancy``, ``t2``, ``recompute``, ``sc``,
``lwp``, ``lwp-v``, ``lwp+sc`` and ``lwp-v+sc`` are all this one recurrence with some parts
switched off (see `stability.rules.discrepancy` and `stability.rules.lwp_sc` for the presets).

Recurrence (state at step t: weights w_t, velocity v_t, T2 accumulator δ_t)::

    u_fwd,t  = w_{t−τf} + T·(w_{t−τf} − w_{t−τf−1})     weight-form LWP      (Kosson eq. 12)
          or = w_{t−τf} − lr·T·v_{t−τf}                  velocity-form LWP    (Kosson eq. 11)
    u_bkwd,t = w_{t−τb} − (τf − τb)·δ_{t−τb}             T2 correction        (PipeMare Sec. 3.2)
    u_rec,t  = w_{t−τr} − (τf − τr)·δ_{t−τr}             T2 for recompute     (PipeMare App. D.1)
    g_t      = ∇f_t(u_fwd,t, u_bkwd,t, u_rec,t)
    v_{t+1}  = m·v_t + g_t                                                    (Kosson eq. 4)
    w_{t+1}  = w_t − lr·(a·v_{t+1} + b·g_t)              Spike Compensation   (Kosson eq. 5)
    δ_{t+1}  = γ·δ_t + (1 − γ)·(w_{t+1} − w_t)                                (PipeMare Sec. 3.2)

With T = 0, a = 1, b = 0, no T2 and τf = τb = τ this is delayed heavy-ball momentum,
``v ← m·v + g, w ← w − lr·v``, identical to PipeMare's ``v ← βv − α∇f, w ← w + v`` (App. B.2)
for a constant step (PipeMare's v is −lr times ours); with m = 0 it is delayed SGD (PipeMare
eq. 1).

Characteristic polynomial (derived here with the z-transform; `stability.dynamics.linear` derives it
from the step itself and the tests check both against the papers' printed forms).  On the
quadratic model ∇f = λ_f·u_fwd + λ_b·u_bkwd + λ_r·u_rec with λ_f = λ + Δ, λ_b = Φ − Δ,
λ_r = −Φ, and with c_b = (τf − τb)(1 − γ), c_r = (τf − τr)(1 − γ), the weight form gives

    (ω − 1)(ω − m) + lr·(aω + b(ω − m))·K(ω) = 0,
    K(ω) = λ_f ω^{−τf}(1 + T − Tω^{−1}) + λ_b ω^{−τb}(1 − c_b (ω−1)/(ω−γ))
           + λ_r ω^{−τr}(1 − c_r (ω−1)/(ω−γ)),

cleared of denominators by the factor ω^{τf+1}(ω − γ).  In the velocity form the forward term
of K loses its prediction and (ω − 1)(ω − m) gains + (ω − 1)·lr·T·λ_f·ω^{−τf}: the polynomial
is still affine in lr (lr·T·v enters the gradient, but the gradient enters v with the same
lr only through the product already counted).  `stability.analysis.boundary` checks affinity
for each rule instance rather than trusting this.

.. warning:: T2 reads its accumulator at the time of the backward pass, δ_{t−τb} (and δ_{t−τr}
   for recompute).  PipeMare's text writes δ_{t,i}; only δ_{t−τb} reproduces the App. B.4
   polynomial (its last term carries ω^{τf−τb}; δ_t would give ω^{τf}), and only δ_{t−τr}
   reproduces App. D.1.  Reading δ_t would use information the backward pass does not have.

.. warning:: Kosson writes the velocity-form prediction with the learning rate of the step;
   with a learning-rate schedule we use the current lr (as PipeOptim does).  With a varying lr
   PipeMare's momentum form (which accumulates lr·g in v) and ours differ; the trainer's T1
   schedules use ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stability.checks import (
    check_choice,
    check_delay,
    check_order,
    check_real,
    is_literal_zero,
)
from stability.rules.base import Passes, TapReader

PREDICTIONS = ("weight", "velocity")


@dataclass(frozen=True)
class DelayedMomentum:
    """Delayed heavy-ball SGD with LWP, Spike Compensation, T2 and recompute (see module doc).

    Attributes:
        tau_fwd: forward delay τf (Kosson's D).
        tau_bkwd: backward delay τb ≤ τf; ``None``: the backward pass uses the forward weights
            (consistent weights, as with weight stashing or in Kosson's analysis).
        tau_recomp: recompute delay τr with τb ≤ τr ≤ τf; ``None``: no recompute.
        momentum: m ∈ [0, 1].
        sc_a, sc_b: Spike Compensation coefficients a, b (a = 1, b = 0: none).
        horizon: LWP horizon T ≥ 0 (0: no prediction).
        prediction: ``"weight"`` (Kosson eq. 12) or ``"velocity"`` (eq. 11) form of LWP.
        gamma: T2 accumulator decay γ ∈ [0, 1]; ``None``: no discrepancy correction.
        t2_recompute: also correct the recompute weights (PipeMare App. D.1); needs ``gamma``.

    Hyperparameters may be arrays (a grid, broadcast together), Fractions or sympy symbols;
    delays are integers (integer arrays only in the trainer, for per-stage delays).
    """

    tau_fwd: Any = 0
    tau_bkwd: Any = None
    tau_recomp: Any = None
    momentum: Any = 0  # integer defaults keep exact (Fraction, sympy) arithmetic exact
    sc_a: Any = 1
    sc_b: Any = 0
    horizon: Any = 0
    prediction: str = "weight"
    gamma: Any = None
    t2_recompute: bool = False

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "tau_fwd", check_delay("tau_fwd", self.tau_fwd))
        if self.tau_bkwd is not None:
            set_(self, "tau_bkwd", check_delay("tau_bkwd", self.tau_bkwd))
            check_order("tau_bkwd", self.tau_bkwd, "tau_fwd", self.tau_fwd)
        if self.tau_recomp is not None:
            set_(self, "tau_recomp", check_delay("tau_recomp", self.tau_recomp))
            check_order("tau_recomp", self.tau_recomp, "tau_fwd", self.tau_fwd)
            check_order("tau_bkwd", self._tau_b, "tau_recomp", self.tau_recomp)
        check_real("momentum", self.momentum, low=0.0, high=1.0)
        check_real("sc_a", self.sc_a)
        check_real("sc_b", self.sc_b)
        check_real("horizon", self.horizon, low=0.0)
        check_choice("prediction", self.prediction, PREDICTIONS)
        if self.gamma is not None:
            check_real("gamma", self.gamma, low=0.0, high=1.0)
        if self.gamma is not None and self.tau_bkwd is None:
            raise ValueError(
                "gamma (T2 correction) needs tau_bkwd: it corrects the backward weights"
            )
        if self.t2_recompute and (self.gamma is None or self.tau_recomp is None):
            raise ValueError("t2_recompute needs both gamma (T2 on) and tau_recomp (recompute on)")

    @property
    def _tau_b(self):
        return self.tau_fwd if self.tau_bkwd is None else self.tau_bkwd

    @property
    def variables(self) -> tuple[str, ...]:
        return ("w", "v") if self.gamma is None else ("w", "v", "delta")

    def passes(self, x: TapReader, lr: Any) -> Passes:
        tf, T = self.tau_fwd, self.horizon
        forward = x("w", tf)
        if not is_literal_zero(T):
            if self.prediction == "weight":  # Kosson eq. 12
                forward = forward + T * (forward - x("w", tf + 1))
            else:  # Kosson eq. 11
                forward = forward - lr * T * x("v", tf)
        backward = forward if self.tau_bkwd is None else self._corrected(x, self.tau_bkwd, True)
        recompute = (
            backward
            if self.tau_recomp is None
            else self._corrected(x, self.tau_recomp, self.t2_recompute)
        )
        return Passes(forward, backward, recompute)

    def _corrected(self, x: TapReader, lag: Any, correct: bool) -> Any:
        """w_{t−lag} − (τf − lag)·δ_{t−lag}: T2's estimate of u_fwd (PipeMare Sec. 3.2)."""
        w = x("w", lag)
        if self.gamma is None or not correct:
            return w
        return w - (self.tau_fwd - lag) * x("delta", lag)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        w = x("w")
        v_new = self.momentum * x("v") + g
        w_new = w - lr * (self.sc_a * v_new + self.sc_b * g)
        new = {"w": w_new, "v": v_new}
        if self.gamma is not None:
            new["delta"] = self.gamma * x("delta") + (1 - self.gamma) * (w_new - w)
        return new
