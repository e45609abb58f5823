r"""The top Lyapunov exponent of a random linear system, by renormalised products.

For x_{t+1} = A_t·x_t with random A_t the top Lyapunov exponent

    γ = lim_{t→∞} (1/t)·ln‖A_t ⋯ A_1·x₀‖        (almost surely)

is estimated on R runs at once (Benettin et al. 1980, "Lyapunov characteristic exponents for
smooth dynamical systems", Meccanica 15): every `EVERY` steps each run's vector is scaled back
to norm 1 and the logarithm of the norm it had reached is summed; the first fifth of the steps
is a transient and not counted, so γ̂ = Σ ln‖x‖ / (T − ⌊T/5⌋) over the renormalisations after
it.  A run whose vector overflows (or becomes NaN) grows faster than float64 can follow: its
γ̂ is +∞ and its vector restarts at norm 1.  A run whose vector is exactly 0 (a nilpotent
product) stays there: its γ̂ is −∞.

One estimator for both random systems of the package: random delays
(`stability.analysis.random_delays.lyapunov_exponent`) and random minibatches
(`stability.noise.lyapunov.lyapunov_exponents`).
"""

from __future__ import annotations

import numpy as np

EVERY = 4
"""Steps between renormalisations."""


class Renormalised:
    """γ̂ of runs whose vectors are the trailing axes of an array with leading axes ``runs``.

    Call it with the step t (0-based) and the runs' vectors after that step; it returns the
    vectors to go on with (renormalised on the steps where that is due) and accumulates their
    log-norms; `exponents` gives γ̂ per run after the last step.
    """

    def __init__(self, runs: tuple[int, ...], steps: int) -> None:
        self.steps = steps
        self.burn = steps // 5
        self.total = np.zeros(runs)

    def __call__(self, t: int, x: np.ndarray) -> np.ndarray:
        if t % EVERY == EVERY - 1 or t == self.steps - 1:
            vector_axes = tuple(range(self.total.ndim, x.ndim))
            with np.errstate(over="ignore", invalid="ignore"):
                norm = np.sqrt(np.sum(x * x, axis=vector_axes))
            overflow, collapsed = ~np.isfinite(norm), norm == 0
            norm[overflow | collapsed] = 1.0
            x = x / norm.reshape(norm.shape + (1,) * len(vector_axes))
            x[overflow] = 1.0 / np.sqrt(np.prod(x.shape[self.total.ndim :]))
            if t >= self.burn:
                self.total += np.log(norm)
                self.total[overflow] = np.inf
                self.total[collapsed] = -np.inf
        if t == self.burn - 1:
            self.total[:] = 0.0
        return x

    def exponents(self) -> np.ndarray:
        """γ̂ per run (shape ``runs``): the summed log-norms over the steps after the burn-in."""
        return self.total / (self.steps - self.burn)


__all__ = ["EVERY", "Renormalised"]
