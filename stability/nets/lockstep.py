r"""R runs of the network simulator's stage rules in lockstep, each on its own batch stream.

The rules' state lives in the simulator's ring buffer (`stability.nets.simulator`); each step
draws run r's batch B_r,t from stream ``streams[r]`` (`stability.trainer.engine.BatchStreams`,
B distinct indices per step for ``"iid"``), assembles every run's forward weights u_r from the
stages' passes and takes all gradients as one ``torch.func.vmap`` over (weights, batch
inputs; a loop for a model vmap cannot batch, `stability.nets.vectorize`), minus a ``tilt``
that depends on the batch:

    g_r = ∇f_{B_r,t}(u_r) − tilt(B_r,t).

`stability.nets.minibatch_runs` tilts by the full-batch gradient at w* (training near a
stationary point), `stability.nets.minibatch_lyapunov` by the batch's own gradient at w*
(the offsets removed).  Stream s is the same at every step size (common random numbers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import grad

from stability.nets.problem import NetProblem
from stability.nets.simulator import StageTaps, _assemble, _Ring
from stability.nets.vectorize import vectorized
from stability.rules.base import Rule, history_depth
from stability.trainer.engine import BatchStreams

CHUNK_STEPS = 128
"""Batch indices drawn per call of the streams."""


@dataclass(frozen=True)
class RunSetup:
    """What every run of a measurement shares: the network ``problem``, its stage ``rules``, the
    batch size B, the ``sampling`` of the batch streams (``"iid"`` or ``"reshuffle"``) and
    their ``seed``."""

    problem: NetProblem
    rules: Sequence[Rule]
    batch: int
    sampling: str = "iid"
    seed: int = 0


class LockstepRuns:
    """The runs (module doc) of ``setup``: ``lr`` (R,), ``w0`` (R, p) as a constant history
    (the other state variables 0), ``streams`` (R,) the stream of each run; `step` advances all
    of them."""

    def __init__(
        self,
        setup: RunSetup,
        lr: np.ndarray,
        w0: torch.Tensor,
        streams: np.ndarray,
        *,
        tilt: Callable[[torch.Tensor], torch.Tensor],
    ):
        problem, rules = setup.problem, setup.rules
        self.problem, self.rules, self.tilt = problem, tuple(rules), tilt
        variables = list(dict.fromkeys(v for r in rules for v in r.variables))
        self.ring = _Ring(variables, max(history_depth(r) for r in rules), problem.vector(w0))
        self.taps = [StageTaps(self.ring, b) for b in problem.blocks]
        self.lr = problem.vector(np.asarray(lr, dtype=float))[:, None]
        self.streams = np.asarray(streams)
        self.source = BatchStreams(
            problem.samples, setup.batch, setup.seed, setup.sampling, int(self.streams.max()) + 1
        )
        self.indices: torch.Tensor | None = None

    @property
    def w(self) -> torch.Tensor:
        """The runs' current weights (R, p)."""
        return self.ring.buffers["w"][self.ring.head]

    def step(self) -> torch.Tensor:
        """One step of every run; returns the new weights (R, p)."""
        t = self.ring.t
        if t % CHUNK_STEPS == 0:
            drawn = self.source.take(CHUNK_STEPS)[:, self.streams]
            self.indices = torch.from_numpy(drawn.astype(np.int64)).to(self.problem.device)
        index = self.indices[t % CHUNK_STEPS]  # (R, B)
        p = self.problem
        passes = [rule.passes(x, self.lr) for rule, x in zip(self.rules, self.taps, strict=True)]
        u = _assemble(p, p.blocks, passes, "forward")
        inputs, targets = p.data.rows(index)
        gradients = vectorized(p, grad(p.batch_loss), u, inputs, targets, looped=p.batch_gradient)
        g = gradients.detach() - self.tilt(index)
        news = [
            rule.update(x, g[:, b], self.lr)
            for rule, x, b in zip(self.rules, self.taps, p.blocks, strict=True)
        ]
        self.ring.push(p.blocks, news)
        return self.w


__all__ = ["CHUNK_STEPS", "LockstepRuns", "RunSetup"]
