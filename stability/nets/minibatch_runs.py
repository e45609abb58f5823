r"""Seeded minibatch runs of the network simulator in lockstep, measured against the theory.

The network side of `stability.noise.runs`: R runs of the stage rules (the simulator's ring
buffer and tap readers, `stability.nets.simulator`), each with its **own** batch stream, advance
together; the gradients of all runs are one ``torch.func.vmap`` over (weights, batch indices)
(a loop for a model vmap cannot batch, `stability.nets.vectorize`):

    g_r = ∇f_{B_r,t}(u_r) − ∇f(w*)           (run r's forward weights u_r, its batch B_r,t),

tilted by the full-batch gradient at w* as the full-batch protocol is
(`stability.nets.bracket`): w* is then an exact stationary point of the mean gradient, the
centring that `stability.noise.persample` assumes (ξ_B has mean zero).  Batches: B distinct
indices per step from `stability.trainer.engine.BatchStreams` (``"iid"``, what the theory
covers, or ``"reshuffle"``); stream s is the same at every step size (common random numbers).

* `measure_loss` — R runs from w₀ = w* + ε·v₁ (ε = ``perturbation``·√p, constant history): the
  excess loss f(w_t) − f(w*) (full batch) at the chosen steps as mean and standard error over the
  runs, and each run's mean over a late window (every ``record_every`` steps), whose mean and
  standard error over the runs is the measured floor.  A run whose ‖w − w*‖ exceeds
  ``divergence`` × the start's (or becomes non-finite) is a blow-up: stopped and left out of the
  means.  ``wander``: max ‖w_t − w*‖ over the runs and steps.
* the almost-sure bracket is measured by `stability.nets.minibatch_lyapunov` (the runs here
  carry the offsets ξ_B, whose heavy tails near that threshold take them out of the
  quadratic region: see there).
* `quadratic_radius` — the distance r₁₀ from w* along ±v₁ at which the curvature v₁ᵀ∇²f v₁
  has changed by 10 %: the scale of the quadratic region the linearisation assumes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from stability.nets.lockstep import CHUNK_STEPS, LockstepRuns, RunSetup
from stability.nets.problem import NetProblem
from stability.nets.vectorize import vectorized


@dataclass(frozen=True)
class Lockstep:
    """What `lockstep` recorded: losses (R, len(times)), window means (R,), blow-ups (R,),
    each run's largest ‖w_t − w*‖ (R,; up to its blow-up) and final weights (R, p)."""

    at: np.ndarray
    window_mean: np.ndarray
    blown: np.ndarray
    wander: np.ndarray
    final: np.ndarray


