"""Kosson et al.'s claims about the stability region of Fig. 6 (Sec. 3.4 and the caption).

The stability region of Fig. 6 is the set of (ηλ, m) whose dominant root is inside the unit
circle.  For each m it is compared through the max stable ηλ (exact, boundary locus over a
fine momentum grid, λ = 1) and, as a set, on a (log ηλ, m) grid of spectral radii — the second
also catches stable islands above the first crossing, which the max ηλ alone would miss.
Momenta where one method's max ηλ crosses another's are refined by root-finding
(`stability.claims.locate`).
"""

from __future__ import annotations

import numpy as np

from stability.claims.claim import Claim, Range, Size, intervals, relative_change
from stability.claims.lexicon import Qualifier
from stability.claims.locate import crossings

MOMENTA = tuple(np.linspace(0.0, 0.999, 1000))
"""Fine momentum grid for the max stable ηλ (λ = 1)."""

REGION_RATES = tuple(np.geomspace(1e-3, 10.0, 241))
REGION_MOMENTA = tuple(np.linspace(0.0, 0.99, 100))
"""The (ηλ, m) grid of Fig. 6's heatmaps (ηλ log-spaced)."""

HIGH_MOMENTUM = 0.9
""""High momentum values" (Kosson Sec. 3.4) read as m ≥ 0.9."""

LARGER_DELAYS = tuple(range(2, 17))
""""Larger delays" (Fig. 6 caption) read as D = 2 … 16."""


def _max_lr(name: str, tau: int, momenta) -> np.ndarray:
    from stability.analysis.boundary import max_lr_grid
    from stability.rules.registry import build_rule

    rule, model = build_rule(name, tau=tau, momentum=np.atleast_1d(np.asarray(momenta, float)))
    return max_lr_grid(rule, model)[0]


def _ratio(name: str, base: str, tau: int, m: float) -> float:
    """max stable ηλ of ``name`` / that of ``base`` at one momentum."""
    return float(_max_lr(name, tau, [m])[0] / _max_lr(base, tau, [m])[0])


def _stable_region(name: str, tau: int, rates, momenta) -> np.ndarray:
    """Boolean (rate, momentum) grid: spectral radius < 1 (batched companion eigenvalues)."""
    from stability.dynamics.linear import characteristic_polynomial
    from stability.rules.registry import build_rule
    from stability.spectrum import spectral_radius

    rule, model = build_rule(name, tau=tau, momentum=np.array(momenta)[None, :])
    poly = characteristic_polynomial(rule, model).at(np.array(rates)[:, None])
    return spectral_radius(poly.normalized().dense()) < 1


def _symbolic_difference(a: str, b: str, tau: int):
    """Derived polynomial of rule ``a`` minus that of ``b`` (sympy, symbols m, lr, λ)."""
    import sympy

    from stability.dynamics.symbolic import LR, rule_polynomial
    from stability.quadratic import QuadraticModel
    from stability.rules.registry import get_spec

    m, lam = sympy.symbols("m lam", positive=True)
    model = QuadraticModel(lam)
    polys = []
    for name in (a, b):
        spec = get_spec(name)
        params = {p.name: p.default for p in spec.params if p.name != "lam"}
        params = {k: sympy.nsimplify(v) if isinstance(v, float) else v for k, v in params.items()}
        params.update(tau=tau, momentum=m)
        poly = rule_polynomial(spec.builder(**params), model, LR)
        polys.append(sympy.nsimplify(poly, rational=True))  # the engine's constants 0.0, 1.0
    return sympy.factor(sympy.expand(polys[0] - polys[1]))


def _geometric_mean_gain(ratio) -> float:
    """exp(mean log ratio) − 1 in %: the shift of the boundary on Fig. 6's log-ηλ axis."""
    return float(relative_change(np.exp(np.mean(np.log(ratio))), 1.0))


