r"""The modal Gramians of uniform delays, and their matrix-free loop for many parameters.

For uniform delays every parameter runs the same (K, β, φ), so in H's eigenbasis H = VΛVᵀ the
mean state matrix splits into modes A_k = K + λ_k βφᵀ (s × s) and the Gramians of
`stability.noise.gramian` act entrywise in that basis,

    𝒢_z(R) = V·(G ∘ VᵀRV)·Vᵀ,   G_kl = φᵀX_klφ / z,
    𝒲_z(R) = V·(W ∘ VᵀRV)·Vᵀ,   W_kl = X_kl[0, 0] / z,

X_kl = Σ_t z^{−t} A_kᵗ ββᵀ A_lᵗᵀ, solved for every pair (k, l) at once by Smith's doubling
X ← X + Â_k X Â_lᵀ, Â ← Â² (Â = A/√z) (`modal_weights`).

**Any state** (per-stage rules, `SteinLoop`): the geometric sum X = Σ_t Âᵗ B̃RB̃ᵀ Âᵗᵀ solves the
Stein equation X = ÂXÂᵀ + B̃RB̃ᵀ, solved on the Schur form of the full mean state matrix
(Bartels–Stewart) — no time-domain summation, whose length grows like 1/(lr·λ_min) on an
ill-conditioned network Hessian; 𝒢_z(R) = Φ̃XΦ̃ᵀ/z, 𝒲_z(R) = X^{ww}/z.

`Loop` and `SteinLoop` apply 𝒢_z∘N and 𝒲_z without forming any d² × d² matrix: on the d(d+1)/2
coordinates of a symmetric d × d matrix in the orthonormal basis of
`stability.noise.gramian.symmetric_basis` (x_aa = P_aa, x_ab = √2·P_ab for a < b), one
application costs O(d³) plus the noise map N(P) = p·(F(P) − HPH).  Then

* ρ(𝒢_z∘N) is its Perron root (the map is positive, so the root of largest modulus is real,
  Krein-Rutman), found by ARPACK (`scipy.sparse.linalg.eigs`) from the identity;
* the stationary forward second moment solves (I − 𝒢₁N)P∞ = 𝒢₁(pΣ_ξ) (GMRES), and
  S∞^{ww} = 𝒲₁(N(P∞) + pΣ_ξ).

This is the path for d > `stability.noise.gramian.DENSE_LOOP_MAX_DIM` (a network's projected
curvature with k up to a few hundred), where the dense (d(d+1)/2)² eigenproblem costs minutes;
the tests check it against the dense one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stability.noise.state import StateSpace

DENSE_BATCH = 4_000_000
"""`SteinLoop.dense` solves at most this many matrix entries (K·N²) per batch."""
MAX_SQUARINGS = 64
"""Smith doubling stops after 2^64 terms: a mode that has not decayed by then counts as
unstable (ρ(A)/√z within ~1e-19 of 1)."""


def modal_weights(
    state: StateSpace, hessian: np.ndarray, z: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(V, G, W) of module doc (``None``: some mode has ρ(A_k)² ≥ z)."""
    lam, V = np.linalg.eigh(hessian)
    A = state.mode_matrices(lam) / np.sqrt(z)
    beta, phi = state.beta[0], state.phi[0]
    d = lam.size
    X = np.broadcast_to(np.outer(beta, beta), (d, d, *A.shape[1:])).copy()
    for _ in range(MAX_SQUARINGS):
        size = np.max(np.abs(A))
        if not size < 1e150:
            return None
        if size < 1e-10:
            break
        X = X + A[:, None] @ X @ A[None, :].transpose(0, 1, 3, 2)
        A = A @ A
    else:
        return None
    G = np.einsum("a,klab,b->kl", phi, X, phi) / z
    W = X[:, :, 0, 0] / z
    return V, G, W


def pack(P: np.ndarray) -> np.ndarray:
    """Coordinates of symmetric P (d, d) in the orthonormal symmetric basis (module doc)."""
    d = P.shape[-1]
    a, b = np.triu_indices(d)
    return np.where(a == b, 1.0, np.sqrt(2.0)) * P[a, b]


