r"""Max stable step size of a coupled multi-stage system by a frequency scan (O(n_θ·p³)).

The characteristic polynomial of the block state matrix (`stability.coupled.system`) factors as

    det P(ω, lr) = Π_j d_j(ω) · det(I + lr·M(ω)),     M(ω) = Σ_pass H_pass·diag(ñ_pass,j/d_j)

(`stability.coupled.transfer`: d_j, ñ_j are parameter j's stage's open-loop transfer functions).
A closed-loop root reaches the unit circle at ω = e^{iθ} exactly when M(e^{iθ}) has the
eigenvalue μ = −1/lr: the lr at which the system loses stability are −1/μ for the eigenvalues
μ(θ) of M that cross the negative real axis — the generalized Nyquist criterion (characteristic
loci), and the matrix form of the boundary locus PipeMare uses for Lemma 1 (App. B.1) and
`stability.analysis.boundary` for one delay.  The max stable lr is the smallest such crossing:

1. **small lr.**  Every stage has one open-loop root at ω = 1 (the integrator w ← w − lr·…);
   near it iθ·M(e^{iθ}) → M₀ = Σ H_pass·diag(ñ_pass(1)/d'(1)) and the closed-loop roots are
   1 − lr·ν, ν ∈ eig(M₀).  Stable for small lr > 0 iff Re ν > 0 for every ν (zero ν are flat
   directions of the Hessian: neither converging nor diverging, ignored) and the other
   open-loop roots lie inside the circle; otherwise the result is 0 (stable for no lr > 0).
2. **where crossings can be.**  On a fine grid of θ (cheap: P scalar transfer functions) a
   bound on |μ| for μ on the negative axis restricts the θ to scan: in general
   |μ| ≤ Σ ‖C‖·max_j |c_j/d_j| (C, c the couplings: Hessians and their ñ); for H_f symmetric
   positive semi-definite and H_b = H_r = 0 (linear regression) the eigenvalues lie in the
   numerical range of H^{1/2}·S·H^{1/2}, so μ ∈ λ_max·conv{0, s_1(θ), …, s_P(θ)} (s_i the
   stages' ñ/d) and the reach of that hull along the negative axis (`_hull_reach`) bounds
   the crossings — zero at small θ, where every stage's response points along −i.  A
   crossing beyond −R (lr ≤ 1/R) needs the bound ≥ R, so a search at radius R scans only a
   few multiples of the crossing angle ~π/(2τ+1), not [0, π].
3. **counting crossings beyond −R** (`stability.coupled.track`).  In that region, samples are
   spaced by 0.5 rad of the fastest log-rotation of the stages' responses (max_i |d log s_i/dθ|,
   geometric near θ = 0); at each, one `numpy.linalg.eig` gives the eigenvalues μ and their
   derivatives dμ/dθ = yᴴM'x/yᴴx.  Between neighbouring samples the number of eigenvalues
   crossing the cut (−∞, −R) is the jump of Σ_i Arg(μ_i + R) — a symmetric function of the
   eigenvalues, so none has to be matched with its partner — except for the few branches
   passing near −R (a multiple eigenvalue counts as one branch, `track.branches`), which
   are matched by prediction or followed by continuation (Rayleigh-quotient iteration: one
   LU per step, no eigen-decomposition); an interval whose count is not resolved is
   bisected.  The sweep stops at the first interval with a crossing.
   Real negative eigenvalues at θ = π are crossings at ω = −1.
4. **refinement and the search over R.**  The counted crossing is located (bisection by the
   count) and refined by Newton on Im μ(θ) = 0 along its branch, each step an inverse
   iteration for the eigen-triple near the predicted μ: lr = −1/Re μ to ~1e-13.  The search
   starts at R = 1/(the scalar bound at the delay τ_eff the top Hessian eigenvector sees),
   but no closer to 0 than 10⁻⁹·max|ν| (ν of step 1: the scale of θ·M; eig rounds M's
   eigenvalues by ~10⁻¹⁶ of it, so crossings nearer 0 cannot be counted — a stage whose
   gradient Gradient Shrinking scales by s^τ = 10⁻⁸⁴ guessed R = 10⁻⁵⁸), shrinks R by 1.5
   until a crossing is counted (none down to that floor: stable for every lr it resolves),
   and then sets R just beyond each crossing found until no crossing is left beyond it: the
   last one is the max stable lr.  The critical stage is the one carrying most of the
   crossing mode's weight amplitude |q_j/d_j·x_j|² (x the eigenvector of M: the gradient).
5. **verification.**  Where the block state matrix is small (≤ `CERTIFY_MAX_STATES` rows), its
   spectral radius is checked below 1 at lr·(1 − 1e-6) and above 1 at lr·(1 + 1e-6); the count
   of unstable roots only changes at crossings, so with step 1 this certifies the whole
   interval (0, lr).  Larger systems rest on the count of step 3 — its sampling adapts to
   the eigenvalues' motion and it is checked against the state matrix up to a few thousand
   rows (tests, benchmark), but it is not a proof.

Cost: one p×p eigen-decomposition per sample (about ten at p = 500, τ_max = 100), a few
dozen LU factorizations, and O(n_fine·P) scalar evaluations: O(n_θ·p³) instead of the
O((p·τ)³) of the state matrix.
"""

