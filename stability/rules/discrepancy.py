"""PipeMare's rules (Yang et al.): delayed SGD and momentum, delay discrepancy, T2, recompute.

Each preset is the `DelayedMomentum` engine with PipeMare's parts switched on; each carries
the characteristic polynomial PipeMare prints, as an independent check of the one derived
from the step.  Notation: α = lr, β = m (momentum), τf/τb/τr the forward/backward/recompute
delays, Δ and Φ the discrepancy sensitivities of the quadratic model (`stability.quadratic`).

Conventions pinned down by the printed polynomials (see the engine's warnings):

* T2 reads its accumulator at the backward pass, δ_{t−τb}: App. B.4's last term
  αΔω^{τf−τb}(τf−τb)(1−γ)(ω−1) fixes the lag (δ_t would give ω^{τf}).
* T2 for recompute reads δ_{t−τr}, fixed the same way by App. D.1.
* PipeMare's momentum polynomial (eq. 13) is written for τ ≥ 1; at τ = 0 it has a factor
  ω^{−1}, so polynomials are compared up to ω^k.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from stability.checks import is_literal_zero
from stability.polynomial import SparsePoly
from stability.polynomial import term as W
from stability.quadratic import QuadraticModel
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.spec import (
    DELTA,
    LAM,
    TAU,
    TAU_BKWD,
    TAU_FWD,
    ClosedForm,
    Param,
    RuleSpec,
    momentum_param,
)

# -- T2 decay ------------------------------------------------------------------------------


def optimal_gamma(tau_fwd: int, tau_bkwd: int) -> float:
    """γ* = 1 − 2/(τf − τb + 1): makes p''(1) independent of Δ (PipeMare eq. 14, App. B.4)."""
    return 1.0 - 2.0 / (tau_fwd - tau_bkwd + 1)


def gamma_from_decay(decay: Any, tau_fwd: int, tau_bkwd: int) -> Any:
    """γ = D^{1/(τf − τb)}: per-stage decay from the global T2 hyperparameter D (PipeMare 3.2)."""
    return decay ** (1.0 / (tau_fwd - tau_bkwd))


def t2_refusal(tau_fwd: Any, tau_bkwd: Any, remedy: str = "") -> None:
    """Refuse T2 where a stage has no discrepancy to correct (τ_fwd ≤ τ_bkwd: no
    γ = D^{1/(τ_fwd − τ_bkwd)}, PipeMare Sec. 3.2), e.g. under weight stashing (PipeDream):
    the one wording of this refusal for the trainer, the coupled analysis, the minibatch
    theory and the networks (which add the ``remedy`` they offer after a semicolon).  Delays
    may be per-stage arrays: the first offender is named."""
    tf, tb = np.broadcast_arrays(np.asarray(tau_fwd), np.asarray(tau_bkwd))
    bad = np.flatnonzero(tf <= tb)
    if bad.size:
        i = bad[0]
        raise ValueError(
            f"T2 needs tau_fwd > tau_bkwd (got tau_fwd={tf.flat[i]}, tau_bkwd={tb.flat[i]})"
            + (f"; {remedy}" if remedy else "")
        )


def _t2_gamma(tau_fwd, tau_bkwd, decay, gamma, *, default_optimal: bool):
    if decay is not None and gamma is not None:
        raise ValueError("give decay or gamma, not both (gamma = decay^(1/(tau_fwd - tau_bkwd)))")
    if gamma is None and decay is None and not default_optimal:
        return None
    t2_refusal(tau_fwd, tau_bkwd)
    if gamma is not None:
        return gamma
    if decay is not None:
        return gamma_from_decay(decay, tau_fwd, tau_bkwd)
    return optimal_gamma(tau_fwd, tau_bkwd)


# -- builders ------------------------------------------------------------------------------


def sgd(*, tau):
    """Delayed SGD: w_{t+1} = w_t − α·∇f(w_{t−τ}) (PipeMare eq. 1)."""
    return DelayedMomentum(tau_fwd=tau, momentum=0.0)


def momentum(*, tau, momentum):
    """Delayed heavy ball: w_{t+1} − w_t = β(w_t − w_{t−1}) − α∇f(w_{t−τ}) (PipeMare App. B.2)."""
    return DelayedMomentum(tau_fwd=tau, momentum=momentum)


def discrepancy(*, tau_fwd, tau_bkwd, momentum):
    """Forward/backward delay discrepancy: gradient (λ+Δ)w_{t−τf} − Δw_{t−τb} (PipeMare eq. 5)."""
    return DelayedMomentum(tau_fwd=tau_fwd, tau_bkwd=tau_bkwd, momentum=momentum)


def t2(*, tau_fwd, tau_bkwd, momentum, decay, gamma):
    """Discrepancy correction T2 (PipeMare Sec. 3.2): u_bkwd = w_{t−τb} − (τf − τb)·δ_{t−τb}.

    γ = ``gamma``, or D^{1/(τf−τb)} from ``decay`` D, or by default γ* of eq. 14.
    """
    g = _t2_gamma(tau_fwd, tau_bkwd, decay, gamma, default_optimal=True)
    return DelayedMomentum(tau_fwd=tau_fwd, tau_bkwd=tau_bkwd, momentum=momentum, gamma=g)


def recompute(*, tau_fwd, tau_bkwd, tau_recomp, momentum, decay, gamma, t2_recompute):
    """Asynchronous recompute (PipeMare App. D.1), T2 on when ``decay`` or ``gamma`` is given.

    ``t2_recompute`` (default: on whenever T2 is on) also corrects the recompute weights,
    u_recomp = w_{t−τr} − (τf − τr)·δ_{t−τr} ("T2 for Recompute").
    """
    g = _t2_gamma(tau_fwd, tau_bkwd, decay, gamma, default_optimal=False)
    return DelayedMomentum(
        tau_fwd=tau_fwd,
        tau_bkwd=tau_bkwd,
        tau_recomp=tau_recomp,
        momentum=momentum,
        gamma=g,
        t2_recompute=(g is not None) if t2_recompute is None else t2_recompute,
    )


# -- closed forms printed in the paper -------------------------------------------------------


def eq3(rule, model: QuadraticModel, lr) -> SparsePoly:
    """p(ω) = ω^{τ+1} − ω^τ + αλ (PipeMare eq. 3)."""
    t = rule.tau_fwd
    return W(t + 1) - W(t) + W(0, lr * model.lam)


def eq13(rule, model: QuadraticModel, lr) -> SparsePoly:
    """p(ω) = ω^{τ+1} − (1+β)ω^τ + βω^{τ−1} + αλ (PipeMare eq. 12/13, Lemma 3)."""
    t, b = rule.tau_fwd, rule.momentum
    return W(t + 1) - W(t, 1 + b) + W(t - 1, b) + W(0, lr * model.lam)


def eq5(rule, model: QuadraticModel, lr) -> SparsePoly:
    """p(ω) = ω^{τf+1} − ω^{τf} + α(λ+Δ) − αΔω^{τf−τb}: eq. 5's polynomial (PipeMare B.3)."""
    tf, tb, lam, d = rule.tau_fwd, rule.tau_bkwd, model.lam, model.delta
    return W(tf + 1) - W(tf) + W(0, lr * (lam + d)) - W(tf - tb, lr * d)


