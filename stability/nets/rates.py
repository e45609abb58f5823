r"""The rate of a network's run started along v₁: which mode it excites, predicted and measured.

A run of `stability.nets.bracket` starts at w* + ε·v₁ with a constant history.  With per-stage
delays (or per-stage rules: SC_D, LWP_D with D = τ_i) the stages respond differently to the
gradient along v₁, so the run leaves v₁ within the span of its **stage pieces** v₁⁽ⁱ⁾ (v₁
restricted to stage i): the start excites the coupled modes of that P-dimensional space.
The rank-1 model λ₁v₁v₁ᵀ sees these other directions as flat — their roots are ω = 1 and,
with momentum β, ω = β, which the previous prediction read as "the rate" (`predicted_rate` =
0.9 for lwp+sc on the digits MLP, measured 0.950).  On the network they have curvature.

**Prediction** (`predict_rate`).  The Galerkin projection of the network's Hessian onto the
stage pieces of the top r eigenvectors (all k the curvature computed, ``--k``), H_Q = QᵀHQ
with Q = diag(Q₁, …, Q_P), Q_i an orthonormal basis of stage i's rows of v₁ … v_r (r·P
Hessian-vector products; with ``--backward current`` also QᵀH_bQ by
`stability.nets.sensitivity.discrepancy_jacobian`, the forward part H_Q − QᵀH_bQ), gives a
coupled system of at most r·P parameters (`stability.coupled.system`, each stage running its
own rule).  The stage pieces of v₁ alone (r = 1) are the first directions the start excites,
but they couple further: on a 3-stage MLP with lwp+sc that model's rate was 9 % slow, r = 2
… 8 agreed with the simulator to 1.3 %; on a held-out 283-parameter wine ELU network with
uneven stages (130, 10, 100, 43 parameters) under PipeMare P = 4, r = 8 missed by 7.0 %
(lwp+sc, momentum 0.9) and 3.2 % (sgd), r = 16 … 64 agree to 0.1 %.  ``truncation_change``
(`rate_truncation_change` of `net max-lr`) is the relative change of ln ρ from the space of
the top ⌈r/2⌉ eigenvectors to r's — the former restricted from the latter's products,
Q'ᵀHQ' = Cᵀ(QᵀHQ)C with C = QᵀQ', so it costs no product; a large one says the rate has not
converged in r (raise ``--k``).  Its state is started as the run is (w = Qᵀv₁ at every lag,
every other variable 0) and iterated; the rate is read from the increments ‖w_t − w_{t−1}‖ by
the *same* estimator as the measurement (`envelope_log_rate`), so that prediction and
measurement are the same quantity over the same window.  ``rate_mode`` names the mode that
carries the increments at the end of that window (eigen-decomposition of the state matrix
and the start's modal amplitudes): its root ω (per step), modulus |ω|, the curvature its
weights see (Rayleigh quotient on H_Q) and the stage holding most of them.

**Estimator** (`envelope_log_rate`).  A slope fitted to log ‖w_t − w_{t−1}‖ itself is biased
when the dominant root is complex — the increments oscillate, a dip can end the valid range
early, and the fitted slope of the oscillation is not the decay (sgd with uniform τ = 4:
0.80 × the root's rate on an exactly quadratic model).  The upper envelope (the suffix
maximum: each point replaced by the largest value after it) decays like the mode and keeps
its peaks; the slope of log ‖w_t − w_{t−1}‖ is fitted by least squares through the points
that are their own envelope (the peaks larger than everything after them) in the second half
of the first `RATE_DECADES` decades of its decay (after the start's transient, before the
modes of small curvature excited at small amplitude take over).  Four decades: with three, an
oscillating root shows too few peaks (bias up to 5 %, ≤ 2.2 % with four); with five, the
window reaches the tail of a slow mode excited at ~1e-5 of the start, whose amplitude the
Galerkin model overstates (digits MLP, lwp+sc, PipeMare: 10× in energy from step 100 on) —
model and run then read different modes (ratio 9.7); at four both read −0.148 (0.3 %).

What is left out: the directions outside span Q that H couples to the stage pieces (a second
Galerkin step would bring them in; ``truncation_change`` bounds what they add only as far as
the step from r/2 to r shows it); measured errors are listed in docs/nets_agreement.md.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from stability.coupled.system import CoupledSystem, state_matrix
from stability.nets.curvature import Curvature, HessianOperator
from stability.nets.problem import NetProblem
from stability.rules.base import Rule

RATE_DECADES = 4.0
"""Decades of ‖w_t − w_{t−1}‖ over which the rate is measured (module doc)."""

_TINY = 1e-280


def envelope_log_rate(energies: np.ndarray, decades: float = RATE_DECADES) -> np.ndarray:
    """ln ρ̂ per run from per-step energies ‖w_t − w_{t−1}‖² (R, T): the least-squares slope
    of the log of their upper envelope over the second half of its first ``decades`` decades
    (module doc); NaN when the run is non-finite or too short."""
    E = np.atleast_2d(np.asarray(energies, dtype=float))
    out = np.full(E.shape[0], np.nan)
    for r, row in enumerate(E):
        if not np.all(np.isfinite(row)):
            continue
        top = float(np.max(row))
        if top <= _TINY:
            continue
        start = int(np.argmax(row >= top * (1 - 1e-6)))  # ties (a constant history) broken early
        env = np.maximum.accumulate(row[start:][::-1])[::-1]  # suffix maximum: non-increasing
        n = int(np.count_nonzero(env >= max(top * 10.0 ** (-2 * decades), _TINY)))
        t = np.flatnonzero(row[start : start + n] >= env[:n] * (1 - 1e-12))  # envelope points
        later = t[t >= n // 2]
        t = later if later.size >= 3 else t
        if t.size < 2 or t[-1] - t[0] < 4:
            continue
        out[r] = 0.5 * np.polyfit(t.astype(float), np.log(row[start + t]), 1)[0]
    return out


@dataclass(frozen=True)
class RatePrediction:
    """`predict_rate`: ln ρ read from the Galerkin model's run, and the mode carrying it."""

    log_rate: float
    root: complex
    eigenvalue: float
    stage: int
    method: str
    truncation_change: float | None = None

    def mode(self) -> dict:
        """``rate_mode`` of the results: root ω (re, im), |ω|, curvature, stage (1 … P)."""
        return {
            "root": [self.root.real, self.root.imag],
            "modulus": abs(self.root),
            "eigenvalue": self.eigenvalue,
            "stage": self.stage,
        }