def unpack(x: np.ndarray, d: int) -> np.ndarray:
    """The symmetric d × d matrix with coordinates ``x`` (inverse of `pack`)."""
    a, b = np.triu_indices(d)
    values = np.where(a == b, 1.0, np.sqrt(0.5)) * x
    P = np.zeros((d, d))
    P[a, b] = values
    P[b, a] = values
    return P


class _LoopMaps:
    """What every loop shares: N, the Perron root of 𝒢_z∘N, the stationary point (module
    doc); subclasses give ``dim``, ``forward`` (𝒢_z) and ``weights`` (𝒲_z)."""

    moments: object

    def noise(self, P: np.ndarray) -> np.ndarray:
        """N(P) = p·(F(P) − HPH)."""
        H, mo = self.moments.hessian, self.moments
        return mo.p * (mo.fourth(P) - H @ P @ H)

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """(𝒢_z, 𝒲_z) as (d², d²) matrices on row-major vec R (small d)."""
        d = self.dim
        units = np.eye(d * d).reshape(d * d, d, d)
        G = np.stack([self.forward(E).ravel() for E in units], axis=1)
        W = np.stack([self.weights(E).ravel() for E in units], axis=1)
        return G, W

    @cached_property
    def _operator(self):
        from scipy.sparse.linalg import LinearOperator

        d = self.dim
        n = d * (d + 1) // 2

        def matvec(x):
            return pack(self.forward(self.noise(unpack(np.asarray(x, dtype=float).ravel(), d))))

        return LinearOperator((n, n), matvec=matvec, dtype=float)

    def loop_radius(self, *, tol: float = 1e-13) -> float:
        """ρ(𝒢_z∘N) on symmetric matrices (ARPACK, module doc)."""
        from scipy.sparse.linalg import ArpackNoConvergence, eigs

        start = pack(np.eye(self.dim))
        try:
            values = eigs(self._operator, k=2, which="LM", v0=start, tol=tol, maxiter=20_000)[0]
        except ArpackNoConvergence as err:
            values = err.eigenvalues
            if values.size == 0:
                raise ValueError("ARPACK did not converge on the mean-square loop map") from None
        return float(np.max(np.abs(values)))

    def stationary(self) -> tuple[np.ndarray, np.ndarray]:
        """(P∞, S∞^{ww}) of module doc (call only when ρ(𝒢₁∘N) < 1)."""
        from scipy.sparse.linalg import LinearOperator, gmres

        d, mo = self.dim, self.moments
        source = mo.p * mo.offset_covariance
        rhs = pack(self.forward(source))
        op = self._operator
        system = LinearOperator(op.shape, matvec=lambda x: x - op.matvec(x), dtype=float)
        scale = max(float(np.linalg.norm(rhs)), 1e-300)
        x, info = gmres(system, rhs, rtol=1e-13, atol=1e-13 * scale, restart=60, maxiter=200)
        if info != 0:
            raise ValueError("GMRES did not converge on the stationary second moment")
        P = unpack(x, d)
        Sww = self.weights(self.noise(P) + source)
        return P, 0.5 * (Sww + Sww.T)


@dataclass(frozen=True, eq=False)
class Loop(_LoopMaps):
    """Uniform delays: 𝒢_z(R) = V(G ∘ VᵀRV)Vᵀ, 𝒲_z(R) = V(W ∘ VᵀRV)Vᵀ (module doc); ``moments``
    as in `stability.noise.second_moment` (``hessian``, ``p``, ``fourth``,
    ``offset_covariance``)."""

    V: np.ndarray
    G: np.ndarray
    W: np.ndarray
    moments: object

    @classmethod
    def modal(
        cls, state: StateSpace, hessian: np.ndarray, z: float = 1.0, moments=None
    ) -> Loop | None:
        """``None`` when some mode has ρ(A_k)² ≥ z."""
        found = modal_weights(state, hessian, z)
        return None if found is None else cls(*found, moments)

    @property
    def dim(self) -> int:
        return self.V.shape[0]

    def forward(self, R: np.ndarray) -> np.ndarray:
        """𝒢_z(R)."""
        V = self.V
        return V @ (self.G * (V.T @ R @ V)) @ V.T

    def weights(self, R: np.ndarray) -> np.ndarray:
        """𝒲_z(R)."""
        V = self.V
        return V @ (self.W * (V.T @ R @ V)) @ V.T


