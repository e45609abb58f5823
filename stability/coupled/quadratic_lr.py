r"""Max stable lr of a coupled system whose dynamics are quadratic in lr (PipeOptim with AdamW).

PipeOptim's forward pass predicts u_fwd = w_{t−τ} − lr·s·ΔW_{t−τ} (eq. 5) and AdamW decays the
weights by c = 1 − lr·wd (`stability.rules.adam`); over the common denominator, which carries
the factor ω − c, the prediction term becomes lr·s·(ω − c)·… and the matrix polynomial of
`stability.coupled.system` is quadratic in lr:

    P(ω, lr) = D(ω) + lr·N(ω) + lr²·N₂(ω)        (scalar case: the −(1 − β1)·lr·λ·s·c term of
                                                 `stability.rules.adam.frozen_adam_polynomial`)

The frequency scan (`stability.coupled.scan`) needs P affine in lr.  Freezing the lr² part at
a step size lr₀ gives the affine system P₀(ω, lr) = D + lr·(N + lr₀·N₂)
(`CoupledSystem.frozen_at`), which equals P at lr = lr₀.  With L(lr₀) its scanned max lr
(first crossing), the true system at lr is stable whenever lr < L(lr) — the frozen system is
then stable on all of (0, lr], lr included — and at a root of

    φ(lr) = lr − L(lr)

the frozen system, hence P itself, has a root on the unit circle at lr.  The max stable lr is
the first root of φ.  The iteration lr ← L(lr) from L(0) finds it in a few scans when lr·wd
is small (L then hardly moves); where it does not converge in `FIXED_POINT` steps, a grid of
`GRID` points on (0, hi] (hi doubled from L(0) until φ(hi) ≥ 0) brackets the first sign
change and Brent's method (`scipy.optimize.brentq`) refines it to ``rtol`` (the iteration
stops at 1e-10, above the scan's own precision).

That root r is a candidate, not yet the answer: φ ≥ 0 does not imply instability (the frozen
system is physical only at lr = lr₀; off it, it can cross out and back in), and φ can jump
where the first crossing of the frozen system switches branches (measured: PipeOptim-AdamW
at τ = 3, wd = 3, one eigenvalue 2 — r = 0.621 against the true 0.686).  So where the block
state matrix is small (≤ `stability.coupled.scan.CERTIFY_MAX_STATES` rows) the answer is
decided on the true system's spectral radius (`stability.coupled.system.spectral_radius`,
which steps the rules themselves, c = 1 − lr·wd included): stable at `CHECKS` points of
(0, r) and unstable just above r (r·(1 + 1e-6)): r is returned, ``certified``; otherwise the
first unstable lr of that grid, or of a geometric march above r (factor 1 + 1/`CHECKS`, up
to 4r; beyond, `dense_max_lr` from scratch), is searched on the spectral radius to ``rtol``
(Brent, `Unstable.crossing`; certified by construction, the crossing angle unknown).
Larger systems return r uncertified.  The tests check it against the block state matrix
search (`dense_max_lr`), a brute-force grid of the spectral radius and, for one stage and one
eigenvalue, the registry's certified bisection of the scalar polynomial.
"""

from __future__ import annotations

from dataclasses import replace

from scipy.optimize import brentq

from stability.coupled.scan import CERTIFY_MAX_STATES, scan_max_lr
from stability.coupled.system import (
    CoupledMaxLr,
    CoupledSystem,
    Unstable,
    dense_max_lr,
)

GRID = 12
"""Points of the grid on (0, hi] that brackets the first root of φ."""
FIXED_POINT = 8
"""Steps of the fixed-point iteration lr ← L(lr) tried before the grid."""

_DOUBLINGS = 40  # hi = 2^k·L(0) at most (then: stable for every lr the scan can reach)


