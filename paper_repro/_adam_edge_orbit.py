"""Why real Adam's sharpness settles above the frozen-P edge under delay: the dissection.

A helper of `adam_edge_delay.py` (issue 22), not a reproduction.

Frozen-P Adam in the whitened coordinates x = P^{-1/2}(w − c) is a linear filter fed by the
gradient along the delayed path y_t = x_{t−τ} (`stability.rules.adam`: μ ← β1·μ + (1 − β1)·g,
x ← x − lr·μ, g = ∇f̃(y)); at frequency ω its linear part is

    d(ω)·Y + H̃·Y = 0,        d(ω) = (ω − 1)(ω − β1)ω^{τ−1} / (lr·(1 − β1)),

so an eigenmode λ of H̃ is neutral where −d(e^{iθ}) = λ: λ_edge at the crossing angle θ_c
(0.221 rad at τ = 2, β1 = 0.9, a period of 28.4 steps; π at τ = 0).  Three candidate causes
of λ₁ > λ_edge, each measured:

* `scalar_ratio` — v̂ reacting to the oscillation it drives (the delayed mode is complex, so
  g² is modulated within its period, where at τ = 0 the period-2 mode leaves g² constant):
  real Adam with delay τ on f(w) = w²/2, where the oscillation alone drives v; the ratio of
  the time-mean of lr·P_t (the preconditioned sharpness) to the edge.
* `frozen_continuation` — the same, on the network: real Adam until ``freeze``, then P held
  (v no longer updated); the median λ₁(P H_t) of the last quarter over the edge.
* `orbit` — the single-mode nonlinearity, and the oscillation as a whole.  Over the last
  ``window`` steps of a real run, at the window's centre c (mean of the delayed path, mean P):
  the eigenvalues of H̃ (dense), how many lie within `NEAR` of the edge, the Rayleigh quotient
  R of H̃ over the oscillation's Fourier components at the DFT frequencies whose period lies
  within `BAND` of 2π/θ_c (`stability.nets.oscillation`, here from the stored path, all
  bins), the share of that energy along the top eigenvector q, and the Hopf/harmonic-balance
  shift of a single mode along q: with y = a·q·cos θt, g = H̃y + ½B(y,y) + ⅙C(y,y,y), the
  third-order balance at frequency θ (the 2θ harmonic Y₂ = −(a²/8)(d(e^{2iθ}) + H̃)^{-1}b,
  the mean already in c) is

      d(e^{iθ}) + λ₁ + (a²/8)·(C(q,q,q,q) − bᵀ(d(e^{2iθ}) + H̃)^{-1}b) = 0,   b = B(q,q),

  solved for the neutral λ₁* and θ* (imaginary part zero, then the real part) at the measured
  amplitude a = √2·std(qᵀy_t).  B and C are the third and fourth derivatives of f̃ by nested
  forward-mode products.
"""

from __future__ import annotations

import _adam_edge_twins as adam_edge_twins
import numpy as np
import torch

BAND = 1.5
"""The band: periods within this factor of the critical period 2π/θ_c."""
NEAR = 0.2
"""A mode is near-critical when |λ/λ_edge − 1| ≤ NEAR."""


def _edge(tau: int, beta1: float, lr: float) -> float:
    from stability.analysis.boundary import max_lr
    from stability.rules.registry import build_rule

    return max_lr(*build_rule("adam", tau=tau, lam=1.0, beta1=beta1)).max_lr / lr


