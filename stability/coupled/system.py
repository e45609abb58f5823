r"""Per-stage delays on a full Hessian: the coupled multi-stage model and its exact stability.

PipeMare (Sec. 2-3) and Kosson (Sec. 3.4) analyse one eigen-direction with one delay.  A real
pipeline splits the parameters w ∈ ℝ^p into P stages (contiguous blocks, stage i = 1 … P in
PipeMare's numbering); stage i reads its weights with its own delays (τ_fwd,i, τ_bkwd,i,
τ_recomp,i) — PipeMare Table 1: τ_fwd,i = ⌈(2(P−i)+1)/N⌉ — and runs its own instance of the
rule (T1 step size lr/τ_i^p, PipeMare eq. 4; T2 decay γ_i = D^{1/(τ_fwd,i−τ_bkwd,i)}, Sec. 3.2;
SC/LWP horizons D_i, Kosson eq. 7, 12).  The gradient is linear around the minimum w*:

    g = H_f·(u_fwd − w*) + H_b·(u_bkwd − w*) + H_r·(u_recomp − w*),     H_f + H_b + H_r = ∇²f

— the matrix form of PipeMare's (λ + Δ, −(Δ − Φ), −Φ) model (eq. 5, App. D.1).  For linear
regression H_b = H_r = 0; for a network H_f and H_b are the Jacobians of the backpropagated
gradient with respect to the forward and the backward weights.

**Exact stability.**  Two independent constructions, checked against each other in the tests:

* the **block state matrix** (`state_matrix`): the composed step — every stage's ``passes``,
  one oracle call on the full vectors, every stage's ``update`` — probed with unit vectors of
  the whole state (all stages' variables and histories) in one batched call.  Its size is
  Σ_i |w_i|·(Σ_var depth), ~p·τ_max: exact and simple, O((p·τ)³) to diagonalise;
* the **matrix polynomial** P(ω, lr) = diag(d_j(ω)) + lr·Σ_pass H_pass·diag(ñ_pass,j(ω))
  (`stability.coupled.transfer`: d, ñ are stage j's open-loop transfer functions read off its
  rule), whose determinant is the characteristic polynomial of the state matrix.  On the unit
  circle it is a p×p eigenproblem per angle: `stability.coupled.scan` finds the max stable lr
  in O(n_θ·p³), for sizes where the state matrix is out of reach.

With one stage and a diagonal Hessian both reduce to the scalar analysis
(`stability.analysis.boundary.max_lr` at each eigenvalue); the tests check this to 1e-10.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
from scipy.optimize import brentq

from stability.checks import check_delay, check_real
from stability.coupled.transfer import PASSES, StageTransfer, stage_transfer
from stability.polynomial import SparsePoly
from stability.rules.base import Rule, taps_read

DENSE_MAX_STATES = 4000
"""Largest block state matrix `spectral_radius` and `dense_max_lr` will diagonalise."""

_UNSTABLE = 1e-10  # spectral radius above 1 + this counts as unstable (flat modes sit at 1)


# -- the model -------------------------------------------------------------------------------


def _hessian(name: str, H: Any, p: int | None) -> np.ndarray:
    A = np.asarray(H, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or (p is not None and A.shape[0] != p):
        want = "square" if p is None else f"{p}×{p}"
        raise ValueError(f"{name} must be a {want} matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must contain finite numbers only")
    return A


@dataclass(frozen=True, eq=False)
class CoupledSystem:
    """P stages of a rule on a p-parameter quadratic with forward/backward/recompute Hessians.

    Attributes:
        rules: one time-invariant rule per stage (stage 1 first), each with scalar delays.
        stage_sizes: |w_i|, the parameters of stage i, contiguous in parameter order.
        hessians: ``{"forward": H_f, "backward": H_b, "recompute": H_r}`` (p × p; absent or
            ``None`` passes do not enter the gradient).
        lr_scales: per-stage step-size factors (T1, PipeMare eq. 4); stage i steps with
            lr·lr_scales[i].  Default 1.
        stepped: the block state matrix (`state_matrix`, which steps the rules) is this
            system's; False for `frozen_at` systems, whose transfers are not their rules' step.
    """

    rules: tuple[Rule, ...]
    stage_sizes: tuple[int, ...]
    hessians: dict[str, np.ndarray]
    lr_scales: tuple[float, ...] = field(default=())
    stepped: bool = True

    def __post_init__(self):
        sizes = tuple(int(n) for n in self.stage_sizes)
        if not sizes or any(n < 1 for n in sizes) or sizes != tuple(self.stage_sizes):
            raise ValueError(f"stage_sizes must be positive integers, got {self.stage_sizes!r}")
        if len(self.rules) != len(sizes):
            raise ValueError(f"one rule per stage: {len(sizes)} stages, {len(self.rules)} rules")
        p = sum(sizes)
        unknown = set(self.hessians) - set(PASSES)
        if unknown:
            raise ValueError(f"hessians keys must be among {', '.join(PASSES)}, got {unknown}")
        hessians = {
            k: _hessian(f"the {k} Hessian", H, p) for k, H in self.hessians.items() if H is not None
        }
        if "forward" not in hessians:
            raise ValueError("the forward Hessian H_f is required")
        scales = self.lr_scales or (1.0,) * len(sizes)
        if len(scales) != len(sizes):
            raise ValueError(f"lr_scales must have one factor per stage ({len(sizes)})")
        for s in scales:
            check_real("lr_scales", s, low=0.0, low_open=True)
        object.__setattr__(self, "stage_sizes", sizes)
        object.__setattr__(self, "rules", tuple(self.rules))
        object.__setattr__(self, "hessians", hessians)
        object.__setattr__(self, "lr_scales", tuple(float(s) for s in scales))

    @property
    def dim(self) -> int:
        """Number of parameters p."""
        return sum(self.stage_sizes)

    @property
    def stages(self) -> int:
        return len(self.stage_sizes)

    @cached_property
    def stage_index(self) -> np.ndarray:
        """The stage (0-based) of every parameter, shape (p,)."""
        return np.repeat(np.arange(self.stages), self.stage_sizes)

    @cached_property
    def blocks(self) -> tuple[slice, ...]:
        ends = np.cumsum((0, *self.stage_sizes))
        return tuple(slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:], strict=True))

    @cached_property
    def hessian(self) -> np.ndarray:
        """∇²f = H_f + H_b + H_r, symmetrised (the Hessian at consistent weights)."""
        H = sum(self.hessians.values())
        return 0.5 * (H + H.T)

    @cached_property
    def transfers(self) -> tuple[StageTransfer, ...]:
        """Each stage's open-loop transfer functions, step size scaled by ``lr_scales``."""
        cache: dict[int, StageTransfer] = {}
        out = []
        for rule, scale in zip(self.rules, self.lr_scales, strict=True):
            key = id(rule)
            if key not in cache:
                cache[key] = stage_transfer(rule)
            out.append(cache[key].scaled(scale))
        return tuple(out)

    @cached_property
    def couplings(self) -> tuple[tuple[np.ndarray, tuple], ...]:
        """The lr-terms of P(ω, lr) = diag(d_j) + lr·Σ C·diag(c_j): pairs (C, per-stage c).

        The passes' Hessians with their ñ_pass, and — where a stage's open loop has terms in
        lr (AdamW's decoupled weight decay) — the identity with those terms.
        """
        out = [(H, tuple(t.passes[k] for t in self.transfers)) for k, H in self.hessians.items()]
        if any(t.decay.terms for t in self.transfers):
            out.append((np.eye(self.dim), tuple(t.decay for t in self.transfers)))
        return tuple(out)

    @property
    def is_affine(self) -> bool:
        """P(ω, lr) affine in lr (every registry rule but PipeOptim-AdamW with a decay)."""
        return all(t.is_affine for t in self.transfers)

    @cached_property
    def quadratic_couplings(self) -> tuple[tuple[np.ndarray, tuple], ...]:
        """The lr²-terms of P(ω, lr): (H_pass, per-stage ñ²_pass) where a stage has them."""
        empty = SparsePoly({}, {})
        return tuple(
            (H, tuple(t.quadratic.get(k, empty) for t in self.transfers))
            for k, H in self.hessians.items()
            if any(k in t.quadratic for t in self.transfers)
        )

    def frozen_at(self, lr0: float) -> CoupledSystem:
        """The affine system equal to this one at lr = lr0 (`StageTransfer.frozen_at`)."""
        out = replace(self, stepped=False)
        out.__dict__["transfers"] = tuple(t.frozen_at(lr0) for t in self.transfers)
        return out

    @cached_property
    def max_delay(self) -> int:
        """The largest lag any stage's rule reads (the history a state must keep)."""
        return max(max(lag for _, lag in taps_read(r)) for r in self.rules)

    @cached_property
    def state_layout(self) -> tuple[dict[str, tuple[int, int]], ...]:
        """Per stage, var → (offset, depth): where its history sits in the state vector."""
        layout, offset = [], 0
        for rule, n in zip(self.rules, self.stage_sizes, strict=True):
            taps = taps_read(rule)
            entry = {}
            for var in rule.variables:
                depth = 1 + max(lag for v, lag in taps if v == var)
                entry[var] = (offset, depth)
                offset += depth * n
            layout.append(entry)
        return tuple(layout)

    @property
    def state_size(self) -> int:
        """Rows of the block state matrix: Σ_i |w_i|·Σ_var depth_var."""
        last = self.state_layout[-1]
        return max(off + depth * self.stage_sizes[-1] for off, depth in last.values())

    def hessian_norms(self) -> dict[str, float]:
        """Spectral norms ‖H_pass‖₂ (the network's Δ is ‖H_b‖ relative to ‖H_f‖)."""
        return {k: float(np.linalg.norm(H, 2)) for k, H in self.hessians.items()}