def lockstep(
    setup: RunSetup,
    lr: np.ndarray,
    w0: torch.Tensor,
    streams: np.ndarray,
    *,
    steps: int,
    times: Sequence[int] = (),
    window: tuple[int, int] | None = None,
    record_every: int = 10,
    divergence: float = 1e6,
    observe=None,
) -> Lockstep:
    """R = len(lr) runs of ``setup`` from ``w0`` (R, p), run r on stream ``streams[r]``
    (module doc); ``observe(step, w)`` after every step (`stability.nets.step_counter`)."""
    problem = setup.problem
    lr = np.asarray(lr, dtype=float)
    R = lr.size
    w_star = problem.w_star.detach()
    f_star = float(problem.loss(w_star))
    g_ref = problem.gradient(w_star).detach()
    runner = LockstepRuns(setup, lr, w0, streams, tilt=lambda index: g_ref)
    ring = runner.ring
    start = torch.linalg.vector_norm(w0 - w_star, dim=1)
    limit = divergence * torch.clamp(start, min=1e-300)
    times = sorted(int(t) for t in times)
    at = np.full((R, len(times)), np.nan)
    window_sum, window_count = np.zeros(R), 0
    blown_t = torch.zeros(R, dtype=torch.bool, device=w_star.device)
    zero = torch.zeros((), dtype=w_star.dtype, device=w_star.device)
    wander = torch.zeros(R, dtype=w_star.dtype, device=w_star.device)

    def record(w: torch.Tensor, t: int) -> None:
        nonlocal window_sum, window_count
        inside = window is not None and window[0] <= t < window[1] and t % record_every == 0
        if t not in times and not inside:
            return
        with torch.no_grad():
            excess = (vectorized(problem, problem.loss, w) - f_star).cpu().numpy()
        if t in times:
            at[:, times.index(t)] = excess
        if inside:
            window_sum = window_sum + excess
            window_count += 1

    record(runner.w, 0)
    for t in range(steps):
        w = runner.step()
        distance = torch.linalg.vector_norm(w - w_star, dim=1)
        bad = ~torch.isfinite(distance) | (distance > limit)
        blown_t |= bad
        for var, buf in ring.buffers.items():  # a blown run rests at w*; no host sync a step
            torch.where(bad[None, :, None], w_star if var == "w" else zero, buf, out=buf)
        w = ring.buffers["w"][ring.head]
        wander = torch.maximum(wander, torch.where(bad, 0.0, distance))
        record(w, t + 1)
        if observe is not None:
            observe(t + 1, w)
    blown = blown_t.cpu().numpy()
    mean = window_sum / window_count if window_count else np.full(R, np.nan)
    at[blown] = np.nan
    mean[blown] = np.nan
    final = ring.buffers["w"][ring.head].cpu().numpy().astype(float)
    final[blown] = np.nan
    return Lockstep(at, mean, blown, wander.cpu().numpy(), final)


def start_weights(problem: NetProblem, v1: np.ndarray, perturbation: float) -> torch.Tensor:
    """w₀ = w* + ε·v₁, ε = ``perturbation``·√p (module doc)."""
    v = problem.vector(np.asarray(v1, dtype=float))
    return problem.w_star.detach() + perturbation * problem.dim**0.5 * v / v.norm()


@dataclass(frozen=True)
class LossRuns:
    """Mean and standard error of f(w_t) − f(w*) over the runs that did not blow up."""

    mean: np.ndarray
    se: np.ndarray
    floor: tuple[float, float]
    blowups: int
    wander: float


