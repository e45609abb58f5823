"""PipeMare's claims: Lemmas 2-3 as bounds, T2 and Fig. 10, Fig. 6(b) and 16, Lemma 3's motivation.

Max stable step sizes come from `stability.analysis.boundary.max_lr_grid` (boundary locus, batched
over Δ or momentum; delays must be scalar, so sweeps over delays loop over them), spectral radii
from batched companion eigenvalues.  Sample grids are module constants, chosen to cover the papers'
ranges; ``QUICK`` has coarser ones.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from stability.claims.claim import Claim, intervals

POSITIVE_DELTAS = (1e-3, 1e-2, 0.1, 0.3, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 50.0)
POSITIVE_DELTAS += (70.0, 100.0)
"""Δ ∈ (0, 100] for the sweeps over all delay pairs (PipeMare App. B.4 tried Δ up to 100)."""

MOMENTA = tuple(
    np.round(np.concatenate((np.geomspace(1e-3, 0.5, 12), np.linspace(0.55, 1, 10))), 6)
)
"""Heavy-ball momentum β ∈ (0, 1] for Lemma 3 (β = 1 included: max lr 0 there)."""


def _max_lr(name: str, **params) -> np.ndarray:
    from stability.analysis.boundary import max_lr_grid
    from stability.rules.registry import build_rule

    rule, model = build_rule(name, **params)
    return np.atleast_1d(max_lr_grid(rule, model)[0])


@functools.lru_cache(maxsize=8)
def _pairs_table(name: str, tau_max: int, deltas: tuple[float, ...]):
    """Max lr of ``name`` for every 0 ≤ τb < τf ≤ ``tau_max`` (rows) and Δ (columns)."""
    pairs = np.array([(tf, tb) for tf in range(1, tau_max + 1) for tb in range(tf)])
    d = np.array(deltas)
    table = np.array(
        [_max_lr(name, tau_fwd=int(tf), tau_bkwd=int(tb), delta=d) for tf, tb in pairs]
    )
    return pairs, table


def _where(pairs, deltas, index) -> dict:
    i, j = np.unravel_index(index, (len(pairs), len(deltas)))
    return {"tau_fwd": int(pairs[i, 0]), "tau_bkwd": int(pairs[i, 1]), "delta": deltas[j]}


# -- Lemmas 2 and 3 as upper bounds ---------------------------------------------------------------


def lemma2_upper_bound(tau_max: int = 40, deltas=POSITIVE_DELTAS) -> Claim:
    from stability.analysis.bounds import lemma2_bound

    pairs, lr = _pairs_table("discrepancy", tau_max, tuple(deltas))
    bound = lemma2_bound(pairs[:, :1], pairs[:, 1:], np.array(deltas)[None, :])
    ratio = lr / bound
    top, low = int(np.argmax(ratio)), int(np.argmin(ratio))
    return Claim(
        id="lemma2-upper-bound",
        source="PipeMare Lemma 2 (App. B.3)",
        statement="for Δ > 0 and τf > τb the exact max lr of delayed SGD with discrepancy is "
        f"≤ min(2/(Δ(τf−τb)), 2/λ·sin(π/(4τf+2))): all {len(pairs)} pairs τb < τf ≤ "
        f"{tau_max}, Δ ∈ {{{', '.join(f'{d:g}' for d in deltas)}}}, λ = 1",
        holds=bool(np.all(ratio <= 1 + 1e-9)),
        numbers={
            "points": int(ratio.size),
            "max_ratio": float(ratio.flat[top]),
            "max_ratio_at": _where(pairs, deltas, top),
            "min_ratio": float(ratio.flat[low]),
            "min_ratio_at": _where(pairs, deltas, low),
            "median_ratio": float(np.median(ratio)),
        },
    )


def lemma3_upper_bound(tau_max: int = 40, momenta=MOMENTA) -> Claim:
    from stability.analysis.bounds import lemma3_bound

    taus = np.arange(tau_max + 1)
    m = np.array(momenta)
    lr = np.array([_max_lr("momentum", tau=int(t), momentum=m) for t in taus])
    ratio = lr / lemma3_bound(taus[:, None].astype(float))
    live = m < 1  # at β = 1 nothing is stable
    top = np.unravel_index(np.argmax(ratio), ratio.shape)
    low = np.unravel_index(np.argmin(ratio[:, live]), ratio[:, live].shape)
    return Claim(
        id="lemma3-upper-bound",
        source="PipeMare Lemma 3 (App. B.2)",
        statement="for heavy-ball momentum 0 < β ≤ 1 the exact max lr of delayed momentum is "
        f"≤ 4/λ·sin(π/(4τ+2)): τ = 0..{tau_max}, {len(m)} values of β in "
        f"[{m.min():g}, {m.max():g}], λ = 1",
        holds=bool(np.all(ratio <= 1 + 1e-9)),
        numbers={
            "points": int(ratio.size),
            "max_ratio": float(ratio[top]),
            "max_ratio_at": {"tau": int(taus[top[0]]), "momentum": float(m[top[1]])},
            "min_ratio_below_momentum_1": float(ratio[:, live][low]),
            "min_ratio_at": {"tau": int(taus[low[0]]), "momentum": float(m[live][low[1]])},
            "median_ratio": float(np.median(ratio[:, live])),
            "max_lr_at_momentum_1": float(np.max(lr[:, m == 1])) if np.any(m == 1) else None,
        },
    )


# -- T2 (App. B.4, Fig. 10) ------------------------------------------------------------------------


def t2_raises_max_lr(tau_max: int = 40, deltas=POSITIVE_DELTAS) -> Claim:
    pairs, plain = _pairs_table("discrepancy", tau_max, tuple(deltas))
    _, corrected = _pairs_table("t2", tau_max, tuple(deltas))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(plain > 0, corrected / plain, np.where(corrected > 0, np.inf, np.nan))
    low = int(np.nanargmin(ratio))
    finite = ratio[np.isfinite(ratio)]
    return Claim(
        id="t2-raises-max-lr",
        source="PipeMare App. B.4 / Fig. 10",
        statement="T2 with γ* = 1 − 2/(τf−τb+1) (eq. 14) raises the max stable lr over plain "
        f"discrepancy for every Δ > 0: all {len(pairs)} pairs τb < τf ≤ {tau_max}, "
        f"Δ ∈ {{{', '.join(f'{d:g}' for d in deltas)}}}, λ = 1",
        holds=bool(np.all(ratio > 1)),
        numbers={
            "points": int(ratio.size),
            "min_ratio": float(ratio.flat[low]),
            "min_ratio_at": _where(pairs, deltas, low),
            "median_ratio": float(np.median(finite)),
            "max_finite_ratio": float(np.max(finite)),
            "plain_unstable_for_every_lr": int(np.sum(plain == 0)),
        },
    )


def t2_negative_delta(
    tau_fwd: int = 40, tau_bkwd: int = 10, low: float = -100.0, step: float = 0.05
) -> Claim:
    deltas = np.round(low + step * np.arange(round(-low / step)), 12)  # [low, 0), no noise
    plain = _max_lr("discrepancy", tau_fwd=tau_fwd, tau_bkwd=tau_bkwd, delta=deltas)
    corrected = _max_lr("t2", tau_fwd=tau_fwd, tau_bkwd=tau_bkwd, delta=deltas)
    lower = corrected < plain

    def gain(d: float) -> float:
        kw = {"tau_fwd": tau_fwd, "tau_bkwd": tau_bkwd, "delta": np.array([d])}
        return float(_max_lr("t2", **kw)[0] - _max_lr("discrepancy", **kw)[0])

    found = []
    for first, last in intervals(deltas, lower):
        i, j = np.searchsorted(deltas, first), np.searchsorted(deltas, last)
        a = _edge(gain, deltas[i - 1], first) if i > 0 else first
        b = _edge(gain, last, deltas[j + 1]) if j + 1 < len(deltas) else 0.0
        inside = (deltas >= first) & (deltas <= last)
        worst = int(np.argmin(np.where(inside, corrected / plain, np.inf)))
        found.append(
            {
                "delta_from": a,
                "delta_to": b,
                "worst_delta": float(deltas[worst]),
                "max_lr_plain": float(plain[worst]),
                "max_lr_t2": float(corrected[worst]),
            }
        )
    return Claim(
        id="t2-negative-delta",
        source="PipeMare App. B.4 / Fig. 10",
        statement=f"for Δ < 0 T2 (γ*) sometimes lowers the max stable lr: scan of Δ ∈ [{low:g}, 0) "
        f"step {step:g} at τf = {tau_fwd}, τb = {tau_bkwd}, λ = 1; intervals where it does "
        "(ends refined by bisection; 0 means up to the end of the scan)",
        holds=bool(found),
        numbers={
            "points": int(len(deltas)),
            "lowered_on": found,
            "lowered_points": int(lower.sum()),
        },
    )


def _edge(f, a: float, b: float, tol: float = 1e-6) -> float:
    """Bisection for the sign change of ``f`` on [a, b] (f(a), f(b) of opposite signs)."""
    fa = f(a)
    while b - a > tol:
        mid = 0.5 * (a + b)
        fm = f(mid)
        if (fm < 0) == (fa < 0):
            a, fa = mid, fm
        else:
            b = mid
    return float(0.5 * (a + b))


# -- Fig. 6(b) and Fig. 16: the spectral radius with and without correction ---------------------


def _radius(name: str, lr: np.ndarray, **params) -> np.ndarray:
    from stability.dynamics.linear import characteristic_polynomial
    from stability.rules.registry import build_rule
    from stability.spectrum import spectral_radius

    rule, model = build_rule(name, **params)
    return spectral_radius(characteristic_polynomial(rule, model).at(lr).normalized().dense())


def _correction_claim(claim_id, source, figure, plain, corrected, reference, lr_max, points):
    lr = np.linspace(lr_max / points, lr_max, points)
    cases = {"plain": plain, "corrected": corrected, "reference": reference}
    rho = {key: _radius(name, lr, **params) for key, (name, params) in cases.items()}
    reduced = rho["corrected"] < rho["plain"]
    closer = np.abs(rho["corrected"] - rho["reference"]) < np.abs(rho["plain"] - rho["reference"])
    max_lrs = {key: float(_max_lr(name, **params)[0]) for key, (name, params) in cases.items()}
    return Claim(
        id=claim_id,
        source=source,
        statement=f"{figure}: with D = 0.1 the corrected model's spectral radius is below the "
        "uncorrected one and closer to the no-discrepancy one, at every lr of "
        f"{points} points in (0, {lr_max:g}]",
        holds=bool(np.all(reduced) and np.all(closer)),
        numbers={
            "not_reduced_on": intervals(lr, ~reduced),
            "not_closer_on": intervals(lr, ~closer),
            "max_lr": max_lrs,
            "radius_at_lr": {
                f"{x:g}": {k: float(v[i]) for k, v in rho.items()}
                for i, x in ((k, lr[k]) for k in np.linspace(0, points - 1, 5).astype(int))
            },
        },
    )


def fig6b_correction(lr_max: float = 0.2, points: int = 400) -> Claim:
    delays = {"tau_fwd": 10, "tau_bkwd": 6}
    return _correction_claim(
        "fig6b-correction",
        "PipeMare Fig. 6(b), Sec. 3.2",
        "τf = 10, τb = 6, λ = 1, Δ = 5 (no correction: discrepancy; reference: Δ = 0)",
        ("discrepancy", {**delays, "delta": 5.0}),
        ("t2", {**delays, "delta": 5.0, "decay": 0.1}),
        ("discrepancy", {**delays, "delta": 0.0}),
        lr_max,
        points,
    )


def fig16_correction(lr_max: float = 0.2, points: int = 400) -> Claim:
    setting = {"tau_fwd": 10, "tau_bkwd": 1, "tau_recomp": 4, "delta": 10.0, "phi": -5.0}
    return _correction_claim(
        "fig16-correction",
        "PipeMare Fig. 16, App. D.1",
        "recompute with τf = 10, τb = 1, τr = 4, λ = 1, Δ = 10, Φ = −5 (T2 and T2 for recompute; "
        "reference: no discrepancy, delayed SGD τ = 10)",
        ("recompute", setting),
        ("recompute", {**setting, "decay": 0.1}),
        ("sgd", {"tau": 10, "lam": 1.0}),
        lr_max,
        points,
    )


# -- Lemma 3's motivation: momentum keeps the O(1/τ) threshold ------------------------------------


TAUS = tuple(int(t) for t in np.unique(np.round(np.geomspace(8, 1000, 12))))


def lemma3_slope(taus=TAUS, momenta=(0.5, 0.9, 0.99), tolerance: float = 0.1) -> Claim:
    m = np.array(momenta)
    lr = np.array([_max_lr("momentum", tau=int(t), momentum=m) for t in taus])
    log_tau = np.log(np.array(taus, dtype=float))
    slopes = [float(np.polyfit(log_tau, np.log(lr[:, j]), 1)[0]) for j in range(len(m))]
    # large-τ asymptote (derived here): ω = e^{iθ} near 1, (iθ)(1−β)e^{iτθ} = −αλ, so
    # τθ = π/2 and α ≈ (1 − β)π/(2λτ)
    asymptote = (1 - m) * math.pi / (2 * taus[-1])
    return Claim(
        id="lemma3-slope",
        source="PipeMare Lemma 3 and App. B.2 (momentum does not escape O(1/τ))",
        statement="the max stable lr of delayed heavy-ball momentum falls like 1/τ: the slope "
        f"of log max_lr vs log τ over τ ∈ [{taus[0]}, {taus[-1]}] ({len(taus)} delays) is within "
        f"{tolerance:g} of −1 for β ∈ {{{', '.join(f'{x:g}' for x in m)}}}, λ = 1",
        holds=bool(all(abs(s + 1) <= tolerance for s in slopes)),
        numbers={
            "slopes": dict(zip((f"{x:g}" for x in m), slopes, strict=True)),
            "max_lr_times_tau_at_largest_tau": dict(
                zip((f"{x:g}" for x in m), (lr[-1] * taus[-1]).tolist(), strict=True)
            ),
            "ratio_to_asymptote_(1-β)π/(2τ)": dict(
                zip((f"{x:g}" for x in m), (lr[-1] / asymptote).tolist(), strict=True)
            ),
        },
    )


CLAIMS = {
    "lemma2-upper-bound": lemma2_upper_bound,
    "lemma3-upper-bound": lemma3_upper_bound,
    "t2-raises-max-lr": t2_raises_max_lr,
    "t2-negative-delta": t2_negative_delta,
    "fig6b-correction": fig6b_correction,
    "fig16-correction": fig16_correction,
    "lemma3-slope": lemma3_slope,
}

QUICK_DELTAS = (1e-3, 0.1, 1.0, 10.0, 100.0)
QUICK = {
    "lemma2-upper-bound": {"tau_max": 12, "deltas": QUICK_DELTAS},
    "lemma3-upper-bound": {"tau_max": 12, "momenta": (0.001, 0.1, 0.5, 0.9, 0.99, 1.0)},
    "t2-raises-max-lr": {"tau_max": 12, "deltas": QUICK_DELTAS},
    "t2-negative-delta": {"step": 0.5},
    "fig6b-correction": {"points": 100},
    "fig16-correction": {"points": 100},
    "lemma3-slope": {"taus": (8, 32, 128, 512, 1000)},
}
