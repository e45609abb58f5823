r"""Pipeline schedules → per-stage delays, pipeline utilization and memory (PipeMare Table 1).

A pipeline splits the model into P stages (stage i = 1 … P, stage 1 first in the forward pass)
and a minibatch into N microbatches.  Each schedule fixes, per stage, the forward delay τ_fwd,i
(steps between reading a stage's weights in the forward pass and applying the gradient) and
the backward delay τ_bkwd,i (PipeMare Sec. 2):

==========  ==============================  ===============  ===============  ====================
schedule    τ_fwd,i                         τ_bkwd,i         utilization      weight memory
==========  ==============================  ===============  ===============  ====================
pipedream   ⌈(2(P−i)+1)/N⌉                  τ_fwd,i (stash)  1                Σ_i |w_i|·τ_fwd,i
gpipe       0                               0                N/(N+P−1)        W = Σ_i |w_i|
pipemare    ⌈(2(P−i)+1)/N⌉                  0                1                W
pb          2(P−i)                          0                1                W
uniform     τ                               τ (consistent)   1                W
==========  ==============================  ===============  ===============  ====================

Sources: PipeMare Table 1 and App. A.1 (pipedream, gpipe, pipemare); Kosson App. B eq. 29-31
(pb: Pipelined Backpropagation, one sample per update, N = 1, the forward weights of stage
s = i − 1 are 2(S−1−s) steps old and the backward pass uses the current weights); ``uniform``
is the single-delay model of PipeMare Sec. 3.1 and Kosson Sec. 3 (every weight delayed by τ,
forward and backward consistent).

Consistent weights: PipeDream's weight stashing gives τ_bkwd = τ_fwd, i.e. the backward pass
uses the very weights of the forward pass.  `Pipeline.tau_bkwd` is then ``None`` (the
convention of `stability.rules.delayed_momentum.DelayedMomentum`: ``tau_bkwd=None`` = backward
uses the forward weights), and `Pipeline.backward_delays` returns τ_fwd.

.. note:: PipeMare's τ counts the step of the update itself (the last stage has τ_fwd,P = 1
   for N = 1); Kosson's D counts the steps between the forward and backward passes (the last
   stage has D = 0).  The schedules keep each paper's own count.

Activation memory follows App. A.2-A.3 and Table 4 in units of M (one microbatch's
activations at one operator), with L operators spread evenly over the P stages.

API::

    p = pipeline("pipemare", stages=4, microbatches=2)
    p.tau_fwd            # array([4, 3, 2, 1])   (stage 1 first)
    p.backward_delays    # array([0, 0, 0, 0])
    p.utilization        # 1.0
    p.weight_memory([10, 10, 10, 10])
    p.activation_memory(operators=8)
    per_parameter(p.tau_fwd, [10, 10, 10, 10])   # the (40,) integer array a rule takes
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.checks import check_choice, check_delay, check_integer, check_order, check_real

SCHEDULES = ("pipemare", "pipedream", "gpipe", "pb", "uniform")
"""Schedule names accepted by `Pipeline.from_options` (see the module table).  The only list
of them: the CLI's ``--schedule`` choices and every API check read it."""

CUSTOM = "custom"
"""`Pipeline.schedule` of an explicit per-stage delay profile (``stage_delays`` alone)."""

BACKWARDS = ("schedule", "stashed", "current")
"""Backward-weight choices of `Pipeline.from_options` (see there)."""

DEFAULT_STAGES = 2
"""P when a schedule is given without ``stages``."""


def _positive_int(name: str, value: Any) -> int:
    return check_integer(name, value, low=1)


def _stage_delays(value: Any, stages: int | None) -> np.ndarray:
    """An explicit per-stage delay profile: integers ≥ 0, one per stage (or one for all)."""
    if isinstance(value, str):
        try:
            value = [int(v) for v in value.split(",")]
        except ValueError:
            raise ValueError(
                f"stage_delays must be comma-separated integers ≥ 0, got {value!r}"
            ) from None
    arr = np.atleast_1d(np.asarray(value))
    if arr.ndim != 1 or arr.size == 0 or (stages is not None and arr.size not in (1, stages)):
        want = "one delay per stage" + ("" if stages is None else f" (1 or {stages})")
        raise ValueError(f"stage_delays must give {want}, got {value!r}")
    arr = check_delay("stage_delays", arr)
    return np.broadcast_to(arr, (stages or arr.size,)).astype(np.int64)