from __future__ import annotations

import math

import numpy as np

from stability.coupled.frequency import FrequencyResponse, eigentriple, newton_crossing
from stability.coupled.stage_bounds import stage_bound_at, stage_delay
from stability.coupled.system import CoupledMaxLr, CoupledSystem, spectral_radius
from stability.coupled.track import AMBIGUOUS, crossing_start, decompose, net_crossings, rotate
from stability.limits import SCAN_MAX_PARAMETERS

CERTIFY_MAX_STATES = 1500
"""Largest block state matrix used to certify a scan result (`scan_max_lr`)."""

_KAPPA = 0.5  # log-rotation (rad) of the fastest stage response between planned samples
_CHUNK = 4  # samples decomposed at a time (the sweep stops at the first crossing)
_MAX_SPLITS = 16  # bisections of an ambiguous interval before it counts as a crossing
_TOP = math.pi * (1 - 1e-9)  # last sample of the sweep; θ = π itself is checked separately
_FLAT = 1e-10  # |ν| below this (relative) is a flat direction of the Hessian
_RESOLVED = 1e-9  # smallest radius searched, relative to max|ν| (`_small_lr`): eig's rounding


# -- step 1: small lr ------------------------------------------------------------------------


def _small_lr(system: CoupledSystem) -> tuple[bool, float, str, float]:
    """(stable for small lr > 0, angular margin of eig(M₀) from ±iℝ, reason if not, max |ν|:
    the size of θ·M(e^{iθ}) near θ = 0, against which eig's rounding of M is measured)."""
    dprime, gains = [], []
    for i, t in enumerate(system.transfers):
        roots = t.open_loop_roots()
        at_one = np.abs(roots - 1) <= 1e-7
        if np.count_nonzero(at_one) != 1 or t.integrator_roots() != 1:
            return False, 0.0, f"stage {i + 1} has no simple open-loop root at ω = 1", 0.0
        if np.any(np.abs(roots[~at_one]) >= 1 - 1e-12):
            return False, 0.0, f"stage {i + 1} has an open-loop root on or outside |ω| = 1", 0.0
        dprime.append(t.denominator.derivative()(1.0))
        gains.append([polys[i](1.0) for _, polys in system.couplings])
    dprime, gains = np.array(dprime), np.array(gains)
    cols = system.stage_index
    M0 = sum(
        C * (gains[cols, k] / dprime[cols])[None, :] for k, (C, _) in enumerate(system.couplings)
    )
    nu = np.linalg.eigvals(M0)
    nu = nu[np.abs(nu) > _FLAT * max(np.max(np.abs(nu)), 1e-300)]
    if nu.size == 0:
        return False, 0.0, "the Hessian is zero: nothing converges", 0.0
    if np.any(nu.real <= 0):
        return False, 0.0, "a mode at ω = 1 moves outward for small lr (Re ν ≤ 0)", 0.0
    margin = float(np.min(np.pi / 2 - np.abs(np.angle(nu))))
    return True, margin, "", float(np.max(np.abs(nu)))


# -- step 2: where crossings can be -------------------------------------------------------------


_PAIRS_PER_CHUNK = 2_000_000  # point pairs evaluated at a time by `_hull_reach`


