"""Hypothesis strategies: random parameter points for any registered rule.

Ranges follow the papers' regimes (delays up to ``max_delay``, momentum in [0, 0.99], λ over
two decades, Δ and Φ of either sign); optional parameters are left to their defaults half the
time, so default-derived values (SC_D, LWP_D, γ*) are exercised too.
"""

from __future__ import annotations

from hypothesis import strategies as st

from stability.rules.registry import RULES

REAL_RANGES = {
    "lam": (0.05, 20.0),
    "momentum": (0.0, 0.99),
    "delta": (-5.0, 5.0),
    "phi": (-5.0, 5.0),
    "decay": (0.01, 0.99),
    "gamma": (0.0, 0.99),
    "sc_a": (0.0, 3.0),
    "sc_b": (0.0, 3.0),
    "sc_scale": (0.0, 3.0),
    "horizon": (0.0, 8.0),
    "horizon_scale": (0.0, 3.0),
    # seed systems (issue 6)
    "dampening": (0.0, 0.9),
    "beta1": (0.0, 0.99),
    "beta2": (0.9, 0.9999),
    "eps": (1e-10, 1e-6),
    "precond": (0.05, 20.0),
    "weight_decay": (0.0, 0.5),
    "stale_fraction": (0.0, 1.0),
    "quality": (0.0, 1.0),
    "dc_lambda": (0.0, 1.0),
    "workers": (1.0, 8.0),
    "hessian_estimate": (0.0, 5.0),
    "elastic": (0.0, 0.95),
    "shrink_factor": (0.8, 1.0),
    "delay_rate": (-5.0, 5.0),
}

INTEGER_RANGES = {
    "replicas": (1, 6),
    "sync_period": (1, 3),
    "stages": (1, 8),
    "microbatches": (1, 8),
}
"""Counts (integer parameters that are not delays), drawn in these ranges."""

PERIODIC = frozenset({"ea"})
"""Rules whose dynamics are periodic (Floquet): excluded unless asked for by name."""


def _real(name):
    lo, hi = REAL_RANGES[name]
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@st.composite
def rule_points(draw, names=None, max_delay: int = 6):
    """``(name, params)`` for a random rule of ``names`` (default: all time-invariant rules)."""
    name = draw(st.sampled_from(sorted(names or set(RULES) - PERIODIC)))
    spec = RULES[name]
    params = spec.param_names
    v: dict = {}
    if "tau" in params:
        v["tau"] = draw(st.integers(0, max_delay))
    if "tau_fwd" in params:
        needs_gap = name == "t2"
        tf = draw(st.integers(1 if needs_gap else 0, max_delay))
        tb = draw(st.integers(0, tf - 1 if needs_gap else tf))
        v["tau_fwd"], v["tau_bkwd"] = tf, tb
        if "tau_recomp" in params:
            v["tau_recomp"] = draw(st.integers(tb, tf))
    if "tau_max" in params and draw(st.booleans()):
        v["tau_max"] = draw(st.integers(v["tau"], max_delay + 2))
    for p in spec.params:
        if p.kind == "choice":
            v[p.name] = draw(st.sampled_from(p.choices))
        if p.kind == "delay" and p.name in INTEGER_RANGES:
            v[p.name] = draw(st.integers(*INTEGER_RANGES[p.name]))
        if p.kind != "real" or p.name in v:
            continue
        if p.default is None and draw(st.booleans()):
            continue  # leave optional parameters to their defaults half the time
        if p.name in INTEGER_RANGES:
            v[p.name] = draw(st.integers(*INTEGER_RANGES[p.name]))
        else:
            v[p.name] = draw(_real(p.name))
    if v.get("optimizer") not in (None, "adamw"):
        v.pop("weight_decay", None)  # decoupled decay is AdamW's
    if ("sc_a" in v) != ("sc_b" in v):  # given together or not at all
        v.pop("sc_a", None), v.pop("sc_b", None)
    if "decay" in v and "gamma" in v:
        del v["gamma"]
    if "horizon" in v:  # T given, or T = horizon_scale·D
        v.pop("horizon_scale", None)
    if "sc_a" in v:  # SC's coefficients given, or SC_D at D = sc_scale·τ
        v.pop("sc_scale", None)
    t2_on = "decay" in v or "gamma" in v
    if name == "recompute":
        if t2_on and v["tau_fwd"] == v["tau_bkwd"]:
            v.pop("decay", None), v.pop("gamma", None)
            t2_on = False
        if t2_on:
            v["t2_recompute"] = draw(st.booleans())
    return name, v