@dataclass(frozen=True)
class Pipeline:
    """Per-stage delays of one schedule (PipeMare Table 1; Kosson App. B for ``pb``).

    Attributes:
        schedule: one of `SCHEDULES`.
        stages: P, the number of pipeline stages.
        microbatches: N, microbatches per minibatch (weights update once per minibatch).
        tau_fwd: forward delays, integer array of shape (P,), stage 1 (first) at index 0.
        tau_bkwd: backward delays (P,), or ``None`` when the backward pass uses the forward
            weights (weight stashing, synchronous schedules, the uniform model).
    """

    schedule: str
    stages: int
    microbatches: int
    tau_fwd: np.ndarray
    tau_bkwd: np.ndarray | None

    @classmethod
    def from_options(
        cls,
        schedule: str | None = None,
        *,
        stage_delays: Any = None,
        tau: int | None = None,
        stages: int | None = None,
        microbatches: int | None = None,
        backward: str = "schedule",
        tau_bkwd: int | None = None,
        default: str | None = None,
    ) -> Pipeline | None:
        """The one builder of per-stage delays, from the options a user gives.

        The profile comes from one of (PipeMare Table 1 for the schedules):

        * ``schedule`` (one of `SCHEDULES`) over ``stages`` P (default `DEFAULT_STAGES`) and
          ``microbatches`` N (default 1); ``uniform`` takes ``tau`` (its one delay, required);
        * ``tau`` alone: the ``uniform`` schedule;
        * ``stage_delays``: an explicit forward-delay profile, one per stage (``"7,5,3,1"``
          or a sequence; one value for all stages).  Alone it is the ``custom`` schedule with
          consistent weights; with a ``schedule`` it overrides that schedule's forward delays,
          and the backward delays keep the schedule's rule (pipemare, pb, gpipe: 0; pipedream,
          uniform: the forward weights).

        ``backward``: ``"schedule"`` (default) the schedule's own backward delays;
        ``"stashed"``: weight stashing, each stage's backward pass reads its forward weights
        (``tau_bkwd`` None); ``"current"``: no stashing, the schedule's own backward delays,
        or for ``uniform`` the uniform ``tau_bkwd`` (default 0: the current weights).

        With no profile given: the schedule ``default`` (the networks' pipemare), or None
        without one (then ``stages``, ``microbatches``, ``tau_bkwd`` may not be given: they
        describe a pipeline).

        >>> Pipeline.from_options("pipemare", stages=4).tau_fwd.tolist()
        [7, 5, 3, 1]
        >>> Pipeline.from_options(stage_delays="7,5,3,1").describe()["schedule"]
        'custom'
        >>> Pipeline.from_options() is None
        True
        """
        check_choice("backward", backward, BACKWARDS)
        if schedule is None and stage_delays is None and tau is None:
            schedule = default
        if schedule is None and stage_delays is None and tau is None:
            for name, value in (
                ("stages", stages),
                ("microbatches", microbatches),
                ("tau_bkwd", tau_bkwd),
            ):
                if value is not None:
                    raise ValueError(f"{name} needs a schedule (the pipeline it describes)")
            return None
        if schedule is not None:
            check_choice("schedule", schedule, SCHEDULES)
        if tau is not None and schedule not in (None, "uniform"):
            raise ValueError(
                "tau is the delay of the uniform schedule: give a uniform tau or a schedule, "
                "not both"
            )
        if tau is not None and stage_delays is not None:
            raise ValueError("give stage_delays or a uniform tau, not both")
        if tau_bkwd is not None and (backward != "current" or schedule not in (None, "uniform")):
            raise ValueError("tau_bkwd needs backward='current' and a uniform tau")
        N = _positive_int("microbatches", 1 if microbatches is None else microbatches)
        if stage_delays is not None:
            delays = _stage_delays(stage_delays, stages)
            P = delays.size if stages is None else _positive_int("stages", stages)
            if schedule is None:
                pipe = cls(CUSTOM, P, N, delays, None)
            else:
                base = _schedule(schedule, P, N, int(delays[0]) if schedule == "uniform" else None)
                zeros = np.zeros(P, dtype=np.int64)
                pipe = cls(schedule, P, N, delays, None if base.tau_bkwd is None else zeros)
        else:
            P = _positive_int("stages", DEFAULT_STAGES if stages is None else stages)
            pipe = _schedule(schedule or "uniform", P, N, tau)
        if backward == "stashed":
            return cls(pipe.schedule, pipe.stages, pipe.microbatches, pipe.tau_fwd, None)
        if backward == "current" and pipe.schedule == "uniform":
            t = int(pipe.tau_fwd[0])
            b = check_delay("tau_bkwd", 0 if tau_bkwd is None else tau_bkwd)
            check_order("tau_bkwd", b, "tau", t)
            return cls("uniform", P, N, pipe.tau_fwd, np.full(P, b, dtype=np.int64))
        return pipe

    @property
    def backward_delays(self) -> np.ndarray:
        """τ_bkwd,i as numbers (τ_fwd,i where the weights are consistent)."""
        return self.tau_fwd if self.tau_bkwd is None else self.tau_bkwd

    @property
    def consistent(self) -> bool:
        """True when every stage's forward and backward weights agree (no discrepancy)."""
        return self.tau_bkwd is None or bool(np.all(self.tau_bkwd == self.tau_fwd))

    @property
    def utilization(self) -> float:
        """Fraction of stages busy at any time (PipeMare Table 1, App. A.1).

        GPipe fills and drains the pipeline at every minibatch: N/(N + P − 1).  The others
        never stall: 1.
        """
        if self.schedule == "gpipe":
            return self.microbatches / (self.microbatches + self.stages - 1)
        return 1.0

    def weight_memory(self, stage_sizes: Sequence[int]) -> float:
        """Weights stored, in parameters (PipeMare Table 1, "Mem" column).

        PipeDream stashes one copy of stage i's weights per step in flight:
        Σ_i |w_i|·τ_fwd,i.  Every other schedule keeps one copy, W = Σ_i |w_i|.
        Optimizer state (momentum, the T2 accumulator) is not counted, as in Table 1.
        """
        sizes = _stage_sizes(stage_sizes, self.stages)
        if self.schedule == "pipedream":
            return float(np.sum(sizes * self.tau_fwd))
        return float(np.sum(sizes))

    def activation_memory(
        self, operators: int | None = None, *, recompute_segment: int | None = None
    ) -> float:
        """Activation memory in units of M (one microbatch at one operator), App. A.2-A.3.

        ``operators`` L (default P, fine-grained pipelining), spread evenly over the stages.

        Without recompute:

        * asynchronous schedules (pipemare, pipedream, pb, uniform): stage i holds
          2(P−i)+1 microbatches in flight for each of its L/P operators,
          (L/P)·Σ_i (2(P−i)+1) = L·P  (eq. 6, A_PM = O(MPL));
        * gpipe: every operator caches the N microbatches of a minibatch, N·L  (eq. 7).

        With PipeMare recompute over segments of S = ``recompute_segment`` stages (App. A.3,
        which assumes one operator per stage, L = P): a segment starting at stage i costs
        2(P−i) + S² (asynchronous) or N + S² (gpipe), summed over the ⌈P/S⌉ segments; at
        S = √P this is O(MP^{3/2}) (eq. 9) and at S = √N, O(MPN^{1/2}) for gpipe (eq. 10).
        """
        P, N = self.stages, self.microbatches
        L = P if operators is None else _positive_int("operators", operators)
        if recompute_segment is None:
            return float(N * L) if self.schedule == "gpipe" else float(L * P)
        S = _positive_int("recompute_segment", recompute_segment)
        if L != P:
            raise ValueError(
                f"recompute_segment assumes one operator per stage (App. A.3): operators must "
                f"equal stages={P}, got {L}"
            )
        starts = np.arange(1, P + 1, S)
        head = np.full(starts.size, N) if self.schedule == "gpipe" else 2 * (P - starts)
        return float(np.sum(head + S * S))

    def describe(self, stage_sizes: Sequence[int] | None = None) -> dict[str, Any]:
        """JSON-ready summary: delays per stage, utilization, memory."""
        out = {
            "schedule": self.schedule,
            "stages": self.stages,
            "microbatches": self.microbatches,
            "tau_fwd": self.tau_fwd.tolist(),
            "tau_bkwd": self.backward_delays.tolist(),
            "consistent_weights": self.consistent,
            "utilization": self.utilization,
            "activation_memory": self.activation_memory(),
        }
        if stage_sizes is not None:
            out["weight_memory"] = self.weight_memory(stage_sizes)
        return out


