r"""The adaptive edge of stability under delay: λ₁(P_t H_t) along a run of Adam/AdamW.

Full-batch Adam at a fixed lr raises the *preconditioned* sharpness λ₁(P_t H_t) — P_t the
optimizer's current 1/(√v̂_t + ε) — until the frozen-P linearisation is at its threshold and
then hovers there (Cohen et al. 2022, "Adaptive gradient methods at the edge of stability":
(2 + 2β1)/((1 − β1)·lr), 38/lr at β1 = 0.9, no delay).  With delays the predicted edge is

    λ_edge = max_lr(adam, delays; P = 1, λ = 1)/lr

(`stability.rules.adam`: the frozen-P polynomial; per-stage delays: the coupled edge along the
top eigenvector of P_t^{1/2}H_tP_t^{1/2}, as `stability.nets.sharpness` does for SGD; weight
decay from the flags).  `PreconditionedTracker` records λ₁(P_t H_t) every K steps with the run's
own P_t (`stability.nets.adam_stages.RealStage.preconditioner`; the frozen P for the analysed
update), by Lanczos on s_t∇²f(w_t)s_t (`stability.nets.preconditioned`), and the reading
(``plateau``, ``reached``, ``edge_ratio``) is `stability.nets.sharpness.edge_summary`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from stability.nets.preconditioned import top_preconditioned_eigenpair
from stability.nets.problem import NetProblem
from stability.nets.sharpness import SharpnessTracker


class PreconditionedTracker(SharpnessTracker):
    """``observe(step, w)``: λ₁(P_t∇²f(w_t)) of the first run every ``every`` steps, with
    s_t = P_t^{1/2} from ``scale_of()`` (None: no preconditioner yet — a fresh Adam before its
    first step — and no sample)."""

    def __init__(
        self,
        problem: NetProblem,
        every: int,
        scale_of: Callable[[], torch.Tensor | None],
        tol: float = 1e-4,
    ):
        super().__init__(problem, every, tol)
        self.scale_of = scale_of

    @classmethod
    def of(cls, setup, stages, every: int) -> PreconditionedTracker:
        """The tracker of an `stability.nets.adaptive.AdaptiveSetup` run with stage rules
        ``stages``: the frozen P (analysed) or the real stages' current P_t."""
        if setup.update != "real":
            scale = setup.scale
            return cls(setup.net, every, lambda: scale)

        def current() -> torch.Tensor | None:
            parts = [stage.preconditioner(0) for stage in stages]
            if any(p is None for p in parts):
                return None
            return torch.cat([p.reshape(-1) for p in parts]).sqrt()

        return cls(setup.net, every, current)

    def scale(self) -> torch.Tensor | None:
        return self.scale_of()

    def _record(self, step: int, w: torch.Tensor) -> None:
        s = self.scale_of()
        if s is None:
            return
        lam, self.vector, hvps = top_preconditioned_eigenpair(
            self.problem, w, s, self.vector, self.tol
        )
        self.hvps += hvps
        self.samples.append((step, lam))


__all__ = ["PreconditionedTracker"]
