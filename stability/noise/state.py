r"""The state-space form z_{t+1} = A(H)·z_t + B̃·g_t of a rule, read off its own step.

For linear regression the gradient reads only the forward weights (`stability.trainer.linreg`),
g = H·(u_fwd − w*) + ξ.  A time-invariant rule's step is linear in its state and in g, so in
error coordinates (w − w*; every other variable is 0 at rest) each parameter c carries the same
kind of state — its slots (var, lag), the values the rule reads — and

    z_{t+1}[c] = K_c·z_t[c] + β_c·g_t[c],        u_t[c] = φ_cᵀ·z_t[c],        g_t = H_t·u_t + ξ_t,

i.e. A(H) = K̃ + B̃·H·Φ̃ with K̃ = ⊕_c K_c (s × s per parameter), B̃ = ⊕_c β_c, Φ̃ = ⊕_c φ_cᵀ.
Nothing here is typed by hand:

* K_c is the state matrix of the rule with a zero gradient, and K_c + β_c φ_cᵀ the one with the
  gradient u (λ = 1), both from `stability.dynamics.linear.linearize` (probing the step);
* φ_c is read by probing the rule's ``passes`` with unit taps, β_c by calling its ``update``
  with g = 1 on a zero state; `state_space` checks β_c φ_cᵀ = (K_c + β_c φ_cᵀ) − K_c, so a rule
  that is not linear in its gradient through the forward pass is refused.

Uniform delays give one (K, β, φ) for every parameter; per-stage delays (a pipeline schedule,
`stability.coupled.system.stage_rules`) one per stage, on the union of the stages' slots.  Slots
(var, lag) run over lag = 0 … (the largest lag the rule reads of var): unread history is left
out, so s = Σ_var depth_var (momentum at delay τ: s = τ + 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stability.dynamics.linear import linearize
from stability.rules.base import Rule, UnitTap, taps_read

Slot = tuple[str, int]


def _zero_gradient(u_fwd, u_bkwd, u_recomp):
    return 0.0 * u_fwd


def _unit_gradient(u_fwd, u_bkwd, u_recomp):
    return u_fwd


def rule_slots(rules: Sequence[Rule]) -> tuple[Slot, ...]:
    """The union of the (var, lag) slots the rules read, var by var, lag 0 first."""
    depth: dict[str, int] = {}
    for rule in rules:
        if getattr(rule, "period", 1) != 1:
            raise ValueError(
                "rule: the minibatch analysis needs a time-invariant rule (this one is periodic)"
            )
        for var in rule.variables:
            depth.setdefault(var, 1)
        for var, lag in taps_read(rule):
            depth[var] = max(depth[var], lag + 1)
    if "w" not in depth:
        raise ValueError("a rule must have the weights w among its variables")
    order = ["w"] + [v for v in depth if v != "w"]
    return tuple((var, lag) for var in order for lag in range(depth[var]))


def probe(rule: Rule, lr: float, slots: Sequence[Slot]) -> tuple[np.ndarray, ...]:
    """(K, β, φ) of ``rule`` at step size ``lr`` on ``slots`` (module doc), numeric."""
    index = {slot: i for i, slot in enumerate(slots)}
    s = len(slots)

    def assemble(dynamics) -> np.ndarray:
        A = np.zeros((s, s))
        for lag, matrix in dynamics.matrices.items():
            for i, var_i in enumerate(dynamics.variables):
                for j, var_j in enumerate(dynamics.variables):
                    if float(matrix[i][j]) != 0.0:  # a tap the rule reads: always a slot
                        A[index[(var_i, 0)], index[(var_j, lag)]] += float(matrix[i][j])
        for (var, lag), i in index.items():
            if lag > 0:
                A[i, index[(var, lag - 1)]] = 1.0
        return A

    K = assemble(linearize(rule, _zero_gradient, lr))
    coupled = assemble(linearize(rule, _unit_gradient, lr))
    phi = np.array([float(rule.passes(UnitTap(slot), lr).forward) for slot in slots])
    new = rule.update(UnitTap(None), 1.0, lr)
    beta = np.zeros(s)
    for var in rule.variables:
        beta[index[(var, 0)]] = float(new[var])
    gap = np.max(np.abs(coupled - K - np.outer(beta, phi)))
    if not gap <= 1e-12 * max(1.0, np.max(np.abs(coupled))):
        raise ValueError(
            "the rule is not linear in its gradient through the forward pass: the minibatch "
            f"analysis does not apply (mismatch {gap:.2e})"
        )
    return K, beta, phi


@dataclass(frozen=True, eq=False)
class StateSpace:
    """A(H) = K̃ + B̃·H·Φ̃ per parameter (module doc).

    Attributes:
        K: (d, s, s) per-parameter zero-gradient dynamics.
        beta: (d, s) where the gradient enters.
        phi: (d, s) the forward-pass weights u = φᵀz (in error coordinates).
        slots: the (var, lag) of each of the s slots; slot 0 is w_t.
        uniform: every parameter has the same (K, β, φ) (uniform delays).
    """

    K: np.ndarray
    beta: np.ndarray
    phi: np.ndarray
    slots: tuple[Slot, ...]
    uniform: bool

    @property
    def dim(self) -> int:
        return self.K.shape[0]

    @property
    def size(self) -> int:
        """Slots per parameter s."""
        return self.K.shape[1]

    @cached_property
    def weight_slots(self) -> np.ndarray:
        """(s,) 1 on the slots holding a past value of w (the start fills them with w₀ − w*)."""
        return np.array([1.0 if var == "w" else 0.0 for var, _ in self.slots])

    def initial(self, e0: np.ndarray) -> np.ndarray:
        """z₀ (d, s) for weights that were w₀ forever (e0 = w₀ − w*), every other variable 0."""
        return np.asarray(e0, dtype=float)[:, None] * self.weight_slots

    def forward(self, Z: np.ndarray) -> np.ndarray:
        """u = Φ̃ z for states Z (..., d, s): shape (..., d)."""
        return np.einsum("cs,...cs->...c", self.phi, Z)

    def advance(self, Z: np.ndarray, g: np.ndarray) -> np.ndarray:
        """K̃ z + B̃ g for states Z (..., d, s) and gradients g (..., d)."""
        return np.einsum("cab,...cb->...ca", self.K, Z) + self.beta * g[..., None]

    def apply(self, Z: np.ndarray, H: np.ndarray) -> np.ndarray:
        """A(H)·z for states Z (..., d, s) and a symmetric H (d, d)."""
        return self.advance(Z, self.forward(Z) @ H)

    def matrix(self, H: np.ndarray) -> np.ndarray:
        """The dense (d·s) × (d·s) state matrix A(H), index (c, a) → c·s + a (small sizes)."""
        d, s = self.dim, self.size
        eye = np.eye(d * s).reshape(d * s, d, s)
        return self.apply(eye, H).reshape(d * s, d * s).T

    def mode_matrices(self, eigenvalues: np.ndarray) -> np.ndarray:
        """A_k = K + λ_k β φᵀ (d, s, s): A(H) in H's eigenbasis (uniform delays only)."""
        if not self.uniform:
            raise ValueError("mode matrices need one (K, β, φ) for every parameter")
        lam = np.asarray(eigenvalues, dtype=float)
        return self.K[0] + lam[:, None, None] * np.outer(self.beta[0], self.phi[0])


