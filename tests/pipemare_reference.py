r"""Independent reference: PipeMare's characteristic polynomials derived with sympy from the
recurrences as the paper prints them — never through `stability`'s ``linearize`` or ``step``.

The recurrences (PipeMare, Yang et al.), one scalar coordinate of the quadratic model::

    g_t         = (λ+Δ)·u_fwd,t − (Δ−Φ)·u_bkwd,t − Φ·u_recomp,t        (eq. 5; App. D.1)
    u_fwd,t     = w_{t−τf}
    u_bkwd,t    = w_{t−τb} − (τf−τb)·δ_{t−ℓ}                           (T2, Sec. 3.2)
    u_recomp,t  = w_{t−τr} − (τf−τr)·δ_{t−ℓr}                          (T2 for recompute, D.1)
    v_{t+1}     = β·v_t − α·g_t,      w_{t+1} = w_t + v_{t+1}          (App. B.2)
    δ_{t+1}     = γ·δ_t + (1−γ)·(w_{t+1} − w_t)                        (Sec. 3.2)

without the δ terms when T2 is off, without the recompute correction when T2 for recompute is
off.  The paper writes the accumulator as δ_{t,i}; *when* it is read is a hidden convention: the
lag ℓ (ℓr) is a parameter here, ``"pass"`` (ℓ = τb, ℓr = τr: δ as of the pass that uses it) or
``"current"`` (ℓ = ℓr = 0), so that the tests can show which one reproduces App. B.4 / D.1.

Derivation: x_t = x·ω^t (x = (w, v, δ)) solves the recurrences iff det M(ω) = 0, M(ω) the
coefficient matrix of the amplitudes after dividing every equation by ω^t (sympy's
``linear_eq_to_matrix`` and ``det``).  The delays stay symbolic: x_{t−τ}/ω^t = x·E_τ with the
shift E_τ = ω^{−τ} a symbol of its own, so one determinant serves every delay (and the tests
prove identities for all delays at once).  With E_τ = ω^{−τ} substituted, det M is the
characteristic polynomial of the recurrences up to a factor c·ω^k, the same for any
state-space form of them.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

omega = sp.Symbol("omega")
alpha, lam, Delta, Phi, beta, gamma = sp.symbols("alpha lambda Delta Phi beta gamma")
tau_f, tau_b, tau_r = sp.symbols("tau_f tau_b tau_r", integer=True, nonnegative=True)
E_f, E_b, E_r = sp.symbols("E_f E_b E_r")  # the shifts ω^{−τf}, ω^{−τb}, ω^{−τr}
SHIFTS = ((E_f, tau_f), (E_b, tau_b), (E_r, tau_r))
READS = ("pass", "current")


@cache
def determinant(t2: bool, t2_recompute: bool = False, read: str = "pass") -> sp.Expr:
    """det M(ω) of the recurrences (module doc), a polynomial in ω and the shifts E_τ."""
    if read not in READS:
        raise ValueError(f"read must be one of {READS}, got {read!r}")
    if t2_recompute and not t2:
        raise ValueError("T2 for recompute needs T2")
    w, v, d = sp.symbols("w v d")  # amplitudes of w_t, v_t, δ_t
    u_fwd, u_bkwd, u_recomp = w * E_f, w * E_b, w * E_r
    if t2:  # δ_{t−ℓ}/ω^t: ℓ = τb (τr) when read at the pass, 0 when read now
        d_b, d_r = (d * E_b, d * E_r) if read == "pass" else (d, d)
        u_bkwd -= (tau_f - tau_b) * d_b
        if t2_recompute:
            u_recomp -= (tau_f - tau_r) * d_r
    g = (lam + Delta) * u_fwd - (Delta - Phi) * u_bkwd - Phi * u_recomp
    equations = [
        omega * v - (beta * v - alpha * g),  # v_{t+1} = β v_t − α g_t
        omega * w - (w + omega * v),  # w_{t+1} = w_t + v_{t+1}
    ]
    unknowns = [w, v]
    if t2:  # δ_{t+1} = γ δ_t + (1 − γ)(w_{t+1} − w_t)
        equations.append(omega * d - (gamma * d + (1 - gamma) * (omega * w - w)))
        unknowns.append(d)
    matrix, _ = sp.linear_eq_to_matrix([sp.expand(e) for e in equations], unknowns)
    return sp.expand(matrix.det())


def characteristic(t2: bool, t2_recompute: bool = False, read: str = "pass") -> sp.Expr:
    """det M(ω) with the shifts written as powers ω^{−τ} (delays symbolic)."""
    det = determinant(t2, t2_recompute, read)
    return det.subs({e: omega ** (-t) for e, t in SHIFTS})


@cache
def _numeric(t2: bool, t2_recompute: bool, read: str):
    """Monomials of `determinant`: exponents of (ω, E_f, E_b, E_r), coefficient function."""
    terms = sp.Poly(determinant(t2, t2_recompute, read), omega, E_f, E_b, E_r).terms()
    powers = np.array([m for m, _ in terms])
    args = (alpha, lam, Delta, Phi, beta, gamma, tau_f, tau_b, tau_r)
    f = sp.lambdify(args, [c for _, c in terms], modules="math")
    return powers, f


def coefficients(
    tf: int, tb: int, tr: int, values: dict, *, t2: bool, t2_recompute: bool, read: str = "pass"
) -> np.ndarray:
    """The characteristic polynomial at numeric delays and ``values`` (α, λ, Δ, Φ, β, γ by
    their symbol names), highest degree first, lowest power ω^0 (divided by ω^k)."""
    powers, f = _numeric(t2, t2_recompute, read)
    exps = powers[:, 0] - powers[:, 1] * tf - powers[:, 2] * tb - powers[:, 3] * tr
    args = [values[s.name] for s in (alpha, lam, Delta, Phi, beta, gamma)] + [tf, tb, tr]
    out = np.zeros(exps.max() - exps.min() + 1)
    np.add.at(out, exps.max() - exps, np.asarray(f(*args), dtype=float))
    return out


PIPEMARE_RULES = ("sgd", "momentum", "discrepancy", "t2", "recompute")
"""The registry rules this reference covers."""


def optimal_gamma(tau_fwd: int, tau_bkwd: int) -> float:
    """γ* = 1 − 2/(τf − τb + 1) (PipeMare eq. 14), typed here from the paper."""
    return 1 - 2 / (tau_fwd - tau_bkwd + 1)


def reference_coefficients(name: str, params: dict, lr: float, defaults: dict) -> np.ndarray:
    """The polynomial of registry rule ``name`` at ``params`` (a battery point) and ``lr``.

    ``defaults`` holds the registry's declared defaults of the parameters not in ``params``.
    γ follows PipeMare Sec. 3.2 (γ = D^{1/(τf−τb)}) or eq. 14 (γ*), typed here; T2 is on for
    ``t2`` always and for ``recompute`` when ``decay`` or ``gamma`` is given, and T2 for
    recompute defaults to on with T2 (App. D.1).
    """
    p = {**defaults, **{k: v for k, v in params.items() if v is not None}}
    if name in ("sgd", "momentum"):
        tf = tb = tr = p["tau"]
    else:
        tf, tb = p["tau_fwd"], p["tau_bkwd"]
        tr = p["tau_recomp"] if name == "recompute" else tb
    t2 = name == "t2" or (name == "recompute" and ("decay" in params or "gamma" in params))
    g = 0.0
    if t2:
        if params.get("gamma") is not None:
            g = params["gamma"]
        elif params.get("decay") is not None:
            g = params["decay"] ** (1 / (tf - tb))
        else:
            g = optimal_gamma(tf, tb)
    t2r = name == "recompute" and t2 and params.get("t2_recompute", True) is not False
    values = {
        "alpha": lr,
        "lambda": p["lam"],
        "Delta": p["delta"] if name in ("discrepancy", "t2", "recompute") else 0.0,
        "Phi": p["phi"] if name == "recompute" else 0.0,
        "beta": p["momentum"] if name != "sgd" else 0.0,
        "gamma": g,
    }
    return coefficients(tf, tb, tr, values, t2=t2, t2_recompute=t2r)
