"""Symbolic characteristic polynomials: the derivation of `stability.dynamics.linear` in sympy.

The rule's step is run on sympy symbols (its arithmetic is type-generic), so the polynomial
comes out exactly, as an expression in ω, ``lr``, ``lam`` and the rule's real parameters;
delays stay integers.  Used by ``stability poly --symbolic`` and by the symbolic tests that
check the papers' closed forms and identities exactly.
"""

from __future__ import annotations

from typing import Any

import sympy

from stability.dynamics.linear import linearize
from stability.polynomial import SparsePoly
from stability.quadratic import QuadraticModel
from stability.rules.spec import MODEL_PARAMS, RuleSpec

OMEGA = sympy.Symbol("omega")
LR = sympy.Symbol("lr", positive=True)


def symbols_for(spec: RuleSpec, **values: Any) -> dict[str, Any]:
    """Parameter values with every real parameter replaced by a sympy symbol of its name.

    Delays, booleans and optional parameters left unset keep their (integer/None) values.  A
    real parameter that was not given and is zero by default stays 0 when the rule refuses it
    as a symbol (it is switched off there, e.g. PipeOptim's weight decay for plain Adam).
    """
    resolved = spec.resolve(**values)
    out = {}
    for p in spec.params:
        value = resolved[p.name]
        if p.kind == "real" and value is not None:
            positive = p.low is not None and p.low >= 0
            value = sympy.Symbol(p.name, positive=True) if positive else sympy.Symbol(p.name)
        out[p.name] = value
    try:
        _build(spec, out)
    except ValueError:
        off = {k: resolved[k] for k in spec.param_names if k not in values and resolved[k] == 0}
        out.update(off)
    return out


def _build(spec: RuleSpec, params: dict[str, Any]):
    return spec.builder(**{k: v for k, v in params.items() if k not in MODEL_PARAMS})


def to_sympy(poly: SparsePoly, omega: sympy.Symbol = OMEGA) -> sympy.Expr:
    """Σ c_k ω^k as a sympy expression (exponents may be negative: Laurent)."""
    return sympy.Add(*(sympy.sympify(c) * omega**k for k, c in poly.terms.items()))


def symbolic_polynomial(spec: RuleSpec, **values: Any) -> sympy.Expr:
    """The characteristic polynomial of a registered rule, exact, in sympy symbols.

    Real parameters become symbols (see `symbols_for`); the polynomial is monic in ω with
    zero roots divided out, like `stability.dynamics.linear.characteristic_polynomial`.
    """
    params = symbols_for(spec, **values)
    model = QuadraticModel(**{k: params[k] for k in MODEL_PARAMS if k in params})
    rule = _build(spec, params)
    poly = linearize(rule, model, LR).polynomial()
    # the engine's fixed constants (1.0, 0.0) and γ* = 1 − 2/(τf−τb+1) are rationals
    return sympy.expand(sympy.nsimplify(to_sympy(poly), rational=True))


def rule_polynomial(rule, model: QuadraticModel, lr: Any = LR) -> sympy.Expr:
    """Exact polynomial of an already-built rule whose parameters are sympy or rational."""
    return sympy.expand(to_sympy(linearize(rule, model, lr).polynomial()))
