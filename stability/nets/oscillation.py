r"""The curvature of a run's oscillation at the edge of stability.

`stability.nets.sharpness` compares the top eigenvalue λ₁ with the predicted edge λ_edge =
max_lr(rule, delays; λ = 1)/η.  That is the right reading when the run oscillates along one
eigenvector.  Under delay the critical root crosses the unit circle slowly (κ = d ln ρ/d ln λ
≈ 0.05 at the edge for Adam or heavy-ball at τ = 2, against 38 at τ = 0), so every mode within
tens of percent of the edge is nearly neutral, and a network with several outlying eigenvalues
(a 10-output MSE model after Adam's whitening) oscillates in all of them at once at the
critical frequency.  The linearisation then constrains the *curvature felt by the
oscillation*, not λ₁:

The rule is a linear filter fed by the gradient along its delayed path y_t (heavy-ball form
of frozen-P Adam in the whitened coordinates, `stability.rules.adam`; SGD and momentum alike).
For a sinusoidal path y_t = Re(Y e^{iθt}) its linear part is the characteristic equation
d(e^{iθ})·Y + H·Y = 0 (Adam: d(ω) = (ω − 1)(ω − β1)ω^{τ−1}/(η(1 − β1)); PipeMare Lemma 1,
Kosson eq. 20 for SGD), so each eigenmode λ is neutral where −d(e^{iθ}) = λ, i.e. at λ_edge
and the crossing angle θ_c.  Harmonic balance over a periodic orbit of several modes at
frequencies near θ_c gives Σ_f F_f^*(d(e^{iθ_f}) + H)F_f = Σ_f F_f^*N_f (N the nonlinear
remainder of the gradient), so where the remainder does no net work on the oscillation its
Rayleigh quotient equals the edge:

    R = Re Σ_f F_f^* H̃ F_f / Σ_f ‖F_f‖²  ≈  λ_edge,

F_f the Hann-windowed Fourier components of the (linearly detrended) weights over the last
quarter of the run — the window of the plateau — at `FREQUENCIES` angles evenly spread over
[θ_c/`BAND`, min(`BAND`·θ_c, π)], whitened by the window's mean P^{1/2} for an adaptive rule
(H̃ = P^{1/2}HP^{1/2}; H̃ = H for SGD), with H̃ at the window's mean weights.  The current
weights stand in for the delayed path: a delay multiplies each F_f by a phase, which R does
not see.  `OscillationProbe` accumulates the F_f while the run goes (O(FREQUENCIES·p) memory,
no stored trajectory) and `curvature` takes 2·`FREQUENCIES` Hessian-vector products at the end.

R is defined for a uniform delay (a single crossing angle θ_c whatever the top eigenvector);
`stability.nets.public.net_train` reports it as ``oscillation_curvature`` beside ``plateau``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from stability.nets.curvature import HessianOperator
from stability.nets.problem import NetProblem

BAND = 1.5
"""The band: angles within this factor of the crossing angle θ_c (capped at π)."""
FREQUENCIES = 9
"""Angles sampled evenly over the band."""


class OscillationProbe:
    """``observe(step, w, s)`` on the steps of the last ``window`` of ``steps`` (``s``: the
    scale P^{1/2} at that step, None for 1); `curvature` then gives R (module doc)."""

    def __init__(self, steps: int, window: int, angle: float):
        if not 0 < angle <= math.pi:
            raise ValueError(f"angle must be in (0, π], got {angle}")
        self.first, self.n = steps - window + 1, int(window)
        self.angles = np.linspace(angle / BAND, min(BAND * angle, math.pi), FREQUENCIES)
        self.count = 0
        self.sums: dict[str, torch.Tensor] = {}

    def _add(self, key: str, value: torch.Tensor) -> None:
        self.sums[key] = self.sums[key] + value if key in self.sums else value.clone()

    def observe(self, step: int, w: torch.Tensor, s: torch.Tensor | None) -> None:
        k = step - self.first
        if not 0 <= k < self.n:
            return
        w = w.detach()
        h = 0.5 - 0.5 * math.cos(2 * math.pi * k / (self.n - 1))
        self._add("w", w)
        self._add("kw", k * w)
        if s is not None:
            self._add("s", s.detach())
        for j, a in enumerate(self.angles):
            self._add(f"re{j}", (h * math.cos(a * k)) * w)
            self._add(f"im{j}", (-h * math.sin(a * k)) * w)
        self.count += 1

    def curvature(self, problem: NetProblem) -> float | None:
        """R over the window (null: the run stopped before the window was complete)."""
        if self.count < self.n:
            return None
        n, k = self.n, np.arange(self.n, dtype=float)
        centre = self.sums["w"] / n
        slope = (self.sums["kw"] - k.mean() * self.sums["w"]) / float(np.sum((k - k.mean()) ** 2))
        offset = centre - k.mean() * slope
        s = self.sums["s"] / n if "s" in self.sums else torch.ones_like(centre)
        h = 0.5 - 0.5 * np.cos(2 * np.pi * k / (n - 1))
        op = HessianOperator(problem, w=centre)
        scale = s.to(device="cpu", dtype=torch.float64).numpy()
        num = den = 0.0
        for j, a in enumerate(self.angles):
            line = h * np.exp(-1j * a * k)  # the straight line's own windowed transform
            c, d = complex(line.sum()), complex((line * k).sum())
            for part, key in ((np.real, "re"), (np.imag, "im")):
                f = self.sums[f"{key}{j}"] - float(part(c)) * offset - float(part(d)) * slope
                x = (f / s).to(device="cpu", dtype=torch.float64).numpy()
                num += float(x @ (scale * op.matvec(scale * x)))  # xᵀ H̃ x
                den += float(x @ x)
        return num / den if den > 0 else None


def oscillation_probe(rules, stage_sizes, steps: int, fraction: float):
    """The probe of a run of the stage ``rules`` over its last ``fraction`` of ``steps``, or
    None: delays not uniform across the stages (no single crossing angle), no crossing, or a
    window shorter than the Hann window's main lobe needs to resolve the band,
    n ≥ 4π/(θ_c·(BAND − 1/BAND))."""
    from stability.nets.lowrank import reduced_system
    from stability.nets.prediction import coupled_analysis

    if any(r != rules[0] for r in rules):
        return None
    v = np.full(sum(stage_sizes), sum(stage_sizes) ** -0.5)
    system = reduced_system(tuple(rules), np.ones(1), v[:, None], tuple(stage_sizes))
    angle = coupled_analysis(system).crossing_angle
    window = int(fraction * steps)
    if not angle or window < 4 * math.pi / (angle * (BAND - 1 / BAND)):
        return None
    return OscillationProbe(steps, window, float(angle))


__all__ = ["BAND", "FREQUENCIES", "OscillationProbe", "oscillation_probe"]
