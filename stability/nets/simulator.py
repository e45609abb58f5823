r"""Delayed-pipeline training of a PyTorch model, each stage running the analysis's own rule.

A pipeline of P stages holds the flat parameter vector w ∈ ℝ^p as P contiguous blocks
(`stability.nets.problem`).  Stage i runs its own rule object — the very objects the coupled
analysis linearizes (`stability.coupled.system.stage_rules`, one per stage, with that stage's
delays and delay-dependent defaults) — and every step is (`stability.rules.base`)::

    p_i    = rule_i.passes(x_i, lr·c_i)                 # stage i's u_fwd, from its history
    u      = [p_1.forward; …; p_P.forward]              # the weights one microbatch met
    g      = ∇f(u)                                      # backpropagation through the model
    new_i  = rule_i.update(x_i, g_i, lr·c_i)            # each stage updates its block

with x_i a tap reader over a **ring buffer of parameter versions**: one tensor of shape
(depth, R, p) per state variable (``w``, ``v``, …), depth = 1 + the deepest lag any stage reads,
so memory is O(τ_max·p) per run; stage i reads its columns of the slot ``lag`` steps back — a
view, no copy.  Rules use only + − × ÷ on tap values, so they run on torch tensors unchanged.
R runs (one per step size) advance in lockstep; c_i are T1's per-stage factors (PipeMare eq. 4,
1 by default).

**Backward weights.**  ``backward="stashed"`` (default): the gradient is computed at one
vector u, each stage's backward pass using the weights its forward pass used (PipeDream's
stashing; PipeMare Sec. 2 with τ_bkwd = τ_fwd); rules whose passes read *different* backward or
recompute weights (``discrepancy``, ``t2``, ``recompute``, or any rule whose probe says so,
`check_stashed`) are refused.  ``backward="current"``: the stages' passes are assembled into
three vectors u_fwd, u_bkwd, u_recomp and the gradient is backpropagation with inconsistent
weights, ∇f(u_fwd, u_bkwd, u_recomp) (`stability.nets.inconsistent`; PipeMare Sec. 2, App. D.1;
the recompute chain only where some stage's rule reads recompute weights of its own).

**Runs.**  Full batch, or minibatches of B rows drawn by the trainer's seeded stream (random
reshuffling or iid, `stability.trainer.engine.BatchStream`), shared by the R runs (per-run
streams: `stability.nets.minibatch_runs`).  ``tilt`` subtracts
the full-batch gradient at the reference point, g ↦ ∇f(u) − ∇f(w_ref): then w_ref is an exact
stationary point with the same Hessian, and a constant force from an inexact minimum cannot
move the runs (a constant force shifts the fixed point, never its stability); ``flip`` adds the
gradient of a fixed quadratic centred there that turns the saddle directions into minima
(`stability.nets.saddle_flip`, at the forward weights u).  Divergence:
``criterion="distance"`` marks a run once ‖w_t − w_ref‖ exceeds ``divergence`` × its initial
value, ``"loss"`` once f(w_t) exceeds ``divergence`` × f(w_0), either also on non-finite values;
a diverged run is frozen (removed from the batch) and reads NaN afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
from torch.func import grad

from stability.checks import check_step_sizes
from stability.nets.problem import NetProblem
from stability.nets.saddle_flip import SaddleFlip
from stability.nets.vectorize import vectorized
from stability.rules.base import Passes, Rule, TapProbe, history_depth
from stability.trainer.engine import BatchStream

MAX_BUFFER = 250_000_000
"""Largest ring buffer (floats: depth × runs × p × state variables) a simulation may hold."""

INCONSISTENT_RULES = ("discrepancy", "t2", "recompute")
"""Registry rules defined by inconsistent backward weights (``backward="current"`` only)."""

BACKWARDS = ("stashed", "current")


class _Ring:
    """Ring buffers (depth, R, p) per state variable, newest at ``head``."""

    def __init__(self, variables: Sequence[str], depth: int, w0: torch.Tensor):
        R, p = w0.shape
        self.depth, self.head, self.t = depth, 0, 0
        self.buffers = {}
        for var in variables:
            buf = torch.zeros((depth, R, p), dtype=w0.dtype, device=w0.device)
            if var == "w":
                buf[:] = w0
            self.buffers[var] = buf

    def read(self, var: str, lag, block: slice) -> torch.Tensor:
        if not isinstance(lag, (int, np.integer)):
            raise ValueError("the simulator runs per-stage rules with scalar (integer) delays")
        return self.buffers[var][(self.head - int(lag)) % self.depth, :, block]

    def push(self, blocks: Sequence[slice], news: Sequence[dict]) -> None:
        """Advance one step: stage i's new values into its columns of the next slot."""
        slot = (self.head + 1) % self.depth
        for var, buf in self.buffers.items():
            for block, new in zip(blocks, news, strict=True):
                buf[slot, :, block] = new[var] if var in new else buf[self.head, :, block]
        self.head, self.t = slot, self.t + 1

    def take(self, keep: torch.Tensor) -> None:
        for var in self.buffers:
            self.buffers[var] = self.buffers[var][:, keep].contiguous()


