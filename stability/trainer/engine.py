r"""Batched delayed training: R runs advance in lockstep as one array computation.

Every step calls the rule's own functions (`stability.rules.base`)::

    p      = rule.passes(x, lr)                          # u_fwd, u_bkwd, u_recomp
    g      = oracle(p.forward, p.backward, p.recompute)  # the problem's gradient
    x.push(rule.update(x, g, lr))

with ``x`` a `RingHistory`: one ring buffer of shape (depth, R, p) per state variable, read by
``x(var, lag)``.  ``lag`` may be an integer, an integer array of shape (p,) (per-stage delays,
the same for every run), (R, 1) (one delay per run) or (R, p).  Hyperparameters broadcast
against the (R, p) state: ``lr`` has shape (R, 1) (times a per-parameter factor for T1),
rule fields may be arrays of shape (p,), (R, 1) or (R, p).  The trainer never re-implements a
rule: the same `DelayedMomentum` object is linearized by `stability.dynamics.linear`.

Minibatches (``batch`` = B) are drawn from seeded batch streams (`BatchStreams`) in one of two
``sampling`` modes:

* ``"reshuffle"`` (random reshuffling, the default): a new permutation of the samples each
  epoch, consecutive batches of B, the incomplete last batch dropped;
* ``"iid"``: B distinct indices drawn uniformly at every step, independently across steps
  (the sampling the exact minibatch theory of `stability.noise` covers).

``streams=None`` (the default) gives all runs one shared stream — the same batches for every
run, common random numbers for comparing step sizes.  ``streams`` = an integer array (R,)
gives run r the stream ``streams[r]``: runs with equal ids share their batches, runs with
different ids draw independently (R independent samples of training; two runs sharing a
stream differ by a solution of the homogeneous system).  ``batch=None`` is full-batch,
deterministic training.

Divergence: every ``check_every`` steps the loss of each run is computed; a run whose loss is
non-finite or exceeds ``divergence`` × its initial loss is marked (step, loss) and frozen —
removed from the arrays, so it costs nothing afterwards and cannot spread NaN or warnings
(all arithmetic runs under ``np.errstate(all="ignore")``).  Its outputs after that step are
NaN in the arrays (null in JSON).

Rates: with ``track`` the engine records, per run and step, ‖w_t − w*‖² (``"error"``, needs the
problem's minimizer) and/or ‖w_t − w_{t−1}‖² (``"increment"``), summed over blocks of
``block`` steps (1 unless memory demands more); `stability.trainer.measure` turns them into
asymptotic rates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.checks import check_step_sizes
from stability.rules.base import Rule, history_depth

TRACKS = ("error", "increment")
_ENERGY_BUDGET = 8_000_000  # floats kept per tracked quantity (R × steps / block)


class RingHistory:
    """Tap reader over ring buffers: ``x(var, lag)`` for R runs of p parameters at once.

    Before the start every value is the initial one, so a lag beyond the t steps taken reads
    lag t: ``depth`` need only exceed the steps a run takes (`train` keeps min(1 + largest
    lag, steps + 1) values: a stage delay of 10⁵ in a run of 2,000 steps allocated and
    copied 10⁵ values per run, 25 s of a `validate` call).
    """

    def __init__(self, variables: Sequence[str], depth: int, initial: dict[str, np.ndarray]):
        w = initial["w"]
        R, p = w.shape
        self.depth, self.head, self.t = depth, 0, 0
        self.buffers = {}
        for var in variables:
            buf = np.empty((depth, R, p))
            buf[:] = initial.get(var, np.zeros_like(w))
            self.buffers[var] = buf
        self._rows = np.arange(R)[:, None]
        self._cols = np.arange(p)

    def __call__(self, var: str, lag: Any = 0) -> np.ndarray:
        buf = self.buffers[var]
        if isinstance(lag, (int, np.integer)):
            return buf[(self.head - min(lag, self.t)) % self.depth]
        slot = (self.head - np.minimum(lag, self.t)) % self.depth
        R, p = buf.shape[1:]
        if slot.shape == (R, 1):
            return buf[slot[:, 0], self._rows[:, 0]]
        if slot.shape == (p,):
            return buf[slot, :, self._cols].T
        return buf[slot, self._rows, self._cols]

    def weighted(self, var: str, lags: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Σ_k weights_k·x(var, lags_k) in one gather (`stability.rules.base.tap_sum`; lags
        ascending).  Lags beyond the steps taken all read the initial value, so they are one
        term, (Σ of their weights)·x(var, t): a step gathers min(t, K) weight vectors, not K
        (a kernel of 10⁵ lags in a run of a few thousand steps)."""
        buf = self.buffers[var]
        near = int(np.searchsorted(lags, self.t, side="right"))
        total = np.tensordot(weights[:near], buf[(self.head - lags[:near]) % self.depth], axes=1)
        if near < lags.size:
            total = total + weights[near:].sum() * buf[(self.head - self.t) % self.depth]
        return total

    def push(self, new: dict[str, np.ndarray]) -> None:
        """Advance one step; variables absent from ``new`` keep their current value."""
        head = (self.head + 1) % self.depth
        for var, buf in self.buffers.items():
            buf[head] = new[var] if var in new else buf[self.head]
        self.head, self.t = head, self.t + 1

    def take(self, keep: np.ndarray) -> None:
        """Keep only the runs ``keep`` (indices into the current runs)."""
        for var in self.buffers:
            self.buffers[var] = np.ascontiguousarray(self.buffers[var][:, keep])
        self._rows = np.arange(len(keep))[:, None]


