r"""The measured almost-sure threshold of a network: the top Lyapunov exponent at w*, simulated.

The almost-sure threshold is where the top Lyapunov exponent γ(lr) of the random product of
the linearised maps A(H_B) (`stability.noise.lyapunov`; H_B the batch's Hessian at w*, the
rule's delays in A) crosses 0.  It does not depend on the offsets ξ_B.  Two runs of training
that share their batches (the linear-regression protocol, `stability.noise.runs`) measure it
only while both stay where the linearisation at w* holds, and near the threshold they cannot:
between the mean-square and the almost-sure threshold the stationary law of w − w* under the
offsets ξ_B is heavy-tailed (Kesten; its tail index falls to 0 at the almost-sure threshold),
so every run of a few thousand steps makes excursions far beyond r₁₀ (the distance along v₁
at which the curvature changes by 10 %).  Measured on the benchmark's teacher31 network
(sgd, τ = 0, B = 16): the pairs went 4.5 × r₁₀ away, and their bracket was [0.068, 0.068]
when an escape beyond r₁₀ was counted as growth and [0.277, 0.279] when it was not, around
a predicted 0.0785 — the pairs measured the nonlinear network far from w*, not the threshold.

What is measured here instead is the simulator with the **offsets removed**,

    g_r = ∇f_{B_r,t}(u_r) − (1/B)·Σ_{i ∈ B_r,t} ∇ℓ_i(w*)      (the per-sample tilt),

so that every batch's gradient vanishes at w*: the rest state (every stage's weights w* at
every lag, the other state variables 0) is a fixed point of every step, and the linearisation
there is the same random map A(H_B) that training has.  Run r at a step size is the pair
(rest state, rest + deviation) sharing batch stream r (stream r is the same at every step
size: common random numbers).  Its deviation — every ring slot of every state variable minus
its rest value — starts at δ₀ along ∇²f(w*)·z (z random: the directions of curvature) and is
scaled every `EVERY` steps so that ‖d‖, the norm of the weights' ring (w_t − w*, …, the rule's
history depth), is δ₀ again (Benettin et al. 1980; every variable is scaled by the same factor,
exact for the linearisation), accumulating ln(‖d‖/δ₀):

    γ̂_r = Σ_{renormalisations after T/5} ln(‖d‖/δ₀) / (T − T/5).

δ₀ = ``separation``·r₁₀ (default `SEPARATION`): the network's own nonlinear gradient is
evaluated, but so close to w* that its curvature is w*'s to O(δ₀/r₁₀); γ̂ is the
finite-difference form of the tangent (JVP) exponent, whose trajectory here is w*.  Every
run's largest ‖w − w*‖ is reported (``wander``).

Decision: per step size the mean γ̄ and standard error s of the γ̂_r over the runs; unstable
if γ̄ > `Z_DECIDE`·s, stable if γ̄ < −`Z_DECIDE`·s, otherwise undecided.  `measure_almost_sure`
brackets the threshold in rounds: a geometric grid around the guess (moved until it holds a
stable and an unstable step size), then linear grids between the largest stable step size
below the smallest unstable one and that one, until the bracket is ``rel_tol`` wide or a round
decides nothing inside it (the runs cannot resolve it further: the bracket says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import grad
from torch.nn.functional import embedding_bag

from stability.nets.batches import sample
from stability.nets.lockstep import LockstepRuns, RunSetup
from stability.nets.problem import NetProblem
from stability.nets.simulator import StageTaps, _Ring
from stability.nets.vectorize import vectorized
from stability.rules.base import Rule, history_depth

EVERY = 4
"""Steps between renormalisations of the deviation."""
SEPARATION = 1e-3
"""δ₀ / r₁₀: the deviation's size relative to the quadratic region."""
Z_DECIDE = 3.0
"""A step size is decided (un)stable when γ̄ is this many standard errors from 0."""
PER_ROUND = 8
"""Step sizes per round of `measure_almost_sure`."""
SPAN = 1.5
"""Its first round's grid: [guess/SPAN, SPAN·guess]."""
REL_TOL = 0.01
"""Its bracket's target relative width."""
MAX_ROUNDS = 8
"""Its most rounds after the first."""


