"""Independent references for the closed forms and claims: plain dense-matrix and mpmath code.

Nothing here uses the characteristic polynomial, the boundary locus or the Schur-Cohn test:

* `state_radius` — the largest |eigenvalue| of the rule's block companion (state) matrix,
  read off the rule's step (`stability.dynamics.linear.LinearDynamics.state_matrix`);
* `dense_max_lr` — the first lr where that radius (or another one, e.g. of a monodromy)
  reaches 1, by a geometric scan and bisection (`first_crossing`), the way one would find it
  by hand; `polynomial_radius` for polynomials typed from a paper;
* `mp_roots_inside` — the number of roots of a sparse polynomial inside |ω| = 1 by the argument
  principle in mpmath (adaptive sampling of the phase), for degrees up to thousands;
* `naive_optimum` — the optimal rate over a spectrum by dense λ × lr grids of the papers'
  printed polynomials (no windows, no peaks, no brackets);
* `bisect_sign`, `brackets` — plain bisection of a sign change, and whether a claimed root
  sits within eps of one.
"""

from __future__ import annotations

import math

import numpy as np

from stability.dynamics.linear import linearize
from stability.quadratic import QuadraticModel
from stability.rules.registry import get_spec
from stability.spectrum import spectral_radius


def state_radius(rule, model, lr: float) -> float:
    """max |eig| of the state matrix of ``rule`` on ``model`` at step size ``lr``."""
    return float(np.max(np.abs(np.linalg.eigvals(linearize(rule, model, lr).state_matrix()))))


def first_crossing(measure, *, lo: float, hi: float, rtol: float = 1e-12, points: int = 120):
    """First lr in (lo, hi] with ``measure(lr)`` ≥ 1, by a geometric scan and bisection.

    ``measure(lo)`` < 1 is asserted (stable at the lower end), and some grid point ≥ 1.
    """
    assert measure(lo) < 1, "not stable at the lower end of the scan"
    grid = np.geomspace(lo, hi, points)
    unstable = [lr for lr in grid if measure(lr) >= 1]
    assert unstable, "no instability up to hi"
    b = unstable[0]
    a = grid[np.searchsorted(grid, b) - 1]
    while b - a > rtol * b:
        mid = 0.5 * (a + b)
        if measure(mid) >= 1:
            b = mid
        else:
            a = mid
    return b


def dense_max_lr(
    rule, model, *, lo: float, hi: float, rtol: float = 1e-12, radius=state_radius
) -> float:
    """First lr in (lo, hi] with ``radius(rule, model, lr)`` ≥ 1 (stable at ``lo`` is asserted).

    ``radius``: the state-matrix radius by default; any per-lr spectral radius (a monodromy's).
    """
    return first_crossing(lambda lr: radius(rule, model, lr), lo=lo, hi=hi, rtol=rtol)


def polynomial_radius(coefficients) -> float:
    """max |root| of a dense polynomial (highest degree first), by numpy's companion matrix."""
    return float(np.max(np.abs(np.roots(coefficients))))


def mp_poly(terms: dict[int, object]):
    """p(z) = Σ c_k z^k (mpmath) for exponent → coefficient ``terms``."""
    import mpmath

    items = [(k, mpmath.mpf(c) if not isinstance(c, mpmath.mpc) else c) for k, c in terms.items()]
    return lambda z: mpmath.fsum(c * z**k for k, c in items)