class StageTaps:
    """Tap reader of one stage: ``x(var, lag)`` = its block of ``var`` ``lag`` steps ago."""

    def __init__(self, ring: _Ring, block: slice):
        self.ring, self.block = ring, block

    @property
    def t(self) -> int:
        return self.ring.t

    def __call__(self, var: str, lag=0) -> torch.Tensor:
        return self.ring.read(var, lag, self.block)


def check_stashed(rule: Rule | None, name: str = "") -> None:
    """Refuse rules whose backward or recompute weights differ from the forward ones (module
    doc); also periodic rules (no single per-stage rule to compare with the analysis).
    ``rule=None`` checks the registry name only."""
    if name in INCONSISTENT_RULES:
        raise ValueError(
            f"rule {name!r} models backward weights that differ from the forward ones; the "
            "simulator runs weight stashing (each stage's backward uses its forward weights) — "
            "inconsistent weights need --backward current"
        )
    if rule is None:
        return
    if getattr(rule, "period", 1) != 1:
        raise ValueError(
            f"rule {name or type(rule).__name__!r} is periodic; the simulator and the coupled "
            "analysis need time-invariant rules"
        )
    if not consistent(rule):
        raise ValueError(
            f"rule {name or type(rule).__name__!r} reads different backward or recompute "
            "weights; with weight stashing it needs --backward current (net max-lr, net train; "
            "net noise analyses weight stashing only)"
        )


def consistent(rule: Rule, role: str = "backward") -> bool:
    """Whether the rule's ``role`` pass (``"backward"``, or ``"recompute"``: against the
    backward one) reads the same weights as its reference pass, by a probe of distinct values."""
    p = rule.passes(TapProbe(), 0.1)
    if role == "recompute":
        return p.recompute == p.backward
    return p.backward == p.forward and p.recompute == p.forward


@dataclass(frozen=True)
class SimResult:
    """Outcome of `simulate` for R runs (arrays indexed by run).

    ``diverged_step``: step at which divergence was detected (−1: never); ``final_loss`` and
    ``final_weights`` (R, p) (NaN for diverged runs); ``curve`` (R, K) losses at
    ``curve_steps`` (NaN after divergence; empty without ``record_every``); ``energies[track]``
    (R, steps) per-step squared norms (``"increment"``: ‖w_t − w_{t−1}‖², ``"error"``:
    ‖w_t − w_ref‖²; NaN after divergence).
    """

    lr: np.ndarray
    steps: int
    diverged_step: np.ndarray
    final_loss: np.ndarray
    final_weights: np.ndarray
    curve_steps: np.ndarray
    curve: np.ndarray
    energies: dict[str, np.ndarray]

    @property
    def diverged(self) -> np.ndarray:
        return self.diverged_step >= 0