def stage_pieces(v1: np.ndarray, stage_sizes: tuple[int, ...]) -> np.ndarray:
    """Q = diag(v₁⁽¹⁾/‖v₁⁽¹⁾‖, …) (p × P'), stages where v₁ vanishes left out."""
    ends = np.cumsum((0, *stage_sizes))
    cols = []
    for a, b in zip(ends[:-1], ends[1:], strict=True):
        piece = np.zeros_like(v1)
        piece[a:b] = v1[a:b]
        norm = float(np.linalg.norm(piece))
        if norm > 1e-12 * float(np.linalg.norm(v1)):
            cols.append(piece / norm)
    return np.stack(cols, axis=1)


def predict_rate(
    problem: NetProblem,
    curv: Curvature,
    rules: tuple[Rule, ...],
    lr: float,
    steps: int,
    *,
    backward: bool = False,
    rank: int | None = None,
) -> RatePrediction | None:
    """The rate a run from w* + ε·v₁ shows at ``lr`` over ``steps`` steps (module doc).

    ``backward``: the stages' backward passes read other weights (no stashing): H_b enters.
    ``rank``: the stage pieces of the top ``rank`` eigenvectors span the Galerkin space
    (default: as many of the eigenpairs computed as fit `NET_RATE_MAX_STATE`; None when not
    even v₁'s fit); ``truncation_change`` compares it with the space of the top ⌈rank/2⌉
    (restricted from the same products: no more of them).
    """
    v1 = curv.eigenvectors[:, 0]
    computed = curv.eigenvectors.shape[1]
    rank = _fitting_rank(curv, rules) if rank is None else min(int(rank), computed)
    if rank == 0:
        return None
    Q = _galerkin_basis(curv, rank)
    HQ = Q.T @ HessianOperator(problem).matmat(Q)
    HQ = 0.5 * (HQ + HQ.T)
    Hb = None
    if backward:
        from stability.nets.sensitivity import discrepancy_jacobian

        Hb = Q.T @ discrepancy_jacobian(problem, problem.w_star, Q)
    full = _model_rate(Q, HQ, Hb, rules, lr, steps, v1, curv.stage_sizes)
    change = None
    if rank > 1:  # the half space inside this one: H restricted, Q'ᵀHQ' = Cᵀ(QᵀHQ)C
        half = _galerkin_basis(curv, -(-rank // 2))
        C = Q.T @ half
        Hb_half = None if Hb is None else C.T @ Hb @ C
        coarse = _model_rate(half, C.T @ HQ @ C, Hb_half, rules, lr, steps, v1, curv.stage_sizes)
        if coarse.log_rate and math.isfinite(coarse.log_rate) and math.isfinite(full.log_rate):
            change = abs(full.log_rate / coarse.log_rate - 1)
    how = f"Galerkin model on the stage pieces of the top {rank} of {computed} eigenvectors (QᵀHQ"
    method = f"{how}{', QᵀH_bQ' if backward else ''}), same estimator as measured"
    return dataclasses.replace(full, method=method, truncation_change=change)


def model_state_size(curv: Curvature, rules: tuple[Rule, ...], rank: int) -> int:
    """Rows of the Galerkin model's state matrix at ``rank`` (before any product)."""
    stages = _stages_of(_galerkin_basis(curv, rank), curv.stage_sizes)
    used = sorted(set(stages))
    sizes = tuple(stages.count(s) for s in used)
    zero = {"forward": np.zeros((sum(sizes), sum(sizes)))}
    return CoupledSystem(tuple(rules[i] for i in used), sizes, zero).state_size


def _fitting_rank(curv: Curvature, rules: tuple[Rule, ...]) -> int:
    """The most eigenvectors (≤ those computed) whose model fits `NET_RATE_MAX_STATE`; 0 if
    none does (the state grows with the rank, so by bisection)."""
    from stability.limits import NET_RATE_MAX_STATE

    low, high = 0, curv.eigenvectors.shape[1]
    while low < high:
        mid = (low + high + 1) // 2
        if model_state_size(curv, rules, mid) <= NET_RATE_MAX_STATE:
            low = mid
        else:
            high = mid - 1
    return low


def _galerkin_basis(curv: Curvature, rank: int) -> np.ndarray:
    """Q: orthonormal columns, each within one stage, spanning the stage pieces of the top
    ``rank`` eigenvectors."""
    pieces = [stage_pieces(curv.eigenvectors[:, j], curv.stage_sizes) for j in range(rank)]
    return _stage_orthonormal(np.hstack(pieces), curv.stage_sizes)[0]


def _model_rate(Q, HQ, Hb, rules, lr, steps, v1, stage_sizes) -> RatePrediction:
    """The Galerkin model on ``Q`` (``HQ`` = QᵀHQ, ``Hb`` = QᵀH_bQ or None with stashing)
    started as the run is, iterated ``steps`` steps and read by `envelope_log_rate`."""
    stages = _stages_of(Q, stage_sizes)
    order = np.argsort(stages, kind="stable")  # columns grouped by stage, in stage order
    Q, stages = Q[:, order], [stages[i] for i in order]
    HQ = HQ[np.ix_(order, order)]
    hessians = {"forward": HQ}
    if Hb is not None:
        Hb = Hb[np.ix_(order, order)]
        hessians = {"forward": HQ - Hb, "backward": Hb}
    used = sorted(set(stages))
    sizes = tuple(stages.count(s) for s in used)
    system = CoupledSystem(tuple(rules[i] for i in used), sizes, hessians)
    T = state_matrix(system, float(lr))
    w_rows = [  # lag 0 of each stage's w
        entry["w"][0] + j
        for entry, n in zip(system.state_layout, sizes, strict=True)
        for j in range(n)
    ]
    x0 = np.zeros(T.shape[0])
    start = iter(Q.T @ v1)
    for entry, n in zip(system.state_layout, sizes, strict=True):
        offset, depth = entry["w"]
        piece = np.array([next(start) for _ in range(n)])
        for lag in range(depth):  # constant history; every other variable 0
            x0[offset + lag * n : offset + (lag + 1) * n] = piece
    energies = np.empty(steps)
    x = x0
    for t in range(steps):
        new = T @ x
        energies[t] = float(np.sum((new[w_rows] - x[w_rows]) ** 2))
        x = new
    log_rate = float(envelope_log_rate(energies)[0])
    root, weights = _dominant_mode(T, x0, w_rows, energies)
    norm2 = max(float(np.vdot(weights, weights).real), 1e-300)
    rayleigh = float(np.real(np.vdot(weights, HQ @ weights)) / norm2)
    share = np.array([np.sum(np.abs(weights[np.array(stages) == s]) ** 2) for s in used])
    stage = used[int(np.argmax(share))] + 1
    return RatePrediction(log_rate, root, rayleigh, stage, "")


def _stage_orthonormal(Q: np.ndarray, stage_sizes: tuple[int, ...]):
    """Orthonormal columns spanning those of ``Q`` (each supported on one stage), per stage."""
    ends = np.cumsum((0, *stage_sizes))
    cols = []
    for a, b in zip(ends[:-1], ends[1:], strict=True):
        block = Q[a:b][:, np.any(Q[a:b] != 0, axis=0)]
        if block.shape[1] == 0:
            continue
        u, s, _ = np.linalg.svd(block, full_matrices=False)
        u = u[:, s > 1e-10 * s[0]]
        full = np.zeros((Q.shape[0], u.shape[1]))
        full[a:b] = u
        cols.append(full)
    out = np.hstack(cols)
    return out, out.shape[1]


def _stages_of(Q: np.ndarray, stage_sizes: tuple[int, ...]) -> list[int]:
    """The stage (0-based) of each column of Q."""
    ends = np.cumsum((0, *stage_sizes))
    first = np.argmax(np.abs(Q) > 0, axis=0)
    return [int(np.searchsorted(ends, f, side="right") - 1) for f in first]


def _dominant_mode(T: np.ndarray, x0: np.ndarray, w_rows: list[int], energies: np.ndarray):
    """(ω, weights): the mode whose increments are largest at the end of the estimator's
    window (modal amplitudes of the start), and its weight components."""
    omega, V = np.linalg.eig(T)
    amp = np.linalg.lstsq(V, x0.astype(complex), rcond=None)[0]
    env = np.maximum.accumulate(energies[::-1])[::-1]
    top = env[int(np.argmax(energies))]
    t_end = int(np.count_nonzero(env >= top * 10.0 ** (-2 * RATE_DECADES))) or 1
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        size = (
            np.abs(amp)
            * np.abs(omega - 1)
            * np.linalg.norm(V[w_rows], axis=0)
            * np.abs(omega) ** float(t_end)
        )
    j = int(np.nanargmax(size))
    root = complex(omega[j])
    if root.imag < 0:
        root = root.conjugate()
    return root, V[w_rows, j]


__all__ = [
    "RATE_DECADES",
    "RatePrediction",
    "envelope_log_rate",
    "model_state_size",
    "predict_rate",
    "stage_pieces",
]