def _hull_reach(points: np.ndarray) -> np.ndarray:
    """The reach X = max{X : −X ∈ conv(0, points[n, :])} per row n, exactly.

    A convex hull of finitely many points meets the real axis in the segment spanned by the
    points on the axis and the intercepts of the segments [p, q] joining a point p above the
    axis to a point q below it (a point of the hull on a line is a convex combination of at
    most two points on opposite sides of that line, Carathéodory in the plane); 0 belongs to
    the hull, so X = max(0, −(the least of those abscissae)).  O(m²) per row of m points.
    """
    x, y = points.real, points.imag
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = (x[:, :, None] * -y[:, None, :] + x[:, None, :] * y[:, :, None]) / (
            y[:, :, None] - y[:, None, :]
        )
    across = (y[:, :, None] > 0) & (y[:, None, :] < 0)
    least = np.min(np.where(across, cross, np.inf), axis=(1, 2))
    on_axis = np.min(np.where(y == 0, x, np.inf), axis=1, initial=np.inf)
    return np.maximum(0.0, -np.minimum(least, on_axis))


def _bound(freq: FrequencyResponse, s: np.ndarray) -> np.ndarray:
    """Per cell [θ_n, θ_n+1] of the fine grid: a bound on |μ| for μ < 0 (module doc, step 2).

    The stage responses of both ends of a cell enter (the fine grid resolves their motion);
    the last cell also gets their conjugates, the responses just beyond θ = π.
    """
    cells = np.concatenate([s[:, :-1], s[:, 1:]], axis=2)  # (K, n − 1, 2P)
    cells[:, -1] = np.where(cells[:, -1].imag > 0, cells[:, -1], cells[:, -1].conj())
    cells = np.concatenate([cells, cells.conj()], axis=2)
    cells[:, :-1, cells.shape[2] // 2 :] = 0.0
    if freq.symmetric:
        H = freq.C[0]
        if np.allclose(H, H.T, rtol=0, atol=1e-12 * np.max(np.abs(H))):
            lam = np.linalg.eigvalsh(H)
            if lam[0] >= -1e-12 * lam[-1]:
                # all but the last cell carry their 2P responses, then zeros (the origin)
                half = cells.shape[2] // 2
                body = cells[0, :-1, :half]
                out = np.empty(cells.shape[1])
                rows = max(1, _PAIRS_PER_CHUNK // half**2)
                for c in range(0, body.shape[0], rows):
                    out[c : min(c + rows, body.shape[0])] = _hull_reach(body[c : c + rows])
                out[-1] = _hull_reach(cells[0, -1:])[0]
                return lam[-1] * out
    norms = [np.linalg.norm(C, 2) for C in freq.C]
    return sum(nrm * np.max(np.abs(cells[k]), axis=1) for k, nrm in enumerate(norms))


# -- step 3: counting crossings ----------------------------------------------------------------


class _Scan:
    """Eigen-data over angles (cached), and the crossing counts of `stability.coupled.track`."""

    def __init__(self, system: CoupledSystem, margin: float):
        """``margin``: the angular margin of step 1; the scan starts at θ = margin/(4(τ_max+2)),
        below which every eigenvalue keeps the phase it has near θ = 0 (no crossing)."""
        self.freq = FrequencyResponse(system)
        self.system = system
        self.cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}
        self.eigensolves = 0
        tau_max = max(1, system.max_delay)
        start = 0.25 * min(margin, 1.0) / (tau_max + 2)
        self.fine, s, self.planned = _plan(self.freq, start, tau_max)
        self.bound = _bound(self.freq, s)

    def data(self, thetas) -> list[tuple[np.ndarray, np.ndarray]]:
        new = sorted({float(t) for t in thetas} - set(self.cache))
        for c in range(0, len(new), _CHUNK):
            chunk = np.array(new[c : c + _CHUNK])
            mu, dmu = decompose(*self.freq.matrices(chunk))
            self.eigensolves += chunk.size
            for k, th in enumerate(chunk):
                self.cache[float(th)] = (mu[k], dmu[k])
        return [self.cache[float(t)] for t in thetas]

    def count(self, ta: float, tb: float, radius: float, depth: int = 0) -> list:
        """Sub-intervals of [ta, tb] with crossings beyond −radius, refining ambiguous ones:
        (ta, tb, estimates) with the crossing estimates (direction, θ, μ) of near branches.

        A near branch whose estimated crossing lies within 5 % of −radius is settled exactly:
        Newton on the branch gives its true crossing, kept only if beyond −radius.
        """
        a, b = self.data([ta, tb])
        n, residue, estimates = net_crossings(a, b, ta, tb - ta, radius, self.follow)
        if residue > AMBIGUOUS:
            if depth >= _MAX_SPLITS:
                return [(ta, tb, estimates)]  # unresolved: treated as a possible crossing
            mid = 0.5 * (ta + tb)
            return self.count(ta, mid, radius, depth + 1) + self.count(mid, tb, radius, depth + 1)
        settled = []
        for direction, theta, mu in estimates:
            if -mu.real < 1.05 * radius:
                exact = newton_crossing(self.freq, theta, mu, np.random.default_rng(0))
                if exact is not None and abs(exact[1] - theta) <= tb - ta:
                    if not _beyond(exact[0], radius):
                        n -= direction  # the branch crosses inside −radius: none here
                        continue
            settled.append((direction, theta, mu))
        return [(ta, tb, settled)] if n != 0 or settled else []

    def follow(self, t0: float, mu: complex, dmu: complex, t1: float):
        """Continuation of one eigenvalue branch from θ = t0 to t1: log-polar prediction,
        Rayleigh-quotient correction (one LU per iteration, no eigen-decomposition), in 2 steps
        or, if that fails, 4.  Points (θ, μ, dμ/dθ), or None if a correction strays more than a
        quarter of the step's travel from its prediction (another branch is too close)."""
        return self._follow(t0, mu, dmu, t1, 2) or self._follow(t0, mu, dmu, t1, 4)

    def _follow(self, t0: float, mu: complex, dmu: complex, t1: float, steps: int):
        rng = np.random.default_rng(0)
        path = [(t0, mu, dmu)]
        for k in range(1, steps + 1):
            t = t0 + (t1 - t0) * k / steps
            tp, mp, dp = path[-1]
            pred = complex(rotate(np.array([mp]), np.array([dp]), t - tp)[0])
            triple = eigentriple(self.freq, t, pred, rng)
            if triple is None or abs(triple[0] - pred) > 0.25 * abs(dp * (t - tp)):
                return None
            path.append((t, triple[0], triple[1]))
        return path

    def fire(self, radius: float, skip=frozenset()) -> tuple | None:
        """The first (lowest θ) interval with a crossing beyond −radius, or None.

        Intervals ``(ta, tb)`` in ``skip`` (counted before, but no crossing beyond −radius
        could be located in them) are passed over.
        """
        inside = (self.bound >= 0.9 * radius).astype(np.int8)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], inside, [0]])))
        for start, stop in zip(edges[::2], edges[1::2], strict=True):
            a, b = self.fine[start], min(self.fine[stop], _TOP)
            grid = np.concatenate([[a], self.planned[(self.planned > a) & (self.planned < b)], [b]])
            for c in range(0, grid.size - 1, _CHUNK):
                part = grid[c : c + _CHUNK + 1]
                self.data(part)
                for ta, tb in zip(part[:-1], part[1:], strict=True):
                    hits = [h for h in self.count(ta, tb, radius) if h[:2] not in skip]
                    if hits:
                        return hits[0]
            if self.fine[stop] >= math.pi:  # real eigenvalues at ω = −1, on the cut itself
                mu = self.data([math.pi])[0][0]
                real = (np.abs(mu.imag) <= 1e-9 * np.abs(mu)) & (mu.real < -radius)
                if np.any(real) and (math.pi, math.pi) not in skip:
                    return (math.pi, math.pi, [])
        return None