def quadratic_max_lr(system: CoupledSystem, *, rtol: float = 1e-12) -> CoupledMaxLr:
    """The first lr > 0 at which a root of P(ω, lr) = D + lr·N + lr²·N₂ reaches the unit
    circle (module doc).  Affine systems are scanned directly."""
    if system.is_affine:
        return scan_max_lr(system)
    solves, guess = 0, None

    def first(lr0: float) -> CoupledMaxLr:
        nonlocal solves, guess
        r = scan_max_lr(system.frozen_at(lr0), lr_cap=guess)
        solves += r.eigensolves
        # L(0) starts every later scan: the scan's own first guess, a scalar bound, costs a
        # search on dense eigenvalues for a rule not affine in lr
        guess = guess or r.max_lr or None
        return r

    def phi(lr: float) -> float:
        top = first(lr).max_lr
        return -1.0 if top is None else lr - top  # None: stable at every lr, so at lr too

    start = first(0.0).max_lr
    if not start:  # 0.0: unstable for small lr (the lr² part does not change that); None
        return replace(first(0.0), method="frequency scan (frozen lr² part: lr = 0)")
    root = _fixed_point(first, start, rtol)
    if root is None:
        root = _first_root(phi, start, rtol)
    if root is None:
        return CoupledMaxLr(None, None, None, (), _METHOD, solves, False)
    at = first(root)
    if system.state_size > CERTIFY_MAX_STATES:
        return CoupledMaxLr(
            root, at.crossing_angle, at.critical_stage, at.stage_shares, _METHOD, solves, False
        )
    return _decide(system, root, at, solves, rtol)


def _fixed_point(first, start: float, rtol: float) -> float | None:
    """lr ← L(lr) from L(0) while it converges (`FIXED_POINT` steps; L varies little with
    lr when lr·wd is small): the root of φ, or None."""
    lr = start
    for _ in range(FIXED_POINT):
        new = first(lr).max_lr
        if not new:
            return None
        if abs(new - lr) <= max(rtol, 1e-10) * new:  # the scan's own precision ~1e-13
            return new
        lr = new
    return None


def _first_root(phi, start: float, rtol: float) -> float | None:
    """The first sign change of φ on a `GRID`-point grid of (0, hi], refined by Brent."""
    hi = start
    for _ in range(_DOUBLINGS):
        if phi(hi) >= 0:
            break
        hi *= 2
    else:
        return None
    lo = 0.0
    for lr in [hi * (k + 1) / GRID for k in range(GRID)]:
        if phi(lr) >= 0:
            hi = lr
            break
        lo = lr
    return hi if phi(hi) == 0 else brentq(phi, lo, hi, xtol=1e-300, rtol=rtol)


def _decide(system: CoupledSystem, root: float, at: CoupledMaxLr, solves: int, rtol: float):
    """Certify the candidate ``root`` on the true spectral radius, or bisect (module doc)."""
    unstable = Unstable(system)
    lo, hi = 0.0, None
    for k in range(1, CHECKS):
        if unstable(root * k / CHECKS):
            hi = root * k / CHECKS
            break
        lo = root * k / CHECKS
    if hi is None and unstable(root * (1 - 1e-6)):  # a crossing between lo and the candidate
        hi = root * (1 - 1e-6)
    elif hi is None and unstable(root * (1 + 1e-6)):
        return CoupledMaxLr(
            root, at.crossing_angle, at.critical_stage, at.stage_shares, _METHOD,
            solves + unstable.count, True,
        )  # fmt: skip
    elif hi is None:  # stable just above the candidate: march on to the first unstable lr
        lo = root * (1 + 1e-6)
        while lo < _MARCH * root:
            if unstable(lo * (1 + 1 / CHECKS)):
                hi = lo * (1 + 1 / CHECKS)
                break
            lo *= 1 + 1 / CHECKS
        else:  # none within _MARCH × the candidate: the plain reference from scratch
            return dense_max_lr(system)
    found = unstable.crossing(lo, hi, max(rtol, 1e-13))
    method = "block state matrix search (the frozen-lr² candidate was not a crossing)"
    return CoupledMaxLr(found, None, None, (), method, solves + unstable.count, True)


_METHOD = "frequency scan, lr² part frozen at the root of lr = L(lr)"
CHECKS = 8
"""Points of (0, r) where the true spectral radius is checked; 1/CHECKS the march's step."""
_MARCH = 4  # the march stops at 4 × r, then `dense_max_lr` (log grid + bisection) decides

__all__ = ["CHECKS", "GRID", "quadratic_max_lr"]
