r"""Is the network at a minimum?  The gradient and the negative curvature, relative to λ₁.

The max lr of `stability.nets.public.net_max_lr` is that of the linearisation at the model's
weights w: e_{t+1} = (rule's step on H)·e_t with H = ∇²f(w).  That is the dynamics of the
run a user will make only near a minimum, where the gradient vanishes and H ⪰ 0; elsewhere
the gradient moves the weights and the sharpness changes under them — progressive sharpening
or its reverse (Cohen et al. 2021, "Gradient descent on neural networks typically occurs at
the edge of stability") — and a run can stay stable far above the predicted max lr (issue 26:
an iris MLP after 300 Adam steps, predicted 0.0069, trained stably at 0.1).

Two numbers, both relative to the curvature scale λ₁ so that they do not depend on the scale
of the loss (nor on the units of the parameters):

* ``gradient_scale`` = ‖∇f(w)‖ / (λ₁·‖w‖).  No curvature exceeds λ₁, so the minimum of the
  local quadratic model along −∇f lies at least ‖∇f‖/λ₁ away: this is that distance as a
  fraction of ‖w‖.  Above `GRADIENT_TOL` = 1e-5 the weights are not at a minimum.
* ``negative_ratio`` = λ_min/λ₁, the most negative eigenvalue found by Lanczos at the bottom
  of the spectrum (`stability.nets.curvature`), 0 when none is below −1e-9·λ₁.  Below
  −`NEGATIVE_TOL` = −1e-4 the point is a saddle, not a minimum.

Measured (``stability net max-lr``): a model fitted with full-batch L-BFGS (diabetes linear
model: 2.9e-11, no negative eigenvalue; digits MLP after 2,000 iterations: 7.7e-7, none) is
well inside both; small classifiers after 100-1,000 Adam steps from their initialisation
(iris, wine) have gradient_scale 3.8e-4 … 9.6e-3 and negative_ratio −1.2e-3 … −1.7e-2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.nets.problem import NetProblem
from stability.result import output

GRADIENT_TOL = 1e-5
"""‖∇f‖/(λ₁‖w‖) above which the weights are not at a minimum (module doc)."""

NEGATIVE_TOL = 1e-4
"""λ_min/λ₁ below −NEGATIVE_TOL: negative curvature beyond rounding noise (module doc)."""

WHAT_INSTEAD = (
    "the max lr describes the linearisation at these weights, not a run from them (the "
    "gradient moves the weights and the sharpness changes); for the run, measure the edge of "
    "stability under delay (`stability net train --sharpness-every K` tracks λ₁ against the "
    "predicted edge) or bring the model to a minimum first (e.g. full-batch L-BFGS, "
    "`stability.nets.fitting.near_minimum`)"
)


@dataclass(frozen=True)
class Nearness:
    """How near a minimum the weights are (module doc); ``warning`` None when near one;
    ``unknown`` says why ``negative_ratio`` is None after a search (else None)."""

    gradient_norm: float
    gradient_scale: float | None
    negative_ratio: float | None
    warning: str | None
    unknown: str | None = None

    @property
    def saddle(self) -> bool:
        """The most negative eigenvalue found is below −`NEGATIVE_TOL`·λ₁."""
        return self.negative_ratio is not None and self.negative_ratio < -NEGATIVE_TOL


NEARNESS_DOCS = {
    "gradient_norm": "‖∇f(w)‖ at the weights analysed (full batch; docs/nets.md, not at a minimum)",
    "gradient_scale": "‖∇f‖/(λ₁·‖w‖): the distance to the local model's minimum (≥ ‖∇f‖/λ₁) as a "
    "fraction of ‖w‖; > 1e-5: not at a minimum (stability.nets.minimum)",
    "negative_ratio": "λ_min/λ₁ of the most negative eigenvalue found (0: none; null: not "
    "searched, or a search that did not converge and found none); < −1e-4: a saddle",
}
"""The meaning of each field of `Nearness` in the results that report it."""


def nearness_output(name: str) -> Any:
    """The result field ``name`` of `Nearness` (`NEARNESS_DOCS`), declared once for every
    network result that reports how near a minimum its weights are."""
    return output(NEARNESS_DOCS[name], default=None)


def nearness(
    problem: NetProblem,
    lam_max: float,
    negative_eigenvalues: np.ndarray | None,
    gradient_norm: float | None = None,
    complete: bool = True,
) -> Nearness:
    """`Nearness` at the problem's weights from λ₁ and the negative eigenvalues found
    (``None``: the bottom of the spectrum was not searched; ``complete``: whether that search
    converged, `stability.nets.curvature.negative_end` — one that did not and found none leaves
    ``negative_ratio`` None, unknown, not 0); ``gradient_norm``: ‖∇f(w)‖ if already known
    (else computed)."""
    w = problem.w_star
    g = float(problem.gradient(w).detach().norm()) if gradient_norm is None else gradient_norm
    scale = float(lam_max) * float(w.detach().norm())
    gradient_scale = g / scale if scale > 0 else None
    negative_ratio = unknown = None
    if negative_eigenvalues is not None and lam_max > 0:
        low = np.asarray(negative_eigenvalues, dtype=float)
        if low.size:
            negative_ratio = float(min(low.min(), 0.0) / lam_max)
        elif complete:
            negative_ratio = 0.0
        else:
            unknown = (
                "negative_ratio is unknown: Lanczos at the bottom of the spectrum did not "
                "converge in its restarts (near zero a network's spectrum is dense), so a saddle "
                "is not excluded"
            )
    reasons = []
    if lam_max < 0:
        reasons.append("λ₁ < 0: no positive curvature")
    elif lam_max == 0:
        reasons.append(
            "λ₁ = 0: the Hessian vanishes at these weights in the problem's dtype (e.g. a loss "
            "saturated at exactly 0)"
        )
    elif gradient_scale is not None and gradient_scale > GRADIENT_TOL:
        reasons.append(
            f"‖∇f‖ = {g:.3g}: the minimum is at least ‖∇f‖/λ₁ = {g / lam_max:.3g} away, "
            f"{gradient_scale:.2g} of ‖w‖ (> {GRADIENT_TOL:g})"
        )
    if negative_ratio is not None and negative_ratio < -NEGATIVE_TOL:
        reasons.append(f"λ_min = {negative_ratio:.2g}·λ₁ (< −{NEGATIVE_TOL:g}·λ₁: a saddle)")
    warning = None
    if reasons:
        warning = (
            f"not at a minimum: {'; '.join(reasons)}. {WHAT_INSTEAD[0].upper()}{WHAT_INSTEAD[1:]}"
        )
    return Nearness(g, gradient_scale, negative_ratio, warning, unknown)


def nearness_searched(
    problem: NetProblem, lam_max: float, search, always: bool = False
) -> tuple[Nearness, np.ndarray | None]:
    """(`Nearness`, the negative eigenvalues or ``None``), calling ``search()`` — (the
    negative eigenvalues, whether the search is complete): the search of the bottom of the
    spectrum, an eigen-solve that can cost more than the top one — only when
    its answer can change the verdict: when the gradient alone does not already show that the
    weights are not at a minimum (or ``always``).  Without the search the warning, if any, is
    the gradient's, and true; ``negative_ratio`` is then ``None`` (not searched)."""
    first = nearness(problem, lam_max, None)
    if first.warning is not None and not always:
        return first, None
    negatives, complete = search()
    return nearness(problem, lam_max, negatives, first.gradient_norm, complete), negatives


