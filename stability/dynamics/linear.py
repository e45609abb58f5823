"""Linear dynamics of a rule on the quadratic model, read off the rule's own step.

On the quadratic model (`stability.quadratic`) a rule's step is linear in the past state:

    x_{t+1} = Σ_{k=0}^{L} A_k · x_{t−k},        x_t = (w_t, v_t, δ_t, ...)  (n variables)

`linearize` finds the taps the step reads and probes each with a unit value; the responses are
the columns of the n×n matrices A_k.  Nothing about a rule's dynamics is typed by hand here.

Two equivalent views follow (PipeMare Sec. 3.1 eq. 2 and App. B; Kosson App. I):

* the **state matrix**, the block companion matrix of size n(L+1) acting on
  (x_t, x_{t−1}, ..., x_{t−L}) — the dense oracle, O((nL)³) to diagonalise;
* the **characteristic polynomial** det(ω^{L+1}·I − Σ_k A_k ω^{L−k}), computed as the
  determinant of an n×n matrix of *sparse* polynomials, so O(terms) for any delay.  Its
  nonzero roots are the nonzero eigenvalues of the state matrix; the factor ω^j (zero roots,
  padding of unused history) is divided out, so the polynomial matches the papers' up to ω^k.

The step size enters as a formal variable: `linearize` runs the rule with ``lr`` = `LR`, a
polynomial in ℓ, so the characteristic polynomial comes out as p(ω, ℓ) = Σ_j ℓ^j·C_j(ω).
`CharacteristicPolynomial.is_affine` (C_j = 0 for j ≥ 2) then decides, per rule instance,
whether the boundary-locus method of `stability.analysis.boundary` applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.dynamics.round_robin import check_size, has_round_robin
from stability.polynomial import SparsePoly, polynomial_determinant
from stability.quadratic import QuadraticModel
from stability.rules.base import Oracle, Rule, UnitTap, taps_read

LR = SparsePoly.monomial(1, 1)
"""The step size ℓ as a formal variable (a polynomial in ℓ), for `linearize`."""


@dataclass(frozen=True)
class LinearDynamics:
    """``x_{t+1} = Σ_k A_k x_{t−k}`` for a rule on the quadratic model.

    ``matrices[k][i][j]`` is the coefficient of variable j at lag k in the new value of
    variable i.  Entries are numbers, grid arrays, Fractions, sympy expressions or polynomials
    in the formal step size `LR`, depending on what the rule and model were built from.
    """

    variables: tuple[str, ...]
    matrices: Mapping[int, tuple[tuple[Any, ...], ...]]

    @property
    def max_lag(self) -> int:
        return max(self.matrices)

    def polynomial(self) -> SparsePoly:
        """det(ω^{L+1} I − Σ_k A_k ω^{L−k}) with the factor ω^j divided out (monic)."""
        n, top = len(self.variables), self.max_lag + 1
        rows = []
        for i in range(n):
            row = []
            for j in range(n):
                identity = [(top, 1)] if i == j else []
                lags = [
                    (top - 1 - k, -a[i][j])
                    for k, a in self.matrices.items()
                    if not _is_const_zero(a[i][j])
                ]
                row.append(SparsePoly.from_terms(identity + lags))
            rows.append(row)
        return polynomial_determinant(rows).normalized()

    def lr_slope_at_one(self) -> Any:
        """∂p/∂ℓ at ω = 1 (B(1) of p = A + ℓ·B): the coefficient of ℓ in det(I − Σ_k A_k(ℓ)),
        which is `polynomial` at ω = 1 (ω^j is 1 there), without forming p.  Exact for
        Fraction entries, where p's float coefficients can lose it to cancellation."""
        n = len(self.variables)
        total = [[_as_lr_poly(int(i == j)) for j in range(n)] for i in range(n)]
        for a in self.matrices.values():
            total = [[total[i][j] - _as_lr_poly(a[i][j]) for j in range(n)] for i in range(n)]
        return polynomial_determinant(total).terms.get(1, 0)

    def state_matrix(self) -> np.ndarray:
        """Block companion matrix on (x_t, ..., x_{t−L}), shape ``(*grid, n(L+1), n(L+1))``.

        Numeric entries only (evaluate the formal step size first, see `linearize`).
        """
        n, depth = len(self.variables), self.max_lag + 1
        entries = [a for m in self.matrices.values() for row in m for a in row]
        grid = np.broadcast_shapes(*(np.shape(a) for a in entries))
        size = n * depth
        out = np.zeros((*grid, size, size))
        for k, m in self.matrices.items():
            for i in range(n):
                for j in range(n):
                    out[..., i, k * n + j] = m[i][j]
        idx = np.arange(n, size)
        out[..., idx, idx - n] = 1.0
        return out


def _is_const_zero(a: Any) -> bool:
    return isinstance(a, int) and a == 0


def linearize(rule: Rule, model: Oracle, lr: Any = LR, t: int = 0) -> LinearDynamics:
    """Probe step ``t`` of ``rule`` under the linear ``model`` at step size ``lr``.

    ``lr`` defaults to the formal variable `LR`; pass a number, grid array, Fraction or sympy
    symbol to get matrices of that type.  ``t`` matters only for periodic rules (one
    linearization per phase; their product over a period is the monodromy matrix).
    """
    variables = tuple(rule.variables)
    index = {v: i for i, v in enumerate(variables)}
    n = len(variables)
    columns: dict[int, list[list[Any]]] = {}
    for var, lag in sorted(taps_read(rule, lr, t)):
        probe = UnitTap((var, lag), t)
        p = rule.passes(probe, lr)
        new = rule.update(probe, model(p.forward, p.backward, p.recompute), lr)
        block = columns.setdefault(lag, [[0] * n for _ in range(n)])
        for i, name in enumerate(variables):
            block[i][index[var]] = new[name]
    matrices = {k: tuple(tuple(r) for r in m) for k, m in sorted(columns.items())}
    return LinearDynamics(variables, matrices)


