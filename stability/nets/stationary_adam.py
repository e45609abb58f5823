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

**Solved** by iteration in ln v̂ from the noise alone, with Anderson's steps (Walker & Ni 2011:
the last `ANDERSON_DEPTH` residuals ln F − ln v mixed by least squares, damping ½), F(v) the
right-hand side at P(v) on the top-k eigenvectors of H̃ = P^{1/2}HP^{1/2} at P(v).  F
decreases in v (a larger v̂, a smaller P, a smaller fluctuation), so the plain iteration
ln v ← ln F(v) alternates about the fixed point, and diverges where F is steep — near the step
size at which P(v̂) stops being mean-square stable F grows without bound.  It stops when every
coordinate's v̂ moves by at most `TOLERANCE`, so the subspace is the top-k eigen-subspace of
the fixed point itself.  Where the frozen-P rule at a trial v̂ has no stationary state the
damping is halved and the mixing restarts; at the start v is multiplied by 16 until it has one
(the fixed point's v̂ lies above the noise).  Coordinates with no minibatch noise of their own
take F itself.  Each iteration is one preconditioned top-k eigensolve, one projection of the
per-sample moments, one stationary solve and one pass of per-sample products — about the cost
of ``net noise`` without its thresholds.

**k < p can have no fixed point.**  The fluctuation of the directions the top-k subspace leaves
out is not counted, so their v̂ stays at the noise and their P high; a direction whose P stays
high enters the top k of H̃, gains fluctuation, its P falls and it leaves again.  Where the k-th
and (k+1)-th eigenvalues of H̃ trade places this way the iteration does not settle, and after
`MAX_ITERATIONS` — or after `STALLED_AFTER` if no iterate has yet come within
`STALLED_CHANGE` — it is refused naming ``k`` (on the shipped digits MLP some k converge and
neighbouring ones do not).  At k = p the whole space is counted and F is continuous.

**What it leaves out**: v̂'s fluctuation about its mean (a finite β2 averages about
1/(1 − β2) squared gradients), its correlation with the weights, and the fluctuation outside the
top-k subspace (exact at k = p, as the floor).  How close real ``torch.optim.Adam``, started
from the noise alone, comes to this floor and v̂ is measured by benchmarks/net_noise_adam.py
(its table is in docs/adam.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from stability.nets.minibatch_moments import gradient_noise, gradient_square_mean
from stability.nets.minibatch_subspace import project, subspace
from stability.nets.preconditioned import evaluation_problem, preconditioned_curvature
from stability.nets.preconditioner import Preconditioner, precondition
from stability.nets.problem import NetProblem

SOURCE = "stationary"
"""The ``precond_from`` value of this preconditioner."""
TOLERANCE = 1e-6
"""Converged when every coordinate's v̂ moves by at most this relative to the larger of v̂ and
F(v̂)."""
MAX_ITERATIONS = 60
STALLED_AFTER, STALLED_CHANGE = 30, 0.1
"""Refused early, after STALLED_AFTER iterations, when none has yet come within
STALLED_CHANGE (relative) of its image: on the digits MLP a k that converges got below 0.01 by
the 10th iteration (14 in all), a k that does not stayed between 0.43 and 1 for all 60."""
MIN_WEIGHT = 1e-3
"""The smallest damping β of a step (halved where F has no stationary state, doubled back
towards ½ after each step that has one)."""
ANDERSON_DEPTH = 5
"""Differences of past iterates the Anderson step mixes."""
GROWTH, MAX_GROWTH = 16.0, 15
"""The start is multiplied by GROWTH at most MAX_GROWTH times (16¹⁵ ≈ 10¹⁸) before it has a
stationary state."""
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
    noise = gradient_noise(evaluated, batch)
    if not np.max(noise) > 0:
        raise ValueError(
            "batch: the minibatch gradients at w* do not vary (batch = n, or every sample has "
            "the same gradient), so real Adam's v̂ decays to 0 at a minimum: there is no "
            "stationary preconditioner; give a smaller batch, or a state file"
        )

    def fluctuated(v: np.ndarray) -> np.ndarray | None:
        """F(v) (module doc) on the top-k eigenvectors of H̃ at P(v), or None where the
        frozen-P rule at P(v) has no stationary state there."""
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
        directions = proj.weight_directions()
        return gradient_square_mean(evaluated, directions, fixed.forward, batch, noise)

    v, iterations = fixed_point(fluctuated, noise, lr=lr, k=k)
    return _preconditioner(v, noise, beta2, eps, lr, batch, iterations)


def fixed_point(fluctuated, noise: np.ndarray, *, lr: float, k: int) -> tuple[np.ndarray, int]:
    """(v̂, the steps taken): the fixed point v̂ = F(v̂) of ``fluctuated`` (F, or None where
    P(v) has no stationary state) from the minibatch ``noise`` at w* (module doc: Anderson's
    steps in ln v̂, damping halved where F has no stationary state); ``lr`` and ``k`` name the
    refusals (no stationary state on the way: lower lr; no convergence: raise k)."""
    v, F = _stationary_start(noise, fluctuated, lr)
    moving = noise > 0  # solved in ln v̂; the others (no noise of their own) take F itself
    weight, history, closest = 0.5, [], np.inf
    for iteration in range(MAX_ITERATIONS + 1):  # iteration: the steps taken so far
        change = _change(v, F)
        if change <= TOLERANCE:
            return v, iteration
        closest = min(closest, change)
        stalled = iteration == STALLED_AFTER and closest > STALLED_CHANGE
        if stalled or iteration == MAX_ITERATIONS:
            break
        x, residual = np.log(v[moving]), np.log(F[moving]) - np.log(v[moving])
        history = [*history[-ANDERSON_DEPTH:], (x, residual)]
        while True:
            trial = F.copy()
            trial[moving] = np.exp(_anderson(history, weight))
            candidate = fluctuated(trial)
            if candidate is not None:
                break
            weight, history = weight / 2, history[-1:]  # damped, mixing restarted
            if weight < MIN_WEIGHT:
                raise ValueError(
                    f"lr: at lr = {lr:g} the iteration for the stationary v̂ reaches "
                    "preconditioners without a stationary state: lower lr"
                )
        v, F, weight = trial, candidate, min(2 * weight, 0.5)
    raise ValueError(
        f"k: the stationary v̂ did not converge in {iteration} iterations (last relative "
        f"change {_change(v, F):.2g}): on the top-{k} subspace the fluctuation of the "
        "directions it leaves out is lost, so P stays high there and they re-enter it; raise k "
        "(k = p is exact), or give a state file"
    )


def _stationary_start(v: np.ndarray, fluctuated, lr: float) -> tuple:
    """(v, F(v)): ``v`` multiplied by `GROWTH` until the frozen-P rule at P(v) has a stationary
    state (a larger v̂, a smaller P: more stable, module doc)."""
    for _ in range(MAX_GROWTH + 1):
        F = fluctuated(v)
        if F is not None:
            return v, F
        v = GROWTH * v
    raise ValueError(
        f"lr: at lr = {lr:g} the frozen-P rule has no stationary state even with v̂ "
        f"{GROWTH:g}^{MAX_GROWTH} × the minibatch noise: no stationary preconditioner; lower lr"
    )


def _anderson(history: list, weight: float) -> np.ndarray:
    """The next ln v̂ by Anderson mixing (Walker & Ni 2011, Alg. AA with damping β) of the
    iterates x_i and residuals r_i = ln F(x_i) − x_i in ``history`` (oldest first):
    x + β·r − (ΔX + β·ΔR)·γ, γ = argmin ‖r − ΔR·γ‖ over the differences of consecutive
    pairs; one pair: the damped step x + β·r."""
    x, r = history[-1]
    if len(history) < 2:
        return x + weight * r
    dX = np.stack([b[0] - a[0] for a, b in zip(history[:-1], history[1:], strict=True)], axis=1)
    dR = np.stack([b[1] - a[1] for a, b in zip(history[:-1], history[1:], strict=True)], axis=1)
    gamma = np.linalg.lstsq(dR, r, rcond=None)[0]
    return x + weight * r - (dX + weight * dR) @ gamma


def _P(v: np.ndarray, eps: float) -> np.ndarray:
    return 1.0 / (np.sqrt(v) + eps)


def _change(v: np.ndarray, F: np.ndarray) -> float:
    """max_j |F_j − v_j| / max(F_j, v_j) over the coordinates where either is positive."""
    top = np.maximum(v, F)
    some = top > 0
    return float(np.max(np.abs(F - v)[some] / top[some], initial=0.0))


def _preconditioner(v, noise, beta2, eps, lr, batch, iterations) -> Preconditioner:
    v_t = torch.from_numpy(np.asarray(v, dtype=float))
    step = torch.full_like(v_t, float(STEP))
    beta2_t, eps_t = torch.full_like(v_t, float(beta2)), torch.full_like(v_t, float(eps))
    moving = noise > 0
    info: dict[str, Any] = {
        "lr": lr,
        "batch": batch,
        "iterations": iterations,
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


__all__ = [
    "MAX_ITERATIONS",
    "SOURCE",
    "STALLED_AFTER",
    "STALLED_CHANGE",
    "STEP",
    "TOLERANCE",
    "fixed_point",
    "stationary_preconditioner",
]