def state_space(
    rules: Rule | Sequence[Rule], lr: float, stage_sizes: Sequence[int] | None = None
) -> StateSpace:
    """The state space of one rule for every parameter (``stage_sizes=None`` with ``dim`` from
    the caller via `uniform_state`) or of per-stage rules on contiguous parameter blocks."""
    rules = (rules,) if not isinstance(rules, Sequence) else tuple(rules)
    sizes = tuple(int(n) for n in stage_sizes) if stage_sizes is not None else (1,)
    if len(sizes) != len(rules):
        raise ValueError(f"one rule per stage: {len(sizes)} stages, {len(rules)} rules")
    slots = rule_slots(rules)
    parts = [probe(rule, lr, slots) for rule in rules]
    K = np.concatenate(
        [np.broadcast_to(k, (n, *k.shape)) for (k, _, _), n in zip(parts, sizes, strict=True)]
    )
    beta = np.concatenate(
        [np.broadcast_to(b, (n, b.size)) for (_, b, _), n in zip(parts, sizes, strict=True)]
    )
    phi = np.concatenate(
        [np.broadcast_to(f, (n, f.size)) for (_, _, f), n in zip(parts, sizes, strict=True)]
    )
    same = all(np.array_equal(a, b) for p in parts[1:] for a, b in zip(p, parts[0], strict=True))
    return StateSpace(K, beta, phi, slots, same)


def uniform_state(rule: Rule, lr: float, dim: int) -> StateSpace:
    """One rule (uniform delays) on ``dim`` parameters."""
    return state_space([rule], lr, [dim])


__all__ = ["Slot", "StateSpace", "probe", "rule_slots", "state_space", "uniform_state"]