def app_b4(rule, model: QuadraticModel, lr) -> SparsePoly:
    """T2's polynomial (PipeMare App. B.4)::

    (ω−1)(ω−γ)ω^{τf} + α(λ+Δ)(ω−γ) − αΔω^{τf−τb}(ω−γ) + αΔω^{τf−τb}(τf−τb)(1−γ)(ω−1)
    """
    tf, tb, g = rule.tau_fwd, rule.tau_bkwd, rule.gamma
    lam, d = model.lam, model.delta
    wg, w1 = W(1) - W(0, g), W(1) - W(0)
    return (
        w1 * wg * W(tf)
        + wg * (lr * (lam + d))
        - W(tf - tb, lr * d) * wg
        + W(tf - tb, lr * d * (tf - tb) * (1 - g)) * w1
    )


def app_d1(rule, model: QuadraticModel, lr) -> SparsePoly:
    """Recompute's polynomial (PipeMare App. D.1)::

    (ω−1)(ω−γ)ω^{τf} + α(λ+Δ)(ω−γ) − α(Δ−Φ)ω^{τf−τb}(ω−γ)
      + α(Δ−Φ)ω^{τf−τb}(τf−τb)(1−γ)(ω−1)
      − αΦω^{τf−τr}(ω−γ) + αΦω^{τf−τr}(τf−τr)(1−γ)(ω−1)

    The last term is T2 for recompute; with ``t2_recompute`` off it is dropped.  Without T2
    (γ = None) every correction term is dropped and the common factor (ω−γ) divided out.
    """
    tf, tb, tr, g = rule.tau_fwd, rule.tau_bkwd, rule.tau_recomp, rule.gamma
    lam, d, phi = model.lam, model.delta, model.phi
    w1 = W(1) - W(0)
    wg = W(0, 1) if g is None else W(1) - W(0, g)
    p = (
        w1 * wg * W(tf)
        + wg * (lr * (lam + d))
        - W(tf - tb, lr * (d - phi)) * wg
        - W(tf - tr, lr * phi) * wg
    )
    if g is not None:
        p = p + W(tf - tb, lr * (d - phi) * (tf - tb) * (1 - g)) * w1
        if rule.t2_recompute:
            p = p + W(tf - tr, lr * phi * (tf - tr) * (1 - g)) * w1
    return p