def _plan(freq: FrequencyResponse, lo: float, tau_max: int):
    """Fine grid θ ∈ [lo, π], responses there, and the planned sample angles (step 3)."""
    n = 32 * (tau_max + 2) + 64
    uniform = np.linspace(0.0, math.pi, n + 1)[1:]
    first = uniform[0]
    near = np.geomspace(lo, first, 48, endpoint=False) if lo < first else np.zeros(0)
    fine = np.concatenate([near, uniform[uniform >= lo]])
    s, ds, _ = freq.response(fine)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.nanmax(np.abs(ds / s), axis=(0, 2))
    # zeros of a response on the circle (ñ(e^{iθ}) = 0) make |s'/s| unbounded where |μ| is
    # tiny and irrelevant: the rate is capped at 8(τ_max + 2), or 2/θ near the pole at θ = 0
    cap = np.maximum(8.0 * (tau_max + 2), 2.0 / fine)
    rate = np.where(np.isfinite(rate), np.minimum(rate, cap), cap)
    phase = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(fine))])
    marks = np.arange(0.0, phase[-1], _KAPPA)
    planned = np.unique(np.interp(marks, phase, fine))
    return fine, s, planned


def check_scan_size(parameters: int, flag: str) -> None:
    """Refuse a system of more than `stability.limits.SCAN_MAX_PARAMETERS` parameters (one p × p
    eigen-decomposition per sampled angle) before it is built, naming the ``flag`` that sizes
    it."""
    if parameters > SCAN_MAX_PARAMETERS:
        raise ValueError(
            f"{flag}: the frequency scan diagonalises a p × p matrix at each angle and allows at "
            f"most {SCAN_MAX_PARAMETERS} parameters (docs/limits.md); this problem has {parameters}"
        )


