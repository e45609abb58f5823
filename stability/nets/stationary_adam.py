r"""The stationary preconditioner of real Adam on minibatches (``precond_from="stationary"``).

Near a minimum real Adam keeps updating its second moment, v ← β2·v + (1 − β2)·g_B∘g_B
(Kingma & Ba, Alg. 1), so over its memory of about 1/(1 − β2) steps v̂ is the mean square of
the minibatch gradients *of the run it is in*.  A run that has settled at its noise floor sees
gradients drawn from its own stationary distribution, which the frozen-P theory of
`stability.nets.noise_public` gives for any P.  The stationary preconditioner is therefore the
fixed point

    v̂ = diag E_P[g_B g_Bᵀ],        P = 1/(√v̂ + ε),

    E_P[g_B g_Bᵀ] = (1 − p)·H X H + p·(1/n) Σ_i H_i X H_i + p·Σ_ξ,

with X = E_P[(u − w*)(u − w*)ᵀ] the stationary second moment of the forward weights u (where
the gradient is taken: delayed, per stage) of the frozen-P rule at the step size lr and batch B
(`stability.noise.gramian.stationary` on the projected problem,
`stability.nets.minibatch_subspace`; the diagonal by
`stability.nets.minibatch_moments.gradient_square_mean`), p = (n − B)/(B(n − 1)), H_i and Σ_ξ
the per-sample Hessians and the gradient covariance at w* (`stability.noise.persample`).  Its
two parts: the minibatch noise at w*, p·diag Σ_ξ — the v̂ of a run whose weights stood still —
and the run's own fluctuation, which grows with lr and lowers P.

**Solved** by damped iteration in ln v̂ from the noise alone, ln v ← ln v + a·(ln F(v) − ln v),
F(v) the right-hand side at P(v).  F decreases in v (a larger v̂, a smaller P, a smaller
fluctuation), so the plain iteration (a = 1) alternates about the fixed point, and diverges
where F is steep — near the step size at which P(v̂) stops being mean-square stable, F grows
without bound.  The weight is the secant's, a = 1/(1 − s) with s the slope of ln F along the
last step (a scalar Newton step on the residual; a = 1 where F is flat, ½ at s = −1), until
every coordinate's v̂ moves by at most `TOLERANCE`.  Where the frozen-P rule at a trial v̂ has
no stationary state (not mean-square stable) the step is halved; at the start, v is multiplied
by 4 until it has one (the fixed point's v̂ lies above the noise).  Coordinates with no
minibatch noise of their own take F itself.  Each iteration is one preconditioned top-k
eigensolve, one projection of the per-sample moments and one stationary solve — the cost of
``net noise`` without its thresholds.

**What it leaves out**: v̂'s fluctuation about its mean (a finite β2 averages about
1/(1 − β2) squared gradients), its correlation with the weights, and the fluctuation outside the
top-k subspace (exact at k = p, as the floor).  With β2 = 0.999 and B = 16 real
``torch.optim.Adam`` settles at this v̂ and floor to 1–2 % on two small networks, from the
noise alone or from the fixed point itself (benchmarks/net_noise_adam.py, docs/adam.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from stability.nets.minibatch_moments import gradient_square_mean
from stability.nets.minibatch_subspace import project, subspace
from stability.nets.preconditioned import evaluation_problem, preconditioned_curvature
from stability.nets.preconditioner import Preconditioner, precondition
from stability.nets.problem import NetProblem

SOURCE = "stationary"
"""The ``precond_from`` value of this preconditioner."""
TOLERANCE = 1e-6
"""Converged when every coordinate's v̂ moves by at most this relative to the larger of v̂ and
F(v̂)."""
MAX_ITERATIONS = 200
MIN_WEIGHT = 1e-3
"""The smallest step towards F(v̂) (the secant's, or halved where F has no stationary state)."""
MAX_GROWTH = 30
"""At most this many ×4 of the start before it has a stationary state (4³⁰ ≈ 10¹⁸)."""
STEP = 2**40
"""The step t of the optimizer state it stands for: 1 − β2^t = 1 in float64 (no bias
correction left), as in a run that has been going for long."""


def stationary_preconditioner(
    net: NetProblem,
    rules,
    *,
    lr: float,
    batch: int,
    k: int,
    uniform: bool,
    beta2: float,
    eps: float,
) -> Preconditioner:
    """The stationary preconditioner (module doc) of the stage ``rules`` (the analysis's,
    P = 1) at ``lr`` and ``batch`` on the top-``k`` subspace, as a `Preconditioner` whose
    state (v = v̂, m = 0, t = `STEP`) a real-Adam run continues; ``stationary`` says how it
    was found."""
    evaluated = evaluation_problem(net)[0]
    p = net.dim
    noise = gradient_square_mean(evaluated, np.zeros((p, 0)), np.zeros((0, 0)), batch)
    if not np.max(noise) > 0:
        raise ValueError(
            "batch: the minibatch gradients at w* do not vary (batch = n, or every sample has "
            "the same gradient), so real Adam's v̂ decays to 0 at a minimum: there is no "
            "stationary preconditioner; give a smaller batch, or a state file"
        )

    def fluctuated(v: np.ndarray) -> np.ndarray | None:
        """F(v) (module doc), or None where the frozen-P rule at P(v) has no stationary state."""
        from stability.noise.gramian import stationary

        scale = np.sqrt(_P(v, eps))
        curv = preconditioned_curvature(net, torch.from_numpy(scale), k, stage_blocks=False)
        proj = project(
            evaluated, curv.eigenvalues, curv.eigenvectors, scale, k=k, batch=batch,
            curvature="hessian", rules=rules, uniform=uniform,
        )  # fmt: skip
        room = subspace(proj.moments, rules, proj.sizes, np.zeros(proj.moments.dim), uniform)
        fixed = stationary(room.builder(lr), proj.moments)
        if fixed is None:
            return None
        return gradient_square_mean(evaluated, proj.weight_directions(), fixed.forward, batch)

    v, F, growth = noise, fluctuated(noise), 0
    while F is None:
        growth += 1
        if growth > MAX_GROWTH:
            raise ValueError(
                f"lr: at lr = {lr:g} the frozen-P rule has no stationary state even with v̂ "
                f"4^{MAX_GROWTH} × the minibatch noise: no stationary preconditioner; lower lr"
            )
        v = 4.0 * v
        F = fluctuated(v)
    moving = noise > 0  # solved in ln v̂; the others (no noise of their own) take F itself
    weight = 0.5
    for iteration in range(1, MAX_ITERATIONS + 1):
        change = _change(v, F)
        if change <= TOLERANCE:
            return _preconditioner(v, noise, beta2, eps, lr, batch, iteration, change)
        residual = np.log(F[moving]) - np.log(v[moving])
        while True:
            trial = F.copy()
            trial[moving] = v[moving] * np.exp(weight * residual)
            candidate = fluctuated(trial)
            if candidate is not None:
                break
            weight /= 2
            if weight < MIN_WEIGHT:
                raise ValueError(
                    f"lr: at lr = {lr:g} the iteration for the stationary v̂ reaches "
                    "preconditioners without a stationary state: lower lr"
                )
        step = np.log(trial[moving]) - np.log(v[moving])
        new_residual = np.log(candidate[moving]) - np.log(trial[moving])
        slope = np.dot(new_residual - residual, step) / max(np.dot(step, step), 1e-300)
        weight = float(np.clip(-1.0 / slope, MIN_WEIGHT, 1.0)) if slope < 0 else 1.0
        v, F = trial, candidate
    raise ValueError(
        f"precond_from: the stationary v̂ did not converge in {MAX_ITERATIONS} iterations "
        f"(last relative change {_change(v, F):.2g}); lower lr"
    )


def _P(v: np.ndarray, eps: float) -> np.ndarray:
    return 1.0 / (np.sqrt(v) + eps)


def _change(v: np.ndarray, F: np.ndarray) -> float:
    """max_j |F_j − v_j| / max(F_j, v_j) over the coordinates where either is positive."""
    top = np.maximum(v, F)
    some = top > 0
    return float(np.max(np.abs(F - v)[some] / top[some], initial=0.0))


def _preconditioner(v, noise, beta2, eps, lr, batch, iterations, change) -> Preconditioner:
    v_t = torch.from_numpy(np.asarray(v, dtype=float))
    step = torch.full_like(v_t, float(STEP))
    beta2_t, eps_t = torch.full_like(v_t, float(beta2)), torch.full_like(v_t, float(eps))
    moving = noise > 0
    info: dict[str, Any] = {
        "lr": lr,
        "batch": batch,
        "iterations": iterations,
        "relative_change": change,
        "noise_share_median": float(np.median(noise[moving] / v[moving])),
        "means": "v̂ = E[g_B²] over the stationary distribution of the frozen-P rule at "
        "P = 1/(√v̂ + ε) and this lr and batch (fixed point); noise_share: the minibatch "
        "noise at w*, p·Var_i ∇ℓ_i(w*), over v̂",
    }
    return Preconditioner(
        P=precondition(v_t, step, beta2_t, eps_t),
        exp_avg=torch.zeros_like(v_t),
        exp_avg_sq=v_t,
        step=step.long(),
        beta2=beta2_t,
        eps=eps_t,
        source=SOURCE,
        stationary=info,
    )


__all__ = ["MAX_ITERATIONS", "SOURCE", "STEP", "TOLERANCE", "stationary_preconditioner"]