def measure_loss(
    setup: RunSetup,
    lr: float,
    times: Sequence[int],
    w0: torch.Tensor,
    *,
    runs: int,
    window: tuple[int, int],
    record_every: int = 10,
    observe=None,
) -> LossRuns:
    """``runs`` seeded runs of ``setup`` at ``lr`` (module doc); ``observe``: `lockstep`'s."""
    res = lockstep(
        setup,
        np.full(runs, lr),
        torch.broadcast_to(w0, (runs, setup.problem.dim)),
        np.arange(runs),
        steps=max(max(times), window[1]),
        times=times,
        window=window,
        record_every=record_every,
        observe=observe,
    )
    keep = ~res.blown
    n = int(keep.sum())
    at, late = res.at[keep], res.window_mean[keep]
    se = at.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.full(at.shape[1], np.nan)
    floor_se = float(late.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    mean = at.mean(axis=0) if n else np.full(at.shape[1], np.nan)
    floor = float(late.mean()) if n else float("nan")
    wander = float(res.wander[keep].max()) if n else float("nan")
    return LossRuns(mean, se, (floor, floor_se), int(res.blown.sum()), wander)


def quadratic_radius(problem: NetProblem, v1: np.ndarray, change: float = 0.1) -> float:
    """r₁₀: the smallest δ > 0 with |v₁ᵀ∇²f(w* ± δv₁)v₁ − λ₁| ≥ ``change``·|λ₁| (module doc);
    doubling from 10⁻⁶·max(‖w*‖, 1), then 30 bisections; inf if no change up to 10³·‖w*‖."""
    v = problem.vector(np.asarray(v1, dtype=float))
    v = v / v.norm()
    w = problem.w_star.detach()

    def curvature(delta: float) -> float:
        return float(v @ problem.hvp(w + delta * v, v))

    lam = curvature(0.0)
    scale = max(float(w.norm()), 1.0)

    def moved(delta: float) -> bool:
        return any(abs(curvature(s * delta) - lam) >= change * abs(lam) for s in (1.0, -1.0))

    low, high = 0.0, 1e-6 * scale
    while not moved(high):
        low, high = high, 2 * high
        if high > 1e3 * scale:
            return float("inf")
    for _ in range(30):
        mid = 0.5 * (low + high)
        low, high = (low, mid) if moved(mid) else (mid, high)
    return high


def measure_runs(
    setup: RunSetup,
    lr: float,
    times: Sequence[int],
    w0: torch.Tensor,
    as_lr: float | None,
    *,
    runs: int,
    pairs: int,
    pair_steps: int,
    steps: int,
    separation: float,
    real: RunSetup | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict, float, float, dict | None]:
    """(``measured``, wander, as_wander, ``measured_real``): the keys ``stability noise
    --measure`` prints — ``runs``, ``expected_loss`` rows [t, mean, se], ``floor`` [mean, se]
    over the second half of the steps, ``as_bracket`` (``pairs`` offset-free runs per step size
    around ``as_lr``, `stability.nets.minibatch_lyapunov`, with its rows ``as_exponents``),
    ``pairs`` — the largest ‖w_t − w*‖ of the loss runs and that of the almost-sure runs, and
    with a ``real`` setup (real Adam, `stability.nets.adaptive.AdaptiveSetup.real`) its loss
    runs alike (``runs``, ``expected_loss``, ``floor``, ``floor_window``, ``blowup_fraction``,
    ``max_distance``; None without).  ``progress(done, total)``: in lockstep steps
    (`stability.nets.step_counter`)."""
    from stability.nets.minibatch_lyapunov import expected_rounds, measure_almost_sure
    from stability.nets.step_counter import counter

    if isinstance(runs, bool) or int(runs) != runs or not 2 <= runs <= 1 << 16:
        raise ValueError(f"runs must be an integer in [2, {1 << 16}], got {runs!r}")
    window = (steps // 2, steps)
    loss_steps = max(max(times), window[1])
    expected = loss_steps * (1 if real is None else 2)
    counted = counter(progress, expected + (expected_rounds() * pair_steps if as_lr else 0))
    out, wander = _loss_runs(setup, lr, times, w0, int(runs), window, counted)
    out.update(as_bracket=None, as_exponents=[], pairs=int(pairs))
    as_wander = 0.0
    if as_lr:
        found = measure_almost_sure(
            setup, as_lr, runs=pairs, steps=pair_steps, separation=separation, observe=counted
        )
        out["as_bracket"] = [found.stable, found.unstable]
        out["as_exponents"] = found.rows
        as_wander = found.wander
    real_out = None
    if real is not None:
        real_out, real_wander = _loss_runs(real, lr, times, w0, int(runs), window, counted)
        real_out["max_distance"] = real_wander
    if counted is not None:
        counted.finish()
    return out, wander, as_wander, real_out


def _loss_runs(setup, lr, times, w0, runs: int, window, observe) -> tuple[dict, float]:
    """The loss runs of `measure_runs` as its JSON keys, and their largest ‖w_t − w*‖."""
    from stability.checks import finite_or_none as _finite

    m = measure_loss(
        setup, lr, times, w0, runs=runs, window=window,
        record_every=max(1, min(10, (window[1] - window[0]) // 20)), observe=observe,
    )  # fmt: skip
    out: dict[str, Any] = {
        "runs": runs,
        "expected_loss": [
            [int(t), _finite(a), _finite(b)] for t, a, b in zip(times, m.mean, m.se, strict=True)
        ],
        "floor": [_finite(m.floor[0]), _finite(m.floor[1])],
        "floor_window": list(window),
        "blowup_fraction": m.blowups / runs,
        "blowup_criterion": "‖w − w*‖ > 1e6 × its start, or non-finite",
    }
    return out, m.wander


__all__ = [
    "CHUNK_STEPS",
    "Lockstep",
    "LossRuns",
    "lockstep",
    "measure_loss",
    "measure_runs",
    "quadratic_radius",
    "start_weights",
]
