"""Where the frozen-P edge holds under delay: the curvature of real Adam's oscillation.

A helper of `adam_edge_delay.py` (issue 22), not a reproduction.

Frozen-P Adam in the whitened coordinates x = P^{-1/2}(w − c) is a linear filter fed by the
gradient along the delayed path y_t = x_{t−τ} (`stability.rules.adam`: μ ← β1·μ + (1 − β1)·g,
x ← x − lr·μ, g = ∇f̃(y)); at frequency ω its linear part is

    d(ω)·Y + H̃·Y = 0,        d(ω) = (ω − 1)(ω − β1)ω^{τ−1} / (lr·(1 − β1)),

so an eigenmode λ of H̃ is neutral where d(e^{iθ}) = −λ: λ = λ_edge at the critical angle
θ_c (0.221 rad at τ = 2, β1 = 0.9: a period of 28.4 steps; π at τ = 0).  The prediction
reads the top eigenvalue λ₁(H̃).  A run that oscillates in *several* near-critical modes at
once is judged instead by the curvature its oscillation feels: the Rayleigh quotient of H̃
over the oscillation's Fourier components near θ_c,

    R = Re Σ_f F_f^* H̃ F_f / Σ_f ‖F_f‖²,     F_f = DFT of the detrended whitened delayed path,

f over the frequencies whose period lies within a factor `BAND` of 2π/θ_c (harmonic balance:
each component obeys d(e^{iθ})F + H̃F = nonlinear forcing, so R = −Re d(e^{iθ}) = λ_edge when
the forcing does no net work on the oscillation).  `orbit` runs real Adam (as
`torch.optim.AdamW` steps, the gradient at w_{t−τ}; `_adam_edge_twins`'s loop), keeps the
last ``window`` steps, and measures at the window's centre c (the mean of the delayed path,
with the window's mean P): λ₁…λ₄ of H̃ (dense, ``torch.func.hessian``), how many eigenvalues
lie within 20 % of the edge, R, and the share of the band's energy along the top eigenvector.
"""

from __future__ import annotations

import _adam_edge_twins as adam_edge_twins
import numpy as np
import torch

BAND = 1.5
"""The band: periods within this factor of the critical period 2π/θ_c."""
NEAR = 0.2
"""A mode is near-critical when |λ/λ_edge − 1| ≤ NEAR."""


def critical_angle(tau: int, beta1: float, lr: float, edge: float) -> float:
    """θ_c: the angle of the root of largest modulus of the frozen-P polynomial at λ = edge
    (ω = 1 excluded)."""
    from stability.quadratic import QuadraticModel
    from stability.rules.adam import Adam, frozen_adam_polynomial

    poly = frozen_adam_polynomial(Adam(tau=tau, beta1=beta1), QuadraticModel(lam=lr * edge), 1.0)
    roots = np.roots(np.asarray(poly.dense(), dtype=complex))
    roots = roots[np.abs(roots - 1) > 1e-9]
    return float(abs(np.angle(roots[np.argmax(np.abs(roots))])))


def orbit(spec, tau, lr, steps, window, beta1=0.9, beta2=0.999, eps=1e-8) -> dict:
    """The oscillation of a real-Adam run over its last ``window`` steps (module doc)."""
    from stability.analysis.boundary import max_lr
    from stability.rules.registry import build_rule

    f, w = adam_edge_twins._loss(spec)
    path, precs = [], []
    for t, _, delayed, P in adam_edge_twins.real_adam(f, w, tau, lr, steps, beta1, beta2, eps):
        if t > steps - window:
            path.append(delayed)
            precs.append(P)
    Y, s = torch.stack(path), torch.stack(precs).mean(0).sqrt()
    centre = Y.mean(0)
    H = torch.func.hessian(f)(centre)
    Ht = (s[:, None] * H * s[None, :]).numpy()
    lam, V = np.linalg.eigh(Ht)
    lam, V = lam[::-1], V[:, ::-1]
    edge = max_lr(*build_rule("adam", tau=tau, lam=1.0, beta1=beta1)).max_lr / lr
    X = ((Y - centre) / s).numpy()
    F = np.fft.rfft(_detrend(X) * np.hanning(window)[:, None], axis=0)
    period = 2 * np.pi / critical_angle(tau, beta1, lr, edge)
    freq = np.fft.rfftfreq(window)
    band = (freq >= 1 / (BAND * period)) & (freq <= BAND / period)
    Fb = F[band]
    energy = float(np.real(np.sum(Fb.conj() * Fb)))
    rayleigh = float(np.real(np.einsum("fi,ij,fj->", Fb.conj(), Ht, Fb))) / energy
    top_share = float(np.sum(np.abs(Fb @ V[:, 0]) ** 2)) / energy
    return {
        "edge": edge,
        "critical_period": period,
        "window": window,
        "lam_centre": [float(x) / edge for x in lam[:4]],
        "near_critical": int(np.sum(np.abs(lam / edge - 1) <= NEAR)),
        "oscillation_ratio": rayleigh / edge,
        "top_share": top_share,
    }


def _detrend(X: np.ndarray) -> np.ndarray:
    """X minus its least-squares straight line in time (each coordinate)."""
    k = np.arange(X.shape[0], dtype=float)
    A = np.stack([k, np.ones_like(k)], axis=1)
    return X - A @ np.linalg.lstsq(A, X, rcond=None)[0]