# -- building from the registry ----------------------------------------------------------------


def _per_stage(name: str, values: Any, stages: int | None) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(values))
    if arr.ndim != 1 or arr.size == 0 or (stages is not None and arr.shape != (stages,)):
        want = "one delay per stage" + ("" if stages is None else f" ({stages})")
        raise ValueError(f"{name} must have {want}, got {values!r}")
    return check_delay(name, arr)


def stage_rules(
    rule: str,
    tau_fwd: Sequence[int],
    tau_bkwd: Sequence[int] | None = None,
    tau_recomp: Sequence[int] | None = None,
    **params: Any,
) -> tuple[Rule, ...]:
    """One instance of registry rule ``rule`` per stage, with that stage's delays.

    Each stage's rule is `stability.rules.staged.staged_rule` at that stage's delays — the
    function that also builds the trainer's per-parameter pipeline rules
    (`stability.trainer.schedules`), so analysis and measurement run the same dynamics: rules
    with a single delay ``tau`` get τ = τ_fwd,i and, where the backward weights are
    inconsistent (``tau_bkwd`` given and ≠ τ_fwd somewhere), read them at τ_bkwd,i; rules
    with ``tau_fwd`` get both (``tau_bkwd=None``: τ_bkwd,i = τ_fwd,i).  Delay-dependent
    defaults are resolved per stage (SC_D and LWP_D: D = τ_i, Kosson eq. 7, 12; T2:
    γ_i = D^{1/(τ_fwd,i − τ_bkwd,i)}, PipeMare Sec. 3.2); T2 on a stage without discrepancy
    is refused there as in the trainer.
    """

    from stability.rules.registry import delay_parameter, refuse_model_parameters
    from stability.rules.staged import DELAY_NAMES, staged_rule

    refuse_model_parameters(
        params,
        "the coupled model takes the curvature (and the discrepancy sensitivity) from the Hessians",
    )
    for name in params:
        if name in DELAY_NAMES:
            raise ValueError(f"{name} is per stage here: give the stage delays instead")
    key = delay_parameter(rule)
    tf = _per_stage("tau_fwd", tau_fwd, None)
    P = tf.size
    tb = tf if tau_bkwd is None else _per_stage("tau_bkwd", tau_bkwd, P)
    inconsistent = bool(np.any(tb != tf))
    tr = None if tau_recomp is None else _per_stage("tau_recomp", tau_recomp, P)
    backward = inconsistent or key == "tau_fwd"
    # the rule as the trainer runs it (one entry per stage): what it refuses is refused here
    staged_rule(rule, params, tf, tb if backward else None, tr)
    out: list[Rule] = []
    built: dict[tuple, Rule] = {}
    for i in range(P):
        delays = (int(tf[i]), int(tb[i]) if backward else None, None if tr is None else int(tr[i]))
        if delays not in built:
            built[delays] = staged_rule(rule, params, *delays)
        out.append(built[delays])
    return tuple(out)


