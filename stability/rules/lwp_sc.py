"""Kosson et al.'s rules: Nesterov, Spike Compensation, Linear Weight Prediction, their combination.

All are the `DelayedMomentum` engine with a single delay D (= τ) and consistent weights
(Kosson analyse the delay "without modeling the pipeline or inconsistency", Sec. 3):

* generalized Spike Compensation (GSC, eq. 3-5): w ← w − η(a·v + b·g); SC_D (eq. 7) takes
  a = m^D, b = (1 − m^D)/(1 − m); SC_2D (Table 6) replaces D by 2D (``sc_scale``);
* Linear Weight Prediction: forward weights ŵ = w_{t−D} + T(w_{t−D} − w_{t−D−1}) (weight form
  LWP^w, eq. 12, 22) or ŵ = w_{t−D} − ηT·v_{t−D} (velocity form LWP^v, eq. 11); default
  horizon T = D (LWP_D), ``horizon_scale`` α gives T = αD (LWP_2D, Fig. 17);
* LWP + SC (eq. 13-18, 23), in both forms;
* delayed Nesterov momentum, derived here: PyTorch's Nesterov ``v ← m·v + g,
  w ← w − η(g + m·v)`` is GSC with a = m, b = 1.  For D = 1, SC_D has a = m, b = 1 too, which
  is why Kosson Fig. 6 finds Nesterov and SC equal at delay one.

.. warning:: The extracted text of Kosson eq. 20 reads ``z^{τ+1} − (1+m)z^τ + mz^{τ−1} − ηλ``.
   The step (and PipeMare eq. 13, the same recurrence) gives **+ηλ**; with −ηλ the polynomial
   has a real root above 1 for every η > 0.  We use +ηλ.

.. warning:: Kosson prints no polynomial for LWP^v + SC ("a complicated state transition
   equation", App. I).  The z-transform of eq. 11, 16-18 gives
   (z−1)(z−m)z^D + ηλ[T(z−1) + (a+b)z − bm], recorded below as derived here; with a = 1, b = 0
   it reduces to eq. 22, as LWP^v and LWP^w agree for plain SGDM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stability.polynomial import SparsePoly
from stability.polynomial import term as W
from stability.quadratic import QuadraticModel
from stability.rules.delayed_momentum import DelayedMomentum
from stability.rules.spec import LAM, TAU, ClosedForm, Param, RuleSpec, momentum_param


def geometric_sum(m: Any, n: Any) -> Any:
    """Σ_{k<n} m^k = (1 − m^n)/(1 − m), with the limit n at m = 1 (Kosson eq. 6)."""
    if isinstance(m, np.ndarray):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(m == 1, n, (1 - m**n) / np.where(m == 1, 0.5, 1 - m))
    if hasattr(m, "free_symbols"):
        return (1 - m**n) / (1 - m)
    return n if m == 1 else (1 - m**n) / (1 - m)


def spike_coefficients(m: Any, delay: Any) -> tuple[Any, Any]:
    """SC_D: a = m^D, b = (1 − m^D)/(1 − m) (Kosson eq. 7); the missed updates of eq. 6 at once."""
    return m**delay, geometric_sum(m, delay)


def _sc(momentum, tau, sc_a, sc_b, sc_scale):
    if (sc_a is None) != (sc_b is None):
        raise ValueError("give both sc_a and sc_b, or neither (SC_D of Kosson eq. 7)")
    if sc_a is not None:
        if np.any(np.asarray(sc_scale) != 1):
            raise ValueError("give sc_a and sc_b or sc_scale, not both (sc_scale sets SC's D)")
        return sc_a, sc_b
    return spike_coefficients(momentum, sc_scale * tau)


def _horizon(tau, horizon, horizon_scale):
    if horizon is None:
        return horizon_scale * tau
    if np.any(np.asarray(horizon_scale) != 1):
        raise ValueError("give horizon or horizon_scale, not both (T = horizon_scale·D)")
    return horizon


# -- builders ------------------------------------------------------------------------------


def nesterov(*, tau, momentum):
    """Delayed Nesterov: v ← m·v + g, w ← w − η(g + m·v), g = ∇f(w_{t−τ}) (GSC a=m, b=1)."""
    return DelayedMomentum(tau_fwd=tau, momentum=momentum, sc_a=momentum, sc_b=1.0)


def sc(*, tau, momentum, sc_a, sc_b, sc_scale):
    """Spike Compensation (Kosson eq. 3-5); SC_D by default (eq. 7), SC_{αD} with ``sc_scale``."""
    a, b = _sc(momentum, tau, sc_a, sc_b, sc_scale)
    return DelayedMomentum(tau_fwd=tau, momentum=momentum, sc_a=a, sc_b=b)


def _lwp(prediction):
    def build(*, tau, momentum, horizon, horizon_scale):
        T = _horizon(tau, horizon, horizon_scale)
        return DelayedMomentum(tau_fwd=tau, momentum=momentum, horizon=T, prediction=prediction)

    build.__doc__ = f"LWP^{prediction[0]} (Kosson eq. {'12' if prediction == 'weight' else '11'})"
    return build


def _lwp_sc(prediction):
    def build(*, tau, momentum, horizon, horizon_scale, sc_a, sc_b, sc_scale):
        T = _horizon(tau, horizon, horizon_scale)
        a, b = _sc(momentum, tau, sc_a, sc_b, sc_scale)
        return DelayedMomentum(
            tau_fwd=tau, momentum=momentum, horizon=T, prediction=prediction, sc_a=a, sc_b=b
        )

    build.__doc__ = f"LWP^{prediction[0]} + SC (Kosson eq. 13-18)"
    return build


# -- closed forms printed in the paper -------------------------------------------------------


def _base(rule) -> SparsePoly:
    """z^{τ+2} − (1+m)z^{τ+1} + m z^τ = (z−1)(z−m)z^τ."""
    t, m = rule.tau_fwd, rule.momentum
    return W(t + 2) - W(t + 1, 1 + m) + W(t, m)


def eq21(rule, model: QuadraticModel, lr) -> SparsePoly:
    """GSC: z^{τ+2} − (1+m)z^{τ+1} + mz^τ + ηλ(a+b)z − ηλmb (Kosson eq. 21)."""
    el, a, b, m = lr * model.lam, rule.sc_a, rule.sc_b, rule.momentum
    return _base(rule) + W(1, el * (a + b)) - W(0, el * m * b)


def eq22(rule, model: QuadraticModel, lr) -> SparsePoly:
    """LWP: z^{τ+2} − (1+m)z^{τ+1} + mz^τ + ηλ(1+T)z − ηλT (Kosson eq. 22)."""
    el, T = lr * model.lam, rule.horizon
    return _base(rule) + W(1, el * (1 + T)) - W(0, el * T)


def eq23(rule, model: QuadraticModel, lr) -> SparsePoly:
    """LWP^w + GSC (Kosson eq. 23)::

    z^{τ+3} − (1+m)z^{τ+2} + mz^{τ+1} + ηλ(a+b)(T+1)z² − ηλ((T+1)mb + T(a+b))z + ηλTmb
    """
    el, a, b, m, T = lr * model.lam, rule.sc_a, rule.sc_b, rule.momentum, rule.horizon
    return (
        _base(rule).shift(1)
        + W(2, el * (a + b) * (T + 1))
        - W(1, el * ((T + 1) * m * b + T * (a + b)))
        + W(0, el * T * m * b)
    )


def lwp_v_sc(rule, model: QuadraticModel, lr) -> SparsePoly:
    """LWP^v + GSC, derived here: (z−1)(z−m)z^τ + ηλ[T(z−1) + (a+b)z − bm] (see module warning)."""
    el, a, b, m, T = lr * model.lam, rule.sc_a, rule.sc_b, rule.momentum, rule.horizon
    return _base(rule) + W(1, el * (T + a + b)) - W(0, el * (T + b * m))


# -- registry entries ----------------------------------------------------------------------

MOMENTUM = momentum_param(0.9)
SC_A = Param("sc_a", "Spike Compensation a (default: SC_D, a = m^D)", None)
SC_B = Param("sc_b", "Spike Compensation b (default: SC_D, b = (1−m^D)/(1−m))", None)
SC_SCALE = Param("sc_scale", "SC overcompensation: SC_{αD} (2 gives SC_2D)", 1.0, low=0.0)
HORIZON = Param("horizon", "LWP horizon T (default: horizon_scale·D)", None, low=0.0)
HORIZON_SCALE = Param("horizon_scale", "LWP prediction scale α: T = αD", 1.0, low=0.0)


def _lwp_spec(
    prediction: str, compensated: bool, summary: str, sources: tuple[str, ...], form: ClosedForm
) -> RuleSpec:
    """The LWP rule of one ``prediction`` form (weight / velocity, Kosson eq. 12 / 11), with
    Spike Compensation if ``compensated``: its name, parameters and builder follow from the
    two (``lwp``, ``lwp-v``, ``lwp+sc``, ``lwp-v+sc``)."""
    return RuleSpec(
        name="lwp" + ("-v" if prediction == "velocity" else "") + ("+sc" if compensated else ""),
        summary=summary,
        sources=sources,
        params=(TAU, MOMENTUM, HORIZON, HORIZON_SCALE)
        + ((SC_A, SC_B, SC_SCALE) if compensated else ())
        + (LAM,),
        builder=(_lwp_sc if compensated else _lwp)(prediction),
        closed_forms=(form,),
    )


SPECS = (
    RuleSpec(
        name="nesterov",
        summary="delayed Nesterov momentum, w ← w − lr·(g + m·v) (GSC with a = m, b = 1)",
        sources=("derived here", "Kosson Fig. 6", "Kosson eq. 21"),
        params=(TAU, MOMENTUM, LAM),
        builder=nesterov,
        closed_forms=(ClosedForm("Kosson eq. 21 with a = m, b = 1", eq21),),
    ),
    RuleSpec(
        name="sc",
        summary="Spike Compensation, w ← w − lr·(a·v + b·g); SC_D by default",
        sources=("Kosson eq. 3-7", "Kosson eq. 21", "Kosson Table 6 (SC_2D)"),
        params=(TAU, MOMENTUM, SC_A, SC_B, SC_SCALE, LAM),
        builder=sc,
        closed_forms=(ClosedForm("Kosson eq. 21", eq21),),
    ),
    _lwp_spec(
        "weight",
        False,
        "Linear Weight Prediction, weight form: ŵ = w_{t−D} + T(w_{t−D} − w_{t−D−1})",
        ("Kosson eq. 8-12", "Kosson eq. 22", "Kosson Fig. 17"),
        ClosedForm("Kosson eq. 22", eq22),
    ),
    _lwp_spec(
        "velocity",
        False,
        "Linear Weight Prediction, velocity form: ŵ = w_{t−D} − lr·T·v_{t−D}",
        ("Kosson eq. 11", "Kosson eq. 22"),
        ClosedForm("Kosson eq. 22 (LWP^v = LWP^w for plain SGDM)", eq22),
    ),
    _lwp_spec(
        "weight",
        True,
        "LWP (weight form) combined with Spike Compensation",
        ("Kosson eq. 13-18", "Kosson eq. 23"),
        ClosedForm("Kosson eq. 23", eq23),
    ),
    _lwp_spec(
        "velocity",
        True,
        "LWP (velocity form) combined with Spike Compensation",
        ("Kosson eq. 11", "Kosson eq. 16-18"),
        ClosedForm("derived here from Kosson eq. 11, 16-18", lwp_v_sc),
    ),
)