class SteinLoop(_LoopMaps):
    """Any state (per-stage rules): 𝒢_z(R) = Φ̃X(R)Φ̃ᵀ/z and 𝒲_z(R) = X(R)^{ww}/z with
    X = ÂXÂᵀ + B̃RB̃ᵀ, Â = Ā/√z (the Stein equation of the geometric sum), solved on the complex
    Schur form Â = UTUᴴ column by column (Bartels–Stewart; unitary, so a nearly defective Ā —
    a delay chain at small lr — costs no accuracy)."""

    def __init__(self, state: StateSpace, hessian: np.ndarray, z: float, moments=None):
        from scipy.linalg import schur

        d, s = state.dim, state.size
        self.state, self.z, self.moments = state, z, moments
        self.T, self.U = schur(state.matrix(hessian) / np.sqrt(z), output="complex")
        self.stable = bool(np.max(np.abs(np.diag(self.T))) < 1)
        rows = np.arange(d)[:, None] * s + np.arange(s)
        self.B = np.zeros((d * s, d))
        self.B[rows.ravel(), np.repeat(np.arange(d), s)] = state.beta.ravel()
        self.Phi = np.zeros((d, d * s))
        self.Phi[np.repeat(np.arange(d), s), rows.ravel()] = state.phi.ravel()

    @classmethod
    def of(cls, state: StateSpace, hessian: np.ndarray, z: float = 1.0, moments=None):
        """``None`` when ρ(Ā)² ≥ z."""
        loop = cls(state, hessian, z, moments)
        return loop if loop.stable else None

    @property
    def dim(self) -> int:
        return self.state.dim

    def stein(self, Y: np.ndarray) -> np.ndarray:
        """X with X = ÂXÂᵀ + Y for a batch Y (K, N, N)."""
        from scipy.linalg import solve_triangular

        T, U = self.T, self.U
        N = T.shape[0]
        Yt = U.conj().T @ Y @ U
        X = np.zeros(Yt.shape, dtype=complex)
        eye = np.eye(N)
        for j in range(N - 1, -1, -1):
            rhs = Yt[:, :, j]
            if j < N - 1:
                rhs = rhs + (X[:, :, j + 1 :] @ T[j, j + 1 :].conj()) @ T.T
            M = eye - T[j, j].conj() * T
            X[:, :, j] = solve_triangular(M, rhs.T).T
        return np.real(U @ X @ U.conj().T)

    def _sums(self, R: np.ndarray) -> np.ndarray:
        return self.stein((self.B @ R @ self.B.T)[None])[0] / self.z

    def forward(self, R: np.ndarray) -> np.ndarray:
        """𝒢_z(R)."""
        return self.Phi @ self._sums(R) @ self.Phi.T

    def weights(self, R: np.ndarray) -> np.ndarray:
        """𝒲_z(R)."""
        s = self.state.size
        return self._sums(R)[::s, ::s]

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """(𝒢_z, 𝒲_z) as (d², d²) matrices: the unit R in batched solves."""
        d, s, B = self.dim, self.state.size, self.B
        N = B.shape[0]
        Y = np.einsum("na,mb->abnm", B, B).reshape(d * d, N, N)
        chunk = max(1, DENSE_BATCH // (N * N))
        X = np.concatenate([self.stein(Y[k : k + chunk]) for k in range(0, d * d, chunk)])
        X /= self.z
        G = np.einsum("cn,knm,em->cek", self.Phi, X, self.Phi).reshape(d * d, d * d)
        W = X[:, ::s, ::s].reshape(d * d, d * d).T
        return G, W


__all__ = ["MAX_SQUARINGS", "Loop", "SteinLoop", "modal_weights", "pack", "unpack"]
