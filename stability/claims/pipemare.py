"""PipeMare's claims: Lemmas 2-3 as bounds, T2 and Fig. 10, Fig. 6(b) and 16, Lemma 3's motivation.

Max stable step sizes come from `stability.analysis.boundary.max_lr_grid` (boundary locus, batched
over Δ or momentum; delays must be scalar, so sweeps over delays loop over them), spectral radii
from batched companion eigenvalues.  Sample grids are module constants, chosen to cover the papers'
ranges; ``QUICK`` has coarser ones.  Boundaries where a claim stops holding are refined by
root-finding on the computed quantity (`stability.claims.locate`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from stability.claims.claim import Claim, Optimum, Range, Size, relative_change
from stability.claims.lexicon import Qualifier
from stability.claims.locate import longest, minimize, positive_intervals

POSITIVE_DELTAS = (1e-3, 1e-2, 0.1, 0.3, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 50.0)
POSITIVE_DELTAS += (70.0, 100.0)
"""Δ ∈ (0, 100] for the sweeps over all delay pairs (PipeMare App. B.4 tried Δ up to 100)."""

MOMENTA = tuple(
    np.round(np.concatenate((np.geomspace(1e-3, 0.5, 12), np.linspace(0.55, 1, 10))), 6)
)
"""Heavy-ball momentum β ∈ (0, 1] for Lemma 3 (β = 1 included: max lr 0 there)."""

FIG10 = {"tau_fwd": 40, "tau_bkwd": 10}
"""The delays of PipeMare Fig. 10 (App. B.4)."""

GAMMA_DELTAS = (0.1, 1.0, 10.0, 100.0)
"""Δ at which the optimal T2 decay γ is compared with γ* of eq. 14 (Fig. 10's delays)."""


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


def _listed(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


# -- Lemmas 2 and 3 as upper bounds ---------------------------------------------------------------


def _bound_claim(claim_id, source, statement, scope, ratio, numbers) -> Claim:
    top = float(np.max(ratio))
    return Claim(
        id=claim_id,
        source=source,
        statement=statement,
        direction="the exact max stable lr is at most the lemma's bound, at every point",
        scope=scope,
        direction_holds=bool(np.all(ratio <= 1 + 1e-9)),
        size=Size(
            100.0 * top, "% of the bound", "the largest exact max lr / bound (tightest point)"
        ),
        numbers=numbers,
    )


def lemma2_upper_bound(tau_max: int = 40, deltas=POSITIVE_DELTAS) -> Claim:
    from stability.analysis.closed_forms import lemma2_bound

    pairs, lr = _pairs_table("discrepancy", tau_max, tuple(deltas))
    bound = lemma2_bound(pairs[:, :1], pairs[:, 1:], np.array(deltas)[None, :])
    ratio = lr / bound
    top, low = int(np.argmax(ratio)), int(np.argmin(ratio))
    scope = f"all {len(pairs)} pairs τb < τf ≤ {tau_max}, Δ ∈ {{{_listed(deltas)}}}, λ = 1"
    return _bound_claim(
        "lemma2-upper-bound",
        "PipeMare Lemma 2 (App. B.3)",
        "for Δ > 0 and τf > τb the exact max lr of delayed SGD with discrepancy is "
        f"≤ min(2/(Δ(τf−τb)), 2/λ·sin(π/(4τf+2))): {scope}",
        scope,
        ratio,
        {
            "points": int(ratio.size),
            "max_ratio": float(ratio.flat[top]),
            "max_ratio_at": _where(pairs, deltas, top),
            "min_ratio": float(ratio.flat[low]),
            "min_ratio_at": _where(pairs, deltas, low),
            "median_ratio": float(np.median(ratio)),
        },
    )


def lemma3_upper_bound(tau_max: int = 40, momenta=MOMENTA) -> Claim:
    from stability.analysis.closed_forms import lemma3_bound

    taus = np.arange(tau_max + 1)
    m = np.array(momenta)
    lr = np.array([_max_lr("momentum", tau=int(t), momentum=m) for t in taus])
    ratio = lr / lemma3_bound(taus[:, None].astype(float))
    live = m < 1  # at β = 1 nothing is stable
    top = np.unravel_index(np.argmax(ratio), ratio.shape)
    low = np.unravel_index(np.argmin(ratio[:, live]), ratio[:, live].shape)
    scope = f"τ = 0..{tau_max}, {len(m)} values of β in [{m.min():g}, {m.max():g}], λ = 1"
    return _bound_claim(
        "lemma3-upper-bound",
        "PipeMare Lemma 3 (App. B.2)",
        "for heavy-ball momentum 0 < β ≤ 1 the exact max lr of delayed momentum is "
        f"≤ 4/λ·sin(π/(4τ+2)): {scope}",
        scope,
        ratio,
        {
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


def gamma_optimum(
    delta: float, tau_fwd: int = 40, tau_bkwd: int = 10, points: int = 200
) -> Optimum:
    """The T2 decay γ ∈ [0, 1) with the largest max stable lr, against γ* of eq. 14.

    PipeMare eq. 14, γ* = 1 − 2/(τf − τb + 1), makes the App. B.4 polynomial's second
    derivative at ω = 1 independent of Δ; the max stable lr over γ is scanned on ``points``
    values and refined by bounded Brent (`stability.claims.locate.minimize`).
    """
    from stability.rules.discrepancy import optimal_gamma

    delays = {"tau_fwd": tau_fwd, "tau_bkwd": tau_bkwd, "delta": delta}
    grid = np.linspace(0.0, 1.0, points, endpoint=False)
    values = _max_lr("t2", gamma=grid, **delays)

    def lr(g: float) -> float:
        return float(_max_lr("t2", gamma=np.array([g]), **delays)[0])

    best, neg = minimize(lambda g: -lr(g), grid, -values)
    star = optimal_gamma(tau_fwd, tau_bkwd)
    return Optimum(
        parameter="gamma",
        setting=f"τf = {tau_fwd}, τb = {tau_bkwd}, Δ = {delta:g}, λ = 1",
        computed=best,
        paper=star,
        objective="max stable lr",
        at_computed=-neg,
        at_paper=lr(star),
        lower_is_better=False,
    )


def t2_raises_max_lr(tau_max: int = 40, deltas=POSITIVE_DELTAS, gamma_deltas=GAMMA_DELTAS) -> Claim:
    pairs, plain = _pairs_table("discrepancy", tau_max, tuple(deltas))
    _, corrected = _pairs_table("t2", tau_max, tuple(deltas))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(plain > 0, corrected / plain, np.where(corrected > 0, np.inf, np.nan))
    low = int(np.nanargmin(ratio))
    finite = ratio[np.isfinite(ratio)]
    scope = f"all {len(pairs)} pairs τb < τf ≤ {tau_max}, Δ ∈ {{{_listed(deltas)}}}, λ = 1"
    return Claim(
        id="t2-raises-max-lr",
        source="PipeMare App. B.4 / Fig. 10",
        statement="T2 with γ* = 1 − 2/(τf−τb+1) (eq. 14) raises the max stable lr over plain "
        f"discrepancy consistently for every Δ > 0: {scope}",
        direction="T2's max stable lr is above plain discrepancy's",
        scope=scope,
        direction_holds=bool(np.all(ratio > 1)),
        size=Size(
            float(relative_change(ratio.flat[low], 1.0)),
            "%",
            "the smallest gain of the max stable lr over the scope",
            Qualifier("consistently"),
        ),
        optima=tuple(gamma_optimum(d, **FIG10) for d in gamma_deltas),
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

    def loss(d: float) -> float:  # > 0 where T2 lowers the max stable lr
        kw = {"tau_fwd": tau_fwd, "tau_bkwd": tau_bkwd, "delta": np.array([d])}
        return float(_max_lr("discrepancy", **kw)[0] - _max_lr("t2", **kw)[0])

    grid = np.append(deltas, 0.0)  # at Δ = 0 the two models coincide (loss 0)
    lowered = positive_intervals(loss, grid, np.append(plain - corrected, 0.0))
    found = []
    for a, b in lowered:
        inside = (deltas >= a) & (deltas <= b)
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
    share = 100.0 * sum(b - a for a, b in lowered) / -low
    return Claim(
        id="t2-negative-delta",
        source="PipeMare App. B.4 / Fig. 10",
        statement=f"for Δ < 0 T2 (γ*) occasionally lowers the max stable lr: scan of Δ ∈ "
        f"[{low:g}, 0) step {step:g} at τf = {tau_fwd}, τb = {tau_bkwd}, λ = 1; intervals where "
        "it does, ends refined by root-finding on the max-lr difference",
        direction="T2 lowers the max stable lr at some Δ < 0",
        scope=f"Δ ∈ [{low:g}, 0), τf = {tau_fwd}, τb = {tau_bkwd}, λ = 1",
        direction_holds=bool(found),
        size=Size(
            share,
            "% of the Δ range",
            "the share of [low, 0) where T2 lowers the max stable lr",
            Qualifier("occasionally"),
        ),
        numbers={
            "points": int(len(deltas)),
            "lowered_on": found,
            "lowered_points": int(np.sum(corrected < plain)),
        },
    )


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

    def radii(x) -> dict[str, np.ndarray]:
        return {key: _radius(name, x, **params) for key, (name, params) in cases.items()}

    def margin(rho) -> np.ndarray:
        """> 0 where the correction lowers ρ and brings it closer to the reference."""
        reduced = rho["plain"] - rho["corrected"]
        closer = np.abs(rho["plain"] - rho["reference"]) - np.abs(
            rho["corrected"] - rho["reference"]
        )
        return np.minimum(reduced, closer)

    rho = radii(lr)
    found = positive_intervals(lambda x: float(margin(radii(np.array([x])))[0]), lr, margin(rho))
    everywhere = found == [(lr[0], lr[-1])] and bool(np.all(margin(rho) > 0))
    part = None if everywhere or not found else Range("lr", *longest(found))
    max_lrs = {key: float(_max_lr(name, **params)[0]) for key, (name, params) in cases.items()}
    reduction = rho["plain"] - rho["corrected"]
    return Claim(
        id=claim_id,
        source=source,
        statement=f"{figure}: with D = 0.1 the corrected model's spectral radius is below the "
        "uncorrected one and closer to the no-discrepancy one, at every lr of "
        f"{points} points in (0, {lr_max:g}]; where it stops, the boundary α* is refined by "
        "root-finding",
        direction="ρ(corrected) < ρ(uncorrected) and |ρ(corrected) − ρ(reference)| < "
        "|ρ(uncorrected) − ρ(reference)|",
        scope=f"lr ∈ (0, {lr_max:g}], {figure}",
        direction_holds=everywhere,
        size=Size(
            float(np.max(reduction)),
            "spectral radius",
            "the largest reduction ρ(uncorrected) − ρ(corrected) over the scope",
        ),
        range_where_it_holds=part,
        numbers={
            "alpha_star": None if part is None else part.low,
            "holds_on": found,
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


def lemma3_slope(taus=TAUS, momenta=(0.5, 0.9, 0.99)) -> Claim:
    m = np.array(momenta)
    lr = np.array([_max_lr("momentum", tau=int(t), momentum=m) for t in taus])
    log_tau = np.log(np.array(taus, dtype=float))
    slopes = [float(np.polyfit(log_tau, np.log(lr[:, j]), 1)[0]) for j in range(len(m))]
    worst = max(slopes, key=lambda s: abs(s + 1))
    # large-τ asymptote (derived here): ω = e^{iθ} near 1, (iθ)(1−β)e^{iτθ} = −αλ, so
    # τθ = π/2 and α ≈ (1 − β)π/(2λτ)
    asymptote = (1 - m) * math.pi / (2 * taus[-1])
    scope = f"τ ∈ [{taus[0]}, {taus[-1]}] ({len(taus)} delays), β ∈ {{{_listed(m)}}}, λ = 1"
    return Claim(
        id="lemma3-slope",
        source="PipeMare Lemma 3 and App. B.2 (momentum does not escape O(1/τ))",
        statement="the max stable lr of delayed heavy-ball momentum falls like 1/τ: the slope "
        f"of log max_lr vs log τ is ≈ −1 for each β: {scope}",
        direction="the max stable lr falls with τ (negative slope of log max_lr vs log τ)",
        scope=scope,
        direction_holds=all(s < 0 for s in slopes),
        size=Size(
            worst,
            "log-log slope",
            "the fitted slope farthest from −1 over the momenta",
            Qualifier("≈", -1.0),
        ),
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
    "t2-raises-max-lr": {"tau_max": 12, "deltas": QUICK_DELTAS, "gamma_deltas": (1.0, 100.0)},
    "t2-negative-delta": {"step": 0.5},
    "fig6b-correction": {"points": 100},
    "fig16-correction": {"points": 100},
    "lemma3-slope": {"taus": (8, 32, 128, 512, 1000)},
}