def take_runs(value: Any, keep: np.ndarray, runs: int) -> Any:
    """Select runs ``keep`` from per-run data of ``runs`` runs: 2-D arrays (runs, ·) are indexed
    on axis 0; frozen dataclasses (rules, schedules) have such fields selected; anything else
    (scalars, per-parameter arrays (p,), broadcast (1, ·) arrays) is shared and returned as is."""
    if isinstance(value, np.ndarray):
        return value[keep] if value.ndim == 2 and value.shape[0] == runs else value
    if _is_dataclass(value):
        changes = {
            f.name: take_runs(getattr(value, f.name), keep, runs)
            for f in dataclasses.fields(value)
            if isinstance(getattr(value, f.name), np.ndarray)
            or _is_dataclass(getattr(value, f.name))
        }
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _is_dataclass(v: Any) -> bool:
    return dataclasses.is_dataclass(v) and not isinstance(v, type)


@dataclass(frozen=True)
class Phase:
    """One stretch of training with one rule (PipeMareW: a synchronous phase, then async).

    ``steps``: length (``None``: until the end).  ``lr_scale``: per-step factor of the step
    size, ``lr_scale(k)`` at step k of the phase, broadcastable to (R, p) (T1); ``None``: 1.
    """

    rule: Rule
    steps: int | None = None
    lr_scale: Callable[[int], Any] | None = None


@dataclass(frozen=True)
class TrainResult:
    """Outcome of `train` for R runs (arrays indexed by run).

    ``diverged_step``: step at which divergence was detected (−1: never); ``diverged_loss``
    the loss there (NaN: none, or non-finite); ``final_loss`` and ``final_weights`` (NaN for
    diverged runs); ``curve`` (R, K) losses at ``curve_steps`` (NaN after divergence);
    ``energies[track]`` (R, J) block sums of the tracked squared norms (NaN after divergence),
    blocks of ``block`` steps starting at step 1; ``initial_loss`` (R,).
    """

    lr: np.ndarray
    steps: int
    batch: int | None
    seed: int
    divergence: float
    initial_loss: np.ndarray
    diverged_step: np.ndarray
    diverged_loss: np.ndarray
    final_loss: np.ndarray
    final_weights: np.ndarray
    curve_steps: np.ndarray
    curve: np.ndarray
    block: int
    energies: dict[str, np.ndarray]

    @property
    def diverged(self) -> np.ndarray:
        return self.diverged_step >= 0


SAMPLING = ("reshuffle", "iid")


