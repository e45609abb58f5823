r"""The reduced (small-gain) form of the second-moment map: threshold, floor and rate from d × d.

Split the second-moment map of `stability.noise.second_moment` into its deterministic part and
the part the random Hessian adds,

    𝒯(S) = 𝒜₀(S) + B̃·N(Φ̃SΦ̃ᵀ)·B̃ᵀ,     𝒜₀(S) = Ā S Āᵀ,
    N(P) = E[H_B P H_B] − HPH = p·(F(P) − HPH)       (positive: E[(H_B − H)P(H_B − H)]).

For z > ρ(Ā)² the resolvent of 𝒜₀ is the positive series Σ_t z^{−t−1} Āᵗ(·)Āᵗᵀ, so 𝒯S = zS
⇔ S = Σ_t z^{−t−1} Āᵗ B̃ N(P) B̃ᵀ Āᵗᵀ ⇔ P = 𝒢_z(N(P)) with the Gramian of the forward pass

    𝒢_z(R) = Σ_{t≥0} z^{−t−1} h_t R h_tᵀ,      h_t = Φ̃ Āᵗ B̃   (d × d: the response of the
                                                              forward weights to a gradient),

and likewise 𝒲_z with w_t = (slot 0 of Āᵗ B̃) for the weights.  Both are positive maps on
d × d matrices, decreasing in z.  Hence (the mean-square small-gain theorem):

* **threshold**: mean-square stable ⇔ ρ(Ā) < 1 and ρ(𝒢₁∘N) < 1 (`ms_measure`);
* **rate**: ρ(𝒯) = the z > ρ(Ā)² with ρ(𝒢_z∘N) = 1 (or ρ(Ā)² if there is none) (`ms_radius`);
* **floor**: the stationary second moment solves S∞ = 𝒜₀(S∞) + B̃(N(P∞) + pΣ_ξ)B̃ᵀ, so
  (I − 𝒢₁N)P∞ = 𝒢₁(pΣ_ξ), S∞^{ww} = 𝒲₁(N(P∞) + pΣ_ξ) and the floor is
  lim E f − f* = ½ tr(H S∞^{ww}) (`stationary`).

All are problems on the d(d+1)/2 symmetric d × d matrices (d = parameters), whatever the
delay: 𝒢, 𝒲 and N preserve symmetry, so they are restricted to an orthonormal basis E of the
symmetric matrices (the d² × d² eigenproblem is ~100× slower: its eigenvalues on the
antisymmetric matrices come in repeated pairs).  N is a positive *map* but not a positive
semidefinite matrix (⟨P, N(P)⟩ = E(xᵀPx)² − tr(PHPH) can be negative), so ρ(𝒢N) is a
nonsymmetric eigenproblem; its largest modulus is the Perron root (real, positive).
Two constructions of 𝒢, 𝒲:

* **modal** (uniform delays): in H's eigenbasis H = VΛVᵀ the state matrix splits into
  A_k = K + λ_k βφᵀ (s × s), h_t = V·diag(φᵀA_kᵗβ)·Vᵀ, and 𝒢_z(R) = V(G ∘ VᵀRV)Vᵀ with
  G_kl = φᵀX_klφ, X_kl = Σ_t z^{−t−1} A_kᵗ ββᵀ A_lᵗᵀ — solved exactly for every pair (k, l)
  at once by Smith's doubling X ← X + Â_k X Â_lᵀ, Â ← Â² (Â = A/√z): 2^j terms after j
  squarings, O(d² s³) each;
* **Stein** (per-stage rules, any state): the geometric sums solve a Stein equation on the full
  state, solved on its Schur form (`stability.noise.modal.SteinLoop`);
* **time domain** (`_impulse_gramians`, the tests' reference): h_t, w_t by stepping Āᵗ B̃
  matrix-free and summing until the impulse has decayed to 1e-12 of its peak.

Each is the other's check in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stability.noise.modal import FREE_LOOP_SOLVES, Loop, SteinLoop, modal_weights
from stability.noise.moments import SampleMoments
from stability.noise.state import StateSpace

DENSE_LOOP_MAX_DIM = 32
"""Uniform delays on more parameters than this use the matrix-free modal loop
(`stability.noise.modal`) instead of the dense d² × d² Gramians."""
MAX_IMPULSE_STEPS = 1_000_000
"""The time-domain Gramian gives up (unstable) after this many steps."""


@dataclass(frozen=True)
class Gramians:
    """𝒢_z and 𝒲_z as (d², d²) matrices on row-major vec R (``None``: z ≤ ρ(Ā)²)."""

    forward: np.ndarray
    weights: np.ndarray


def _modal_gramians(state: StateSpace, hessian: np.ndarray, z: float) -> Gramians | None:
    found = modal_weights(state, hessian, z)
    if found is None:
        return None
    V, G, W = found
    VV = np.kron(V, V)
    return Gramians((VV * G.ravel()) @ VV.T, (VV * W.ravel()) @ VV.T)


def _impulse_gramians(state: StateSpace, hessian: np.ndarray, z: float) -> Gramians | None:
    d, s = state.dim, state.size
    Y = np.zeros((d, d, s))  # Y[j] = Âᵗ B̃ e_j
    Y[np.arange(d), np.arange(d)] = state.beta
    G = np.zeros((d, d, d, d))
    W = np.zeros((d, d, d, d))
    peak, block, hs, ws = 0.0, 256, [], []
    scale = 1.0 / np.sqrt(z)
    for t in range(MAX_IMPULSE_STEPS):
        hs.append(state.forward(Y).T)  # h_t[a, j]
        ws.append(Y[:, :, 0].T)
        if len(hs) == block:
            h, w = np.array(hs), np.array(ws)
            G += np.einsum("tab,tec->aebc", h, h)
            W += np.einsum("tab,tec->aebc", w, w)
            hs, ws = [], []
        size = float(np.max(np.abs(Y)))
        peak = max(peak, size)
        if not size < 1e150:
            return None
        if size < 1e-12 * peak and t > s:
            break
        Y = state.apply(Y, hessian) * scale
    else:
        return None
    if hs:
        h, w = np.array(hs), np.array(ws)
        G += np.einsum("tab,tec->aebc", h, h)
        W += np.einsum("tab,tec->aebc", w, w)
    return Gramians(G.reshape(d * d, d * d) / z, W.reshape(d * d, d * d) / z)


def gramians(state: StateSpace, hessian: np.ndarray, z: float = 1.0) -> Gramians | None:
    """𝒢_z, 𝒲_z (module doc): modal for uniform delays, otherwise by the Stein equation
    (`stability.noise.modal.SteinLoop`)."""
    if state.uniform:
        return _modal_gramians(state, hessian, z)
    loop = SteinLoop.of(state, hessian, z)
    return None if loop is None else Gramians(*loop.dense())


def mean_radius(state: StateSpace, hessian: np.ndarray) -> float:
    """ρ(Ā), the spectral radius of the mean dynamics (the full-batch state matrix)."""
    if state.uniform:
        modes = state.mode_matrices(np.linalg.eigvalsh(hessian))
        return float(np.max(np.abs(np.linalg.eigvals(modes))))
    return float(np.max(np.abs(np.linalg.eigvals(state.matrix(hessian)))))


def symmetric_basis(d: int) -> np.ndarray:
    """E (d², d(d+1)/2): orthonormal basis of the symmetric d × d matrices (row-major vec)."""
    cols = []
    for a in range(d):
        for b in range(a, d):
            e = np.zeros((d, d))
            e[a, b] = e[b, a] = 1.0 if a == b else np.sqrt(0.5)
            cols.append(e.ravel())
    return np.array(cols).T


class NoiseMap:
    """N restricted to the symmetric matrices: Ñ = EᵀNE (module doc), formed on first use."""

    def __init__(self, moments: SampleMoments):
        self.moments = moments

    @classmethod
    def of(cls, moments: SampleMoments) -> NoiseMap:
        return cls(moments)

    @cached_property
    def basis(self) -> np.ndarray:
        return symmetric_basis(self.moments.dim)

    @cached_property
    def matrix(self) -> np.ndarray:
        return self.basis.T @ self.moments.noise_matrix() @ self.basis

    def loop_radius(self, forward: np.ndarray) -> float:
        """ρ(𝒢N) on symmetric matrices, 𝒢 = ``forward`` (d², d²)."""
        M = self.basis.T @ forward @ self.basis @ self.matrix
        return float(np.max(np.abs(np.linalg.eigvals(M))))

    @cached_property
    def modal(self) -> np.ndarray:
        """Ñ in H's eigenbasis: R ↦ VᵀN(VRVᵀ)V on symmetric matrices, (V ⊗ V)ᵀ acting on
        row-major vec (H = VΛVᵀ, the V of `stability.noise.modal.modal_weights`)."""
        V = np.linalg.eigh(self.moments.hessian)[1]
        VE = np.kron(V, V) @ self.basis
        return VE.T @ self.moments.noise_matrix() @ VE

    def modal_radius(self, G: np.ndarray) -> float:
        """ρ(𝒢N) for uniform delays from the modal weights G alone: 𝒢 = (V ⊗ V)·(G ∘ ·)·(V ⊗ V)ᵀ
        (`stability.noise.modal`), so 𝒢N is similar to (G ∘ ·)·Ñ_V (`modal`), and on the
        symmetric basis (G ∘ ·) is the diagonal of G's entries G_ab, a ≤ b: one row scaling,
        where forming 𝒢 costs d⁶ (any eigenbasis of H serves: G_kl depends on λ_k, λ_l only, so
        it commutes with a rotation inside an eigenspace).  Ñ_V is symmetric (N is self-adjoint
        in the trace inner product and the basis is orthonormal), so where every G_ab > 0 —
        the usual case — the product is similar to the symmetric g^{1/2}Ñ_Vg^{1/2} and its
        spectrum comes from ``eigvalsh``, 10× faster than the nonsymmetric one at d = 13."""
        a, b = np.triu_indices(G.shape[0])
        g = G[a, b]
        if np.all(g > 0):
            root = np.sqrt(g)
            values = np.linalg.eigvalsh(root[:, None] * self.modal * root)
        else:
            values = np.linalg.eigvals(g[:, None] * self.modal)
        return float(np.max(np.abs(values)))


def _free(state: StateSpace, moments, z: float) -> Loop | SteinLoop | None | bool:
    """The matrix-free loop (``None``: z ≤ ρ(Ā)²), or False (dense): for uniform delays on
    more than `DENSE_LOOP_MAX_DIM` parameters; for per-stage delays when the d(d+1)/2 Stein
    solves of the dense Gramians cost more than the loop's (`stability.noise.modal.
    FREE_LOOP_SOLVES`)."""
    d = moments.dim
    if state.uniform:
        return False if d <= DENSE_LOOP_MAX_DIM else Loop.modal(state, moments.hessian, z, moments)
    if d * (d + 1) // 2 <= FREE_LOOP_SOLVES:
        return False
    return SteinLoop.of(state, moments.hessian, z, moments)


def loop_radius(state: StateSpace, moments, z: float, noise: NoiseMap | None = None) -> float:
    """ρ(𝒢_z∘N) on symmetric matrices; inf if z ≤ ρ(Ā)²."""
    loop = _free(state, moments, z)
    if loop is not False:
        return float("inf") if loop is None else loop.loop_radius()
    noise = noise or NoiseMap.of(moments)
    if state.uniform:
        found = modal_weights(state, moments.hessian, z)
        return float("inf") if found is None else noise.modal_radius(found[1])
    g = gramians(state, moments.hessian, z)
    return float("inf") if g is None else noise.loop_radius(g.forward)


def ms_measure(state: StateSpace, moments: SampleMoments, noise: NoiseMap | None = None) -> float:
    """ρ(𝒢₁∘N): < 1 (with ρ(Ā) < 1) ⇔ mean-square stable; inf if ρ(Ā) ≥ 1."""
    return loop_radius(state, moments, 1.0, noise)


def ms_radius(
    state: StateSpace, moments: SampleMoments, noise: NoiseMap | None = None, *, rtol: float = 1e-12
) -> float:
    """ρ(𝒯), the mean-square rate per step (module doc); ≥ 1 reported as inf.  The root z of
    ρ(𝒢_z∘N) = 1 is sought in t = ln((z − ρ(Ā)²)/(1 − ρ(Ā)²)): it often lies within 1e-8 of
    ρ(Ā)² (little noise), which Brent's method reaches in a few steps of t but in ~20 halvings
    of z."""
    from scipy.optimize import brentq

    noise = noise or NoiseMap.of(moments)
    floor = mean_radius(state, moments.hessian) ** 2
    if floor >= 1:
        return float("inf")
    gap = 1.0 - floor

    seen: dict[float, float] = {}

    def excess_z(z: float) -> float:
        if z not in seen:
            value = loop_radius(state, moments, z, noise)
            seen[z] = (value - 1) / (value + 1) if np.isfinite(value) else 1.0
        return seen[z]

    def excess(t: float) -> float:  # at z = floor + gap·eᵗ, t ≤ 0 (z = 1 at t = 0)
        return excess_z(floor + gap * np.exp(t))

    if excess(0.0) >= 0:
        return float("inf")
    low = float(np.log(1e-12 * floor / gap)) if floor > 0 else float(np.log(1e-300))
    if excess(low) <= 0:
        return floor
    t = brentq(excess, low, 0.0, xtol=1e-3)  # then z itself to rtol, inside that bracket
    a, b = max(low, t - 2e-3), min(0.0, t + 2e-3)
    if not (excess(a) > 0 > excess(b)):
        a, b = low, 0.0
    za, zb = floor + gap * np.exp(a), floor + gap * np.exp(b)
    return float(brentq(excess_z, za, zb, xtol=1e-300, rtol=max(rtol, 4e-16)))


@dataclass(frozen=True)
class Stationary:
    """The stationary second moments: P∞ (forward weights) and S∞^{ww} (weights), d × d,
    and the floor ½ tr(H S∞^{ww}) = lim E f − f*."""

    forward: np.ndarray
    weights: np.ndarray
    floor: float


def stationary(
    state: StateSpace, moments: SampleMoments, noise: NoiseMap | None = None
) -> Stationary | None:
    """The fixed point of the recursion (module doc); ``None`` if not mean-square stable.

    Per-stage delays solve it directly on the dense Gramians even where the loop runs
    matrix-free (one batched set of d(d+1)/2 Stein solves, once): GMRES on the matrix-free
    loop did not converge on PipeMare P = 4 on a 31-parameter network, whose slowest mode has
    ρ(Ā) = 1 − 1e-10."""
    loop = _free(state, moments, 1.0)
    noise = noise or NoiseMap.of(moments)
    if loop is not False:
        if loop is None or loop.loop_radius() >= 1:
            return None
        if not isinstance(loop, SteinLoop):
            P, Sww = loop.stationary()
            return Stationary(P, Sww, 0.5 * float(np.sum(moments.hessian * Sww)))
        g = Gramians(*loop.dense())
    else:
        g = gramians(state, moments.hessian, 1.0)
        if g is None or noise.loop_radius(g.forward) >= 1:
            return None
    d, E = moments.dim, noise.basis
    G, W = E.T @ g.forward @ E, E.T @ g.weights @ E
    source = moments.p * (E.T @ moments.offset_covariance.ravel())
    P = np.linalg.solve(np.eye(E.shape[1]) - G @ noise.matrix, G @ source)
    Sww = (E @ (W @ (noise.matrix @ P + source))).reshape(d, d)
    P = (E @ P).reshape(d, d)
    Sww = 0.5 * (Sww + Sww.T)
    return Stationary(P, Sww, 0.5 * float(np.sum(moments.hessian * Sww)))


__all__ = [
    "DENSE_LOOP_MAX_DIM",
    "Gramians",
    "NoiseMap",
    "symmetric_basis",
    "Stationary",
    "gramians",
    "loop_radius",
    "mean_radius",
    "ms_measure",
    "ms_radius",
    "stationary",
]