def _no_momentum(rule) -> bool:
    return is_literal_zero(rule.momentum)


# -- registry entries ----------------------------------------------------------------------

DECAY = Param(
    "decay",
    "T2 decay D; γ = D^{1/(τf−τb)} (PipeMare Sec. 3.2)",
    None,
    low=0.0,
    high=1.0,
)
GAMMA = Param("gamma", "T2 accumulator decay γ, given directly", None, low=0.0, high=1.0)

SPECS = (
    RuleSpec(
        name="sgd",
        summary="delayed SGD, w ← w − lr·∇f(w_{t−τ})",
        sources=("PipeMare eq. 1", "PipeMare eq. 3", "PipeMare Lemma 1"),
        params=(TAU, LAM),
        builder=sgd,
        closed_forms=(ClosedForm("PipeMare eq. 3", eq3),),
    ),
    RuleSpec(
        name="momentum",
        summary="delayed heavy-ball momentum, v ← m·v + ∇f(w_{t−τ}), w ← w − lr·v",
        sources=("PipeMare eq. 12-13", "PipeMare Lemma 3", "Kosson eq. 1-2", "Kosson eq. 20"),
        params=(TAU, momentum_param(0.9), LAM),
        builder=momentum,
        closed_forms=(
            ClosedForm("PipeMare eq. 13", eq13),
            ClosedForm("Kosson eq. 20 (sign of the lr·λ term corrected to +)", eq13),
        ),
    ),
    RuleSpec(
        name="discrepancy",
        summary="delay discrepancy, gradient (λ+Δ)·w_{t−τf} − Δ·w_{t−τb}, optional momentum",
        sources=("PipeMare eq. 5", "PipeMare Lemma 2"),
        params=(TAU_FWD, TAU_BKWD, DELTA, momentum_param(0.0), LAM),
        builder=discrepancy,
        closed_forms=(ClosedForm("PipeMare eq. 5 (App. B.3)", eq5, _no_momentum),),
    ),
    RuleSpec(
        name="t2",
        summary="discrepancy correction T2: u_bkwd = w_{t−τb} − (τf−τb)·δ_{t−τb}",
        sources=("PipeMare Sec. 3.2", "PipeMare App. B.4", "PipeMare eq. 14"),
        params=(
            TAU_FWD,
            replace(TAU_BKWD, doc="backward delay τ_bkwd < τ_fwd (T2 corrects their difference)"),
            DELTA,
            momentum_param(0.0),
            DECAY,
            GAMMA,
            LAM,
        ),
        builder=t2,
        closed_forms=(ClosedForm("PipeMare App. B.4", app_b4, _no_momentum),),
    ),
    RuleSpec(
        name="recompute",
        summary="asynchronous recompute (Φ, τ_recomp), T2 and T2-for-recompute optional",
        sources=("PipeMare App. D.1",),
        params=(
            Param("tau_fwd", "forward delay τ_fwd", 2, kind="delay"),
            TAU_BKWD,
            Param("tau_recomp", "recompute delay τ_bkwd ≤ τ_recomp ≤ τ_fwd", 1, kind="delay"),
            DELTA,
            Param("phi", "sensitivity Φ to the recompute/backward discrepancy", 0.0),
            momentum_param(0.0),
            DECAY,
            GAMMA,
            Param(
                "t2_recompute",
                "also correct the recompute weights (default: on when T2 is on)",
                None,
                kind="bool",
            ),
            LAM,
        ),
        builder=recompute,
        closed_forms=(ClosedForm("PipeMare App. D.1", app_d1, _no_momentum),),
    ),
)