def _schedule(name: str, P: int, N: int, tau: int | None) -> Pipeline:
    """The delays of schedule ``name`` (module table) for validated P, N."""
    if (tau is not None) != (name == "uniform"):
        raise ValueError("tau is given for the uniform schedule only (and required there)")
    zeros = np.zeros(P, dtype=np.int64)
    if name == "pipedream":
        return Pipeline(name, P, N, pipemare_delays(P, N), None)
    if name == "gpipe":
        return Pipeline(name, P, N, zeros, None)
    if name == "pipemare":
        return Pipeline(name, P, N, pipemare_delays(P, N), zeros)
    if name == "pb":
        if N != 1:
            raise ValueError(
                f"microbatches must be 1 for pb (it updates after every sample), got {N}"
            )
        return Pipeline(name, P, N, 2 * (P - np.arange(1, P + 1)), zeros)
    t = check_delay("tau", tau)
    return Pipeline(name, P, N, np.full(P, t, dtype=np.int64), None)


def pipemare_delays(P: int, N: int) -> np.ndarray:
    """τ_fwd,i = ⌈(2(P−i)+1)/N⌉ for i = 1 … P stages, N microbatches (PipeMare Table 1,
    App. A.1)."""
    i = np.arange(1, P + 1)
    return -((-(2 * (P - i) + 1)) // N)  # integer ceiling


def worst_delay(name: str | None, P: int | None, N: int | None) -> int | None:
    """The delay the ``uniform`` schedule takes where none is given: PipeMare's largest,
    ⌈(2P−1)/N⌉ for P stages (default `DEFAULT_STAGES`) and N microbatches (default 1) — the
    single-delay model of the scalar theory at the worst stage; None for the other schedules
    (which need no ``tau``)."""
    if name != "uniform":
        return None
    P = _positive_int("stages", DEFAULT_STAGES if P is None else P)
    return int(pipemare_delays(P, _positive_int("microbatches", N or 1))[0])


def pipeline(
    schedule: str, stages: int, microbatches: int = 1, *, tau: int | None = None
) -> Pipeline:
    """Positional shorthand for ``Pipeline.from_options(schedule, stages=…, microbatches=…,
    tau=…)`` (the per-stage delays of ``schedule`` for P = ``stages``, N = ``microbatches``)."""
    check_choice("schedule", schedule, SCHEDULES)
    return Pipeline.from_options(schedule, tau=tau, stages=stages, microbatches=microbatches)


# -- stages over parameters ------------------------------------------------------------------


def _stage_sizes(stage_sizes: Sequence[int], stages: int) -> np.ndarray:
    sizes = np.asarray(stage_sizes)
    if sizes.shape != (stages,) or sizes.dtype.kind not in "iu" or np.any(sizes < 1):
        raise ValueError(
            f"stage_sizes must be {stages} positive integers (one per stage), got {stage_sizes!r}"
        )
    return sizes.astype(np.int64)


def split_evenly(parameters: int, stages: int) -> np.ndarray:
    """Stage sizes for ``parameters`` split into ``stages`` contiguous blocks (sizes differ by
    at most one, earlier stages larger), e.g. the blocks of a linear model's weight vector."""
    n = _positive_int("parameters", parameters)
    P = _positive_int("stages", stages)
    if P > n:
        raise ValueError(f"stages must be ≤ the number of parameters {n}, got {P}")
    return np.array([n // P + (s < n % P) for s in range(P)], dtype=np.int64)


def per_parameter(stage_values: Any, stage_sizes: Sequence[int]) -> np.ndarray:
    """Expand one value per stage into one value per parameter (stage blocks in order).

    This turns the per-stage delays of a `Pipeline` into the integer arrays a rule takes as
    its delays (`DelayedMomentum` accepts per-parameter delay arrays).
    """
    values = np.asarray(stage_values)
    sizes = _stage_sizes(stage_sizes, values.shape[-1] if values.ndim else 1)
    return np.repeat(values, sizes, axis=-1)


# -- learning-rate rescheduling and warm-up ---------------------------------------------------


def t1_factor(tau: Any, step: Any, anneal_steps: int) -> Any:
    """T1 step-size factor τ_i^{−p_k}, p_k = 1 − min(k/K, 1) (PipeMare eq. 4).

    α_{k,i} = α_{k,base}·t1_factor(τ_i, k, K).  A stage without delay (τ_i = 0) keeps its
    step size (factor 1): eq. 4 divides by the delay only where there is one.
    """
    K = _positive_int("anneal_steps", anneal_steps)
    p = 1.0 - np.minimum(np.asarray(step, dtype=float) / K, 1.0)
    return np.maximum(np.asarray(tau, dtype=float), 1.0) ** (-p)


def warmup_utilization(async_epochs: float, sync_epochs: float, sync_utilization: float) -> float:
    """Amortized utilization of PipeMareW: (E_async + E_sync)/(E_async + E_sync/Util_sync).

    PipeMare Sec. 4 (Warmup Epochs).  .. warning:: the extracted text prints
    ``E_sync × Util_sync`` in the denominator, which exceeds 1; synchronous epochs take
    1/Util_sync as long, and the division reproduces Table 2 (IWSLT14: 10 warm-up epochs at
    GPipe's 17 % give 42 % over ≈ 35 epochs).
    """
    check_real("async_epochs", async_epochs, low=0.0)
    check_real("sync_epochs", sync_epochs, low=0.0)
    check_real("sync_utilization", sync_utilization, low=0.0, high=1.0, low_open=True)
    total = async_epochs + sync_epochs
    if total == 0:
        raise ValueError("async_epochs + sync_epochs must be > 0")
    return total / (async_epochs + sync_epochs / sync_utilization)


__all__ = [
    "BACKWARDS",
    "CUSTOM",
    "DEFAULT_STAGES",
    "SCHEDULES",
    "Pipeline",
    "per_parameter",
    "pipeline",
    "pipemare_delays",
    "split_evenly",
    "t1_factor",
    "warmup_utilization",
    "worst_delay",
]