def t1_scales(tau_fwd: Sequence[int], power: float) -> tuple[float, ...]:
    """T1 step-size factors τ_i^{−p} per stage (PipeMare eq. 4 at exponent p = p_k ∈ [0, 1]).

    p = 1 is the start of the T1 schedule (lr_i = lr/τ_i), p = 0 its end; a stage without
    delay keeps its step size.
    """
    check_real("t1_power", power, low=0.0, high=1.0)
    tau = np.maximum(np.asarray(tau_fwd, dtype=float), 1.0)
    return tuple(float(x) for x in tau ** (-float(power)))


def coupled_system(
    H_f: Any,
    H_b: Any = None,
    H_r: Any = None,
    *,
    stage_sizes: Sequence[int],
    rule: str = "sgd",
    tau_fwd: Sequence[int],
    tau_bkwd: Sequence[int] | None = None,
    tau_recomp: Sequence[int] | None = None,
    t1_power: float = 0.0,
    **params: Any,
) -> CoupledSystem:
    """The coupled system of registry rule ``rule`` with per-stage delays (see `stage_rules`).

    ``H_f``, ``H_b``, ``H_r``: the Jacobians of the gradient with respect to the forward,
    backward and recompute weights (p × p); ``H_b = H_r = None`` for linear regression.
    ``t1_power``: T1's exponent p (`t1_scales`).  ``params``: the rule's other parameters
    (momentum, decay, horizon, …), shared by all stages.
    """
    rules = stage_rules(rule, tau_fwd, tau_bkwd, tau_recomp, **params)
    return CoupledSystem(
        rules,
        tuple(int(n) for n in stage_sizes),
        {"forward": H_f, "backward": H_b, "recompute": H_r},
        t1_scales(tau_fwd, t1_power),
    )


