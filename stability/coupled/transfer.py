r"""Open-loop transfer functions of one pipeline stage, read off the rule's own step.

A stage runs a rule (`stability.rules.base`) on its block of parameters; the gradient g it
receives is an *input* computed elsewhere (by the coupled oracle, `stability.coupled.system`).  With
the oracle cut away, the rule's step is linear in the past state and in g:

    x_{t+1} = Σ_{k=0}^{L} A_k·x_{t−k} + b·g_t,          x_t = (w_t, v_t, δ_t, …)  (n variables)
    u_pass,t = Σ_k c_pass,k·x_{t−k}      (pass = forward, backward, recompute)

`stage_transfer` probes the rule for A_k (unit taps, g = 0), b (zero taps, g = 1) and the pass
rows c_k (unit taps through ``passes``), with the step size as the formal variable `LR`, as
`stability.dynamics.linear.linearize` does for the closed loop.  In the z-domain
(ω = one step ahead),
with Z(ω) = ω^{L+1}·I − Σ_k A_k·ω^{L−k} (n × n):

    X(ω) = ω^L·adj Z(ω)·b·G(ω) / d(ω),     d(ω) = det Z(ω)   (the stage's open-loop polynomial)
    U_pass(ω) = −lr·ñ_pass(ω)·G(ω) / d(ω),  ñ_pass = −Σ_k c_pass,k·ω^{L−k}·adj Z·b / lr
    W(ω) = lr·q(ω)·G(ω) / d(ω),             q = ω^L·(adj Z·b)_w / lr

(adj Z·b by Cramer's rule: component i is det Z with column i replaced by b).  For a scalar
oracle g = κ·u_pass the matrix determinant lemma gives the closed-loop characteristic
polynomial det(Z − κ·b·c̃) = d(ω) + lr·κ·ñ_pass(ω): with κ = λ this is the rule's polynomial on
the quadratic model, PipeMare eq. 3 / eq. 5 / App. B.4 and Kosson eq. 20-23 up to a factor ω^k
(checked for every registry rule in tests/test_coupled.py).  The coupled system of
`stability.coupled.system` is the matrix version: det[diag(d_j) + lr·Σ_pass H_pass·diag(ñ_pass,j)].

Accepted forms: d affine in lr (its lr-part, ``decay``, is AdamW's decoupled weight decay;
zero for the `DelayedMomentum` engine), q proportional to lr, and ñ proportional to lr (true
for every rule of the engine, including the velocity-form LWP whose taps carry lr) or with an
lr² part (``quadratic``: PipeOptim's AdamW prediction lr·s·ΔW over the denominator's factor
ω − c, c = 1 − lr·wd — `stability.coupled.quadratic_lr` solves those); checked per rule
instance, `ValueError` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stability.dynamics.linear import LR
from stability.polynomial import SparsePoly, polynomial_determinant
from stability.rules.base import Rule, UnitTap, taps_read

PASSES = ("forward", "backward", "recompute")
"""The three weights a gradient is computed from (PipeMare Sec. 2, App. D.1)."""


@dataclass(frozen=True)
class StageTransfer:
    """Open-loop transfer functions of one stage's rule (module doc), per unit step size.

    ``denominator`` d(ω); ``passes[name]`` ñ_name(ω) for name in `PASSES`; ``weights`` q(ω);
    ``decay`` the open-loop terms proportional to lr (AdamW's decoupled weight decay
    w ← w − lr·wd·w; zero for most rules), so that the open-loop polynomial is d + lr·decay.
    ``quadratic[name]``: the lr² part ñ²_name of a pass (empty for dynamics affine in lr),
    which then moves by −(lr·ñ + lr²·ñ²)/d·G.
    All are `SparsePoly` in ω with float coefficients, written over the common
    denominator d: on the unit circle a gradient G(ω) moves the pass weights by
    −lr·ñ(ω)/d(ω)·G(ω) and the weights by lr·q(ω)/d(ω)·G(ω) (to first order in lr·decay).
    """

    denominator: SparsePoly
    passes: dict[str, SparsePoly]
    weights: SparsePoly
    decay: SparsePoly
    quadratic: dict[str, SparsePoly] = field(default_factory=dict)

    @property
    def is_affine(self) -> bool:
        """No lr² terms: the stage's closed loop is affine in lr."""
        return not any(p.terms for p in self.quadratic.values())

    def scaled(self, factor: float) -> StageTransfer:
        """The same stage with its step size multiplied by ``factor`` (T1, PipeMare eq. 4)."""
        return StageTransfer(
            self.denominator,
            {k: p * factor for k, p in self.passes.items()},
            self.weights * factor,
            self.decay * factor,
            {k: p * factor**2 for k, p in self.quadratic.items()},
        )

    def frozen_at(self, lr0: float) -> StageTransfer:
        """The affine stage whose pass terms are lr·(ñ + lr0·ñ²): equal to this one at lr = lr0
        (`stability.coupled.quadratic_lr`)."""
        passes = dict(self.passes)
        for k, p in self.quadratic.items():
            passes[k] = (passes[k] + p * float(lr0)).cleaned()
        return StageTransfer(self.denominator, passes, self.weights, self.decay)

    def closed_loop(self, lr: Any, gains: dict[str, Any]) -> SparsePoly:
        """d(ω) + lr·(decay(ω) + Σ κ_pass·(ñ_pass(ω) + lr·ñ²_pass(ω))): the stage alone under
        g = Σ κ_pass·u_pass."""
        total = self.denominator + self.decay * lr
        for name, kappa in gains.items():
            total = total + self.passes[name] * (lr * kappa)
            if name in self.quadratic:
                total = total + self.quadratic[name] * (lr * lr * kappa)
        return total.cleaned()

    def integrator_roots(self) -> int:
        """Multiplicity of the open-loop root ω = 1 (1 for every rule with w ← w − lr·(…))."""
        p = self.denominator.normalized()
        count = 0
        while p.terms and abs(p(1.0)) <= 1e-9 * sum(abs(c) for c in p.terms.values()):
            count += 1
            p = p.derivative()
        return count

    def open_loop_roots(self) -> np.ndarray:
        """Nonzero roots of d (the stage's modes without a gradient): 1, m, γ, … ."""
        from stability.spectrum import roots

        dense = self.denominator.normalized().dense()
        return roots(dense)


