r"""Characteristic loci without tracking: counting eigenvalue crossings of a ray by arguments.

`stability.coupled.scan` needs to know where eigenvalues μ_i(θ) of the p×p matrix M(e^{iθ})
cross the negative real axis beyond a radius R (there lr = 1/|μ| ≤ 1/R puts a closed-loop root
on the unit circle).  With hundreds of eigenvalues rotating at rates up to τ_max, joining the
samples of neighbouring angles into individual branches needs very fine steps.  This module
avoids it with a count that is a symmetric function of the eigenvalues (the argument
principle, applied to the set):

    F_R(θ) = Σ_i Arg(μ_i(θ) + R),      Arg the principal argument in (−π, π]

is continuous in θ except for a jump of +2π (−2π) whenever an eigenvalue crosses the cut
(−∞, −R) upwards (downwards).  Between two samples a < b its continuous change C is estimated
eigenvalue by eigenvalue along the log-polar prediction μ_i·exp(t·h·μ_i'/μ_i) (a rotation at
a constant rate, the eigenvalues' typical motion), from a forwards and from b backwards, the
two sums averaged — no eigenvalue needs to be matched with its partner; dμ/dθ = yᴴM'x/yᴴx from
the left/right eigenvectors (`decompose`; clusters by the projected block):

    n = (F_R(b) − F_R(a) − C) / 2π

n is an integer (the net crossings) when the samples resolve the motion; a residue
|n − round(n)| > `AMBIGUOUS` tells the caller to bisect the interval.  An eigenvalue passing
close to −R (on either side) is exactly what makes n ambiguous, so refinement concentrates
there.  No eigenvalue needs to be followed individually, and the eigen-data of a sample serves
every R.  Eigenvalues equal in μ and μ' (a multiple eigenvalue of M for every θ, e.g. a Hessian
eigenspace inside one stage) are one branch counted with its multiplicity (`branches`).
"""

from __future__ import annotations

import math

import numpy as np

AMBIGUOUS = 0.15
"""Largest distance of the count from an integer that is accepted as resolved."""

SAME = 1e-9
"""Relative agreement of μ and μ' at which eigenvalues are one multiple branch (`branches`);
the clustering tolerance of `decompose` as well."""

MAX_FOLLOWED = 8
"""Most ambiguous near branches followed by continuation (about one eigen-decomposition's
worth of LU factorizations); beyond that the interval is bisected instead."""