SADDLE_BRACKET_BELOW = 0.95
"""A measured bracket whose unstable end lies below this × the predicted max lr disagrees
with the prediction (the SGD acceptance's 5 %)."""


def saddle_measure_warning(
    near: Nearness, lam_max: float, steps: int, max_lr: float, bracket: list, flip=None
) -> str | None:
    """What the measured bracket of `stability.nets.bracket` means when it lies below the
    prediction at a saddle whose directions the runs could not all turn into minima (None
    otherwise: no negative curvature beyond `NEGATIVE_TOL`, a complete ``flip`` —
    `stability.nets.saddle_flip.SaddleFlip` — or a bracket that agrees).  The measurement's
    runs are tilted so that w is a stationary point of their gradient; along a direction of
    curvature λ_min < 0 left unflipped the linearisation then grows at every lr (a root
    ω ≈ 1 + lr·|λ_min|/(1 − momentum) > 1), so such a bracket is the lr at which that growth
    first reaches the protocol's threshold within its ``steps`` steps — it falls as the steps
    grow — and not a stability threshold."""
    agrees = bracket[1] is None or bracket[1] >= SADDLE_BRACKET_BELOW * max_lr
    if not near.saddle or (flip is not None and flip.complete) or agrees:
        return None
    found = (
        "none was found to flip"
        if flip is None
        else f"{flip.eigenvalues.size} were flipped but the search left "
        + ("an unconverged bottom" if flip.left is None else f"λ = {flip.left:.3g}")
    )
    return (
        f"measured_bracket below the prediction at a saddle (λ_min = "
        f"{near.negative_ratio * lam_max:.3g}; of its negative directions {found}): the "
        "measurement's runs grow along the negative curvature at every lr, so the bracket is "
        f"where that growth first shows within {steps} steps (it falls as --measure-steps "
        "grows), not a stability threshold; bring the model to a minimum to measure the max lr"
    )


__all__ = [
    "GRADIENT_TOL",
    "NEGATIVE_TOL",
    "SADDLE_BRACKET_BELOW",
    "Nearness",
    "nearness",
    "nearness_searched",
    "saddle_measure_warning",
]
