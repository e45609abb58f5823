r"""Predictions for a problem from its Hessian: max stable lr and asymptotic rate of a rule.

**Decoupled modes.**  If the gradient oracle is linear, ∇f(u_f, u_b, u_r) = H_f e_f + H_b e_b +
H_r e_r (e = u − w*), and the three matrices share eigenvectors v_k, a rule with scalar
hyperparameters acts on each mode k independently as on PipeMare's scalar model (eq. 5,
App. D.1) with

    λ_k = v_kᵀ H v_k,   λ_k + Δ_k = v_kᵀ H_f v_k,   −Φ_k = v_kᵀ H_r v_k      (H = H_f + H_b + H_r)

so the dynamics' characteristic polynomial is the product over k of the scalar ones, and

    predicted max lr = min_k max_lr(rule, λ_k, Δ_k, Φ_k)    (`analysis.boundary.max_lr_grid`)
    predicted rate   = max_k ρ(rule, λ_k, Δ_k, Φ_k; lr)     (`dynamics.linear`)

Linear regression satisfies this exactly (H_f = H, H_b = H_r = 0).  For an MLP it is the
linearization at the minimizer *plus* the assumption that H_f, H_b, H_r are diagonal in the
Hessian's eigenbasis (their off-diagonal parts, which couple modes, are dropped; the size of
what is dropped is reported as ``offdiagonal``).  Modes with λ_k ≤ 0 (flat or negative
curvature, not a strict minimum) are left out and counted.

**Per-stage delays** do not decouple (stages cut across eigenvectors).  Two scalar readings
are offered, both compared with the measurement by `stability.agreement.comparison`:
``worst_stage`` (every weight at the largest stage delay) and ``per_stage`` (stage i alone, its
diagonal block H_ii at its own delays; the minimum over stages).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.analysis.boundary import (
    check_searches,
    floquet_stable_below,
    max_lr,
    max_lr_grid,
    min_max_lr_grid,
)
from stability.dynamics.linear import characteristic_polynomial, depends_on_lr_lam_only
from stability.limits import (
    MODES_MAX_LR_MAX_WORK,
    PREDICTION_MAX_TAPS,
    RATE_PREDICTION_MAX_WORK,
)
from stability.quadratic import QuadraticModel
from stability.rules.base import Rule, consistent_passes, taps_read
from stability.spectrum import dominant_point, dominant_root, dominant_root_at


@dataclass(frozen=True)
class Modes:
    """Per-mode coefficients of the scalar model: λ_k, Δ_k, Φ_k (arrays of equal length).

    ``dropped``: number of modes with λ ≤ 0 left out; ``offdiagonal``: relative Frobenius size
    of the parts of H_f, H_b, H_r off the eigenbasis diagonal (0 when the modes decouple).
    """

    lam: np.ndarray
    delta: np.ndarray
    phi: np.ndarray
    dropped: int = 0
    offdiagonal: float = 0.0

    def model(self) -> QuadraticModel:
        return QuadraticModel(lam=self.lam, delta=self.delta, phi=self.phi)


def modes_from_hessian(H: np.ndarray, *, tol: float = 1e-12) -> Modes:
    """Modes of a consistent-gradient problem (Δ = Φ = 0), e.g. linear regression."""
    lam = np.linalg.eigvalsh(0.5 * (H + H.T))
    keep = lam > tol * max(float(np.max(np.abs(lam))), 1e-300)
    zero = np.zeros(int(keep.sum()))
    return Modes(lam[keep], zero, zero.copy(), int((~keep).sum()), 0.0)


def modes_from_passes(Hf: np.ndarray, Hb: np.ndarray, Hr: np.ndarray, *, tol=1e-9) -> Modes:
    """Modes of an inconsistent-gradient linearization (module doc)."""
    H = Hf + Hb + Hr
    lam, V = np.linalg.eigh(0.5 * (H + H.T))
    keep = lam > tol * max(float(np.max(np.abs(lam))), 1e-300)
    Tf, Tb, Tr = (V.T @ M @ V for M in (Hf, Hb, Hr))
    V_lam = lam[keep]
    delta = np.diag(Tf)[keep] - V_lam
    phi = -np.diag(Tr)[keep]
    return Modes(V_lam, delta, phi, int((~keep).sum()), _offdiagonal_size((Tf, Tb, Tr)))


def _offdiagonal_size(blocks) -> float:
    """‖off-diagonal parts‖_F / ‖blocks‖_F over the three pass matrices in the eigenbasis:
    squares of the off-diagonal entries themselves (never a difference of sums, which rounds
    below 0 when they vanish), after scaling by the largest entry (no overflow)."""
    scale = max(float(np.max(np.abs(T))) for T in blocks)
    if scale == 0.0:
        return 0.0
    scaled = [T / scale for T in blocks]
    off = sum(float(np.sum((T - np.diag(np.diag(T))) ** 2)) for T in scaled)
    return math.sqrt(off / sum(float(np.sum(T**2)) for T in scaled))


def modes_of(jacobians: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Modes:
    """The decoupled modes the scalar theory sees for the pass Jacobians (H_f, H_b, H_r) of a
    linearised problem (``Linearization.jacobians_for(rule)``, module doc)."""
    Hf, Hb, Hr = jacobians
    if not Hb.any() and not Hr.any():
        return modes_from_hessian(Hf)
    return modes_from_passes(Hf, Hb, Hr)


def predicted_max_lr(rule: Rule, modes: Modes) -> float | None:
    """min_k max_lr(rule, mode k); ``None`` if every mode is stable for every lr > 0.

    When the rule sees lr and λ only as lr·λ and the modes have Δ = Φ = 0 (linear
    regression), one solve at λ = 1 gives x_max and the minimum is x_max/max_k λ_k;
    otherwise all modes at once by the batched boundary locus, each verified only below the
    least crossing (`stability.analysis.boundary.min_max_lr_grid`); rules it does not cover
    (periodic, or not affine in lr) by one solve at λ = 1 when their passes read one weight
    (`stability.rules.base.consistent_passes`: Δ and Φ do not enter, so mode k is (λ_k, 0, 0);
    EA-Pipe with N ≥ τ + 1 replicas: 77 Floquet bisections on an MLP took 20 s of CPU), else mode by
    mode with `stability.analysis.boundary.max_lr` (Floquet / bisection).  Refused
    (`ValueError`) above `MODES_MAX_LR_MAX_WORK` modes × degree on the batched path.
    """
    if not modes.delta.any() and not modes.phi.any() and depends_on_lr_lam_only(rule):
        unit = QuadraticModel(1.0)  # max lr = x_max/λ: one solve
        x_max = max_lr_grid(rule, unit)[0] if _batched(rule) else max_lr(rule, unit).max_lr
        lr = np.asarray(_inf_if_none(x_max), dtype=float) / np.max(modes.lam)
    elif _batched(rule):
        degree = characteristic_polynomial(rule, QuadraticModel(1.0)).degree
        if modes.lam.size * degree > MODES_MAX_LR_MAX_WORK:
            raise ValueError(
                "tau too large for a max-lr prediction on modes with Δ or Φ: modes × degree "
                f"must be ≤ {MODES_MAX_LR_MAX_WORK:,} (docs/limits.md), got {modes.lam.size} "
                f"× {degree}"
            )
        lr = np.asarray(min_max_lr_grid(rule, modes.model()))
    elif consistent_passes(rule) and depends_on_lr_lam_only(rule):  # Δ, Φ do not enter
        lr = np.asarray(_inf_if_none(max_lr(rule, QuadraticModel(1.0)).max_lr)) / np.max(modes.lam)
    elif getattr(rule, "period", 1) > 1:
        lr = np.array([_least_floquet_max_lr(rule, modes)])
    else:
        check_searches(rule, modes.lam.size, "one per mode")
        lr = np.array([_inf_if_none(max_lr(rule, m).max_lr) for m in _mode_models(modes)])
    best = float(np.min(lr))
    return None if math.isinf(best) else best


def _least_floquet_max_lr(rule: Rule, modes: Modes) -> float:
    """min_k max_lr(rule, mode k) for a periodic rule: the modes with the largest oracle
    coefficient (λ + Δ, Δ − Φ, Φ) first, the likeliest to bind; a later mode is solved only
    when it is not stable below the least max lr found so far
    (`stability.analysis.boundary.floquet_stable_below`: one batched stability count instead
    of a Floquet bisection; EA-Pipe with N < τ + 1 replicas bisected all 77 modes of the MLP,
    23 s of CPU)."""
    models = _mode_models(modes)
    scale = [max(abs(m.lam + m.delta), abs(m.delta - m.phi), abs(m.phi)) for m in models]
    best = math.inf
    for k in np.argsort(scale, kind="stable")[::-1]:
        if best == 0:
            break
        if math.isfinite(best) and floquet_stable_below(rule, models[k], best):
            continue
        best = min(best, _inf_if_none(max_lr(rule, models[k]).max_lr))
    return best


def _batched(rule: Rule) -> bool:
    return (
        getattr(rule, "period", 1) == 1
        and characteristic_polynomial(rule, QuadraticModel(1.0)).is_affine
    )


def _mode_models(modes: Modes) -> list[QuadraticModel]:
    return [
        QuadraticModel(float(a), float(b), float(c))
        for a, b, c in zip(modes.lam, modes.delta, modes.phi, strict=True)
    ]


def _inf_if_none(x: float | None) -> float:
    return math.inf if x is None else x


def modes_log_rate(rule: Rule, modes: Modes, lr: Any) -> float:
    """ln max_k ρ_k(lr): the asymptotic log-rate per step (the dominant mode mpmath-refined).

    Refused (`ValueError`) above `RATE_PREDICTION_MAX_WORK` modes × degree."""
    if getattr(rule, "period", 1) > 1:  # Floquet: per-step root of each mode's monodromy
        return _log(max(dominant_root_at(rule, m, lr).radius for m in _mode_models(modes)))
    cp = characteristic_polynomial(rule, modes.model())
    work = modes.lam.size * cp.degree
    if work > RATE_PREDICTION_MAX_WORK:
        raise ValueError(
            "tau too large for a rate prediction: modes × degree must be ≤ "
            f"{RATE_PREDICTION_MAX_WORK} (docs/limits.md), got {modes.lam.size} × {cp.degree}"
        )
    poly = cp.at(lr).normalized()
    k = dominant_point(poly)  # O(τ) per mode above the dense limit
    grid = modes.lam.shape
    single = type(poly)({e: np.broadcast_to(c, grid).ravel()[k] for e, c in poly.terms.items()})
    single = single.normalized()
    return _log(dominant_root(single).radius)


def _log(radius: float) -> float:
    """ln ρ, −inf at ρ = 0 (every root at 0: the error vanishes after finitely many steps,
    e.g. SGD at lr·λ = 1 on every mode; `math.log` would raise "math domain error")."""
    return math.log(radius) if radius > 0 else -math.inf


@dataclass(frozen=True)
class Prediction:
    """`predict_modes` 's answer for one rule: max lr, log-rate (``None`` where the scalar theory
    has no answer) and ``note``, the reason when it has none."""

    max_lr: float | None
    log_rate: float | None
    note: str | None = None


def predict_modes(rule: Rule, modes: Modes, lr: Any = None) -> Prediction:
    """Predicted max lr (and log-rate at ``lr``) — or the reason there is none.

    Periodic rules are predicted mode by mode through their Floquet monodromy and rules whose
    polynomial is not affine in lr by bisection; if the analysis still cannot answer (it raises
    `ValueError`, or `ArithmeticError` for a crossing it cannot resolve), the trainer still
    trains and measures, and this returns ``None`` and why.
    """
    taps = len(taps_read(rule))
    if taps > PREDICTION_MAX_TAPS:
        return Prediction(
            None,
            None,
            f"no scalar prediction: the rule reads {taps:,} past values; predictions are "
            f"derived for ≤ {PREDICTION_MAX_TAPS:,} (docs/limits.md)",
        )
    try:
        max_lr = predicted_max_lr(rule, modes)
    except (ValueError, ArithmeticError) as err:  # a limit, or a crossing left unresolved
        return Prediction(None, None, f"no scalar prediction: {err}")
    try:
        log_rate = None if lr is None else modes_log_rate(rule, modes, lr)
    except ValueError as err:
        return Prediction(max_lr, None, f"no rate prediction: {err}")
    return Prediction(max_lr, log_rate)


def stage_blocks(H: np.ndarray, stage_sizes) -> list[np.ndarray]:
    """The diagonal blocks H_ii of a matrix for consecutive parameter blocks."""
    edges = np.concatenate([[0], np.cumsum(stage_sizes)])
    return [H[a:b, a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


__all__ = [
    "Modes",
    "Prediction",
    "predict_modes",
    "modes_from_hessian",
    "modes_from_passes",
    "modes_of",
    "modes_log_rate",
    "predicted_max_lr",
    "stage_blocks",
]
