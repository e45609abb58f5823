"""Kosson et al.'s claims about the convex quadratic at delay one (Sec. 3.4, Fig. 6).

The stability region of Fig. 6 is the set of (ηλ, m) whose dominant root is inside the unit
circle.  For each m it is compared through the max stable ηλ (exact, boundary locus over a
fine momentum grid) and, as a set, on a (log ηλ, m) grid of spectral radii — the second also
catches stable islands above the first crossing, which the max ηλ alone would miss.
"""

from __future__ import annotations

import numpy as np

from stability.claims.claim import Claim, intervals

MOMENTA = tuple(np.linspace(0.0, 0.999, 1000))
"""Fine momentum grid for the max stable ηλ (λ = 1)."""

REGION_RATES = tuple(np.geomspace(1e-3, 10.0, 241))
REGION_MOMENTA = tuple(np.linspace(0.0, 0.99, 100))
"""The (ηλ, m) grid of Fig. 6's heatmaps (ηλ log-spaced)."""


def _max_lr(name: str, tau: int, momenta) -> np.ndarray:
    from stability.analysis.boundary import max_lr_grid
    from stability.rules.registry import build_rule

    rule, model = build_rule(name, tau=tau, momentum=np.array(momenta))
    return max_lr_grid(rule, model)[0]


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


def nesterov_equals_sc(delays=(1, 2, 3), momenta=MOMENTA) -> Claim:
    differences = {d: _symbolic_difference("nesterov", "sc", d) for d in delays}
    gaps = {}
    for d in delays:
        a, b = _max_lr("nesterov", d, momenta), _max_lr("sc", d, momenta)
        gaps[str(d)] = float(np.max(np.abs(a - b) / b))
    equal_at_one = differences.get(1) == 0
    differ_above = all(differences[d] != 0 for d in delays if d > 1)
    return Claim(
        id="nesterov-equals-sc",
        source="Kosson Sec. 3.4 / Fig. 6 caption",
        statement="at delay D = 1 delayed Nesterov momentum and Spike Compensation SC_D have "
        "the same characteristic polynomial (exact, sympy, symbolic m, lr, λ); for D = "
        f"{', '.join(str(d) for d in delays if d > 1)} they differ",
        holds=bool(equal_at_one and differ_above),
        numbers={
            "polynomial_difference": {str(d): str(v) for d, v in differences.items()},
            "max_relative_max_lr_difference": gaps,
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
        statement=f"at delay {tau}, SC_D's max stable ηλ exceeds delayed momentum's for every "
        f"m ∈ (0, {m.max():g}] ({positive.sum()} values), and on Fig. 6's (ηλ, m) grid "
        f"({len(rates)} log-spaced ηλ in [{min(rates):g}, {max(rates):g}] × "
        f"{len(region_momenta)} m) "
        "every point stable for momentum is stable for SC_D, and some are stable only for SC_D",
        holds=bool(np.all(ratio[positive] > 1) and not lost.any() and (sc & ~base).any()),
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


def lwp_shrinks_small_momentum(momenta=MOMENTA, tau: int = 1) -> Claim:
    m = np.array(momenta)
    base = _max_lr("momentum", tau, m)
    numbers, verdicts = {}, []
    for name in ("lwp", "lwp+sc"):
        ratio = _max_lr(name, tau, m) / base
        shrink = ratio < 1
        runs = intervals(m, shrink)
        # the claim's shape: a smaller max ηλ exactly on [0, m_c), a larger one above
        first_false = int(np.argmin(shrink)) if not shrink.all() else len(m)
        shape = bool(shrink[0] and not shrink[first_false:].any() and first_false < len(m))
        verdicts.append(shape)
        low = int(np.argmin(ratio))
        numbers[name] = {
            "shrinks_on": runs,
            "momentum_where_it_stops_shrinking": float(m[first_false]) if shape else None,
            "min_ratio": float(ratio[low]),
            "min_ratio_at_momentum": float(m[low]),
            "ratio_at_momentum_0.9": float(np.interp(0.9, m, ratio)),
        }
    return Claim(
        id="lwp-shrinks-small-momentum",
        source="Kosson Sec. 3.4 / Fig. 6",
        statement=f"at delay {tau}, LWP_D and LWP_D^w + SC_D have a smaller max stable ηλ "
        "than delayed momentum for small m and a larger one above some m_c "
        f"(m ∈ [0, {m.max():g}], {len(m)} values; how much smaller is reported)",
        holds=bool(all(verdicts)),
        numbers=numbers,
    )


CLAIMS = {
    "nesterov-equals-sc": nesterov_equals_sc,
    "sc-enlarges-region": sc_enlarges_region,
    "lwp-shrinks-small-momentum": lwp_shrinks_small_momentum,
}

QUICK_MOMENTA = tuple(np.linspace(0.0, 0.99, 100))
QUICK = {
    "nesterov-equals-sc": {"delays": (1, 2), "momenta": QUICK_MOMENTA},
    "sc-enlarges-region": {
        "momenta": QUICK_MOMENTA,
        "rates": tuple(np.geomspace(1e-3, 10.0, 61)),
        "region_momenta": tuple(np.linspace(0.0, 0.99, 34)),
    },
    "lwp-shrinks-small-momentum": {"momenta": QUICK_MOMENTA},
}