@dataclass(frozen=True)
class Exponents:
    """γ̂ per step size: mean and standard error over the runs, and the runs' largest
    ‖w − w*‖ (module doc)."""

    lr: np.ndarray
    gamma: np.ndarray
    se: np.ndarray
    wander: np.ndarray

    @property
    def verdict(self) -> np.ndarray:
        """+1 unstable, −1 stable, 0 undecided (γ̄ within `Z_DECIDE` standard errors of 0)."""
        return np.where(
            self.gamma > Z_DECIDE * self.se, 1, np.where(self.gamma < -Z_DECIDE * self.se, -1, 0)
        )


def _rest(ring: _Ring, w_star: torch.Tensor) -> dict[str, torch.Tensor]:
    return {var: (w_star if var == "w" else torch.zeros_like(w_star)) for var in ring.buffers}


def check_rest(problem: NetProblem, rules: Sequence[Rule]) -> None:
    """Refuse rules whose rest state (w* at every lag, other variables 0) is not a fixed point
    of a step with a zero gradient (module doc)."""
    variables = list(dict.fromkeys(v for r in rules for v in r.variables))
    w_star = problem.w_star.detach()[None]
    ring = _Ring(variables, max(history_depth(r) for r in rules), w_star)
    lr = problem.vector(np.array([1e-2]))[:, None]
    taps = [StageTaps(ring, b) for b in problem.blocks]
    news = [
        rule.update(x, torch.zeros_like(w_star[:, b]), lr)
        for rule, x, b in zip(rules, taps, problem.blocks, strict=True)
    ]
    ring.push(problem.blocks, news)
    for var, rest in _rest(ring, w_star).items():
        if not torch.equal(ring.buffers[var][ring.head], rest):
            raise ValueError(
                f"rule: its state variable {var!r} does not rest at 0 when the weights rest at "
                "w*; the almost-sure measurement needs that rest state"
            )


def exponents(
    setup: RunSetup,
    lrs,
    *,
    runs: int,
    steps: int,
    separation: float,
    observe=None,
) -> Exponents:
    """γ̂ at each of ``lrs`` from ``runs`` runs each (module doc); run r on stream r at every
    step size; δ₀ = ``separation`` (an absolute distance); ``observe(step, w)`` after every
    step (`stability.nets.step_counter`)."""
    problem, seed = setup.problem, setup.seed
    lrs = np.asarray(lrs, dtype=float)
    L, p = lrs.size, problem.dim
    R = L * runs
    w_star = problem.w_star.detach()
    X, Y = problem.inputs, problem.targets
    per_sample = vectorized(
        problem,
        lambda x, y: grad(problem.batch_loss)(w_star, sample(x), sample(y)),
        X,
        Y,
        looped=lambda x, y: problem.batch_gradient(w_star, sample(x), sample(y)),
    ).detach()  # ∇ℓ_i(w*), (n, p)
    z = problem.vector(np.random.default_rng([seed, 2]).standard_normal((runs, p)))
    d0 = torch.stack([problem.hvp(w_star, r) for r in z]).detach()  # ∝ ∇²f(w*)·z
    d0 = separation * d0 / torch.linalg.vector_norm(d0, dim=1, keepdim=True)
    d0 = d0.repeat(L, 1)  # run (l, r) starts at the same deviation for every l

    def batch_mean(index: torch.Tensor) -> torch.Tensor:  # (R, B) → (R, p), no (R, B, p) copy
        return embedding_bag(index, per_sample, mode="mean")  # both on the problem's device

    runner = LockstepRuns(setup, np.repeat(lrs, runs), w_star + d0, np.tile(np.arange(runs), L),
                          tilt=batch_mean)  # fmt: skip
    ring = runner.ring
    rest = _rest(ring, w_star)
    again = rest | {"w": w_star + d0}  # where a run that over- or underflowed starts again
    burn = steps // 5
    total = torch.zeros(R, dtype=w_star.dtype)
    grown = torch.zeros(R, dtype=torch.bool)
    wander = torch.zeros(R, dtype=w_star.dtype)
    for t in range(steps):
        w = runner.step()
        distance = torch.linalg.vector_norm(w - w_star, dim=1)
        wander = torch.maximum(wander, torch.nan_to_num(distance, nan=torch.inf))
        if t % EVERY == EVERY - 1 or t == steps - 1:
            norm = torch.sqrt(((ring.buffers["w"] - w_star) ** 2).sum(dim=(0, 2)))
            bad = ~torch.isfinite(norm) | (norm == 0)
            scale = torch.where(bad, 1.0, separation / norm)
            for var, buf in ring.buffers.items():
                buf.sub_(rest[var]).mul_(scale[None, :, None]).add_(rest[var])
                torch.where(bad[None, :, None], again[var], buf, out=buf)
            if t >= burn:
                total += torch.log(torch.where(bad, 1.0, norm / separation))
                grown |= bad & ~(norm == 0)
        if t == burn - 1:
            total.zero_()
        if observe is not None:
            observe(t + 1, w)
    gam = (total / (steps - burn)).cpu().numpy().reshape(L, runs)
    gam[grown.cpu().numpy().reshape(L, runs)] = np.inf
    finite = np.where(np.isfinite(gam), gam, np.nan)
    with np.errstate(invalid="ignore"):
        se = np.nan_to_num(np.nanstd(finite, axis=1, ddof=1) / np.sqrt(runs), nan=0.0)
    mean = np.where(np.all(np.isfinite(gam), axis=1), gam.mean(axis=1), np.inf)
    return Exponents(lrs, mean, se, wander.cpu().numpy().reshape(L, runs).max(axis=1))


