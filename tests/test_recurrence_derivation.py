"""The hidden conventions, proved for all delays: the sympy derivation from PipeMare's printed
recurrences (tests/pipemare_reference.py) reproduces the printed polynomials exactly only
with the conventions docs/conventions.md names.

* T2 reads its accumulator at the backward pass, δ_{t−τb}: then ω^{τf−1}·det M = −(App. B.4)
  identically in ω, α, λ, Δ, γ, τf, τb; read at δ_t the last term of App. B.4 would carry
  ω^{τf} instead of ω^{τf−τb}.
* T2 for recompute reads δ_{t−τr}: then App. D.1 exactly.
* Momentum: PipeMare eq. 13; Kosson eq. 20 as extracted (− ηλ) is not the recurrence's
  polynomial, eq. 20 with the sign of the lr·λ term corrected to + is.

Delays are symbols (nonnegative integers): each identity holds for every delay at once.
"""

from __future__ import annotations

import pytest
import sympy as sp
from pipemare_reference import (
    Delta,
    Phi,
    alpha,
    beta,
    characteristic,
    gamma,
    lam,
    omega,
    tau_b,
    tau_f,
    tau_r,
)

pytestmark = pytest.mark.symbolic

W = omega


def vanishes(expr: sp.Expr) -> bool:
    """expr ≡ 0, with powers of ω of symbolic exponent merged."""
    return sp.expand(sp.powsimp(sp.expand(expr))) == 0


def printed_b4(read_lag=tau_b):
    """PipeMare App. B.4; ``read_lag``: the lag of δ its last term assumes (τb as printed)."""
    g, a, d = gamma, alpha, Delta
    return (
        (W - 1) * (W - g) * W**tau_f
        + a * (lam + d) * (W - g)
        - a * d * W ** (tau_f - tau_b) * (W - g)
        + a * d * W ** (tau_f - read_lag) * (tau_f - tau_b) * (1 - g) * (W - 1)
    )


def printed_d1(t2_recompute: bool = True):
    """PipeMare App. D.1 (its last term is T2 for recompute)."""
    g, a, d, f = gamma, alpha, Delta, Phi
    p = (
        (W - 1) * (W - g) * W**tau_f
        + a * (lam + d) * (W - g)
        - a * (d - f) * W ** (tau_f - tau_b) * (W - g)
        + a * (d - f) * W ** (tau_f - tau_b) * (tau_f - tau_b) * (1 - g) * (W - 1)
        - a * f * W ** (tau_f - tau_r) * (W - g)
    )
    if t2_recompute:
        p += a * f * W ** (tau_f - tau_r) * (tau_f - tau_r) * (1 - g) * (W - 1)
    return p


def test_t2_reproduces_app_b4_only_reading_delta_at_the_backward_pass():
    at_pass = characteristic(t2=True, read="pass").subs({Phi: 0, beta: 0})
    now = characteristic(t2=True, read="current").subs({Phi: 0, beta: 0})
    assert vanishes(at_pass * W ** (tau_f - 1) + printed_b4())
    assert not vanishes(now * W ** (tau_f - 1) + printed_b4())
    # δ_t is App. B.4 with ω^{τf} in its last term: the lag of δ is what that term pins down
    assert vanishes(now * W ** (tau_f - 1) + printed_b4(read_lag=0))


def test_recompute_reproduces_app_d1_only_reading_delta_at_each_pass():
    for t2r in (True, False):
        at_pass = characteristic(t2=True, t2_recompute=t2r, read="pass").subs({beta: 0})
        assert vanishes(at_pass * W ** (tau_f - 1) + printed_d1(t2r))
    now = characteristic(t2=True, t2_recompute=True, read="current").subs({beta: 0})
    assert not vanishes(now * W ** (tau_f - 1) + printed_d1())


def test_discrepancy_reproduces_eq_5_and_momentum_eq_13_not_kosson_20_as_extracted():
    no_t2 = characteristic(t2=False).subs({Phi: 0})
    eq5 = W ** (tau_f + 1) - W**tau_f + alpha * (lam + Delta) - alpha * Delta * W ** (tau_f - tau_b)
    assert vanishes(no_t2.subs(beta, 0) * W ** (tau_f - 1) + eq5)
    heavy_ball = no_t2.subs({Delta: 0, tau_b: tau_f})
    kosson_20 = W ** (tau_f + 1) - (1 + beta) * W**tau_f + beta * W ** (tau_f - 1) - alpha * lam
    eq13 = kosson_20 + 2 * alpha * lam  # PipeMare eq. 13 = Kosson eq. 20 with + ηλ
    assert vanishes(heavy_ball * W ** (tau_f - 1) + eq13)
    assert not vanishes(heavy_ball * W ** (tau_f - 1) + kosson_20)
    assert not vanishes(heavy_ball * W ** (tau_f - 1) - kosson_20)