class BatchStreams:
    """``count`` seeded streams of minibatch indices (module doc), drawn from one generator.

    ``take(steps)`` returns the indices (steps, count, B).  Stream s is reproducible from
    (``seed``, ``count``, s); streams are independent of each other.

    * ``"reshuffle"``: each stream draws a fresh permutation of the samples each epoch and
      cuts it into ``samples // batch`` consecutive batches;
    * ``"iid"``: every row is B distinct indices, uniform over the B-subsets (B independent
      uniform draws, a row with a repeated index redrawn: exact rejection sampling; when
      repeats are likely, B² > samples, the B smallest of uniform random keys instead).  The
      indices of a batch are returned sorted (the order within a batch carries nothing).
    """

    def __init__(self, samples: int, batch: int, seed: int, sampling: str, count: int):
        if not 1 <= batch <= samples:
            raise ValueError(f"batch must be an integer in [1, {samples}], got {batch}")
        if sampling not in SAMPLING:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLING)}, got {sampling!r}")
        if count < 1:
            raise ValueError(f"the number of batch streams must be ≥ 1, got {count}")
        self.samples, self.batch, self.sampling, self.count = samples, batch, sampling, count
        self.rng = np.random.default_rng(seed)
        self.per_epoch = samples // batch
        self._epoch = self._new_epoch() if sampling == "reshuffle" else None
        self._next = 0

    def _new_epoch(self) -> np.ndarray:
        perms = np.stack([self.rng.permutation(self.samples) for _ in range(self.count)])
        cut = perms[:, : self.per_epoch * self.batch]
        return cut.reshape(self.count, self.per_epoch, self.batch).transpose(1, 0, 2)

    def _sorted_draws(self, count: int) -> np.ndarray:
        """``count`` rows of B uniform indices, each row sorted (a batch is a set)."""
        rows = self.rng.integers(self.samples, size=(count, self.batch), dtype=np.int32)
        rows.sort(axis=1)
        return rows

    def _iid(self, steps: int) -> np.ndarray:
        n, B = self.samples, self.batch
        if B * B > n:
            block = max(1, (1 << 22) // n)  # rows of random keys per draw
            keys = (
                self.rng.random((min(block, steps * self.count - i), n))
                for i in range(0, steps * self.count, block)
            )
            rows = np.sort(np.concatenate([np.argpartition(k, B - 1)[:, :B] for k in keys]), axis=1)
        else:
            rows = self._sorted_draws(steps * self.count)
            redraw = np.arange(rows.shape[0])
            while redraw.size:
                repeated = np.any(rows[redraw, 1:] == rows[redraw, :-1], axis=1)
                redraw = redraw[repeated]
                rows[redraw] = self._sorted_draws(redraw.size)
        return rows.reshape(steps, self.count, B)

    def take(self, steps: int) -> np.ndarray:
        """Indices (steps, count, B) of the next ``steps`` minibatches of every stream."""
        if self.sampling == "iid":
            return self._iid(steps)
        out = []
        while steps > 0:
            if self._next == self.per_epoch:
                self._epoch, self._next = self._new_epoch(), 0
            n = min(steps, self.per_epoch - self._next)
            out.append(self._epoch[self._next : self._next + n])
            self._next += n
            steps -= n
        return np.concatenate(out)


class BatchStream:
    """One seeded stream of minibatch indices (`BatchStreams` with one stream)."""

    def __init__(self, samples: int, batch: int, seed: int, sampling: str = "reshuffle"):
        self._streams = BatchStreams(samples, batch, seed, sampling, 1)

    def take(self, steps: int) -> np.ndarray:
        """Indices (steps, B) of the next ``steps`` minibatches."""
        return self._streams.take(steps)[:, 0]


class _Oracles:
    """The gradient oracle of each step: full batch, shared minibatches (one oracle per step
    for all runs), or per-run minibatches from independent streams (module doc)."""

    CHUNK = 256
    RUN_INDICES = 1 << 22  # per-run indices kept per chunk (steps × runs × B)

    def __init__(self, problem, batch: int | None, seed: int, sampling: str, streams):
        self.problem = problem
        self.run_streams = None if streams is None else np.asarray(streams, dtype=np.int64)
        self.stream = None
        if batch is not None:
            count = 1 if self.run_streams is None else int(self.run_streams.max()) + 1
            self.stream = BatchStreams(problem.samples, batch, seed, sampling, count)
        elif sampling not in SAMPLING:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLING)}, got {sampling!r}")
        if self.run_streams is not None and batch is not None:
            if not hasattr(problem, "run_batch_oracle"):
                raise ValueError(
                    "independent batch streams need per-run minibatch gradients "
                    "(linear regression); use streams=None (one shared stream)"
                )
            size = self.run_streams.size * batch
            self.chunk = max(1, min(self.CHUNK, self.RUN_INDICES // size))
        else:
            self.chunk = self.CHUNK
        self._chunk: Any = []
        self._pos = 0

    def next(self):
        if self.stream is None:
            return self.problem.oracle
        if self._pos == len(self._chunk):
            indices = self.stream.take(self.chunk)
            if self.run_streams is None:
                self._chunk = self.problem.batch_oracles(indices[:, 0])
            else:
                self._chunk = indices  # per run: the oracle is built at each step
            self._pos = 0
        self._pos += 1
        if self.run_streams is None:
            return self._chunk[self._pos - 1]
        return self.problem.run_batch_oracle(self._chunk[self._pos - 1][self.run_streams])

    def take(self, keep: np.ndarray) -> None:
        """Keep only the runs ``keep``; the other runs' streams go on unchanged."""
        if self.run_streams is not None:
            self.run_streams = self.run_streams[keep]


def _phases(plan: Rule | Sequence[Phase]) -> list[Phase]:
    if isinstance(plan, Sequence):
        phases = list(plan)
        if not phases or any(not isinstance(p, Phase) for p in phases):
            raise ValueError("plan must be a rule or a non-empty sequence of Phase")
        return phases
    return [Phase(plan)]


def _uses_recompute(rule: Rule) -> bool:
    return getattr(rule, "tau_recomp", None) is not None


def train(
    problem,
    plan: Rule | Sequence[Phase],
    lr: Any,
    *,
    steps: int,
    batch: int | None = None,
    seed: int = 0,
    w0: Any = None,
    w_star: Any = None,
    sampling: str = "reshuffle",
    streams: Any = None,
    divergence: float = 1e6,
    loss_offset: float = 0.0,
    check_every: int = 10,
    record_every: int | None = None,
    track: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train R = len(lr) runs of ``plan`` (a rule or phases) on ``problem`` for ``steps`` steps.

    ``lr``: step sizes, shape (R,).  ``w0``: initial weights (p,) or (R, p) (default: the
    problem's ``initial_weights(seed)``).  ``sampling`` and ``streams``: how minibatches are
    drawn and which runs share them (module doc).  ``w_star``: the point the ``"error"`` track
    measures from (default: the problem's ``minimizer``).  Divergence compares the excess loss
    f − ``loss_offset`` with ``divergence`` × its initial value (offset 0: the loss itself; the
    minimum loss for runs started next to a minimizer).  Rule fields with a run axis must be
    2-D, (R, 1) or (R, p).  ``record_every``: loss-curve spacing (default: about 200 points).
    ``progress`` is called with the number of steps done (for a progress bar).  See the module
    doc.
    """
    lr = check_step_sizes(lr)
    R, p = lr.size, problem.dim
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    for name in track:
        if name not in TRACKS:
            raise ValueError(f"track entries must be among {', '.join(TRACKS)}, got {name!r}")
    phases = _phases(plan)
    depth = min(max(history_depth(ph.rule) for ph in phases), steps + 1)
    variables = list(dict.fromkeys(v for ph in phases for v in ph.rule.variables))
    w_init = problem.initial_weights(seed) if w0 is None else np.asarray(w0, dtype=float)
    w_init = np.broadcast_to(w_init, (R, p)).astype(float)
    x = RingHistory(variables, depth, {"w": w_init})

    record_every = record_every or max(1, steps // 200)
    curve_steps = np.arange(0, steps + 1, record_every)
    curve = np.full((R, curve_steps.size), np.nan)
    block = max(1, math.ceil(R * steps / _ENERGY_BUDGET)) if track else 1
    energies = {name: np.full((R, math.ceil(steps / block)), np.nan) for name in track}
    acc = {name: np.zeros(R) for name in track}
    if "error" in track and w_star is None:
        w_star = problem.minimizer

    with np.errstate(all="ignore"):
        initial = np.asarray(problem.loss(w_init), dtype=float)
    curve[:, 0] = initial
    diverged_step = np.full(R, -1)
    diverged_loss = np.full(R, np.nan)
    final_weights = np.full((R, p), np.nan)
    active = np.arange(R)  # original index of each live run
    lr_live = lr[:, None]
    live_phases = phases
    if streams is not None:
        streams = np.asarray(streams)
        if streams.shape != (R,) or streams.dtype.kind not in "iu" or np.any(streams < 0):
            raise ValueError(f"streams must be {R} integers ≥ 0 (one stream id per run)")
    oracles = _Oracles(problem, batch, seed, sampling, streams)

    phase_index, phase_start = 0, 0
    with np.errstate(all="ignore"):
        for t in range(steps):
            ph = live_phases[phase_index]
            if ph.steps is not None and t - phase_start >= ph.steps:
                phase_index, phase_start = phase_index + 1, t
                ph = live_phases[phase_index]
            rule = ph.rule
            step_lr = lr_live if ph.lr_scale is None else lr_live * ph.lr_scale(t - phase_start)
            passes = rule.passes(x, step_lr)
            oracle = oracles.next()
            u_rec = passes.recompute if _uses_recompute(rule) else None
            g = oracle(passes.forward, passes.backward, u_rec)
            w_prev = x("w")
            x.push(rule.update(x, g, step_lr))
            w = x("w")
            done = t + 1
            if track:
                if "error" in track:
                    e = w - w_star
                    acc["error"] += np.einsum("ri,ri->r", e, e)
                if "increment" in track:
                    d = w - w_prev
                    acc["increment"] += np.einsum("ri,ri->r", d, d)
                if done % block == 0 or done == steps:
                    j = (done - 1) // block
                    for name in track:
                        energies[name][active, j] = acc[name]
                        acc[name][:] = 0.0
            recording = done % record_every == 0
            if done % check_every == 0 or recording or done == steps:
                loss = np.asarray(problem.loss(w), dtype=float)
                if recording:
                    curve[active, done // record_every] = loss
                excess = loss - loss_offset
                bad = ~np.isfinite(loss) | (excess > divergence * (initial[active] - loss_offset))
                if np.any(bad):
                    lost = active[bad]
                    diverged_step[lost], diverged_loss[lost] = done, loss[bad]
                    if recording:
                        curve[lost, done // record_every] = np.nan
                    for name in track:
                        energies[name][lost, (done - 1) // block :] = np.nan
                    keep = np.flatnonzero(~bad)
                    runs = active.size
                    active = active[keep]
                    if active.size == 0:
                        break
                    x.take(keep)
                    oracles.take(keep)
                    lr_live = lr_live[keep]
                    live_phases = [take_runs(ph, keep, runs) for ph in live_phases]
                    acc = {name: a[keep] for name, a in acc.items()}
            if progress is not None and (done % 1000 == 0 or done == steps):
                progress(done)
        final_loss = np.full(R, np.nan)
        if active.size:
            final_weights[active] = x("w")
            final_loss[active] = problem.loss(x("w"))
    diverged_loss[~np.isfinite(diverged_loss)] = np.nan
    return TrainResult(
        lr=lr,
        steps=steps,
        batch=batch,
        seed=seed,
        divergence=divergence,
        initial_loss=initial,
        diverged_step=diverged_step,
        diverged_loss=diverged_loss,
        final_loss=final_loss,
        final_weights=final_weights,
        curve_steps=curve_steps,
        curve=curve,
        block=block,
        energies=energies,
    )


__all__ = [
    "SAMPLING",
    "TRACKS",
    "BatchStream",
    "BatchStreams",
    "Phase",
    "RingHistory",
    "TrainResult",
    "take_runs",
    "train",
]
