"""The coupled system on the unit circle: M(e^{iθ}), its derivative, and single eigen-branches.

With P(ω, lr) = diag(d_j) + lr·Σ C·diag(c_j) (`stability.coupled.system.CoupledSystem.couplings`),

    det P(e^{iθ}, lr) = Π_j d_j · det(I + lr·M(θ)),       M(θ) = Σ C·diag(c_j/d_j)

`FrequencyResponse` evaluates the stages' responses s = c/d (and q/d, the weights' response)
on a grid of θ from the sparse transfer polynomials (`stability.coupled.transfer`), and builds
the stacks M(θ), dM/dθ.  `eigentriple` finds one eigenvalue of M(θ) near a guess without a full
eigen-decomposition (inverse iteration, re-shifted at the Rayleigh quotient; one LU per shift),
with its derivative dμ/dθ = yᴴM'x/yᴴx (left and right eigenvectors, first-order perturbation
theory); `newton_crossing` follows that branch to a zero of Im μ(θ) — a closed-loop root
e^{iθ} on the unit circle at lr = −1/Re μ.
"""

from __future__ import annotations

import math

import numpy as np

from stability.coupled.system import CoupledSystem


class FrequencyResponse:
    """The stages' responses s = c/d (c the numerators of `CoupledSystem.couplings`), q/d on
    the unit circle, and the matrices M(θ) = Σ C·diag(s_C), M'(θ)."""

    def __init__(self, system: CoupledSystem):
        self.system = system
        self.C = [C for C, _ in system.couplings]
        self.symmetric = len(self.C) == 1 and set(system.hessians) == {"forward"}
        self.stage_of = system.stage_index
        self.polys = [
            (
                t.denominator.sparse_arrays(),
                [polys[i].sparse_arrays() for _, polys in system.couplings],
                t.weights.sparse_arrays(),
            )
            for i, t in enumerate(system.transfers)
        ]

    @staticmethod
    def _eval(arrays, theta):
        ks, cs = arrays
        e = np.exp(1j * np.outer(theta, ks))
        return e @ cs, e @ (1j * ks * cs)

    def response(self, theta: np.ndarray):
        """s (K, n, P), ds/dθ (K, n, P), q/d (n, P) for the K couplings."""
        K, n, P = len(self.C), theta.size, self.system.stages
        s, ds, w = (
            np.empty((K, n, P), complex),
            np.empty((K, n, P), complex),
            np.empty((n, P), complex),
        )
        for i, (den, nums, wts) in enumerate(self.polys):
            d, dd = self._eval(den, theta)
            for k, num in enumerate(nums):
                a, da = self._eval(num, theta)
                s[k, :, i] = a / d
                ds[k, :, i] = (da * d - a * dd) / d**2
            w[:, i] = self._eval(wts, theta)[0] / d
        return s, ds, w

    def matrices(self, theta: np.ndarray):
        """M(θ) and dM/dθ, shape (n, p, p) each."""
        s, ds, _ = self.response(theta)
        cols = self.stage_of
        M = sum(C[None] * s[k][:, None, cols] for k, C in enumerate(self.C))
        dM = sum(C[None] * ds[k][:, None, cols] for k, C in enumerate(self.C))
        return M, dM


def eigentriple(freq: FrequencyResponse, theta: float, sigma: complex, rng):
    """Eigenvalue of M(θ) nearest σ with dμ/dθ and right eigenvector: inverse iteration from
    the shift σ (one LU, re-factored at the Rayleigh quotient when it converges slowly);
    ``None`` unless the residual reaches ‖Mx − μx‖ ≤ 1e-11·‖M‖₁."""
    from scipy.linalg import lu_factor, lu_solve

    M, dM = freq.matrices(np.array([theta]))
    M, dM = M[0], dM[0]
    p = M.shape[0]
    scale = np.linalg.norm(M, 1)
    x = rng.standard_normal(p) + 1j * rng.standard_normal(p)
    y = x.copy()
    mu = sigma
    for _ in range(4):
        shift = mu + 1e-13 * scale * (1 + 1j)
        lu = lu_factor(M - shift * np.eye(p), check_finite=False)
        for _ in range(6):
            x = lu_solve(lu, x)
            x /= np.linalg.norm(x)
            y = lu_solve(lu, y, trans=2)
            y /= np.linalg.norm(y)
            yx = np.vdot(y, x)
            mu = np.vdot(y, M @ x) / yx
            if np.linalg.norm(M @ x - mu * x) <= 1e-11 * scale:
                return mu, np.vdot(y, dM @ x) / yx, x
    return None


def newton_crossing(freq: FrequencyResponse, theta: float, mu: complex, rng):
    """Newton on Im μ(θ) = 0 along the branch through (θ, μ): (lr, θ, x), or None."""
    for _ in range(40):
        triple = eigentriple(freq, theta, mu, rng)
        if triple is None:
            return None
        mu, dmu, x = triple
        if theta >= math.pi or dmu.imag == 0:
            break
        new = min(max(theta - mu.imag / dmu.imag, 0.5 * theta), math.pi)
        done = abs(new - theta) <= 4e-16 * theta
        mu, theta = mu + dmu * (new - theta), new
        if done:
            triple = eigentriple(freq, theta, mu, rng)
            if triple is None:
                return None
            mu, _, x = triple
            break
    if abs(mu.imag) > 1e-9 * abs(mu) or mu.real >= 0:
        return None
    return -1.0 / mu.real, theta, x


__all__ = ["FrequencyResponse", "eigentriple", "newton_crossing"]