def _lr_part(poly: SparsePoly, j: int) -> SparsePoly:
    """The coefficient of lr^j of a polynomial whose coefficients are polynomials in lr."""
    terms = {}
    for k, c in poly.cleaned().terms.items():
        value = c.terms.get(j, 0) if isinstance(c, SparsePoly) else (c if j == 0 else 0)
        if not (isinstance(value, (int, float)) and value == 0):
            terms[k] = float(value)
    return SparsePoly(terms, {k: abs(v) for k, v in terms.items()}).cleaned()


def _lr_degrees(poly: SparsePoly) -> set[int]:
    """The powers of lr in ``poly``, less those whose coefficients are all below float64's
    resolution of the largest coefficient (e.g. lr·wd with wd = 1e-212: 1 − lr·wd rounds to 1,
    and the probed closed-loop polynomial, `dynamics.linear.characteristic_polynomial`, has
    no such term either)."""
    size: dict[int, float] = {}
    for c in poly.cleaned().terms.values():
        parts = c.cleaned().terms if isinstance(c, SparsePoly) else {0: c}
        for j, value in parts.items():
            size[j] = max(size.get(j, 0.0), abs(float(value)))
    scale = max(size.values(), default=0.0)
    return {j for j, v in size.items() if v > np.finfo(float).eps * scale}


def _affine(poly: SparsePoly, degrees: set[int], what: str, rule: Rule) -> SparsePoly:
    extra = _lr_degrees(poly) - degrees
    if extra:
        raise ValueError(
            f"{what} of rule {type(rule).__name__} has lr^{sorted(extra)} terms: the coupled "
            f"analysis needs the gradient entering with one factor lr (or lr and lr²)"
        )
    return _lr_part(poly, 1)


def stage_transfer(rule: Rule) -> StageTransfer:
    """Probe ``rule`` with the gradient cut away and return its transfer functions.

    Nothing about the rule is typed by hand: A_k, b and the pass rows come from calling
    ``rule.passes`` and ``rule.update`` on unit probes (module doc).  Time-invariant rules
    only (periodic rules have no single transfer function).
    """
    if getattr(rule, "period", 1) != 1:
        raise ValueError("the coupled analysis needs time-invariant rules (period 1)")
    variables = tuple(rule.variables)
    n = len(variables)
    taps = sorted(taps_read(rule, LR))
    depth = max(lag for _, lag in taps)
    top = depth + 1

    def z_entry(i: int, j: int) -> SparsePoly:
        return SparsePoly.monomial(top, 1) if i == j else SparsePoly({}, {})

    Z = [[z_entry(i, j) for j in range(n)] for i in range(n)]
    rows = {name: [SparsePoly({}, {}) for _ in range(n)] for name in PASSES}
    for var, lag in taps:
        j = variables.index(var)
        probe = UnitTap((var, lag))
        new = rule.update(probe, 0, LR)
        for i, name in enumerate(variables):
            Z[i][j] = Z[i][j] - SparsePoly.monomial(top - 1 - lag, new[name])
        p = rule.passes(probe, LR)
        for name, value in zip(PASSES, (p.forward, p.backward, p.recompute), strict=True):
            rows[name][j] = rows[name][j] + SparsePoly.monomial(depth - lag, value)
    b_new = rule.update(UnitTap(None), 1, LR)
    b = [SparsePoly.monomial(0, b_new[name]) for name in variables]

    d = polynomial_determinant(Z)
    adj_b = [
        polynomial_determinant([[*r[:i], b[k], *r[i + 1 :]] for k, r in enumerate(Z)])
        for i in range(n)
    ]  # Cramer: column i of Z replaced by b
    passes, quadratic = {}, {}
    for name in PASSES:
        numerator = SparsePoly({}, {})
        for j in range(n):
            numerator = numerator - rows[name][j] * adj_b[j]
        passes[name] = _affine(numerator, {1, 2}, f"the {name} pass", rule)
        if 2 in _lr_degrees(numerator):
            quadratic[name] = _lr_part(numerator, 2)
    weights = _affine(adj_b[variables.index("w")].shift(depth), {1}, "the weight response", rule)
    extra = _lr_degrees(d) - {0, 1}
    if extra:
        raise ValueError(
            f"the open-loop polynomial of rule {type(rule).__name__} has lr^{sorted(extra)} "
            "terms: the coupled analysis needs dynamics affine in lr"
        )
    return StageTransfer(_lr_part(d, 0), passes, weights, _lr_part(d, 1), quadratic)


__all__ = ["PASSES", "StageTransfer", "stage_transfer"]