def mp_roots_inside(terms: dict[int, object], digits: int = 50) -> int:
    """Roots inside the unit circle: winding number of p(e^{iθ}) over θ ∈ [0, 2π], in mpmath.

    p(e^{iθ}) = Σ c_k e^{ikθ} is evaluated term by term (O(terms) per point for any degree).
    The phase is sampled at 16 points per unit of degree and every interval where it turns by
    more than 0.5 rad is halved until none does, so a root close to the circle gets samples
    close to it.  Raises if a sample lands on a root.
    """
    import mpmath

    with mpmath.workdps(digits):
        items = [(k, mpmath.mpf(c)) for k, c in terms.items()]

        def p(t):
            return mpmath.fsum(c * mpmath.expj(k * t) for k, c in items)

        degree = max(terms)
        n = 16 * degree + 16
        theta = [2 * mpmath.pi * j / n for j in range(n + 1)]
        values = [p(t) for t in theta]
        total, i = mpmath.mpf(0), 0
        while i < len(theta) - 1:
            if values[i] == 0 or values[i + 1] == 0:
                raise ArithmeticError("a root lies on the unit circle")
            turn = mpmath.arg(values[i + 1] / values[i])
            if abs(turn) > 0.5:
                mid = (theta[i] + theta[i + 1]) / 2
                theta.insert(i + 1, mid)
                values.insert(i + 1, p(mid))
                continue
            total += turn
            i += 1
        return int(mpmath.nint(total / (2 * mpmath.pi)))


def mp_newton(terms: dict[int, object], z, iterations: int = 60):
    """Newton's method on Σ c_k z^k from ``z`` in the current mpmath precision."""
    import mpmath

    for _ in range(iterations):
        p = mpmath.fsum(c * z**k for k, c in terms.items())
        dp = mpmath.fsum(k * c * z ** (k - 1) for k, c in terms.items() if k)
        step = p / dp
        z -= step
        if abs(step) < mpmath.mpf(10) ** (-mpmath.mp.dps + 3):
            break
    return z


def sgd_terms(tau: int, lr_lam) -> dict[int, object]:
    """PipeMare eq. 3, ω^{τ+1} − ω^τ + αλ, as exponent → coefficient (typed here, not derived)."""
    terms = {tau + 1: 1}
    terms[tau] = terms.get(tau, 0) - 1
    terms[0] = terms.get(0, 0) + lr_lam
    return terms


def bisect_sign(f, a: float, b: float, *, tol: float = 1e-10) -> float:
    """The point where ``f`` changes sign in [a, b], by plain bisection (f(a)·f(b) < 0)."""
    fa, fb = f(a), f(b)
    assert fa * fb < 0, f"no sign change in [{a}, {b}]: {fa}, {fb}"
    while b - a > tol * max(abs(a), abs(b), 1.0):
        mid = 0.5 * (a + b)
        fm = f(mid)
        if (fm < 0) == (fa < 0):
            a, fa = mid, fm
        else:
            b = mid
    return 0.5 * (a + b)


def naive_optimum(name: str, kappa: float, **params) -> float:
    """min over lr of max over λ of ρ: dense λ × lr grids of the paper's printed polynomial,
    zoomed in four times around the best lr (no windows, no peaks, no brackets)."""
    spec = get_spec(name)
    rule, _ = spec.build(**params)
    form = spec.closed_forms[0].polynomial
    lam = np.geomspace(1.0, kappa, 200)
    lo, hi, best = -9.0, 1.0, math.inf
    for _ in range(6):
        lrs = np.logspace(lo, hi, 100)
        poly = form(rule, QuadraticModel(lam[None, :]), lrs[:, None]).normalized()
        rates = spectral_radius(poly.dense()).max(axis=1)
        i = int(np.argmin(rates))
        best = min(best, rates[i])
        lo, hi = math.log10(lrs[max(i - 2, 0)]), math.log10(lrs[min(i + 2, lrs.size - 1)])
    return best


def single_crossing(f, lo: float, hi: float, *, points: int = 400, tol: float = 1e-12) -> float:
    """Where ``f`` turns from ≤ 0 to > 0 in [lo, hi]: a scan of ``points`` (asserting exactly
    one sign change, negative first), then `bisect_sign`."""
    grid = np.linspace(lo, hi, points)
    signs = np.array([f(x) > 0 for x in grid])
    assert not signs[0] and signs[-1] and np.count_nonzero(np.diff(signs)) == 1
    i = int(np.argmax(signs))
    return bisect_sign(f, grid[i - 1], grid[i], tol=tol)


def brackets(f, x: float, eps: float) -> bool:
    """Whether ``f`` changes sign between x − eps and x + eps: a root of f within eps of x."""
    return f(x - eps) * f(x + eps) < 0
