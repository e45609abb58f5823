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

This is the path for d > `stability.noise.gramian.DENSE_LOOP_MAX_DIM` with uniform delays (a
network's projected curvature with k up to a few hundred), where the dense (d(d+1)/2)²
eigenproblem costs minutes, and for per-stage delays once d(d+1)/2 > `FREE_LOOP_SOLVES` (the
dense Gramians' d(d+1)/2 Stein solves cost more than ARPACK's); the tests check it against the
dense one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stability.noise.state import StateSpace

DENSE_BATCH = 4_000_000
"""`SteinLoop.dense` solves at most this many matrix entries (K·N²) per batch."""
STEIN_BLOCK = 32
"""Columns per block of `SteinLoop.stein` (the finished columns enter a block at once)."""
FREE_LOOP_SOLVES = 48
"""Per-stage states on d parameters use the matrix-free `SteinLoop` (one Stein solve per ARPACK
or GMRES step) instead of the dense Gramians (d(d+1)/2 batched solves) when d(d+1)/2 exceeds
this: ARPACK's Perron root takes ~21 single solves, each ~2× the CPU of one of the batched
dense ones (measured, one thread: teacher31 under PipeMare P = 4, d = 31, n = 206: 0.019 s
against 0.0093 s, the Perron root 0.44–0.50 s against 4.6 s dense; cpusmall, d = 12, PipeMare
P = 8, n = 124: 0.115 s against 0.186 s).  It is also the cost `staged_work` counts for one
evaluation on that path."""
HUGE = 1e150
"""Smith doubling gives up (the Gramian diverges) once Â or the partial sum passes this."""
MAX_SQUARINGS = 64
"""Smith doubling stops after 2^64 terms: a mode that has not decayed by then counts as
unstable (ρ(A)/√z within ~1e-19 of 1)."""


def modal_weights(
    state: StateSpace, hessian: np.ndarray, z: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(V, G, W) of module doc (``None``: some mode has ρ(A_k)² ≥ z, or a partial sum passed
    `HUGE` — a Gramian that large makes the loop diverge as surely, and its next doubling
    would overflow to inf·0 = nan)."""
    lam, V = np.linalg.eigh(hessian)
    A = state.mode_matrices(lam) / np.sqrt(z)
    beta, phi = state.beta[0], state.phi[0]
    d = lam.size
    k, m = np.triu_indices(d)  # X_mk = X_kmᵀ: the pairs k ≤ m only
    X = np.broadcast_to(np.outer(beta, beta), (k.size, *A.shape[1:])).copy()
    for _ in range(MAX_SQUARINGS):
        size = np.max(np.abs(A))
        if not (size < HUGE and np.max(np.abs(X)) < HUGE):
            return None
        if size < 1e-10:
            break
        with np.errstate(over="ignore", invalid="ignore"):  # checked above on the next pass
            X = X + A[k] @ X @ A[m].transpose(0, 2, 1)
            A = A @ A
    else:
        return None
    G, W = np.zeros((d, d)), np.zeros((d, d))
    G[k, m] = G[m, k] = np.einsum("a,kab,b->k", phi, X, phi) / z
    W[k, m] = W[m, k] = X[:, 0, 0] / z
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
        from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigs

        start = pack(np.eye(self.dim))
        try:
            values = eigs(self._operator, k=2, which="LM", v0=start, tol=tol, maxiter=20_000)[0]
        except ArpackNoConvergence as err:
            values = err.eigenvalues
            if values.size == 0:
                raise ValueError("ARPACK did not converge on the mean-square loop map") from None
        except ArpackError:  # "starting vector is zero": the map sends I to 0
            if np.any(self._operator.matvec(start)):
                raise
            return 0.0  # N(I) = p·mean_i (H_i − H)² is 0 only where N is (B = n): no noise
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


def relevant_slots(A: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The indices j of the state that reach an ``observed`` one through A's nonzero entries
    (A[i, j] ≠ 0: j feeds i), sorted.  The rest (a stage's history slots past its own delay,
    which no pass reads) feed nothing observed, so A[kept, dropped] = 0 and every sum
    Σ Âᵗ Y Âᵗᵀ restricted to the kept slots solves its own Stein equation: dropping them is
    exact, and it removes the exactly defective shift chains the union of the stages' slots
    adds (their Jordan blocks at 0)."""
    keep = np.asarray(observed, dtype=bool).copy()
    feeds = A != 0
    while True:
        grown = keep | feeds[keep].any(axis=0)
        if np.array_equal(grown, keep):
            return np.flatnonzero(keep)
        keep = grown


_SCHUR_CACHE: list = []
"""The last (state, hessian, kept slots, T, U) of `_schur_of`: the Schur form of Ā does not
depend on z (that of Ā/√z is T/√z), so the bisection in z (`stability.noise.gramian.ms_radius`)
factors Ā once."""


def _schur_of(state: StateSpace, hessian: np.ndarray):
    """(kept slots, T, U) with Ā restricted to the slots that reach an observed one (the
    forward pass or the weights; `relevant_slots`) = U T Uᴴ, complex Schur."""
    from scipy.linalg import schur

    if _SCHUR_CACHE and _SCHUR_CACHE[0] is state and _SCHUR_CACHE[1] is hessian:
        return _SCHUR_CACHE[2:]
    keep = _kept(state, hessian)
    A = state.matrix(hessian)
    T, U = schur(A[np.ix_(keep, keep)], output="complex")
    _SCHUR_CACHE[:] = [state, hessian, keep, T, U]
    return keep, T, U


def staged_solves(d: int) -> int:
    """Stein solves (in units of one batched dense solve) per evaluation of the loop on d
    parameters: d(d+1)/2 for the dense Gramians, `FREE_LOOP_SOLVES` for the matrix-free loop
    (`stability.noise.gramian` takes whichever is fewer)."""
    return min(d * (d + 1) // 2, FREE_LOOP_SOLVES)


def staged_work(state: StateSpace, hessian: np.ndarray) -> tuple[int, float]:
    """(n, `staged_solves` · n³): the slots a `SteinLoop` keeps and the cost of one evaluation
    of the loop (`stability.limits.NOISE_MAX_STAGED_WORK`)."""
    n = _kept(state, hessian).size
    return n, staged_solves(state.dim) * float(n) ** 3


def _kept(state: StateSpace, hessian: np.ndarray) -> np.ndarray:
    s = state.size
    observed = (state.phi != 0) | (np.arange(s) == 0)
    return relevant_slots(state.matrix(hessian), observed.ravel())


class SteinLoop(_LoopMaps):
    """Any state (per-stage rules): 𝒢_z(R) = Φ̃X(R)Φ̃ᵀ/z and 𝒲_z(R) = X(R)^{ww}/z with
    X = ÂXÂᵀ + B̃RB̃ᵀ, Â = Ā/√z (the Stein equation of the geometric sum), solved on the complex
    Schur form Â = UTUᴴ column by column (Bartels–Stewart; unitary, so a nearly defective Ā —
    a delay chain at small lr — costs no accuracy)."""

    def __init__(self, state: StateSpace, hessian: np.ndarray, z: float, moments=None):
        d, s = state.dim, state.size
        self.state, self.z, self.moments = state, z, moments
        keep, T1, U = _schur_of(state, hessian)
        self.T, self.U = T1 / np.sqrt(z), U
        self.stable = bool(np.max(np.abs(np.diag(self.T))) < 1)
        rows = np.arange(d)[:, None] * s + np.arange(s)
        B = np.zeros((d * s, d))
        B[rows.ravel(), np.repeat(np.arange(d), s)] = state.beta.ravel()
        Phi = np.zeros((d, d * s))
        Phi[np.repeat(np.arange(d), s), rows.ravel()] = state.phi.ravel()
        self.B, self.Phi = B[keep], Phi[:, keep]
        self.w = np.searchsorted(keep, np.arange(d) * s)  # slot (w, 0) of each parameter

    @classmethod
    def of(cls, state: StateSpace, hessian: np.ndarray, z: float = 1.0, moments=None):
        """``None`` when ρ(Ā)² ≥ z."""
        loop = cls(state, hessian, z, moments)
        return loop if loop.stable else None

    @property
    def dim(self) -> int:
        return self.state.dim

    def stein(self, Y: np.ndarray) -> np.ndarray:
        """X with X = ÂXÂᵀ + Y for a batch Y (K, N, N) (`schur_stein` on Ỹ = UᴴYU)."""
        U = self.U
        return np.real(U @ self.schur_stein(U.conj().T @ Y @ U) @ U.conj().T)

    def schur_stein(self, Yt: np.ndarray) -> np.ndarray:
        """X̃ with X̃ = TX̃Tᴴ + Ỹ for a batch Ỹ (K, N, N): column j (last first) solves
        (I − t̄_jj T) x_j = Ỹ_j + T Σ_{k>j} x_k t̄_jk; the sum over the columns of finished
        blocks of `STEIN_BLOCK` is one matrix product per block."""
        from scipy.linalg.blas import ztrsm

        T = self.T
        Tc = T.conj()
        N = T.shape[0]
        X = np.zeros(Yt.shape, dtype=complex)
        shifted, diag, at = np.array(T, dtype=complex, order="F"), np.diag(T).copy(), np.arange(N)
        for end in range(N, 0, -STEIN_BLOCK):
            start = max(0, end - STEIN_BLOCK)
            done = X[:, :, end:] @ Tc[start:end, end:].T  # (K, N, block): finished columns
            for j in range(end - 1, start - 1, -1):
                acc = done[:, :, j - start] + X[:, :, j + 1 : end] @ Tc[j, j + 1 : end]
                rhs = Yt[:, :, j] + acc @ T.T
                c = Tc[j, j]
                if c == 0:
                    X[:, :, j] = rhs
                    continue
                # I − cT = −c(T − I/c): only the diagonal of the shifted copy changes per column
                # (1 − c·t_ii rounded as I − cT rounds it: near |t_jj| = 1 it is a cancellation)
                shifted[at, at] = (c * diag - 1.0) / c
                X[:, :, j] = ztrsm(-1.0 / c, shifted, rhs.T).T
        return X

    def _sums(self, R: np.ndarray) -> np.ndarray:
        return self.stein((self.B @ R @ self.B.T)[None])[0] / self.z

    def forward(self, R: np.ndarray) -> np.ndarray:
        """𝒢_z(R)."""
        return self.Phi @ self._sums(R) @ self.Phi.T

    def weights(self, R: np.ndarray) -> np.ndarray:
        """𝒲_z(R)."""
        return self._sums(R)[np.ix_(self.w, self.w)]

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """(𝒢_z, 𝒲_z) as (d², d²) matrices: the unit R = E_ab (a ≤ b) in batched solves on the
        Schur form, never leaving it: Ỹ = q_a q_bᴴ (Q = UᴴB̃), 𝒢(E_ab) = Re P X̃ Pᴴ/z
        (P = Φ̃U), 𝒲(E_ab) = Re U_w X̃ U_wᴴ/z (the weight rows of U); E_ba from
        X(E_ba) = X(E_ab)ᵀ."""
        d, U = self.dim, self.U
        N = U.shape[0]
        Q, P, Uw = U.conj().T @ self.B, self.Phi @ U, U[self.w]
        a, b = np.triu_indices(d)
        chunk = max(1, DENSE_BATCH // (N * N))
        parts = ([], [])
        for k in range(0, a.size, chunk):
            Yt = Q.T[a[k : k + chunk], :, None] * Q.T.conj()[b[k : k + chunk], None, :]
            X = self.schur_stein(Yt)
            parts[0].append(np.real(P @ X @ P.conj().T))
            parts[1].append(np.real(Uw @ X @ Uw.conj().T))
        out = []
        for part in parts:
            part = np.concatenate(part).transpose(1, 2, 0) / self.z
            full = np.zeros((d, d, d, d))
            full[:, :, a, b] = part
            full[:, :, b, a] = part.transpose(1, 0, 2)
            out.append(full.reshape(d * d, d * d))
        return out[0], out[1]


__all__ = [
    "FREE_LOOP_SOLVES",
    "MAX_SQUARINGS",
    "Loop",
    "SteinLoop",
    "modal_weights",
    "pack",
    "relevant_slots",
    "staged_solves",
    "staged_work",
    "unpack",
]