@dataclass(frozen=True)
class AlmostSureBracket:
    """[stable, unstable] (None where not found), every step size tried as rows
    [lr, γ̄, s, verdict] sorted by lr, runs simulated and the largest ‖w − w*‖."""

    stable: float | None
    unstable: float | None
    rows: list
    runs: int
    wander: float


def measure_almost_sure(
    setup: RunSetup,
    guess: float,
    *,
    runs: int = 32,
    steps: int = 4000,
    separation: float,
    rel_tol: float = REL_TOL,
    per_round: int = PER_ROUND,
    span: float = SPAN,
    max_rounds: int = MAX_ROUNDS,
    observe=None,
) -> AlmostSureBracket:
    """The bracket of γ(lr) = 0 around ``guess`` (module doc); ``observe``: `exponents`'."""
    check_rest(setup.problem, setup.rules)
    seen: dict[float, tuple[float, float, int, float]] = {}

    def evaluate(grid) -> None:
        e = exponents(setup, grid, runs=runs, steps=steps, separation=separation, observe=observe)
        for i, lr in enumerate(e.lr):
            seen[float(lr)] = (float(e.gamma[i]), float(e.se[i]), int(e.verdict[i]),
                               float(e.wander[i]))  # fmt: skip

    def bracket() -> tuple[float | None, float | None]:
        lrs = sorted(seen)
        unstable = [a for a in lrs if seen[a][2] == 1]
        hi = unstable[0] if unstable else None
        stable = [a for a in lrs if seen[a][2] == -1 and (hi is None or a < hi)]
        return (stable[-1] if stable else None), hi

    grid = np.geomspace(guess / span, guess * span, per_round)
    for _ in range(6):
        evaluate(grid)
        lo, hi = bracket()
        if hi is None:
            grid = np.geomspace(max(seen), 4 * max(seen), per_round)
        elif lo is None:
            grid = np.geomspace(min(seen) / 4, min(seen), per_round)
        else:
            break
    rounds = 0
    while lo is not None and hi is not None and (hi - lo) / lo > rel_tol and rounds < max_rounds:
        evaluate(np.linspace(lo, hi, per_round + 2)[1:-1])
        rounds += 1
        new = bracket()
        if new == (lo, hi):
            break  # nothing decided inside: the runs resolve no further
        lo, hi = new
    rows = [[lr, *seen[lr][:3]] for lr in sorted(seen)]
    wander = max(v[3] for v in seen.values())
    return AlmostSureBracket(lo, hi, rows, len(seen) * runs, wander)


def expected_rounds() -> int:
    """Rounds of `measure_almost_sure` at its defaults when its first grid brackets the
    threshold (`stability.trainer.measure.verdict_rounds`: 3)."""
    from stability.trainer.measure import verdict_rounds

    return verdict_rounds(REL_TOL, per_round=PER_ROUND, span=SPAN, max_rounds=MAX_ROUNDS)


__all__ = [
    "EVERY",
    "MAX_ROUNDS",
    "PER_ROUND",
    "REL_TOL",
    "SEPARATION",
    "SPAN",
    "Z_DECIDE",
    "AlmostSureBracket",
    "Exponents",
    "check_rest",
    "expected_rounds",
    "exponents",
    "measure_almost_sure",
]
