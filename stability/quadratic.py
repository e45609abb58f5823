"""The scalar quadratic model: a gradient oracle linear in forward, backward, recompute weights.

PipeMare models the gradient of f(w) = λw²/2 computed with delayed, inconsistent weights as

    ∇f_t(u_fwd, u_bkwd, u_recomp) = (λ + Δ)·u_fwd − (Δ − Φ)·u_bkwd − Φ·u_recomp

(PipeMare eq. 5 for Δ, App. D.1 for Φ; the noise η_t is left out because it does not change
the dynamics' stability).  Δ is the sensitivity of the gradient to the forward/backward
discrepancy, Φ that to the recompute/backward discrepancy.  When all three weights agree the
gradient is λ·u, the gradient of the quadratic.  With Δ = Φ = 0 the backward and recompute
weights do not matter, which is Kosson's convex quadratic (Kosson eq. 19).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stability.checks import check_real


@dataclass(frozen=True)
class QuadraticModel:
    """Gradient oracle of the scalar quadratic with discrepancy sensitivities (PipeMare eq. 5, D.1).

    Parameters may be scalars, arrays (a grid of problems), Fractions or sympy symbols.
    """

    lam: Any
    delta: Any = 0  # integer defaults keep exact (Fraction, sympy) arithmetic exact
    phi: Any = 0

    def __post_init__(self):
        check_real("lam", self.lam, low=0.0, low_open=True)
        check_real("delta", self.delta)
        check_real("phi", self.phi)

    def __call__(self, u_fwd: Any, u_bkwd: Any, u_recomp: Any) -> Any:
        """(λ + Δ)·u_fwd − (Δ − Φ)·u_bkwd − Φ·u_recomp  (PipeMare App. D.1)."""
        return (
            (self.lam + self.delta) * u_fwd - (self.delta - self.phi) * u_bkwd - self.phi * u_recomp
        )
