"""Where a computed quantity changes sign, and where it is best: the claims' boundaries and
optima, refined from a sampled bracket (never read off the grid).

* `crossings` — the roots of a continuous f: every sign change between neighbouring samples
  refined by Brent's method (`scipy.optimize.brentq`, to ~1e-12 relative);
* `positive_intervals` — the maximal intervals where f > 0, ends refined by `crossings`;
* `minimize` — the best sample, then a bounded Brent minimisation
  (`scipy.optimize.minimize_scalar`) between its neighbours; the better of the two is kept.

A sign change or a minimum between two samples that the sampling does not see (two roots
within one cell) is missed: the samples must resolve the quantity, as every grid here does
(the tests compare with dense independent scans).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

XTOL = 1e-12
"""Relative tolerance of the refined boundaries."""


def crossings(f: Callable[[float], float], grid, values=None, *, xtol: float = XTOL) -> list[float]:
    """Roots of ``f`` between the sorted samples ``grid`` (``values`` = f on the grid if known).

    A sample where f is exactly 0 is a root; between samples of opposite signs the root is
    refined by Brent's method to ``xtol`` relative to the bracket's larger end.
    """
    from scipy.optimize import brentq

    x = np.asarray(grid, dtype=float)
    v = np.array([f(t) for t in x]) if values is None else np.asarray(values, dtype=float)
    roots = [float(t) for t in x[v == 0]]
    for i in np.flatnonzero(v[:-1] * v[1:] < 0):
        a, b = x[i], x[i + 1]
        roots.append(float(brentq(f, a, b, xtol=xtol * max(abs(a), abs(b)))))
    return sorted(roots)


def positive_intervals(f: Callable[[float], float], grid, values=None) -> list[tuple[float, float]]:
    """Maximal intervals of [grid[0], grid[-1]] where f > 0, ends refined (`crossings`)."""
    x = np.asarray(grid, dtype=float)
    v = np.array([f(t) for t in x]) if values is None else np.asarray(values, dtype=float)
    ends = [float(x[0]), *crossings(f, x, v), float(x[-1])]
    out = []
    for a, b in zip(ends[:-1], ends[1:], strict=True):
        if b > a and f(0.5 * (a + b)) > 0:
            if out and out[-1][1] == a:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
    return out


def longest(found: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The longest interval of ``found`` (None if empty)."""
    return max(found, key=lambda ab: ab[1] - ab[0]) if found else None


def minimize(
    f: Callable[[float], float], grid, values=None, *, xtol: float = 1e-6
) -> tuple[float, float]:
    """(x, f(x)) at the minimum of ``f`` over the sorted samples ``grid``, refined by bounded
    Brent between the best sample's neighbours (the better of sample and refinement)."""
    from scipy.optimize import minimize_scalar

    x = np.asarray(grid, dtype=float)
    v = np.array([f(t) for t in x]) if values is None else np.asarray(values, dtype=float)
    i = int(np.argmin(v))
    a, b = x[max(i - 1, 0)], x[min(i + 1, len(x) - 1)]
    best = (float(x[i]), float(v[i]))
    if b > a:
        found = minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": xtol})
        if found.fun < best[1]:
            best = (float(found.x), float(found.fun))
    return best