def scan_max_lr(system: CoupledSystem, *, lr_cap: float | None = None) -> CoupledMaxLr:
    """Max stable lr of ``system`` by the frequency scan (module doc, steps 1-5).

    ``lr_cap``: a first guess of the answer (default: `_first_guess`); it only decides where
    the search starts.
    """
    if not system.is_affine:
        raise ValueError(
            "the frequency scan needs dynamics affine in lr; PipeOptim-AdamW's are quadratic "
            "(stability.coupled.quadratic_lr.quadratic_max_lr solves them)"
        )
    stable, margin, reason, scale = _small_lr(system)
    if not stable:
        return CoupledMaxLr(0.0, None, None, (), f"frequency scan ({reason})", 0, False)
    scan = _Scan(system, margin)
    direct = _without_delay(system)
    if direct is not None:
        return _finish(scan, direct, method="frequency scan (no delay: ω = 1 − lr·κ, exact)")
    guess = lr_cap if lr_cap is not None else _first_guess(system, scale)
    # a crossing exactly at the guess is then clearly beyond; a guess beyond float64's reach
    # (Gradient Shrinking's s^τ = 1e-84 on one stage) starts where eig still resolves |μ|
    radius = max((1.0 - 1e-3) / guess, _RESOLVED * scale)
    best, skip = None, set()
    for _ in range(80):
        hit = scan.fire(radius, frozenset(skip))
        if hit is None:
            if best is not None:
                return _finish(scan, best)
            radius, skip = radius / 1.5, set()  # none beyond −radius: look further in
            if radius < _RESOLVED * scale:
                return CoupledMaxLr(None, None, None, (), "frequency scan", scan.eigensolves, False)
            continue
        found = _localize(scan, hit, radius)
        if found is None:  # a count the branches do not confirm: pass over that interval
            skip.add(hit[:2])
            continue
        best, skip = found, set()
        radius = (1.0 / found[0]) * (1 + 1e-9)  # strictly beyond the crossing just found
    if best is None:
        raise ArithmeticError("the frequency scan could not locate the crossing it counted")
    return _finish(scan, best, method="frequency scan (crossing count not settled)")


def _without_delay(system: CoupledSystem):
    """(lr, θ, x) of the crossing when no stage reads the past (module doc, shortcut), else None.

    Then every stage's open loop is d_j = a_j·ω^{s_j}·(ω − 1) with constant ñ_pass,j =
    b_pass,j·ω^{s_j} (all delays zero, GPipe with one microbatch), and dividing column j of
    P(ω, lr) by a_j·ω^{s_j} leaves (ω − 1)·I + lr·K, K = Σ_pass H_pass·diag(b_pass,j/a_j):
    the closed-loop roots are ω = 1 − lr·κ, κ ∈ eig(K), and |1 − lr·κ| = 1 first at
    lr = min 2·Re κ/|κ|² (κ with Re κ > 0; step 1 has checked that no other is nonflat).
    The sweep over θ would find the same crossings with hundreds of p×p eigen-decompositions
    (tens of seconds at p = 500).
    """
    columns = []
    for t in system.transfers:
        if t.decay.terms:
            return None
        d = t.denominator.cleaned().terms
        low = min(d)
        if sorted(d) != [low, low + 1] or d[low] != -d[low + 1]:
            return None
        gains = []
        for _, polys in system.couplings:
            terms = polys[len(columns)].cleaned().terms
            if any(k != low for k in terms):
                return None
            gains.append(terms.get(low, 0.0) / d[low + 1])
        columns.append(gains)
    gains = np.array(columns)  # (P, passes)
    cols = system.stage_index
    K = sum(C * gains[cols, k][None, :] for k, (C, _) in enumerate(system.couplings))
    kappa, vecs = np.linalg.eig(K)
    scale = max(float(np.max(np.abs(kappa))), 1e-300)
    live = (np.abs(kappa) > _FLAT * scale) & (kappa.real > 0)
    if not live.any():
        return None
    lrs = np.where(live, 2 * kappa.real / np.maximum(np.abs(kappa) ** 2, 1e-300), np.inf)
    i = int(np.argmin(lrs))
    root = 1 - lrs[i] * kappa[i]
    return float(lrs[i]), abs(math.atan2(root.imag, root.real)), vecs[:, i]