# -- the matrix polynomial --------------------------------------------------------------------


def matrix_polynomial(system: CoupledSystem, omega: Any, lr: float) -> np.ndarray:
    """P(ω, lr) = diag(d_j(ω)) + lr·Σ_pass H_pass·diag(ñ_pass,j(ω)), shape (*ω.shape, p, p).

    d_j, ñ_j are the open-loop transfer functions of parameter j's stage
    (`stability.coupled.transfer`; `CoupledSystem.couplings` adds AdamW's decay); det P(ω, lr)
    is the characteristic polynomial of the block state matrix up to a factor ω^k (the unread
    history it leaves out).
    """
    omega = np.asarray(omega, dtype=complex)
    cols = system.stage_index
    d = np.stack([t.denominator(omega) for t in system.transfers], axis=-1)[..., cols]
    P = d[..., None, :] * np.eye(system.dim)
    for C, polys in system.couplings:
        n = np.stack([poly(omega) for poly in polys], axis=-1)[..., cols]
        P = P + lr * C * n[..., None, :]
    for C, polys in system.quadratic_couplings:  # PipeOptim-AdamW: lr²·H·diag(ñ²)
        n = np.stack([poly(omega) for poly in polys], axis=-1)[..., cols]
        P = P + lr * lr * C * n[..., None, :]
    return P


# -- the block state matrix ------------------------------------------------------------------


class _BlockReader:
    """Tap reader over a batch of stage histories: var → array (depth, batch, |w_i|)."""

    t = 0

    def __init__(self, values: dict[str, np.ndarray]):
        self.values = values

    def __call__(self, var: str, lag: int = 0) -> np.ndarray:
        return self.values[var][lag]


def composed_step(system: CoupledSystem, histories: list[dict[str, np.ndarray]], lr: float):
    """One step of the whole pipeline on a batch of states (the linear oracle, w* = 0).

    ``histories[i][var]`` has shape (depth, batch, |w_i|), newest first.  Every stage's passes
    are read first, the gradient is computed once on the full vectors,
    g = H_f·u_fwd + H_b·u_bkwd + H_r·u_recomp, then every stage updates with its block of g.
    Returns the new histories (same layout).
    """
    readers = [_BlockReader(h) for h in histories]
    batch = next(iter(histories[0].values())).shape[1]
    u = {k: np.empty((batch, system.dim)) for k in system.hessians}
    for rule, reader, block, scale in zip(
        system.rules, readers, system.blocks, system.lr_scales, strict=True
    ):
        p = rule.passes(reader, lr * scale)
        values = dict(zip(PASSES, (p.forward, p.backward, p.recompute), strict=True))
        for k in u:
            u[k][:, block] = values[k]
    g = sum(u[k] @ H.T for k, H in system.hessians.items())
    out = []
    for rule, reader, hist, block, scale in zip(
        system.rules, readers, histories, system.blocks, system.lr_scales, strict=True
    ):
        new = rule.update(reader, g[:, block], lr * scale)
        out.append(
            {
                var: np.concatenate((np.broadcast_to(new[var], h.shape[1:])[None], h[:-1]))
                for var, h in hist.items()
            }
        )
    return out


