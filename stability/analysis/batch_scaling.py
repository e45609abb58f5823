r"""Batch-size (update-size) scaling of lr and momentum, and what it does to the max stable lr.

Kosson et al. train with update size N = 1 and transfer a reference's hyperparameters
(η_r, m_r at update size N_r) with the rules of Chiley et al. (Kosson App. E, eq. 33)::

    m = m_r^{N/N_r},        η = ((1 − m)·N / ((1 − m_r)·N_r))·η_r,

which keep the momentum's decay *per sample* and scale the effective step η/(1 − m) linearly
with N (the effective step per sample stays the same).

A pipeline fixes its delay in samples, not in steps: with D samples in flight, an update size N
gives the delay τ = ⌈D/N⌉ in steps (PipeMare Table 1: τ_fwd,i = ⌈(2(P − i) + 1)/N⌉).  Small
update sizes therefore combine a long delay with a momentum close to 1 and a small step; the
question `scaling_table` answers is whether the scaled step η stays below the max stable lr of
heavy-ball momentum (or any rule with ``tau`` and ``momentum``) at (m, τ(N)), and with which
margin η/max_lr.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from stability.analysis.boundary import max_lr
from stability.checks import check_real
from stability.rules.registry import get_spec


def scale_hyperparameters(
    lr_ref: float, momentum_ref: float, size_ref: float, size: float
) -> tuple[float, float]:
    """(η, m) for update size N from (η_r, m_r) at N_r (Kosson App. E eq. 33)."""
    check_real("lr_ref", lr_ref, low=0.0, low_open=True)
    check_real("momentum_ref", momentum_ref, low=0.0, high=1.0, high_open=True)
    check_real("size_ref", size_ref, low=0.0, low_open=True)
    check_real("size", size, low=0.0, low_open=True)
    m = momentum_ref ** (size / size_ref)
    return (1 - m) * size / ((1 - momentum_ref) * size_ref) * lr_ref, m


@dataclass(frozen=True)
class ScalingRow:
    """One update size: scaled (lr, momentum), delay in steps, max stable lr and the ratio."""

    size: float
    lr: float
    momentum: float
    tau: int
    max_lr: float | None
    ratio: float | None

    @property
    def stable(self) -> bool:
        return self.ratio is None or self.ratio < 1


def scaling_table(
    sizes: Any,
    *,
    lr_ref: float,
    momentum_ref: float,
    size_ref: float,
    delay_samples: int,
    lam: float = 1.0,
    rule: str = "momentum",
    **values: Any,
) -> list[ScalingRow]:
    """For each update size N: eq. 33's (η, m), τ = ⌈D/N⌉ and max_lr(rule, λ, τ, m).

    ``ratio`` = η / max_lr (< 1: the scaled step is stable; ``None``: stable for every lr).
    ``values``: further parameters of ``rule`` (its delay and momentum are set here).
    """
    spec = get_spec(rule)
    for needed in ("tau", "momentum"):
        if needed not in spec.param_names:
            raise ValueError(f"rule {rule!r} has no {needed} parameter: cannot scale it")
    if isinstance(delay_samples, bool) or int(delay_samples) != delay_samples or delay_samples < 0:
        raise ValueError(f"delay_samples must be an integer ≥ 0, got {delay_samples!r}")
    rows = []
    for size in sizes:
        lr, m = scale_hyperparameters(lr_ref, momentum_ref, size_ref, size)
        tau = math.ceil(delay_samples / size)
        built, model = spec.build(**values, tau=tau, momentum=m, lam=lam)
        limit = max_lr(built, model).max_lr
        rows.append(
            ScalingRow(float(size), lr, m, tau, limit, None if limit is None else lr / limit)
        )
    return rows


__all__ = ["ScalingRow", "scale_hyperparameters", "scaling_table"]
