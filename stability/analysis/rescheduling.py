r"""T1 audit: does PipeMare's rescheduled step size stay under each stage's max stable lr?

PipeMare's learning-rate rescheduling T1 (eq. 4) gives stage i at step k

    α_{k,i} = α_{k,base} / τ_i^{p_k},    p_k = 1 − min(k/K, 1),

(`stability.pipeline.t1_factor`; a stage without delay keeps its step, τ_i^{p} := 1), i.e.
≈ α/τ_i early and the plain base schedule after K steps.  The rescheduling is a heuristic: it
is *safe* for a base schedule, stage delays and K if α_{k,i} < max_lr(rule, λ, τ_i) at every
step and stage — the exact threshold of the rule on the quadratic with curvature λ (λ_max of
the problem's Hessian), from `stability.analysis.boundary.max_lr` (Floquet for periodic rules).

`audit` evaluates the whole (steps × stages) table at once; the max lr is computed once per
distinct delay.  It reports the unsafe windows (maximal runs of consecutive unsafe steps, per
stage), the worst point and the margin min_{k,i} (1 − α_{k,i}/max_lr_i): positive when safe,
negative when some step exceeds its threshold.

Base schedules (`parse_schedule`), α_{k,base} for k = 0, 1, …:

* ``constant:LR`` — LR;
* ``step:LR:FACTOR:B1,B2,…`` — LR·FACTOR^{#{j: B_j ≤ k}} (decay by FACTOR at each boundary);
* ``warmup:LR:W`` — linear warm-up LR·(k + 1)/W for k < W, then LR;
* ``cosine:LR:T`` — LR·(1 + cos(π·min(k, T)/T))/2.

.. note:: T1 alone is what the audit checks: the threshold is that of the rule *at a constant
   step size*; a step size that changes slowly between two safe values is treated as safe
   (frozen-time analysis).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.analysis.boundary import max_lr
from stability.checks import check_delay, check_real
from stability.limits import T1_AUDIT_MAX_CELLS
from stability.pipeline import t1_factor
from stability.result import Result, output
from stability.rules.registry import delay_parameter, get_spec

SCHEDULE_KINDS = ("constant", "step", "warmup", "cosine")


@dataclass(frozen=True)
class Schedule:
    """A base learning-rate schedule α_{k,base} (module doc); ``text`` is its spelling."""

    kind: str
    lr: float
    factor: float = 1.0
    boundaries: tuple[int, ...] = ()
    length: int = 0
    text: str = ""

    def __call__(self, steps: np.ndarray) -> np.ndarray:
        k = np.asarray(steps, dtype=float)
        if self.kind == "constant":
            return np.full(k.shape, self.lr)
        if self.kind == "step":
            passed = (k[..., None] >= np.asarray(self.boundaries, dtype=float)).sum(axis=-1)
            return self.lr * self.factor**passed
        if self.kind == "warmup":
            return self.lr * np.minimum((k + 1) / self.length, 1.0)
        return self.lr * 0.5 * (1 + np.cos(math.pi * np.minimum(k, self.length) / self.length))


def parse_schedule(text: str) -> Schedule:
    """``constant:LR``, ``step:LR:FACTOR:B1,B2,…``, ``warmup:LR:W`` or ``cosine:LR:T``; a bad
    part is refused naming ``lr_schedule`` (the flag the text came from)."""
    try:
        return _parse_schedule(text)
    except ValueError as err:
        if str(err).startswith("lr_schedule"):
            raise
        raise ValueError(f"lr_schedule {text!r}: {err}") from None


def _parse_schedule(text: str) -> Schedule:
    parts = text.split(":")
    kind = parts[0]
    usage = {
        "constant": "constant:LR",
        "step": "step:LR:FACTOR:B1,B2,...",
        "warmup": "warmup:LR:W",
        "cosine": "cosine:LR:T",
    }
    if kind not in usage:
        raise ValueError(f"lr_schedule must be one of {', '.join(usage.values())}, got {text!r}")
    if len(parts) != len(usage[kind].split(":")):
        raise ValueError(f"lr schedule {kind} is written {usage[kind]}, got {text!r}")
    lr = check_real("lr", _number(parts[1], "lr"), low=0.0, low_open=True)
    if kind == "constant":
        return Schedule(kind, lr, text=text)
    if kind == "step":
        factor = check_real("factor", _number(parts[2], "factor"), low=0.0, high=1.0)
        bounds = tuple(_steps(b, "boundary") for b in parts[3].split(",") if b)
        if list(bounds) != sorted(bounds):
            raise ValueError(f"step boundaries must be increasing, got {parts[3]!r}")
        return Schedule(kind, lr, factor=factor, boundaries=bounds, text=text)
    length = _steps(parts[2], "warm-up length" if kind == "warmup" else "period")
    if length < 1:
        raise ValueError(f"{kind} length must be an integer ≥ 1, got {parts[2]!r}")
    return Schedule(kind, lr, length=length, text=text)


def _number(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} must be a real number, got {text!r}") from None


def _steps(text: str, name: str) -> int:
    value = _number(text, name)
    if not math.isfinite(value) or value != int(value) or value < 0:
        raise ValueError(f"{name} must be an integer ≥ 0, got {text!r}")
    return int(value)


@dataclass(frozen=True)
class UnsafeWindow(Result):
    """Steps ``start`` … ``end`` (inclusive) where stage ``stage`` (0-based, delay ``tau``)
    exceeds its max stable lr; ``worst_ratio`` = max α_{k,i}/max_lr_i there."""

    stage: int = output("stage index i (0-based)")
    tau: int = output("its forward delay τ_i", "steps")
    start: int = output("first unsafe step k", "steps")
    end: int = output("last unsafe step k of the run (inclusive)", "steps")
    worst_ratio: float | None = output(
        "largest α_{k,i} / max_lr_i in the window (null, ∞ in Python: the stage's max lr is 0)"
    )


@dataclass(frozen=True)
class Audit(Result):
    """The T1 audit of a base schedule: PipeMare's rescheduled step α_{k,i} = α_{k,base} /
    τ_i^{p_k}, p_k = 1 − min(k/K, 1) (PipeMare eq. 4), against each stage's exact max stable lr
    on the quadratic, at every step k < ``steps`` and stage i.

    ``margin`` = 1 − max_{k,i} α_{k,i}/max_lr_i (> 0: safe); ``windows`` are the maximal runs of
    consecutive unsafe steps per stage; ``safe`` is true when there is none.
    """

    rule: str = output("the rule's registry name")
    lr_schedule: str = output("the base schedule as written (constant:LR, step:..., ...)")
    taus: tuple[int, ...] = output("stage delays τ_i", "steps")
    anneal_steps: int = output("T1's annealing length K (eq. 4)", "steps")
    steps: int = output("steps audited", "steps")
    max_lr: tuple[float | None, ...] = output(
        "max stable lr of each stage's delay (null: stable for every lr)"
    )
    margin: float | None = output(
        "1 − max α_{k,i}/max_lr_i: > 0 safe, < 0 unsafe (null, −∞ in Python: a stage is stable "
        "for no lr > 0)"
    )
    worst_step: int = output("step k of the largest ratio α_{k,i}/max_lr_i", "steps")
    worst_stage: int = output("stage i (0-based) of the largest ratio")
    windows: tuple[UnsafeWindow, ...] = output("unsafe windows (empty when safe)")
    safe: bool = output("α_{k,i} < max_lr_i at every step and stage", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "safe", not self.windows)


def stage_max_lr(name: str, values: dict[str, Any], taus: np.ndarray) -> dict[int, float]:
    """max_lr(rule, λ, τ) once per distinct τ (``inf``: stable for every lr)."""
    key = delay_parameter(name)
    out = {}
    for tau in sorted({int(t) for t in taus}):
        rule, model = get_spec(name).build(**{**values, key: tau})
        result = max_lr(rule, model).max_lr
        out[tau] = math.inf if result is None else float(result)
    return out


def audit(
    name: str,
    values: dict[str, Any],
    schedule: Schedule,
    taus: Any,
    anneal_steps: int,
    steps: int,
) -> Audit:
    """Check α_{k,i} < max_lr(rule, λ, τ_i) for k < ``steps`` and every stage (module doc).

    ``values``: the rule's other parameters (``lam`` = λ_max of the problem); ``taus``: the
    stage delays τ_i; ``anneal_steps``: K of eq. 4.
    """
    tau = np.asarray(taus)
    if tau.ndim != 1 or tau.size == 0:
        raise ValueError("taus must be a non-empty list of stage delays")
    tau = np.array([check_delay("taus", int(t)) for t in tau])
    if isinstance(anneal_steps, bool) or int(anneal_steps) != anneal_steps or anneal_steps < 1:
        raise ValueError(f"anneal_steps must be an integer ≥ 1, got {anneal_steps!r}")
    if isinstance(steps, bool) or int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be an integer ≥ 1, got {steps!r}")
    if steps * tau.size > T1_AUDIT_MAX_CELLS:
        raise ValueError(
            f"steps must be ≤ {T1_AUDIT_MAX_CELLS // tau.size} with {tau.size} stages "
            f"(steps × stages ≤ {T1_AUDIT_MAX_CELLS:.0e}, docs/limits.md), got {steps}"
        )
    limits = stage_max_lr(name, values, tau)
    limit = np.array([limits[int(t)] for t in tau])
    k = np.arange(steps)
    alpha = schedule(k)[:, None] * t1_factor(tau[None, :], k[:, None], anneal_steps)
    with np.errstate(divide="ignore"):  # inf where no lr > 0 is stable (limit 0): unsafe
        ratio = alpha / limit[None, :]  # (steps, stages); 0 where the limit is inf
    unsafe = ratio >= 1.0
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    windows = []
    for i in np.flatnonzero(unsafe.any(axis=0)):
        edges = np.diff(np.concatenate([[0], unsafe[:, i].astype(np.int8), [0]]))
        for start, stop in zip(
            np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True
        ):
            worst_ratio = float(ratio[start:stop, i].max())
            windows.append(
                UnsafeWindow(int(i), int(tau[i]), int(start), int(stop - 1), worst_ratio)
            )
    return Audit(
        rule=name,
        lr_schedule=schedule.text,
        taus=tuple(int(t) for t in tau),
        anneal_steps=int(anneal_steps),
        steps=int(steps),
        max_lr=tuple(None if math.isinf(x) else x for x in limit),
        margin=float(1.0 - ratio.max()),
        worst_step=int(worst[0]),
        worst_stage=int(worst[1]),
        windows=tuple(windows),
    )


__all__ = [
    "SCHEDULE_KINDS",
    "Audit",
    "Schedule",
    "UnsafeWindow",
    "audit",
    "parse_schedule",
    "stage_max_lr",
]
