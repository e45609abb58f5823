r"""SAPipe (Chen et al.): stale pipelines, partial staleness, delay compensation, weight prediction.

SAPipe's pipeline applies at iteration t the gradient of iteration t − 1 (PipeSGD, Alg. 1,
orange): in this project's notation a delay τ = 1 (we keep τ general).  Three rules:

``pipesgd`` — partial staleness (Sec. 3.1).  The first k layers, a fraction κ = d_stale/d of the
parameters (Definition 1), are updated with the τ-step-stale gradient, the others with the fresh
one.  On the scalar quadratic a layer split needs a coupling model; we use the rank-one model
(derived here): f(w) = λ·L·ū²/2 with ū the mean of L equal layers, so every layer sees the same
curvature direction and the mean follows

    u_t = (1 − κ)·w_t + κ·w_{t−τ},    g_t = λ·u_t        (κ = 1: PipeSGD, κ = 0: no staleness)

— the strongest coupling; with a diagonal Hessian the stale and fresh layers decouple instead
and the stale ones set the max lr.  The trainer runs the per-parameter version
(`partial_staleness_delays`): delay τ on the first ⌈κ·p⌉ parameters, 0 on the rest.

``dc`` — delay compensation DC_λ (eq. 1, Alg. 2): g ← g + λ_DC·g·gᵀ·Δx with Δx = w_t − w_{t−τ}
(the weights the gradient is applied to minus those it was computed at).  The trainer runs the
full outer-product form (``form="outer"``, SAPipe's choice) or DC-ASGD's diagonal
g + λ_DC·g∘g∘Δx (``form="diagonal"``).  The analysis replaces λ_DC·g·gᵀ, an estimate of the
Hessian, by a Hessian estimate of **quality q**, i.e. q·λ (q = 1: exact, q = 0: none):

    g_DC = ∇f(w_{t−τ}) + q·λ·(w_t − w_{t−τ}) = ∇f(w_{t−τ} + q·Δx)   (exact on the quadratic
                                                                    model, for any Δ, Φ)

so the q-model evaluates the gradient at weights shifted by q·Δx.  It is a model: λ_DC·g·gᵀ is
not scale invariant.  Near the optimum of a full-batch problem g → 0 and the real DC's
threshold is that of q = 0; far from it λ_DC·‖g‖² can exceed the curvature many times and the
real DC diverges much earlier (measured on cpusmall: the README, seed systems section).

``wp`` — weight prediction (Alg. 3): the forward and backward passes of the stale gradient use
weights predicted by an extra optimizer step, x̃ = optimizer(x, g̃).  Generalised to τ steps (the
optimizer applied τ times with a constant gradient ĝ, Kosson eq. 8-10)::

    u_t = w_{t−τ} − lr·(A·v_{t−τ} + B·ĝ),   A = Σ_{k=1}^{τ} m^k,   B = Σ_{k=1}^{τ} Σ_{j<k} m^j

with ĝ by option (identical workers, as in a full-batch run; n workers):

* option 1, local gradient: ĝ = g_{t−1}, the latest gradient computed (exact for τ = 1:
  SAPipe's 1-step prediction then recovers the undelayed method);
* option 2, latest synchronized gradient: ĝ = g_{t−τ−1};
* option 3: ĝ = (1 − 1/n)·(g_{t−τ−1} + h·(w_{t−τ} − w_{t−τ−1})) + g_{t−1}/n: the others' part of
  the synchronized gradient delay-compensated with a Hessian estimate h (≈ λ_DC·g·gᵀ; h = q·λ)
  and the worker's own fresh share.

Gradients are read off the velocity, g_{t−k} = v_{t−k+1} − m·v_{t−k}, so the state stays (w, v).

Characteristic polynomials (all derived here with the z-transform; heavy-ball momentum m)::

    mixed (pipesgd with κ, dc with q = 1 − κ):
        (ω − 1)(ω − m)ω^τ + lr·λ·ω·((1 − κ)ω^τ + κ)
    wp:  (ω − m)(ω − 1)ω^{τ+1}
        + lr·λ·[ω² + A(ω − 1)ω + B(ω − m)(ω − 1)((1 − 1/n) + ω^τ/n) − lr·B(1 − 1/n)·h·ω(ω − 1)]

(option 1: n = 1; option 2: n → ∞ and h = 0, i.e. the weights (1 − 1/n, 1/n) = (1, 0)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from stability.checks import check_choice, check_delay, check_real, check_scalar_delay
from stability.polynomial import SparsePoly
from stability.polynomial import term as W
from stability.quadratic import QuadraticModel
from stability.rules.base import Passes, TapReader
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.spec import LAM, ClosedForm, Param, RuleSpec, momentum_param

DC_FORMS = ("model", "outer", "diagonal")
WP_OPTIONS = ("1", "2", "3")


def _heavy_ball(tau: Any, momentum: Any) -> DelayedMomentum:
    """The optimizer SAPipe applies to the (compensated) gradient: v ← m·v + g, w ← w − lr·v.
    Built once per rule (in ``__post_init__``), not per step: its checks were a fifth of a
    `net train --rule dc` step."""
    return DelayedMomentum(tau_fwd=tau, momentum=momentum)


# -- pipesgd: partial staleness ----------------------------------------------------------------


@dataclass(frozen=True)
class PartialStaleness:
    """Gradient from (1 − κ)·w_t + κ·w_{t−τ} (rank-one coupling model, module doc)."""

    tau: Any = 1
    stale_fraction: Any = 1.0
    momentum: Any = 0.0

    def __post_init__(self):
        object.__setattr__(self, "tau", check_delay("tau", self.tau))
        check_real("stale_fraction", self.stale_fraction, low=0.0, high=1.0)
        check_real("momentum", self.momentum, low=0.0, high=1.0)
        object.__setattr__(self, "_heavy_ball", _heavy_ball(self.tau, self.momentum))

    variables = ("w", "v")

    def passes(self, x: TapReader, lr: Any) -> Passes:
        k = self.stale_fraction
        u = (1 - k) * x("w") + k * x("w", self.tau)
        return Passes(u, u, u)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        return self._heavy_ball.update(x, g, lr)


def partial_staleness_delays(tau: int, stale_fraction: float, parameters: int) -> np.ndarray:
    """Per-parameter delays of SAPipe's partial staleness: τ on the first ⌈κ·p⌉ parameters
    (the first layers, Sec. 3.1 Theorem 1), 0 on the rest — the integer array a
    `DelayedMomentum` takes as ``tau_fwd`` for the trainer."""
    check_delay("tau", tau)
    check_real("stale_fraction", stale_fraction, low=0.0, high=1.0)
    stale = math.ceil(stale_fraction * parameters - 1e-12)
    return np.where(np.arange(parameters) < stale, tau, 0).astype(np.int64)


# -- dc: delay compensation --------------------------------------------------------------------


@dataclass(frozen=True)
class DelayCompensation:
    """SAPipe-DC (eq. 1, Alg. 2) on a τ-stale pipeline with heavy-ball momentum (module doc).

    ``form``: ``"model"`` (analysis: Hessian estimate q·λ, via the shifted pass weights),
    ``"outer"`` (trainer: λ_DC·g·(gᵀΔx), SAPipe's full form) or ``"diagonal"`` (trainer:
    DC-ASGD's λ_DC·g∘g∘Δx).  Weights may carry a leading batch axis; gᵀΔx sums the last axis.
    """

    tau: Any = 1
    quality: Any = 0.5
    dc_lambda: Any = 0.2
    momentum: Any = 0.0
    form: str = "model"

    def __post_init__(self):
        object.__setattr__(self, "tau", check_delay("tau", self.tau))
        check_real("quality", self.quality, low=0.0, high=1.0)
        check_real("dc_lambda", self.dc_lambda, low=0.0)
        check_real("momentum", self.momentum, low=0.0, high=1.0)
        check_choice("form", self.form, DC_FORMS)
        object.__setattr__(self, "_heavy_ball", _heavy_ball(self.tau, self.momentum))

    variables = ("w", "v")

    def trainer_rule(self, form: str = "outer") -> DelayCompensation:
        """The rule the reference trainer runs: the real DC_λ (outer-product or diagonal)."""
        return replace(self, form=check_choice("form", form, DC_FORMS[1:]))

    def passes(self, x: TapReader, lr: Any) -> Passes:
        u = x("w", self.tau)
        if self.form == "model":
            u = u + self.quality * (x("w") - u)  # ∇f(u + qΔx) = ∇f(u) + qλΔx
        return Passes(u, u, u)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        if self.form != "model":
            dx = x("w") - x("w", self.tau)
            hessian_dx = g * _inner(g, dx) if self.form == "outer" else g * g * dx
            g = g + self.dc_lambda * hessian_dx  # SAPipe eq. 1
        return self._heavy_ball.update(x, g, lr)


def _inner(a: Any, b: Any) -> Any:
    """aᵀb over the last axis (kept for broadcasting); the product for scalars."""
    if isinstance(a, np.ndarray) and a.ndim:
        return np.sum(a * b, axis=-1, keepdims=True)
    return a * b


# -- wp: weight prediction ---------------------------------------------------------------------


def prediction_coefficients(momentum: Any, tau: int) -> tuple[Any, Any]:
    """A = Σ_{k=1}^{τ} m^k and B = Σ_{k=1}^{τ} Σ_{j<k} m^j: τ optimizer steps with a constant
    gradient ĝ from (w, v) move w by −lr·(A·v + B·ĝ) (Kosson eq. 8-10)."""
    A, B, partial = 0, 0, 0
    for k in range(1, tau + 1):
        partial = partial + momentum ** (k - 1)
        A = A + momentum**k
        B = B + partial
    return A, B


@dataclass(frozen=True)
class WeightPrediction:
    """SAPipe-WP (Alg. 3), options 1-3, generalised to a τ-step horizon (module doc)."""

    tau: Any = 1
    option: str = "2"
    momentum: Any = 0.0
    workers: Any = 1.0
    hessian_estimate: Any = 0.0

    def __post_init__(self):
        object.__setattr__(self, "tau", check_scalar_delay("tau", self.tau))
        check_choice("option", self.option, WP_OPTIONS)
        check_real("momentum", self.momentum, low=0.0, high=1.0)
        check_real("workers", self.workers, low=1.0)
        check_real("hessian_estimate", self.hessian_estimate, low=0.0)
        object.__setattr__(self, "_heavy_ball", _heavy_ball(self.tau, self.momentum))

    variables = ("w", "v")

    @property
    def shares(self) -> tuple[Any, Any, Any]:
        """(weight of g_{t−τ−1}, weight of g_{t−1}, Hessian estimate) in ĝ for this option."""
        if self.option == "1":
            return 0, 1, 0
        if self.option == "2":
            return 1, 0, 0
        return 1 - 1 / self.workers, 1 / self.workers, self.hessian_estimate

    def _gradient(self, x: TapReader, lag: int) -> Any:
        """g_{t−lag} = v_{t−lag+1} − m·v_{t−lag} (the engine's v_{t+1} = m·v_t + g_t)."""
        return x("v", lag - 1) - self.momentum * x("v", lag)

    def passes(self, x: TapReader, lr: Any) -> Passes:
        t = self.tau
        u = x("w", t)
        if t > 0:
            synced, local, h = self.shares
            g_hat = synced * (
                self._gradient(x, t + 1) + h * (x("w", t) - x("w", t + 1))
            ) + local * self._gradient(x, 1)
            A, B = prediction_coefficients(self.momentum, t)
            u = u - lr * (A * x("v", t) + B * g_hat)
        return Passes(u, u, u)

    def update(self, x: TapReader, g: Any, lr: Any) -> dict[str, Any]:
        return self._heavy_ball.update(x, g, lr)


# -- closed forms (derived here) ---------------------------------------------------------------


def mixed_polynomial(tau: int, m: Any, stale: Any, lam: Any, lr: Any) -> SparsePoly:
    """(ω − 1)(ω − m)ω^τ + lr·λ·ω·((1 − κ)ω^τ + κ), κ = ``stale`` (derived here)."""
    el = lr * lam
    return (
        (W(1) - W(0)) * (W(1) - W(0, m)) * W(tau) + W(tau + 1, el * (1 - stale)) + W(1, el * stale)
    )


def pipesgd_polynomial(rule: PartialStaleness, model: QuadraticModel, lr: Any) -> SparsePoly:
    return mixed_polynomial(rule.tau, rule.momentum, rule.stale_fraction, model.lam, lr)


def dc_polynomial(rule: DelayCompensation, model: QuadraticModel, lr: Any) -> SparsePoly:
    return mixed_polynomial(rule.tau, rule.momentum, 1 - rule.quality, model.lam, lr)


def wp_polynomial(rule: WeightPrediction, model: QuadraticModel, lr: Any) -> SparsePoly:
    """SAPipe-WP's polynomial (module doc), derived here with the z-transform."""
    t, m, el = rule.tau, rule.momentum, lr * model.lam
    w1, wm = W(1) - W(0), W(1) - W(0, m)
    base = wm * w1 * W(t + 1)
    if t == 0:
        return base + W(2, el)
    synced, local, h = rule.shares
    A, B = prediction_coefficients(m, t)
    mix = W(0, synced) + W(t, local)
    return base + (W(2) + A * w1 * W(1) + B * wm * w1 * mix - W(1, lr * B * synced * h) * w1) * el


# -- registry ----------------------------------------------------------------------------------

TAU1 = Param("tau", "staleness τ in steps (SAPipe / PipeSGD: 1)", 1, kind="delay")

SPECS = (
    RuleSpec(
        name="pipesgd",
        summary="stale pipeline (PipeSGD) with partial staleness: a fraction κ of the "
        "parameters uses the τ-stale gradient (rank-one coupling model)",
        sources=("SAPipe Alg. 1", "SAPipe Sec. 3.1", "SAPipe Definition 1", "derived here"),
        params=(
            TAU1,
            Param(
                "stale_fraction",
                "fraction κ of parameters updated stale (Def. 1)",
                1.0,
                low=0.0,
                high=1.0,
            ),
            momentum_param(0.0),
            LAM,
        ),
        builder=lambda *, tau, stale_fraction, momentum: PartialStaleness(
            tau, stale_fraction, momentum
        ),
        closed_forms=(ClosedForm("derived here (rank-one coupling)", pipesgd_polynomial),),
    ),
    RuleSpec(
        name="dc",
        summary="delay compensation DC_λ: g + λ_DC·g·gᵀ·Δx; analysed with a Hessian estimate "
        "of quality q (q·λ); the trainer runs the outer-product form",
        sources=("SAPipe eq. 1", "SAPipe Alg. 2", "DC-ASGD (diagonal form)", "derived here"),
        params=(
            TAU1,
            Param(
                "quality",
                "quality q of the Hessian estimate: λ_DC·g·gᵀ ≈ q·λ (analysis)",
                0.5,
                low=0.0,
                high=1.0,
            ),
            Param("dc_lambda", "λ_DC of eq. 1 (real update, trainer only)", 0.2, low=0.0),
            momentum_param(0.0),
            LAM,
        ),
        builder=lambda *, tau, quality, dc_lambda, momentum: DelayCompensation(
            tau, quality, dc_lambda, momentum
        ),
        closed_forms=(ClosedForm("derived here (Hessian estimate q·λ)", dc_polynomial),),
    ),
    RuleSpec(
        name="wp",
        summary="SAPipe weight prediction: passes at optimizer(w, ĝ), ĝ = local (1), latest "
        "synchronized (2) or DC-combined (3) gradient, over a τ-step horizon",
        sources=("SAPipe Alg. 3", "SAPipe Sec. 3.2", "Kosson eq. 8-10", "derived here"),
        params=(
            TAU1,
            Param(
                "option",
                "weight-prediction option of Alg. 3",
                "2",
                kind="choice",
                choices=WP_OPTIONS,
            ),
            momentum_param(0.0),
            Param("workers", "data-parallel workers n (option 3)", 1.0, low=1.0),
            Param(
                "hessian_estimate", "Hessian estimate h ≈ λ_DC·g·gᵀ of option 3's DC", 0.0, low=0.0
            ),
            LAM,
        ),
        builder=lambda *, tau, option, momentum, workers, hessian_estimate: WeightPrediction(
            tau, option, momentum, workers, hessian_estimate
        ),
        closed_forms=(ClosedForm("derived here (z-transform of Alg. 3)", wp_polynomial),),
    ),
)
