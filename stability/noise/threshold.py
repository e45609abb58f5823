r"""Thresholds on the step size: full batch (deterministic) and mean square.

* **full batch**: the first lr at which a root of the full-batch dynamics reaches the unit
  circle — per eigenvalue λ_k of H for uniform delays (`stability.analysis.modes`, the
  scalar analysis of PipeMare Sec. 3.1 / Kosson eq. 19 on each mode), the coupled per-stage
  analysis for a schedule (`stability.coupled.scan.scan_max_lr`).
* **mean square** (`ms_max_lr`): the first lr < full batch at which ρ(𝒢₁∘N) reaches 1
  (`stability.noise.gramian`, the small-gain form of ρ(𝒯) = 1).  ρ(𝒢₁∘N) → 0 as lr → 0 and
  → ∞ as lr approaches the full-batch threshold (the Gramian of a mode on the unit circle
  diverges), so a crossing exists whenever the noise reaches the critical mode.  It is
  bracketed on the grid lr_fb·{2⁻¹², …, 2⁻¹, 1 − 2⁻², …, 1 − 2⁻⁴⁰} (the first point
  measuring ≥ 1) and refined by Brent's method on (ρ − 1)/(ρ + 1) to relative 1e-10.
  With B = n there is no noise (N = 0): the mean-square threshold is the full-batch one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stability.noise.gramian import NoiseMap, ms_measure
from stability.noise.moments import SampleMoments
from stability.noise.state import StateSpace

Builder = Callable[[float], StateSpace]
"""``builder(lr)``: the state space of the rule(s) at step size lr."""


def ms_max_lr(
    builder: Builder, moments: SampleMoments, full_batch: float, *, rtol: float = 1e-10
) -> float:
    """The mean-square max stable lr (module doc), ≤ ``full_batch``."""
    from scipy.optimize import brentq

    if moments.p == 0 or not full_batch or full_batch <= 0:
        return full_batch  # ≤ full_batch: none stable at full batch (a marginal root), none here
    noise = NoiseMap.of(moments)

    def measure(lr: float) -> float:
        return ms_measure(builder(lr), moments, noise)

    grid = full_batch * np.concatenate((2.0 ** -np.arange(12, 0, -1), 1 - 2.0 ** -np.arange(2, 41)))
    below = 0.0
    for lr in grid:
        if measure(lr) >= 1:
            break
        below = lr
    else:
        return full_batch
    if below == 0.0:
        while measure(lr / 4) >= 1:
            lr /= 4
            if lr < 1e-12 * full_batch:
                return 0.0
        below = lr / 4

    def excess(lr: float) -> float:
        value = measure(lr)
        return (value - 1) / (value + 1) if np.isfinite(value) else 1.0

    return float(brentq(excess, below, lr, rtol=rtol, xtol=1e-300))


def uniform_full_batch(rule, eigenvalues) -> float | None:
    """First lr with a root on the unit circle over the modes λ_k > 0 of H (uniform delays)."""
    from stability.analysis.modes import modes_from_hessian, predicted_max_lr

    return predicted_max_lr(rule, modes_from_hessian(np.diag(np.asarray(eigenvalues))))


__all__ = ["Builder", "ms_max_lr", "uniform_full_batch"]