def nesterov_equals_sc(delays=(1, 2, 3), momenta=MOMENTA) -> Claim:
    differences = {d: _symbolic_difference("nesterov", "sc", d) for d in delays}
    gaps = {}
    for d in delays:
        a, b = _max_lr("nesterov", d, momenta), _max_lr("sc", d, momenta)
        gaps[str(d)] = float(np.max(np.abs(a - b) / b))
    equal_at_one = differences.get(1) == 0
    differ_above = all(differences[d] != 0 for d in delays if d > 1)
    larger = ", ".join(str(d) for d in delays if d > 1)
    return Claim(
        id="nesterov-equals-sc",
        source="Kosson Sec. 3.4 / Fig. 6 caption",
        statement="at delay D = 1 delayed Nesterov momentum and Spike Compensation SC_D have "
        "the same characteristic polynomial (exact, sympy, symbolic m, lr, λ); for D = "
        f"{larger} they differ",
        direction="identical polynomials at D = 1, different ones for larger D",
        scope=f"D ∈ {{{', '.join(map(str, delays))}}}, symbolic m, lr, λ",
        direction_holds=bool(equal_at_one and differ_above),
        size=Size(
            100.0 * gaps["1"],
            "%",
            f"the largest relative difference of the max stable ηλ at D = 1 over {len(momenta)} "
            "momenta",
        ),
        numbers={
            "polynomial_difference": {str(d): str(v) for d, v in differences.items()},
            "max_relative_max_lr_difference": gaps,
        },
    )


def delay_shrinks_region(momenta=MOMENTA) -> Claim:
    m = np.array(momenta)
    ratio = _max_lr("momentum", 1, m) / _max_lr("momentum", 0, m)
    at = {f"{x:g}": float(np.interp(x, m, ratio)) for x in (0.0, 0.5, 0.9, m[-1])}
    return Claim(
        id="delay-shrinks-region",
        source="Kosson Sec. 3.4 / Fig. 6",
        statement="the region of stability is significantly reduced by the delay, especially "
        f"for large momentum values: GDM's max stable ηλ at D = 1 against D = 0 over "
        f"m ∈ [0, {m[-1]:g}] ({len(m)} values)",
        direction="GDM's max stable ηλ is smaller at D = 1 than at D = 0 for every m, and the "
        "reduction grows with m",
        scope=f"m ∈ [0, {m[-1]:g}], D = 1 against D = 0",
        direction_holds=bool(np.all(ratio < 1) and np.all(np.diff(ratio) < 0)),
        size=Size(
            float(relative_change(np.max(ratio), 1.0)),
            "%",
            "the smallest change of the max stable ηλ over m (at m = 0)",
            Qualifier("significantly"),
        ),
        numbers={"ratio_at_momentum": at},
    )


def _crossover(name: str, base: str, tau: int, m, ratio) -> float | None:
    """The momentum where ``name``'s max ηλ first exceeds ``base``'s (root of ratio − 1)."""
    roots = crossings(lambda x: _ratio(name, base, tau, x) - 1.0, m, ratio - 1.0)
    return roots[0] if roots else None


def compensation_high_momentum(momenta=MOMENTA, low: float = HIGH_MOMENTUM) -> Claim:
    m = np.array(momenta)
    base = _max_lr("momentum", 1, m)
    high = m >= low
    ratios = {name: _max_lr(name, 1, m) / base for name in ("sc", "lwp", "lwp+sc")}
    worst = min(float(np.min(r[high])) for r in ratios.values())
    return Claim(
        id="compensation-high-momentum",
        source="Kosson Sec. 3.4 / Fig. 6",
        statement="the compensation methods (SC_D, LWP_D, LWP_D + SC_D) counteract the delay, "
        f"allowing larger learning rates for high momentum values (read as m ∈ [{low:g}, "
        f"{m[-1]:g}]), D = 1",
        direction="each method's max stable ηλ is above GDM's at every high momentum",
        scope=f"m ∈ [{low:g}, {m[-1]:g}], D = 1",
        direction_holds=bool(all(np.all(r[high] > 1) for r in ratios.values())),
        size=Size(
            float(relative_change(worst, 1.0)),
            "%",
            "the smallest gain of the max stable ηλ over GDM's (methods and high momenta)",
        ),
        numbers={
            "momentum_where_it_starts": {
                name: _crossover(name, "momentum", 1, m, r) for name, r in ratios.items()
            },
            "ratio_at_momentum_0.99": {
                name: float(np.interp(0.99, m, r)) for name, r in ratios.items()
            },
        },
    )