def _first_guess(system: CoupledSystem, scale: float) -> float:
    """The scalar bound at (λ_max, τ_eff), τ_eff the delay of the stages averaged with the
    weights of the Hessian's top eigenvector: where the search for crossings starts."""
    lam, vecs = np.linalg.eigh(system.hessian)
    v = vecs[:, -1]
    mass = np.array([v[blk] @ v[blk] for blk in system.blocks])
    delays = np.array([stage_delay(r) for r in system.rules])
    stage = int(np.argmin(np.abs(delays - mass @ delays)))
    bound = stage_bound_at(system, stage, float(lam[-1]))
    return bound if bound is not None and bound > 0 else 1.0 / scale


# -- step 4-5: localization, refinement and verification ----------------------------------------


def _localize(scan: _Scan, interval, radius: float):
    """The crossing beyond −radius counted in ``interval``, refined by Newton: (lr, θ, x).

    Starts from the near branches' estimates, else from the linear predictions of the
    eigenvalues left of −radius/2 (`crossing_start`), bisecting the interval (by the count)
    until one leads Newton to a crossing beyond −radius inside it.
    """
    rng = np.random.default_rng(0)
    ta, tb, estimates = interval
    if ta == tb == math.pi:
        mu = scan.data([math.pi])[0][0]
        real = mu[(np.abs(mu.imag) <= 1e-9 * np.abs(mu)) & (mu.real < -radius)]
        return newton_crossing(scan.freq, math.pi, complex(np.min(real.real)), rng)
    for _ in range(_MAX_SPLITS):
        h = tb - ta
        a, b = scan.data([ta, tb])
        starts = [(t, m) for _, t, m in estimates]
        fallback = crossing_start(a, b, ta, h, radius)
        starts += [fallback] if fallback is not None else []
        for theta0, mu0 in sorted(starts, key=lambda s: s[1].real):
            exact = newton_crossing(scan.freq, theta0, mu0, rng)
            if exact is not None and ta - h <= exact[1] <= tb + h and _beyond(exact[0], radius):
                return exact
        mid = 0.5 * (ta + tb)
        halves = scan.count(ta, mid, radius) + scan.count(mid, tb, radius)
        if not halves:
            return None
        ta, tb, estimates = halves[0]
    return None


def _beyond(lr: float, radius: float) -> bool:
    """A crossing at ``lr`` lies strictly beyond −radius on the negative axis (|μ| = 1/lr)."""
    return 0 < lr * radius < 1 - 1e-12


def _finish(scan: _Scan, best, method: str = "frequency scan") -> CoupledMaxLr:
    system, freq = scan.system, scan.freq
    lr, theta, x = best
    weights = np.abs(freq.response(np.array([theta]))[2][0, system.stage_index] * x) ** 2
    shares = np.array([weights[blk].sum() for blk in system.blocks]) / weights.sum()
    certified = False
    if system.stepped and system.state_size <= CERTIFY_MAX_STATES:
        below = spectral_radius(system, lr * (1 - 1e-6))
        above = spectral_radius(system, lr * (1 + 1e-6))
        certified = below < 1 + 1e-10 < above
        method += ", certified by the block state matrix" if certified else " (NOT certified)"
    return CoupledMaxLr(
        float(lr),
        float(theta),
        int(np.argmax(shares)) + 1,
        tuple(float(v) for v in shares),
        method,
        scan.eigensolves,
        certified,
    )


__all__ = ["CERTIFY_MAX_STATES", "check_scan_size", "scan_max_lr"]