def decompose(M: np.ndarray, dM: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues μ (n, p) of a stack of matrices M (n, p, p) and dμ/dθ from dM/dθ."""
    mu, V = np.linalg.eig(M)
    try:
        W = np.linalg.inv(V)
    except np.linalg.LinAlgError:  # a defective M (e.g. H of low rank: a Jordan block at 0)
        W = np.linalg.pinv(V)
    dMV = dM @ V
    dmu = np.einsum("nij,nji->ni", W, dMV)  # diagonal of W·M'·V, dM/dθ in the eigenbasis
    for b in range(mu.shape[0]):
        scale = np.max(np.abs(mu[b])) or 1.0
        order = np.argsort(mu[b].real)
        close = np.abs(np.diff(mu[b][order])) <= SAME * scale
        if np.any(close):
            for group in np.split(order, np.flatnonzero(~close) + 1):
                if group.size > 1:
                    dmu[b, group] = np.linalg.eigvals(W[b][group] @ dMV[b][:, group])
    return mu, dmu


_PATH = np.linspace(0.0, 1.0, 17)


def branches(sample) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(μ, μ', m): the eigen-data of one sample with each group of eigenvalues whose μ and μ'
    agree to `SAME` (relative to the largest |μ|, |μ'|) merged into one branch of
    multiplicity m.

    A semisimple multiple eigenvalue of M for every θ near the sample — e.g. a Hessian
    eigenspace inside one stage's block, on which M(e^{iθ})·v = λ·s_j(θ)·v — is one branch that
    crosses the cut m times at once; as m separate eigenvalues no prediction could tell its
    copies apart, and every interval around its crossing would be refined in vain.  Eigenvalues
    that merely touch at the sample separate by the next one, where their multiplicities no
    longer match and the interval is refined as before (`_near_branches`).
    """
    mu, dmu = sample
    order = np.argsort(mu.real, kind="stable")
    tol_mu = SAME * (np.max(np.abs(mu), initial=0.0) or 1.0)
    tol_dmu = SAME * (np.max(np.abs(dmu), initial=0.0) or 1.0)
    new = np.ones(mu.size, dtype=bool)  # neighbours in Re μ compared, as `decompose` clusters
    new[1:] = (np.abs(np.diff(mu[order])) > tol_mu) | (np.abs(np.diff(dmu[order])) > tol_dmu)
    starts = np.flatnonzero(new)
    heads = order[starts]
    return mu[heads], dmu[heads], np.diff(starts, append=mu.size)


def _turn(mu: np.ndarray, dmu: np.ndarray, m: np.ndarray, h: float, radius: float) -> float:
    """Σ_i m_i·(the continuous change of Arg(μ_i + radius) along the log-polar predictions
    μ_i·exp(t·h·μ_i'/μ_i), t ∈ [0, 1]) (16 steps, each unwrapped)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        path = mu[:, None] * np.exp(_PATH[None, :] * (h * dmu / mu)[:, None])
    path = np.where(np.isfinite(path), path, mu[:, None] + _PATH[None, :] * h * dmu[:, None])
    z = path + radius
    return float(np.sum(m[:, None] * np.angle(z[:, 1:] / z[:, :-1])))


def rotate(mu: np.ndarray, dmu: np.ndarray, h: float) -> np.ndarray:
    """μ·exp(h·μ'/μ): the first-order prediction in log-polar form (exact for a rotation at a
    constant rate with a geometric change of modulus, the eigenvalues' typical motion)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = mu * np.exp(h * dmu / mu)
    return np.where(np.isfinite(out), out, mu + h * dmu)


def _nearest(pred: np.ndarray, targets: np.ndarray):
    """Nearest target to each prediction: (index, distance, distance of the second)."""
    dist = np.abs(pred[:, None] - targets[None, :])
    order = np.argsort(dist, axis=1)
    rows = np.arange(pred.size)
    first = dist[rows, order[:, 0]]
    second = dist[rows, order[:, 1]] if targets.size > 1 else first + np.inf
    return order[:, 0], first, second


def _near(sample, h: float, radius: float) -> np.ndarray:
    """Eigenvalues within half their travel h·|μ'| of −radius."""
    mu, dmu, _ = sample
    return np.flatnonzero(np.abs(mu + radius) <= 0.5 * abs(h) * np.abs(dmu))


def _predicted_pairs(a, b, h: float, ia: np.ndarray, jb: np.ndarray):
    """Candidate index pairs of the near branches by log-polar prediction, and which are
    reliable: mutual nearest neighbours, error ≤ 25 % of the travel, the next candidate ≥ 2×
    farther."""
    (ma, da, _), (mb, db, _) = a, b
    j_of, _, _ = _nearest(rotate(ma[ia], da[ia], h), mb)
    i_of, _, _ = _nearest(rotate(mb[jb], db[jb], -h), ma)
    pairs = np.unique(np.concatenate([np.stack([ia, j_of], 1), np.stack([i_of, jb], 1)]), axis=0)
    i, j = pairs[:, 0], pairs[:, 1]
    jf, ef, sf = _nearest(rotate(ma[i], da[i], h), mb)
    ib, eb, sb = _nearest(rotate(mb[j], db[j], -h), ma)
    travel = h * np.maximum(np.abs(da[i]), np.abs(db[j]))
    ok = (jf == j) & (ib == i) & (np.maximum(ef, eb) <= 0.25 * travel)
    ok &= (sf >= 2 * ef) & (sb >= 2 * eb)
    return pairs, ok


def _near_branches(a, b, theta_a: float, h: float, radius: float, follow):
    """Index pairs and paths (θ, μ, μ') of the branches near −radius, or None if ambiguous.

    Reliable predicted pairs are taken as they are (a path of their two ends); the others (at
    most `MAX_FOLLOWED`) are followed by ``follow`` from their end at a (or at b) to the other
    sample.  A pair must join branches of the same multiplicity.
    """
    (ma, da, wa), (mb, db, wb) = a, b
    ia, jb = _near(a, h, radius), _near(b, h, radius)
    if ia.size == 0 and jb.size == 0:
        return np.zeros((0, 2), dtype=int), []
    pairs, ok = _predicted_pairs(a, b, h, ia, jb)
    chosen = {
        (int(i), int(j)): [(theta_a, ma[i], da[i]), (theta_a + h, mb[j], db[j])]
        for i, j in pairs[ok]
    }
    if not np.all(ok):
        starts = [(int(i), True) for i in np.unique(pairs[~ok, 0])]
        starts += [(int(j), False) for j in np.unique(pairs[~ok, 1])]
        if follow is None or len(starts) > MAX_FOLLOWED:
            return None  # cheaper to refine the interval (one more sample)
        for k, forward in starts:
            mu, dmu = (ma[k], da[k]) if forward else (mb[k], db[k])
            t0, t1 = (theta_a, theta_a + h) if forward else (theta_a + h, theta_a)
            path = follow(t0, mu, dmu, t1)
            if path is None:
                return None
            targets = mb if forward else ma
            other = int(np.argmin(np.abs(targets - path[-1][1])))
            if abs(targets[other] - path[-1][1]) > 1e-6 * abs(path[-1][1]):
                return None
            key = (k, other) if forward else (other, k)
            chosen.setdefault(key, path if forward else path[::-1])
    keys = np.array(list(chosen), dtype=int).reshape(-1, 2)
    if np.unique(keys[:, 0]).size != len(keys) or np.unique(keys[:, 1]).size != len(keys):
        return None
    if np.any(wa[keys[:, 0]] != wb[keys[:, 1]]):
        return None
    return keys, list(chosen.values())


_T = np.linspace(0.0, 1.0, 65)
_HERMITE = np.stack(
    [2 * _T**3 - 3 * _T**2 + 1, _T**3 - 2 * _T**2 + _T, -2 * _T**3 + 3 * _T**2, _T**3 - _T**2]
)


def _path_crossings(path, radius: float) -> list:
    """Crossings of (−∞, −radius) along a branch given as points (θ, μ, dμ/dθ):
    (direction ±1, θ, μ on the axis).

    Between points the branch is the cubic Hermite interpolant of log μ (unwrapped phase and
    log-modulus, derivatives μ'/μ); a crossing is a passage of the phase through an odd
    multiple of π at modulus > radius.
    """
    out = []
    for (ta, ma, da), (tb, mb, db) in zip(path[:-1], path[1:], strict=True):
        if ma == 0 or mb == 0:
            continue
        h = tb - ta
        ra, rb = da / ma, db / mb
        la, lb = np.log(ma), np.log(mb)
        lb += 2j * math.pi * round((la.imag + h * ra.imag - lb.imag) / (2 * math.pi))
        curve = _HERMITE.T @ np.array([la, h * ra, lb, h * rb])
        phase = curve.imag
        first = math.ceil((phase.min() - math.pi) / (2 * math.pi))
        last = math.floor((phase.max() - math.pi) / (2 * math.pi))
        for k in range(first, last + 1):
            f = phase - (2 * k + 1) * math.pi
            for n in np.flatnonzero(f[:-1] * f[1:] < 0):
                w = f[n] / (f[n] - f[n + 1])
                modulus = math.exp(curve[n].real + w * (curve[n + 1].real - curve[n].real))
                if modulus > radius:
                    t = _T[n] + w * (_T[n + 1] - _T[n])
                    out.append((1 if f[n] < 0 else -1, ta + t * h, complex(-modulus, 0.0)))
    return out


def net_crossings(a, b, theta_a: float, h: float, radius: float, follow=None):
    """Net upward crossings of (−∞, −radius) between samples a and b (module doc).

    ``a``, ``b`` are (μ, dμ/dθ) at θ_a and θ_a + h.  Returns (count, residue, estimates):
    the branches passing near −radius are followed along their paths — matched by log-polar
    prediction, or, when that is ambiguous, by ``follow(θ0, μ0, μ0', θ1)`` (a continuation
    returning points (θ, μ, μ') from θ0 to θ1, or None) — and their crossings, with θ and μ
    estimates, are ``estimates``; every other eigenvalue enters the argument count.  A
    residue above `AMBIGUOUS` (infinite: the near branches could not be matched) means the
    interval must be refined.  A multiple branch (`branches`) counts with its multiplicity m:
    its estimates carry direction ±m.
    """
    a, b = branches(a), branches(b)
    near = _near_branches(a, b, theta_a, h, radius, follow)
    if near is None:
        return 0, math.inf, []
    pairs, paths = near
    (ma, da, wa), (mb, db, wb) = a, b
    keep_a = np.ones(ma.size, bool)
    keep_b = np.ones(mb.size, bool)
    keep_a[pairs[:, 0]] = False
    keep_b[pairs[:, 1]] = False
    fa = float(np.sum(wa[keep_a] * np.angle(ma[keep_a] + radius)))
    fb = float(np.sum(wb[keep_b] * np.angle(mb[keep_b] + radius)))
    turn = 0.5 * (
        _turn(ma[keep_a], da[keep_a], wa[keep_a], h, radius)
        - _turn(mb[keep_b], db[keep_b], wb[keep_b], -h, radius)
    )
    x = (fb - fa - turn) / (2 * math.pi)
    if not math.isfinite(x):
        return 0, math.inf, []
    estimates = [
        (direction * int(wa[i]), theta, mu)
        for (i, _), path in zip(pairs, paths, strict=True)
        for direction, theta, mu in _path_crossings(path, radius)
    ]
    n = round(x)
    return n + sum(e[0] for e in estimates), abs(x - n), estimates


def crossing_start(a, b, theta_a: float, h: float, radius: float):
    """Starting point (θ, μ) for Newton on a branch crossing beyond −radius in [a, b].

    Among the eigenvalues at a and at b that lie left of −radius/2, the linear prediction of
    Im μ = 0 that falls inside the interval (±50 %) with the largest predicted |μ|; ``None``
    if there is none.
    """
    best = None
    for (mu, dmu), t0, sign in ((a, theta_a, 1.0), (b, theta_a + h, -1.0)):
        with np.errstate(divide="ignore", invalid="ignore"):
            dt = -mu.imag / dmu.imag
        at = mu + dmu * dt
        ok = (
            np.isfinite(dt)
            & (sign * dt >= -0.5 * h)
            & (sign * dt <= 1.5 * h)
            & (at.real < -0.5 * radius)
        )
        for k in np.flatnonzero(ok):
            if best is None or -at[k].real > -best[1].real:
                best = (t0 + dt[k], complex(at[k].real, 0.0))
    return best


__all__ = [
    "AMBIGUOUS",
    "MAX_FOLLOWED",
    "SAME",
    "branches",
    "crossing_start",
    "decompose",
    "net_crossings",
    "rotate",
]