def sc_enlarges_region(
    momenta=MOMENTA, rates=REGION_RATES, region_momenta=REGION_MOMENTA, tau: int = 1
) -> Claim:
    m = np.array(momenta)
    ratio = _max_lr("sc", tau, m) / _max_lr("momentum", tau, m)
    positive = m > 0
    base = _stable_region("momentum", tau, rates, region_momenta)
    sc = _stable_region("sc", tau, rates, region_momenta)
    lost = base & ~sc
    low = int(np.argmin(np.where(positive, ratio, np.inf)))
    return Claim(
        id="sc-enlarges-region",
        source="Kosson Sec. 3.4 / Fig. 6",
        statement=f"SC_D strictly increases the region of stability: at delay {tau}, SC_D's max "
        f"stable ηλ exceeds delayed momentum's for every m ∈ (0, {m.max():g}] "
        f"({positive.sum()} values), and on Fig. 6's (ηλ, m) grid ({len(rates)} log-spaced ηλ "
        f"in [{min(rates):g}, {max(rates):g}] × {len(region_momenta)} m) every point stable "
        "for momentum is stable for SC_D, and some are stable only for SC_D",
        direction="SC_D's region contains GDM's and is larger",
        scope=f"m ∈ [0, {m.max():g}], ηλ ∈ [{min(rates):g}, {max(rates):g}], D = {tau}",
        direction_holds=bool(np.all(ratio[positive] > 1) and not lost.any() and (sc & ~base).any()),
        size=Size(
            _geometric_mean_gain(ratio),
            "%",
            "the geometric-mean gain of the max stable ηλ over m (the boundary's shift on "
            "Fig. 6's log-ηλ axis)",
        ),
        numbers={
            "min_ratio": float(ratio[low]),
            "min_ratio_at_momentum": float(m[low]),
            "ratio_at_momentum_0": float(ratio[0]) if m[0] == 0 else None,
            "max_ratio": float(np.max(ratio)),
            "not_larger_on": intervals(m[positive], ratio[positive] <= 1),
            "grid_points_stable_only_for_momentum": int(lost.sum()),
            "grid_points_stable_only_for_sc": int((sc & ~base).sum()),
        },
    )


SLIGHT = 0.9
"""A ratio of max stable ηλ ≥ 0.9 is a slight decrease ("slightly": at most 10 %)."""


def lwp_shrinks_small_momentum(momenta=MOMENTA, tau: int = 1) -> Claim:
    m = np.array(momenta)
    base = _max_lr("momentum", tau, m)
    numbers, shapes, slight = {}, [], []
    for name in ("lwp", "lwp+sc"):
        ratio = _max_lr(name, tau, m) / base
        m_c = _crossover(name, "momentum", tau, m, ratio)
        # the claim's shape: a smaller max ηλ exactly on [0, m_c), a larger one above
        shapes.append(
            m_c is not None and bool(np.all(ratio[m < m_c] < 1) and np.all(ratio[m > m_c] > 1))
        )
        roots = crossings(
            lambda x, n=name: _ratio(n, "momentum", tau, x) - SLIGHT, m, ratio - SLIGHT
        )
        slight.append(roots[-1] if roots and m_c is not None and roots[-1] < m_c else None)
        low = int(np.argmin(ratio))
        numbers[name] = {
            "shrinks_on": intervals(m, ratio < 1),
            "momentum_where_it_stops_shrinking": m_c,
            "momentum_where_the_decrease_is_slight": slight[-1],
            "min_ratio": float(ratio[low]),
            "min_ratio_at_momentum": float(m[low]),
            "ratio_at_momentum_0.9": float(np.interp(0.9, m, ratio)),
        }
    ends = [numbers[n]["momentum_where_it_stops_shrinking"] for n in numbers]
    worst = min(numbers[n]["min_ratio"] for n in numbers)
    part = None
    if all(shapes) and None not in slight and max(slight) < max(ends):
        # no method decreases by more than 10 % there, and at least one decreases
        part = Range("momentum", max(slight), max(ends))
    return Claim(
        id="lwp-shrinks-small-momentum",
        source="Kosson Sec. 3.4 / Fig. 6",
        statement=f"at delay {tau}, LWP_D and LWP_D^w + SC_D slightly decrease the max stable ηλ "
        "against delayed momentum for small m (below some m_c, refined by root-finding) and "
        f"increase it above (m ∈ [0, {m.max():g}], {len(m)} values)",
        direction="LWP_D's and LWP_D + SC_D's max stable ηλ is below GDM's exactly for m < m_c",
        scope=f"m ∈ [0, {m.max():g}], D = {tau}",
        direction_holds=bool(all(shapes)),
        size=Size(
            float(relative_change(worst, 1.0)),
            "%",
            "the largest decrease of the max stable ηλ below m_c (at m = 0)",
            Qualifier("slightly"),
        ),
        range_where_it_holds=part,
        numbers=numbers,
    )