@dataclass(frozen=True)
class CharacteristicPolynomial:
    """p(ω, lr) = Σ_j lr^j · C_j(ω), the characteristic polynomial as a polynomial in lr.

    ``parts[j]`` is C_j, a `SparsePoly` in ω whose coefficients are numbers or grid arrays.
    The ω^k factor common to all parts is divided out; p is monic in ω for every lr.
    """

    parts: tuple[SparsePoly, ...]

    @property
    def lr_degree(self) -> int:
        return len(self.parts) - 1

    @property
    def is_affine(self) -> bool:
        """p = A(ω) + lr·B(ω): the boundary locus lr(θ) = −A/B applies (`analysis.boundary`)."""
        return self.lr_degree <= 1

    @property
    def degree(self) -> int:
        return max(c.degree for c in self.parts if c.terms)

    def at(self, lr: Any) -> SparsePoly:
        """p(·, lr) as a sparse polynomial in ω (``lr`` may be an array: a grid)."""
        total = self.parts[0]
        for j, c in enumerate(self.parts[1:], start=1):
            total = total + c * (lr**j)
        return total.cleaned()


def characteristic_polynomial(rule: Rule, model: QuadraticModel) -> CharacteristicPolynomial:
    """The rule's characteristic polynomial on ``model`` with the step size kept symbolic.

    Derived from the rule's step (see module doc); the papers' printed forms are checked
    against it in the tests, never used in its place.  Periodic rules (``period`` > 1) have
    none: `ValueError` (analyse them with `stability.dynamics.monodromy`).
    """
    period = getattr(rule, "period", 1)
    if period > 1:
        raise ValueError(
            f"rule: a periodic rule (period {period}) has no time-invariant characteristic "
            "polynomial; use radius / max-lr (Floquet monodromy, stability.dynamics.monodromy)"
        )
    nested = linearize(rule, model, LR).polynomial()
    lr_degree = max(
        (c.degree for c in nested.terms.values() if isinstance(c, SparsePoly)), default=0
    )
    parts = []
    for j in range(lr_degree + 1):
        part = SparsePoly(
            {k: _lr_coefficient(c, j) for k, c in nested.terms.items()},
            {k: _lr_bound(c, j) for k, c in nested.terms.items()},
        ).cleaned()
        parts.append(part)
    while len(parts) > 1 and not parts[-1].terms:
        parts.pop()
    return CharacteristicPolynomial(tuple(parts))


def depends_on_lr_lam_only(rule: Rule, delta: Any = 0.0, phi: Any = 0.0) -> bool:
    """True when the dynamics depend on lr and λ only through lr·λ (Kosson's normalized rate).

    Then the max stable lr is x_max/λ and ρ depends on lr·λ alone.  Time-invariant rules: the
    derived polynomials at λ = 1 and λ = 2 are C0 + lr·C1 and C0 + lr·2·C1.  Periodic rules:
    every phase's linear maps, as polynomials in lr, satisfy A(lr; λ=2) = A(2·lr; λ=1) (for
    round-robin rules those of one replica, `stability.dynamics.round_robin`).
    """
    if getattr(rule, "period", 1) > 1:
        if has_round_robin(rule):
            check_size(rule)
            rule = rule.single_replica()
        return all(
            _scales(linearize(rule, QuadraticModel(1.0, delta, phi), LR, t).matrices,
                    linearize(rule, QuadraticModel(2.0, delta, phi), LR, t).matrices)
            for t in range(getattr(rule, "period", 1))
        )  # fmt: skip
    one = characteristic_polynomial(rule, QuadraticModel(1.0, delta, phi))
    two = characteristic_polynomial(rule, QuadraticModel(2.0, delta, phi))
    if not (one.is_affine and two.is_affine) or len(one.parts) != len(two.parts):
        return False
    scaled = (one.parts[0], *(2 * p for p in one.parts[1:]))
    return all(
        _close(a.terms.get(k, 0), b.terms.get(k, 0))
        for a, b in zip(scaled, two.parts, strict=True)
        for k in set(a.terms) | set(b.terms)
    )


def _scales(one: Mapping, two: Mapping) -> bool:
    """Entries e(lr) of ``two`` equal e(2·lr) of ``one`` (polynomials in the formal `LR`)."""
    if set(one) != set(two):
        return False
    for k in one:
        for row1, row2 in zip(one[k], two[k], strict=True):
            for a, b in zip(row1, row2, strict=True):
                a, b = _as_lr_poly(a), _as_lr_poly(b)
                if not all(
                    _close(2**j * a.terms.get(j, 0), b.terms.get(j, 0))
                    for j in set(a.terms) | set(b.terms)
                ):
                    return False
    return True


def _as_lr_poly(x: Any) -> SparsePoly:
    return x if isinstance(x, SparsePoly) else SparsePoly.monomial(0, x)


def _close(a: Any, b: Any) -> bool:
    return bool(np.allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-12, atol=1e-14))


def _lr_coefficient(c: Any, j: int) -> Any:
    if isinstance(c, SparsePoly):
        return c.terms.get(j, 0)
    return c if j == 0 else 0


def _lr_bound(c: Any, j: int) -> Any:
    if isinstance(c, SparsePoly):
        return c.bounds.get(j, 0.0) if c.bounds is not None and j in c.terms else 0.0
    return abs(c) if j == 0 else 0.0


__all__ = [
    "LR",
    "CharacteristicPolynomial",
    "LinearDynamics",
    "characteristic_polynomial",
    "depends_on_lr_lam_only",
    "linearize",
]
