r"""The exact second-moment recursion of minibatch training on least squares.

**The random linear system.**  In error coordinates (`stability.noise.state`) a rule's state
follows, with the batch B_t drawn independently of the past,

    z_{t+1} = A(H_{B_t})·z_t + b_t,     A(H) = K̃ + B̃·H·Φ̃,     b_t = B̃·ξ_{B_t},

where ξ_B = ∇f_B(w*) = X_Bᵀ(X_B w* − y_B)/B is the minibatch gradient at the minimizer: the
residual r = Xw* − y averages to zero over the data (Xᵀr = 0), not over a batch, so b_t ≠ 0
unless B = n.  The gradient the rule sees is g_t = H_{B_t}·u_t + ξ_{B_t}, u_t = Φ̃ z_t.

**Moments.**  z_t is independent of B_t, and A(H) is affine in H, so with m_t = E z_t,
S_t = E[z_t z_tᵀ] and the moments of `stability.noise.moments`:

    m_{t+1} = Ā·m_t,                                          Ā = A(H),
    S_{t+1} = 𝒯(S_t) + p·B̃·[2·J(Φ̃ m_t) + Σ_ξ]·B̃ᵀ,
    𝒯(S)    = E[A(H_B) S A(H_B)ᵀ]
            = K̃SK̃ᵀ + K̃SΦ̃ᵀHB̃ᵀ + B̃HΦ̃SK̃ᵀ + B̃·[(1 − p)·HPH + p·F(P)]·B̃ᵀ,    P = Φ̃SΦ̃ᵀ,

because E[H_B P H_B] = (1 − p)HPH + p·F(P) (the mixture form E[H_B ⊗ H_B] = H ⊗ H +
p(E[xxᵀ ⊗ xxᵀ] − H ⊗ H)), E[b_t b_tᵀ] = p·B̃Σ_ξB̃ᵀ, and the cross term
E[A(H_B) z ξ_Bᵀ]B̃ᵀ = B̃·E[H_B u ξ_Bᵀ]·B̃ᵀ = p·B̃J(u)B̃ᵀ (E ξ_B = 0 kills K̃ m E[ξ]ᵀ; J(u) is
symmetric).  The cross term is linear in m_t: E[z zᵀ] is *not* a function of S alone.

Equivalently the augmented state (1, z) has second moment [[1, mᵀ], [m, S]] following one linear
map, block triangular with diagonal blocks 1, Ā and 𝒯.  So E f − f* approaches its floor at
the rate max(ρ(𝒯), ρ(Ā)) (ρ(Ā) only when the cross term is nonzero), and the iterates are
mean-square stable iff ρ(𝒯) < 1 (then also ρ(Ā) < 1: ρ(Ā)² ≤ ρ(𝒯)).

**Loss.**  f(w) = f* + ½(w − w*)ᵀH(w − w*), so E f(w_t) − f* = ½ tr(H·S_t^{ww}) with S^{ww} the
block of the current weights (slot 0).  Start: z₀ = (w₀ − w*) in every weight slot (the
trainer's history starts constant), m₀ = z₀, S₀ = z₀z₀ᵀ.

**Symmetric matrices only.**  𝒯 is the map on *symmetric* S (second moments are symmetric).
On antisymmetric matrices E[A(H_B) ⊗ A(H_B)] can have a larger spectral radius than on
symmetric ones (the fourth-moment term vanishes there: xᵀPx = 0 for antisymmetric P) — on
cpusmall with B = 32, SGD at lr = 0.1 has 1.061 on the full space against < 1 on the
symmetric one.  Such a mode is the moment of nothing, but rounding excites it: `transition`
symmetrises its result (so the recursion stays exact) and `radius` works on symmetric S.

**Matrix-free.**  S is kept as a (d, s, d, s) array; 𝒯 costs O(d²s³ + d³s) (plus the fourth
moment, O(min(d⁴, n d²))), never the (d·s)² × (d·s)² matrix.  `SecondMoments.radius` finds
ρ(𝒯) with ARPACK on that operator (`scipy.sparse.linalg.eigs`); for a positive map (𝒯 maps
positive semidefinite S to positive semidefinite ones) the spectral radius is itself an
eigenvalue (Krein-Rutman), so the largest-magnitude Ritz value is real.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stability.noise.moments import SampleMoments
from stability.noise.state import StateSpace

DENSE_RADIUS_MAX = 400
"""Operators of at most this dimension ((d·s)²) are diagonalised densely in `radius`."""


def _left(K: np.ndarray, S: np.ndarray) -> np.ndarray:
    """K̃·S for S (d, s, d, s): per parameter c, K_c acting on slot index 1."""
    d, s = K.shape[:2]
    return (K @ S.reshape(d, s, -1)).reshape(S.shape)


@dataclass(frozen=True, eq=False)
class SecondMoments:
    """The recursion of module doc for a state space and the data's moments."""

    state: StateSpace
    moments: SampleMoments

    @property
    def hessian(self) -> np.ndarray:
        return self.moments.hessian

    def transition(self, S: np.ndarray) -> np.ndarray:
        """𝒯(S) = E[A(H_B) S A(H_B)ᵀ] for S of shape (d, s, d, s)."""
        st, H, p = self.state, self.hessian, self.moments.p
        KS = _left(st.K, S)
        KSK = _left(st.K, KS.transpose(2, 3, 0, 1)).transpose(2, 3, 0, 1)
        V = np.einsum("CB,caCB->caC", st.phi, KS) @ H  # (K̃SΦ̃ᵀH)[c, a, E]
        cross = V[..., None] * st.beta  # (K̃SΦ̃ᵀHB̃ᵀ)[c, a, E, A]
        P = np.einsum("ca,caCB,CB->cC", st.phi, S, st.phi)
        M = (1 - p) * (H @ P @ H) + p * self.moments.fourth(P)
        noise = np.einsum("ca,cC,CA->caCA", st.beta, M, st.beta)
        out = KSK + cross + cross.transpose(2, 3, 0, 1) + noise
        return 0.5 * (out + out.transpose(2, 3, 0, 1))  # symmetric exactly (module doc)

    def injection(self, m: np.ndarray) -> np.ndarray:
        """p·B̃·[2·J(Φ̃ m) + Σ_ξ]·B̃ᵀ: what the offset b_t adds to S_{t+1} (module doc)."""
        st, mo = self.state, self.moments
        R = 2 * mo.cross(st.forward(m)) + mo.offset_covariance
        return mo.p * np.einsum("ca,cC,CA->caCA", st.beta, R, st.beta)

    def step(self, m: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(m_{t+1}, S_{t+1}) from (m_t, S_t)."""
        return self.state.apply(m, self.hessian), self.transition(S) + self.injection(m)

    def excess_loss(self, S: np.ndarray) -> float:
        """E f(w) − f* = ½ tr(H·S^{ww}) (slot 0 holds the current weights)."""
        return 0.5 * float(np.sum(self.hessian * S[:, 0, :, 0]))

    def expected_loss(self, e0: np.ndarray, times) -> np.ndarray:
        """E f(w_t) − f* at each of ``times`` (sorted integers ≥ 0) from w₀ − w* = ``e0``.

        Iterates the recursion step by step up to max(times); a value that overflows is inf
        (the iterates are not mean-square stable).
        """
        times = np.asarray(times, dtype=np.int64)
        m = self.state.initial(e0)
        S = np.einsum("ca,CA->caCA", m, m)
        out = np.full(times.size, np.inf)
        t = 0
        with np.errstate(all="ignore"):
            for i, target in enumerate(times):
                while t < target:
                    m, S = self.step(m, S)
                    t += 1
                    if not np.isfinite(S[0, 0, 0, 0]) or abs(S[0, 0, 0, 0]) > 1e290:
                        return out
                out[i] = self.excess_loss(S)
        return out

    def radius(self, *, tol: float = 1e-12) -> float:
        """ρ(𝒯), the spectral radius of the second-moment map (ARPACK; dense when small)."""
        from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigs

        shape = (self.state.dim, self.state.size) * 2
        n = int(np.prod(shape))

        def matvec(x):
            S = np.asarray(x, dtype=float).reshape(shape)
            return self.transition(0.5 * (S + S.transpose(2, 3, 0, 1))).ravel()

        if n <= DENSE_RADIUS_MAX:
            dense = np.stack([matvec(e) for e in np.eye(n)], axis=1)
            return float(np.max(np.abs(np.linalg.eigvals(dense))))
        op = LinearOperator((n, n), matvec=matvec, dtype=float)
        start = np.einsum("ca,CA->caCA", *(np.ones(shape[:2]),) * 2).ravel()  # PSD start
        try:
            values = eigs(op, k=4, which="LM", v0=start, tol=tol, ncv=40, maxiter=5000)[0]
        except ArpackNoConvergence as err:
            values = err.eigenvalues
            if values.size == 0:
                raise ValueError("ARPACK did not converge on the second-moment map") from None
        return float(np.max(np.abs(values)))


__all__ = ["DENSE_RADIUS_MAX", "SecondMoments"]