def nesterov_marginal(delays=LARGER_DELAYS, momenta=MOMENTA) -> Claim:
    m = np.array(momenta)
    gains, means = {}, {}
    for d in delays:
        ratio = _max_lr("nesterov", d, m) / _max_lr("momentum", d, m)
        gains[d] = ratio
        means[str(d)] = _geometric_mean_gain(ratio)
    never_below = all(np.all(r >= 1 - 1e-9) for r in gains.values())
    largest = {d: float(relative_change(np.max(r), 1.0)) for d, r in gains.items()}
    marginal = Qualifier("marginally")
    # "marginally" holds from the smallest D from which every larger D is marginal too
    holding = [d for d in delays if all(marginal.admits(largest[e]) for e in delays if e >= d)]
    worst = max(largest.values())
    part = None
    if never_below and holding and not marginal.admits(worst):
        part = Range("tau", float(holding[0]), float(delays[-1]))
    return Claim(
        id="nesterov-marginal-larger-delays",
        source="Kosson Fig. 6 caption",
        statement="for larger delays Nesterov is only marginally better than GDM: the max "
        f"stable ηλ of delayed Nesterov against delayed GDM for D = {delays[0]} … {delays[-1]}, "
        f"m ∈ [0, {m[-1]:g}] ({len(m)} values)",
        direction="Nesterov's max stable ηλ is at least GDM's at every (D, m)",
        scope=f"D = {delays[0]} … {delays[-1]}, m ∈ [0, {m[-1]:g}]",
        direction_holds=never_below,
        size=Size(
            worst,
            "%",
            "the largest gain of the max stable ηλ over GDM's (over m and D; at the smallest D, "
            "m → 1)",
            marginal,
        ),
        range_where_it_holds=part,
        numbers={
            "largest_gain_percent_per_delay": {str(d): v for d, v in largest.items()},
            "geometric_mean_gain_percent_per_delay": means,
        },
    )


CLAIMS = {
    "nesterov-equals-sc": nesterov_equals_sc,
    "delay-shrinks-region": delay_shrinks_region,
    "compensation-high-momentum": compensation_high_momentum,
    "sc-enlarges-region": sc_enlarges_region,
    "lwp-shrinks-small-momentum": lwp_shrinks_small_momentum,
    "nesterov-marginal-larger-delays": nesterov_marginal,
}

QUICK_MOMENTA = tuple(np.linspace(0.0, 0.99, 100))
QUICK = {
    "nesterov-equals-sc": {"delays": (1, 2), "momenta": QUICK_MOMENTA},
    "delay-shrinks-region": {"momenta": QUICK_MOMENTA},
    "compensation-high-momentum": {"momenta": QUICK_MOMENTA},
    "sc-enlarges-region": {
        "momenta": QUICK_MOMENTA,
        "rates": tuple(np.geomspace(1e-3, 10.0, 61)),
        "region_momenta": tuple(np.linspace(0.0, 0.99, 34)),
    },
    "lwp-shrinks-small-momentum": {"momenta": QUICK_MOMENTA},
    "nesterov-marginal-larger-delays": {"delays": (2, 4, 8, 12, 16), "momenta": QUICK_MOMENTA},
}