def scalar_ratio(tau: int, beta2: float, beta1=0.9, lr=1e-3, steps=100_000) -> float:
    """Time-mean of lr·P_t over the last fifth of ``steps`` of real Adam with delay ``tau`` on
    f(w) = w²/2 (ε = 0), over the edge lr·λ_edge (module doc)."""
    hist, m, v, out = [1.0] * (tau + 1), 0.0, 0.0, []
    for t in range(1, steps + 1):
        g = hist[0]
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        P = 1 / np.sqrt(v / (1 - beta2**t))
        hist = [*hist[1:], hist[-1] - lr * m / (1 - beta1**t) * P]
        out.append(lr * P)
    return float(np.mean(out[-steps // 5 :])) / (lr * _edge(tau, beta1, lr))


def frozen_continuation(spec, tau, lr, freeze, steps, every, beta1=0.9) -> dict:
    """Real Adam until step ``freeze``, then P held: λ₁(P H(w_t)) every ``every`` steps; the
    median over the last quarter of ``steps`` over the edge (module doc)."""
    f, w0 = adam_edge_twins._loss(spec)
    grad = torch.func.grad(f)
    samples, x = [], None
    for t, w, _, P in adam_edge_twins.real_adam(f, w0, tau, lr, steps, beta1, freeze=freeze):
        if t % every == 0 and t >= 0.75 * steps:
            lam, x = adam_edge_twins._top(grad, [(w, P.sqrt())], w.numel(), x)
            samples.append(lam)
    return {"freeze": freeze, "ratio": float(np.median(samples)) / _edge(tau, beta1, lr)}


def _d(omega, tau: int, lr: float, beta1: float):
    return (omega - 1) * (omega - beta1) * omega ** (tau - 1) / (lr * (1 - beta1))


def orbit(spec, tau, lr, steps, window, beta1=0.9, beta2=0.999, eps=1e-8) -> dict:
    """The oscillation of a real-Adam run over its last ``window`` steps (module doc)."""
    from scipy.optimize import brentq

    from stability.nets.oscillation import oscillation_probe
    from stability.rules.adam import Adam

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
    edge = _edge(tau, beta1, lr)
    X = ((Y - centre) / s).numpy()
    k = np.arange(window, dtype=float)
    A = np.stack([k, np.ones(window)], axis=1)
    X = X - A @ np.linalg.lstsq(A, X, rcond=None)[0]
    F = np.fft.rfft(X * np.hanning(window)[:, None], axis=0)
    theta_c = oscillation_probe((Adam(tau=tau, beta1=beta1),), (1,), 10**6, 0.25).angles[0] * BAND
    period = 2 * np.pi / theta_c
    freq = np.fft.rfftfreq(window)
    Fb = F[(freq >= 1 / (BAND * period)) & (freq <= BAND / period)]
    energy = float(np.real(np.sum(Fb.conj() * Fb)))
    rayleigh = float(np.real(np.einsum("fi,ij,fj->", Fb.conj(), Ht, Fb))) / energy
    q = V[:, 0]
    u = s * torch.tensor(q.copy())
    grad = torch.func.grad(f)

    def third(z):  # D³f[u, u, ·] at z
        return torch.func.jvp(lambda x: torch.func.jvp(grad, (x,), (u,))[1], (z,), (u,))[1]

    b = (s * third(centre)).numpy()
    fourth = float(torch.func.jvp(lambda z: (third(z) * u).sum(), (centre,), (u,))[1])
    a = float(np.sqrt(2) * np.std(X @ q))

    def balance(theta):  # d(e^{iθ}) + (a²/8)(C − bᵀ(d(e^{2iθ}) + H̃)^{-1}b)
        z = np.linalg.solve(_d(np.exp(2j * theta), tau, lr, beta1) * np.eye(q.size) + Ht, b)
        return _d(np.exp(1j * theta), tau, lr, beta1) + a * a / 8 * (fourth - b @ z)

    grid = np.linspace(0.3, 1.7, 57) * theta_c
    signs = np.sign([balance(x).imag for x in grid])
    j = int(np.flatnonzero(signs[:-1] != signs[1:])[0])
    theta = brentq(lambda x: balance(x).imag, grid[j], grid[j + 1])
    return {
        "edge": edge,
        "window": window,
        "lam_centre": [float(x) / edge for x in lam[:4]],
        "near_critical": int(np.sum(np.abs(lam / edge - 1) <= NEAR)),
        "oscillation_ratio": rayleigh / edge,
        "top_share": float(np.sum(np.abs(Fb @ q) ** 2)) / energy,
        "amplitude": a,
        "single_mode_edge_ratio": float(-balance(theta).real) / edge,
        "single_mode_angle": float(theta),
    }