def state_matrix(system: CoupledSystem, lr: float) -> np.ndarray:
    """The block state matrix T(lr): x_{t+1} = T·x_t on the full state (module doc).

    Column j is the composed step applied to the j-th unit state; all columns in one batched
    call.  Size `CoupledSystem.state_size` (at most `DENSE_MAX_STATES`).
    """
    n = system.state_size
    if n > DENSE_MAX_STATES:
        raise ValueError(
            f"the block state matrix would have {n} rows (> {DENSE_MAX_STATES}); use the "
            "frequency scan (stability.coupled.scan.scan_max_lr)"
        )
    eye = np.eye(n)
    histories = []
    for entry, size in zip(system.state_layout, system.stage_sizes, strict=True):
        histories.append(
            {
                var: eye[:, off : off + depth * size].reshape(n, depth, size).transpose(1, 0, 2)
                for var, (off, depth) in entry.items()
            }
        )
    new = composed_step(system, histories, lr)
    T = np.empty((n, n))
    for entry, size, hist in zip(system.state_layout, system.stage_sizes, new, strict=True):
        for var, (off, depth) in entry.items():
            T[off : off + depth * size] = hist[var].transpose(0, 2, 1).reshape(depth * size, n)
    return T


def spectral_radius(system: CoupledSystem, lr: float) -> float:
    """Largest |eigenvalue| of the block state matrix at step size ``lr`` (dense)."""
    check_real("lr", lr, low=0.0)
    return float(np.max(np.abs(np.linalg.eigvals(state_matrix(system, lr)))))


@dataclass(frozen=True)
class CoupledMaxLr:
    """Max stable lr of a coupled system (`stability.coupled.scan.scan_max_lr`, `dense_max_lr`).

    ``max_lr``: first lr > 0 at which a closed-loop root reaches the unit circle (``None``:
    stable for every lr > 0; 0.0: for none).  ``crossing_angle``: θ ∈ [0, π] of that root
    e^{iθ}.  ``critical_stage``: the stage (1 … P, PipeMare's numbering) carrying most of the
    crossing mode's weights, ``stage_shares`` the share of each.  ``eigensolves``: p×p
    eigen-decompositions used.  ``certified``: checked on the block state matrix.
    """

    max_lr: float | None
    crossing_angle: float | None
    critical_stage: int | None
    stage_shares: tuple[float, ...]
    method: str
    eigensolves: int
    certified: bool


def dense_max_lr(system: CoupledSystem, *, rtol: float = 1e-11) -> CoupledMaxLr:
    """First lr > 0 with spectral radius > 1: log grid, then Brent's method in the first
    unstable grid interval (the plain reference; `Unstable.crossing`).

    The grid runs over [1e-6, 1e4]/‖∇²f‖ at 4 points per decade; ``None`` if every grid
    point is stable.  Flat directions of the Hessian (radius exactly 1) count as stable.
    """
    scale = float(np.linalg.norm(system.hessian, 2)) or 1.0
    grid = np.logspace(-6, 4, 41) / scale
    unstable = Unstable(system)
    previous = 0.0
    for lr in grid:
        if unstable(lr):
            break
        previous = lr
    else:
        return _dense_result(None, unstable.count)
    if previous == 0.0:
        return _dense_result(0.0, unstable.count)
    return _dense_result(unstable.crossing(previous, lr, rtol), unstable.count)


class Unstable:
    """``unstable(lr)``: the block state matrix's spectral radius exceeds 1 (flat modes, at
    exactly 1, count as stable); ``count`` the evaluations so far."""

    def __init__(self, system: CoupledSystem):
        self.system, self.count = system, 0
        self._excess: dict[float, float] = {}

    def excess(self, lr: float) -> float:
        """ρ(lr) − 1 − the flat-mode allowance: > 0 exactly when ``lr`` is unstable."""
        if lr not in self._excess:
            self.count += 1
            self._excess[lr] = spectral_radius(self.system, lr) - 1 - _UNSTABLE
        return self._excess[lr]

    def __call__(self, lr: float) -> bool:
        return self.excess(lr) > 0

    def crossing(self, lo: float, hi: float, rtol: float) -> float:
        """The crossing in (lo, hi] (lo stable, hi unstable) to relative width ``rtol``: Brent's
        method on `excess` (bisection steps safeguard the secant and inverse quadratic ones;
        the spectral radius is continuous in lr, so the bracket always holds a crossing)."""
        return brentq(self.excess, lo, hi, xtol=1e-300, rtol=max(rtol, 1e-15))


def _dense_result(lr: float | None, evaluations: int) -> CoupledMaxLr:
    return CoupledMaxLr(lr, None, None, (), "block state matrix search", evaluations, True)


__all__ = [
    "DENSE_MAX_STATES",
    "CoupledSystem",
    "CoupledMaxLr",
    "Unstable",
    "composed_step",
    "coupled_system",
    "dense_max_lr",
    "matrix_polynomial",
    "spectral_radius",
    "stage_rules",
    "state_matrix",
    "t1_scales",
]
