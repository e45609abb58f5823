"""Sparse (Laurent) polynomials in ω with coefficients of any arithmetic type.

Characteristic polynomials of delayed rules have a few terms spread over a large degree
(PipeMare eq. 3: ``ω^{τ+1} − ω^τ + αλ`` has three terms for any τ).  `SparsePoly` keeps only
the nonzero terms, so building, multiplying and evaluating them costs O(terms), not O(τ).

Coefficients may be Python numbers, NumPy arrays (one polynomial per point of a parameter
grid, broadcast together), `fractions.Fraction` (exact arithmetic, see `stability.analysis.certify`)
or sympy expressions (see `stability.dynamics.symbolic`).  The same code serves all four.

Coefficient order: every dense array produced or accepted here is **highest degree first**,
as `numpy.roots`, sympy's ``Poly.all_coeffs()`` and python-control use.

Rounding: float coefficients carry a running bound on the magnitude of the terms that were
summed into them.  A coefficient whose value is below the rounding error of that sum
(``|c| ≤ 64·eps·bound``) is an exact cancellation that floating point failed to make exact; it
is set to zero by `SparsePoly.cleaned`, so that structural zeros (factors ω^k) are recognised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

_EPS = np.finfo(float).eps


def _is_float_like(c: Any) -> bool:
    return isinstance(c, (float, np.floating, np.ndarray)) or (
        isinstance(c, int) and not isinstance(c, bool)
    )


def _abs_bound(c: Any) -> Any:
    if isinstance(c, np.ndarray):
        return np.abs(c)
    if isinstance(c, (float, int, np.floating, np.integer)):
        return abs(float(c))
    return None


def is_zero(c: Any) -> bool:
    """True when the coefficient is exactly zero (at every grid point, for arrays)."""
    if isinstance(c, SparsePoly):
        return not c.cleaned().terms
    if isinstance(c, np.ndarray):
        return not np.any(c)
    if isinstance(c, (int, float, Fraction, np.integer, np.floating)):
        return c == 0
    try:  # sympy expression
        return bool(c.expand() == 0)
    except AttributeError:
        return c == 0


@dataclass(frozen=True)
class SparsePoly:
    """A Laurent polynomial ``Σ_k terms[k]·ω^k``.

    ``bounds`` (float coefficients only) maps an exponent to the sum of magnitudes of all the
    products accumulated into that coefficient, the scale of its rounding error.
    """

    terms: Mapping[int, Any]
    bounds: Mapping[int, Any] | None = None

    __array_ufunc__ = None  # make ``ndarray * SparsePoly`` call SparsePoly.__rmul__

    # -- construction -------------------------------------------------------------------
    @staticmethod
    def monomial(exponent: int, coefficient: Any = 1) -> SparsePoly:
        """``coefficient · ω^exponent``."""
        bound = _abs_bound(coefficient)
        return SparsePoly({exponent: coefficient}, None if bound is None else {exponent: bound})

    @staticmethod
    def from_terms(pairs: Iterable[tuple[int, Any]]) -> SparsePoly:
        """Sum of ``c·ω^k`` over ``(k, c)`` pairs (repeated exponents are added), accumulated
        in place: O(terms), where summing K monomials one by one copies O(K²) entries (a
        random-delay kernel at τ = 2·10⁴ has 2·10⁴ terms)."""
        terms: dict[int, Any] = {}
        bounds: dict[int, Any] | None = {}
        for k, c in pairs:
            terms[k] = terms[k] + c if k in terms else c
            bound = _abs_bound(c)
            if bound is None or bounds is None:
                bounds = None
            else:
                bounds[k] = bounds[k] + bound if k in bounds else bound
        return SparsePoly(terms, bounds)

    @staticmethod
    def from_dense(coefficients: Any) -> SparsePoly:
        """From a dense coefficient sequence, highest degree first (numpy.roots order)."""
        coefficients = list(coefficients)
        d = len(coefficients) - 1
        return SparsePoly.from_terms(
            (d - i, c) for i, c in enumerate(coefficients) if not is_zero(c)
        )

    # -- arithmetic ---------------------------------------------------------------------
    def _combine(self, other: SparsePoly, sign: int) -> SparsePoly:
        terms = dict(self.terms)
        track = self.bounds is not None and other.bounds is not None
        bounds = dict(self.bounds) if track else None
        for k, c in other.terms.items():
            terms[k] = terms[k] + sign * c if k in terms else sign * c
            if track:
                bounds[k] = bounds[k] + other.bounds[k] if k in bounds else other.bounds[k]
        return SparsePoly(terms, bounds)

    def __add__(self, other: SparsePoly) -> SparsePoly:
        return self._combine(_as_poly(other), 1)

    __radd__ = __add__

    def __sub__(self, other: SparsePoly) -> SparsePoly:
        return self._combine(_as_poly(other), -1)

    def __rsub__(self, other: Any) -> SparsePoly:
        return _as_poly(other)._combine(self, -1)

    def __neg__(self) -> SparsePoly:
        return SparsePoly({k: -c for k, c in self.terms.items()}, self.bounds)

    def __mul__(self, other: Any) -> SparsePoly:
        other = _as_poly(other)
        terms: dict[int, Any] = {}
        track = self.bounds is not None and other.bounds is not None
        bounds: dict[int, Any] | None = {} if track else None
        for k1, c1 in self.terms.items():
            for k2, c2 in other.terms.items():
                k = k1 + k2
                terms[k] = terms[k] + c1 * c2 if k in terms else c1 * c2
                if track:
                    b = self.bounds[k1] * other.bounds[k2]
                    bounds[k] = bounds[k] + b if k in bounds else b
        return SparsePoly(terms, bounds)

    __rmul__ = __mul__

    def shift(self, k: int) -> SparsePoly:
        """Multiply by ``ω^k``."""
        return SparsePoly(
            {e + k: c for e, c in self.terms.items()},
            None if self.bounds is None else {e + k: b for e, b in self.bounds.items()},
        )

    def map_coefficients(self, f) -> SparsePoly:
        """Apply ``f`` to every coefficient (drops the rounding bounds)."""
        return SparsePoly({k: f(c) for k, c in self.terms.items()}, None)

    # -- normal form --------------------------------------------------------------------
    def cleaned(self) -> SparsePoly:
        """Set coefficients below their own rounding error to zero and drop zero terms."""
        terms = {}
        for k, c in self.terms.items():
            if isinstance(c, SparsePoly):  # nested: a polynomial in a second variable
                c = c.cleaned()
            elif self.bounds is not None and _is_float_like(c):
                tol = 64 * _EPS * self.bounds[k]
                c = (
                    np.where(np.abs(c) <= tol, 0.0, c)
                    if isinstance(c, np.ndarray)
                    else (0.0 if abs(c) <= tol else c)
                )
            if not is_zero(c):
                terms[k] = c
        bounds = None if self.bounds is None else {k: self.bounds[k] for k in terms}
        return SparsePoly(terms, bounds)

    def normalized(self) -> SparsePoly:
        """Cleaned, with the factor ω^k (k = lowest exponent) divided out: ``p(0) ≠ 0``."""
        p = self.cleaned()
        if not p.terms:
            raise ValueError("the polynomial is identically zero")
        return p.shift(-min(p.terms))

    # -- inspection ---------------------------------------------------------------------
    @property
    def degree(self) -> int:
        return max(self.terms)

    @property
    def exponents(self) -> list[int]:
        """Exponents of the stored terms, highest first."""
        return sorted(self.terms, reverse=True)

    def coefficient(self, k: int) -> Any:
        return self.terms.get(k, 0)

    def dense(self, dtype=float) -> np.ndarray:
        """Dense coefficients, highest degree first, shape ``(degree + 1, *grid_shape)``.

        Requires nonnegative exponents (call `normalized` first for Laurent polynomials).
        """
        if min(self.terms) < 0:
            raise ValueError("dense() needs nonnegative exponents; call normalized() first")
        d = self.degree
        grid = np.broadcast_shapes(*(np.shape(c) for c in self.terms.values()))
        out = np.zeros((d + 1, *grid), dtype=dtype)
        for k, c in self.terms.items():
            out[d - k] = c
        return out

    def sparse_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(exponents, coefficients)``: exponents highest first, coefficients stacked (axis 0);
        the zero polynomial (no terms, e.g. a coupling whose terms all cancel) is 0·z⁰."""
        ks = self.exponents
        grid = np.broadcast_shapes(*(np.shape(c) for c in self.terms.values()))
        if not ks:
            return np.zeros(1, dtype=int), np.zeros((1, *grid))
        coeffs = np.stack(
            [np.broadcast_to(np.asarray(self.terms[k], dtype=float), grid) for k in ks]
        )
        return np.asarray(ks), coeffs

    def __call__(self, z: Any) -> Any:
        """Evaluate at ``z`` (numbers, arrays broadcast against the coefficient grid, mpmath)."""
        total = 0
        for k, c in self.terms.items():
            total = total + c * z**k
        return total

    def derivative(self) -> SparsePoly:
        return SparsePoly({k - 1: k * c for k, c in self.terms.items() if k != 0}, None)

    def is_zero(self) -> bool:
        return not self.cleaned().terms


def term(k: int, c: Any = 1) -> SparsePoly:
    """The one-term polynomial ``c·ω^k``."""
    return SparsePoly.monomial(k, c)


def _as_poly(x: Any) -> SparsePoly:
    return x if isinstance(x, SparsePoly) else SparsePoly.monomial(0, x)


def polynomial_determinant(matrix: list[list[SparsePoly]]) -> SparsePoly:
    """Determinant of a small square matrix of polynomials (Laplace expansion along row 0).

    The matrices here are n×n with n the number of state variables of a rule (2-6), so the
    n! cost of Laplace expansion is negligible and, unlike elimination, it needs no division.
    """
    n = len(matrix)
    if n == 1:
        return matrix[0][0]
    total = SparsePoly({}, {})
    for j in range(n):
        if not matrix[0][j].terms:
            continue
        minor = [row[:j] + row[j + 1 :] for row in matrix[1:]]
        term = matrix[0][j] * polynomial_determinant(minor)
        total = total + term if j % 2 == 0 else total - term
    return total
