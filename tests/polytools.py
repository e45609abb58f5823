"""Test helpers: compare polynomials up to a factor c·ω^k."""

from __future__ import annotations

import numpy as np

from stability.polynomial import SparsePoly


def dense_monic(p: SparsePoly | np.ndarray) -> np.ndarray:
    """Coefficients (highest degree first) divided by the leading one."""
    c = np.asarray(p, dtype=float) if isinstance(p, np.ndarray) else p.normalized().dense()
    c = np.trim_zeros(c, "f")
    return c / c[0]


def assert_same_up_to_omega(
    p: SparsePoly | np.ndarray, q: SparsePoly | np.ndarray, rtol: float = 1e-11
) -> None:
    """p = c·ω^k·q for some c and k (compared monic, highest degree first, right-padded).

    ``p`` and ``q`` are sparse polynomials or dense coefficient arrays, highest degree first.
    """
    a, b = dense_monic(p), dense_monic(q)
    n = max(len(a), len(b))
    a, b = np.pad(a, (0, n - len(a))), np.pad(b, (0, n - len(b)))
    scale = 1 + np.maximum(np.abs(a), np.abs(b))
    assert np.all(np.abs(a - b) <= rtol * scale), f"\n{a}\n{b}"