def simulate(
    problem: NetProblem,
    rules: Sequence[Rule],
    lr,
    *,
    steps: int,
    w0: torch.Tensor | None = None,
    w_ref: torch.Tensor | None = None,
    lr_scales: Sequence[float] = (),
    batch: int | None = None,
    seed: int = 0,
    sampling: str = "reshuffle",
    tilt: bool = False,
    flip: SaddleFlip | None = None,
    criterion: str = "loss",
    divergence: float = 1e6,
    check_every: int = 10,
    record_every: int | None = None,
    track: Sequence[str] = (),
    backward: str = "stashed",
    observe=None,
) -> SimResult:
    """Train R = len(lr) runs of the stage ``rules`` on ``problem`` for ``steps`` steps.

    ``w0``: start, (p,) or (R, p) (default the problem's weights); ``w_ref``: the reference
    point of ``tilt``, the distance criterion and the ``"error"`` track (default w*);
    ``sampling``: the minibatches, ``"reshuffle"`` (epochs) or ``"iid"`` (B distinct indices
    per step, `stability.trainer.engine.BatchStreams`);
    ``backward``: ``"stashed"`` or ``"current"`` (module doc); ``observe(step, w)``: called
    after every step with the (R_active, p) weights (e.g. to record the sharpness).  See the
    module doc for the rest.
    """
    lr = check_step_sizes(lr)
    R, p = lr.size, problem.dim
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    if len(rules) != len(problem.blocks):
        raise ValueError(f"one rule per stage: {len(problem.blocks)} stages, {len(rules)} rules")
    if criterion not in ("loss", "distance"):
        raise ValueError(f"criterion must be loss or distance, got {criterion!r}")
    if tilt and batch is not None:
        raise ValueError("tilt needs full-batch gradients")
    if flip is not None and not tilt:
        raise ValueError("flip needs tilt (the quadratic is centred on its reference point)")
    if backward not in BACKWARDS:
        raise ValueError(f"backward must be stashed or current, got {backward!r}")
    if backward == "stashed":
        for rule in rules:
            check_stashed(rule)
        oracle = _oracle
    else:
        from stability.nets.inconsistent import check_rebuild

        check_rebuild(problem)
        recompute = not all(consistent(r, "recompute") for r in rules)
        oracle = partial(_inconsistent_oracle, recompute=recompute)
    scales = tuple(lr_scales) or (1.0,) * len(rules)
    depth = max(history_depth(r) for r in rules)
    variables = list(dict.fromkeys(v for r in rules for v in r.variables))
    if depth * R * p * len(variables) > MAX_BUFFER:
        raise ValueError(
            f"the ring buffer would hold {depth * R * p * len(variables)} floats (depth {depth}, "
            f"{R} runs, {p} parameters); at most {MAX_BUFFER}"
        )
    w_ref = problem.vector(problem.w_star if w_ref is None else w_ref.detach())
    start = problem.vector(problem.w_star if w0 is None else w0.detach())
    ring = _Ring(variables, depth, torch.broadcast_to(start, (R, p)).clone())
    blocks = problem.blocks
    taps = [StageTaps(ring, b) for b in blocks]
    lr_t = torch.tensor(lr, dtype=problem.dtype, device=problem.device)[:, None]
    g_ref = problem.gradient(w_ref).detach() if tilt else None
    stream = None if batch is None else BatchStream(problem.samples, batch, seed, sampling)

    def loss_of(w: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return _host(torch.stack([problem.loss(w[r]) for r in range(w.shape[0])]))

    def distance(w: torch.Tensor) -> np.ndarray:
        return _host(torch.linalg.vector_norm(w - w_ref, dim=1))

    w_start = ring.buffers["w"][ring.head]
    reference = loss_of(w_start) if criterion == "loss" else distance(w_start)
    curve_steps = np.arange(0, steps + 1, record_every) if record_every else np.zeros(0, int)
    curve = np.full((R, curve_steps.size), np.nan)
    if record_every:
        curve[:, 0] = reference if criterion == "loss" else loss_of(w_start)
    # per-step energies stay on the device (no host round trip per step); read at the end
    energy_t = {
        name: torch.full((R, steps), math.nan, dtype=problem.dtype, device=problem.device)
        for name in track
    }
    diverged_step = np.full(R, -1)
    active = np.arange(R)
    active_t = torch.arange(R, device=problem.device)
    indices = None

    for t in range(steps):
        if stream is not None:
            if indices is None or not len(indices):
                # one host-to-device copy per 256 steps, not one a step
                indices = list(torch.from_numpy(stream.take(256)).to(problem.device))
            index = indices.pop(0)
        else:
            index = None
        step_lr = [lr_t * c for c in scales]
        passes = [rule.passes(x, a) for rule, x, a in zip(rules, taps, step_lr, strict=True)]
        g = oracle(problem, blocks, passes, index)
        if g_ref is not None:
            g = g - g_ref
        if flip is not None:
            g = g + flip.gradient(_assemble(problem, blocks, passes, "forward"), w_ref)
        news = [
            rule.update(x, g[:, b], a)
            for rule, x, b, a in zip(rules, taps, blocks, step_lr, strict=True)
        ]
        w_prev = ring.buffers["w"][ring.head].clone() if "increment" in track else None
        ring.push(blocks, news)
        w = ring.buffers["w"][ring.head]
        done = t + 1
        if observe is not None:
            observe(done, w)
        if "increment" in track:
            energy_t["increment"][active_t, t] = ((w - w_prev) ** 2).sum(dim=1)
        if "error" in track:
            energy_t["error"][active_t, t] = ((w - w_ref) ** 2).sum(dim=1)
        recording = bool(record_every) and done % record_every == 0
        if done % check_every == 0 or recording or done == steps:
            value = loss_of(w) if criterion == "loss" or recording else None
            if recording:
                curve[active, done // record_every] = value
            measure = value if criterion == "loss" else distance(w)
            bad = ~np.isfinite(measure) | (measure > divergence * reference[active])
            if np.any(bad):
                lost = active[bad]
                diverged_step[lost] = done
                keep = np.flatnonzero(~bad)
                active = active[keep]
                if active.size == 0:
                    break
                keep_t = torch.from_numpy(keep).to(problem.device)
                ring.take(keep_t)
                lr_t = lr_t[keep_t]
                active_t = active_t[keep_t]
    final_loss = np.full(R, np.nan)
    final_weights = np.full((R, p), np.nan)
    if active.size:
        final_loss[active] = loss_of(ring.buffers["w"][ring.head])
        final_weights[active] = _host(ring.buffers["w"][ring.head])
    energies = {name: _host(e) for name, e in energy_t.items()}
    return SimResult(
        lr, steps, diverged_step, final_loss, final_weights, curve_steps, curve, energies
    )


def _assemble(problem: NetProblem, blocks, passes: Sequence[Passes], role: str) -> torch.Tensor:
    """The (R, p) vectors of one pass role, each stage's block from its own `Passes`."""
    first = passes[0].forward
    u = torch.empty((first.shape[0], problem.dim), dtype=problem.dtype, device=problem.device)
    for block, ps in zip(blocks, passes, strict=True):
        u[:, block] = getattr(ps, role)
    return u


def _host(t: torch.Tensor) -> np.ndarray:
    """A tensor as a float64 numpy array on the host."""
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


def _batched(problem: NetProblem, fn, *args: torch.Tensor, looped=None) -> torch.Tensor:
    """``fn`` on each run's rows of ``args`` (`stability.nets.vectorize.vectorized`, ``looped``
    in its loop)."""
    return vectorized(problem, fn, *args, looped=looped).detach()


def _oracle(problem: NetProblem, blocks, passes: Sequence[Passes], index) -> torch.Tensor:
    """∇f at the forward weights the stages' passes assembled (weight stashing: the backward
    pass uses the same weights), one gradient per run."""
    u = _assemble(problem, blocks, passes, "forward")
    if u.shape[0] == 1:  # plain autograd: no vmap over a single run
        return problem.gradient(u[0], index)[None]
    return _batched(
        problem,
        lambda w: problem.transformable_gradient(w, index),
        u,
        looped=lambda w: problem.gradient(w, index),
    )


def _inconsistent_oracle(
    problem: NetProblem, blocks, passes: Sequence[Passes], index, *, recompute: bool
) -> torch.Tensor:
    """∇f(u_fwd, u_bkwd[, u_recomp]) with the stages' three pass vectors, one per run."""
    from stability.nets.inconsistent import inconsistent_gradient

    roles = ("forward", "backward", "recompute") if recompute else ("forward", "backward")
    us = [_assemble(problem, blocks, passes, role) for role in roles]
    return _batched(
        problem,
        lambda *u: inconsistent_gradient(problem, *u, index=index, differentiate=grad),
        *us,
        looped=lambda *u: inconsistent_gradient(problem, *u, index=index),
    )


__all__ = [
    "INCONSISTENT_RULES",
    "MAX_BUFFER",
    "SimResult",
    "BACKWARDS",
    "StageTaps",
    "check_stashed",
    "consistent",
    "simulate",
]
