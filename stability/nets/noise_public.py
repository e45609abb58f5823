r"""``st.net_noise`` (``stability net noise``): minibatch training of a network near a minimum.

Near w* the minibatch gradient is g_B(w) = H_B·(w − w*) + ξ_B (H_B, ξ_B the batch means of the
per-sample Hessians and centred gradients at w*), the random linear system `stability.noise`
solves exactly for least squares.  Here the dynamics are kept in the span of the top-k Hessian
eigenvectors (per stage for per-stage delays) and the per-sample curvatures and gradients are
Galerkin-projected onto it (`stability.nets.minibatch_moments`); the projected moments go into
the same solvers as ``stability noise``:

* ``full_batch_max_lr`` — the deterministic threshold of the projected system (PipeMare Sec. 3.1
  per eigenvalue for uniform delays; the coupled per-stage analysis, `stability.coupled.scan`,
  for a schedule);
* ``ms_max_lr`` — ρ(𝒯) = 1 for the second-moment map with E[H_B ⊗ H_B] = H ⊗ H +
  p(E_i[H_i ⊗ H_i] − H ⊗ H), p = (n − B)/(B(n − 1)) (`stability.noise.threshold`);
* ``as_max_lr``, ``as_bracket`` — the top Lyapunov exponent = 0 (`stability.noise.lyapunov`);
* ``expected_loss``, ``floor``, ``rate`` at ``lr`` from w₀ = w* + ε·v₁, ε = perturbation·√p
  (`stability.noise.minibatch.predict_at`);
* ``subspace_change`` — max relative change of ``ms_max_lr`` and ``floor`` from k to
  min(2k, p) eigenvectors (0 when k = p).

Adam/AdamW (``adam``, AdamW with ``weight_decay``) is analysed as its frozen-P linearisation, P
from ``precond_from`` (`stability.nets.adaptive`; PipeOptim's current-weight backward pass is
refused, as every rule that reads other backward weights): in the whitened coordinates
x = P^{-1/2}w the rule runs with P = 1 on g̃_B = P^{1/2}g_B = H̃_B·(x − x*) + P^{1/2}ξ_B, with
H̃_B the batch mean of P^{1/2}∇²ℓ_iP^{1/2} (Adam's frozen-P step m ← β1·m + (1 − β1)·g_B,
w ← w − lr·(P·m + wd·(w − w*)) — Kingma & Ba Alg. 1 / PipeOptim Table I linearised with P
frozen, `stability.rules.adam` — is that rule mapped back by P^{1/2}).  So the same theory runs
on the top-k eigenvectors x̃ of H̃ = P^{1/2}HP^{1/2}: the per-sample moments are projected
onto the weight-space directions P^{1/2}x̃ (their Hessian-vector products and gradients are
the whitened ones), evaluated in float64 (`stability.nets.preconditioned.evaluation_problem`),
the start is w* + perturbation·√p·d₁ with d₁ the unit P^{1/2}x̃₁, and the measured runs step
the frozen-P rule in weight space, centred on w* (`stability.nets.adam_stages`); with
``measure`` the same runs of real Adam continuing the source's v and t with m = 0 are
``measured_real``.  ``precond_from="stationary"`` takes P from the v̂ real Adam keeps in its own
stationary run at ``lr`` — the fixed point v̂ = E[g_B²] of `stability.nets.stationary_adam`.
f − f* is ½(w − w*)ᵀH(w − w*) = ½(x − x*)ᵀH̃(x − x*) in either coordinates.

``measure=True`` adds ``measured``: ``runs`` seeded minibatch runs of the network simulator in
lockstep from the same start (`stability.nets.minibatch_runs`), and the almost-sure bracket from
``pairs`` runs per step size of the simulator with the offsets ξ_B removed, their deviation from
w* renormalised to 10⁻³·r₁₀ (`stability.nets.minibatch_lyapunov`: with the offsets, runs near
that threshold leave the quadratic region); ``protocol`` says how far both sets of runs
wandered from w* relative to r₁₀, the distance along v₁ at which the curvature changes by 10 %
(the quadratic region); a measurement beyond r₁₀ is flagged in ``warnings``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from stability.nets.minibatch_subspace import Subspace, project, subspace
from stability.nets.problem import NetProblem, refusing_torch_func_limits
from stability.nets.torch_settings import analysis_settings
from stability.noise.minibatch import MinibatchPrediction, jensen_warning
from stability.noise.runs import blowup_warnings
from stability.pipeline import Pipeline
from stability.result import output

DEFAULT_K = 10
"""Default number of Hessian eigenvectors spanning the subspace."""


@dataclass(frozen=True)
class NetNoise(MinibatchPrediction):
    """Minibatch training of a network near a minimum: mean-square and almost-sure thresholds,
    expected loss and noise floor on the Galerkin-projected per-sample moments, and with
    ``measure`` the simulator's seeded runs (`stability.nets.noise_public`)."""

    n_params: int = output("trainable parameters p")
    k: int = output("Hessian eigenvectors spanning the subspace")
    subspace: int = output("subspace dimension m (Σ per-stage ranks with per-stage delays)")
    dropped: int = output("eigen-directions left out: λ ≤ 1e-9·λ_max (flat or negative)")
    curvature: str = output("per-sample curvature: hessian or ggn (Gauss–Newton part)")
    subspace_change: float = output(
        "max relative change of ms_max_lr and floor from k to min(2k, p) eigenvectors"
    )
    eigenvalues: list[float] = output(
        "top eigenvalues used, descending: of the Hessian, or of P^1/2 H P^1/2 for Adam", "1/lr"
    )
    schedule: str = output("pipemare, pipedream, pb, gpipe or uniform")
    stage_taus: list[int] = output("forward delay per stage (weight stashing)")
    stage_sizes: list[int] = output("parameters per stage")
    preconditioner: dict[str, Any] | None = output(
        "Adam's frozen P = 1/(√v̂ + ε): source, step t, min / median / max (null: a rule "
        "without a preconditioner)"
    )
    measured: dict[str, Any] | None = output(
        "the simulator's seeded minibatch runs (null without measure)"
    )
    measured_real: dict[str, Any] | None = output(
        "Adam: the same runs of real Adam continuing the preconditioner's state (v, t; m = 0), "
        "with v_hat_ratio, the median over coordinates of the runs' final v̂ over the start's, "
        "and max_distance_ratio, their max ‖w − w*‖ / r₁₀ (null without measure or a "
        "preconditioner)"
    )
    protocol: dict[str, Any] = output("start, perturbation, the runs' distance from w* and r₁₀")
    notes: list[str] = output("what the numbers assume")
    seconds: float = output("wall time", "s")


def _pipeline(net: NetProblem, pipeline: Pipeline | None, tau: int | None) -> Pipeline:
    """The stages' delays with weight stashing (the linearisation reads the forward weights):
    ``pipeline``'s forward delays, or a uniform ``tau`` (default 0) on every stage."""
    P = len(net.stage_sizes)
    if pipeline is not None and tau is not None:
        raise ValueError("give a uniform tau or a pipeline, not both")
    if pipeline is None or (isinstance(pipeline, Pipeline) and pipeline.schedule == "uniform"):
        uniform = tau if pipeline is None else int(pipeline.tau_fwd[0])
        return Pipeline.from_options(tau=uniform or 0, stages=P, backward="stashed")
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline must be a stability.pipeline.Pipeline, got {pipeline!r}")
    if pipeline.stages != P:
        raise ValueError(f"stages: the pipeline has {pipeline.stages}, the problem {P}")
    return dataclasses.replace(pipeline, tau_bkwd=None)


@analysis_settings()
@refusing_torch_func_limits
def net_noise(
    problem: str | dict | NetProblem,
    rule: str,
    *,
    batch: int,
    lr: float | None = None,
    pipeline: Pipeline | None = None,
    tau: int | None = None,
    stages: int | None = None,
    k: int = DEFAULT_K,
    curvature: str = "hessian",
    steps: int = 1000,
    at: Any = None,
    perturbation: float = 1e-3,
    sampling: str = "iid",
    measure: bool = False,
    runs: int = 256,
    pairs: int | None = None,
    pair_steps: int | None = None,
    seed: int = 0,
    lyapunov_steps: int = 4000,
    lyapunov_runs: int = 32,
    precond_from: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    **params: Any,
) -> NetNoise:
    """Mean-square and almost-sure thresholds, expected loss and floor of minibatch training of
    a network near its minimum (module doc), optionally measured by the simulator.

    ``pipeline``: per-stage delays (a `stability.pipeline.Pipeline`; the network runs weight
    stashing), or ``tau``: a uniform delay (default 0); ``lr``: the step size of
    ``expected_loss``/``floor``/``rate`` (default 0.25 × ``ms_max_lr``); ``at``: the steps of
    ``expected_loss`` (default the 1-2-5 sequence up to ``steps``); ``perturbation``: the start
    w* + perturbation·√p·v₁; ``runs``: the loss runs of ``measure``; ``pairs``, ``pair_steps``:
    the offset-free runs per step size of the measured almost-sure bracket and their length
    (`stability.nets.minibatch_lyapunov`; default: the predicted exponent's
    ``lyapunov_runs`` — at most `MAX_PAIRS` — and ``lyapunov_steps``, at most
    `PAIR_STEPS_DEFAULT`: as many runs, and up to 1,000 steps, their cost); ``precond_from``:
    Adam's preconditioner (needed by adaptive rules, refused with others; module doc), or
    ``"stationary"``: real Adam's own stationary v̂ at ``lr`` (`stability.nets.stationary_adam`,
    needs ``lr``);
    ``progress(done, total)``: the measurement's lockstep steps
    (`stability.nets.step_counter`).  Implements the recursion of
    `stability.noise.second_moment` with the per-sample moments of `stability.noise.persample`
    (Mulayoff & Michaeli 2023's mixture form of E[H_B ⊗ H_B]) and the thresholds of PipeMare
    Sec. 3.1 at B = n.
    """
    from stability.api.tables import MAX_LYAPUNOV_RUNS, MAX_PAIRS, PAIR_STEPS_DEFAULT
    from stability.checks import check_choice, check_integer, check_number, check_real
    from stability.nets.adaptive import adaptive_setup
    from stability.nets.curvature import curvature as top_curvature
    from stability.nets.lockstep import RunSetup
    from stability.nets.minibatch_lyapunov import EVERY, SEPARATION, Z_DECIDE
    from stability.nets.minibatch_runs import measure_runs, quadratic_radius, start_weights
    from stability.nets.preconditioned import evaluation_problem, preconditioned_curvature
    from stability.nets.prediction import net_rules
    from stability.nets.public import _problem, _rule_params, measured_problem
    from stability.nets.simulator import INCONSISTENT_RULES
    from stability.nets.stationary_adam import stationary_preconditioner
    from stability.noise.lyapunov import bracket_note
    from stability.noise.minibatch import (
        MAX_STEPS,
        predict_at,
        thresholds,
        time_points,
    )
    from stability.trainer.engine import SAMPLING

    started = time.perf_counter()
    net = _problem(problem, stages)
    check_choice("sampling", sampling, SAMPLING)
    check_choice("curvature", curvature, ("hessian", "ggn"))
    k = check_integer("k", k, low=1)
    steps = check_integer("steps", steps, low=1, high=MAX_STEPS)
    batch = check_integer("batch", batch, low=1, high=net.samples)
    check_real("perturbation", perturbation, low=0.0, low_open=True)
    lyapunov_steps = check_integer("lyapunov_steps", lyapunov_steps, low=100, high=MAX_STEPS)
    lyapunov_runs = check_integer("lyapunov_runs", lyapunov_runs, low=2, high=MAX_LYAPUNOV_RUNS)
    pairs = check_integer(
        "pairs", min(lyapunov_runs, MAX_PAIRS) if pairs is None else pairs, low=2, high=MAX_PAIRS
    )
    pair_steps = check_integer(
        "pair_steps",
        min(lyapunov_steps, PAIR_STEPS_DEFAULT) if pair_steps is None else pair_steps,
        low=100,
        high=MAX_STEPS,
    )
    if lr is not None:
        lr = check_number("lr", lr, low=0.0, low_open=True)
    times = time_points(at, steps)
    if rule in INCONSISTENT_RULES:
        raise ValueError(
            f"rule {rule!r} models backward weights that differ from the forward ones; net noise "
            "linearises the gradient at the forward weights (weight stashing)"
        )
    params = _rule_params(rule, params)
    adaptive = adaptive_setup(net, rule, params, precond_from, command="noise", measure=measure)
    pipe = _pipeline(net, pipeline, tau)
    uniform = len(set(pipe.tau_fwd.tolist())) == 1
    p = net.dim
    k = min(k, p)
    k2 = min(2 * k, p)
    if adaptive is None:
        rules = net_rules(rule, params, pipe)
        curv = top_curvature(net, k2, stage_blocks=False, negative_k=0)
        scale, evaluated, lam_h = np.ones(p), net, float(curv.eigenvalues[0])
    else:  # the frozen-P rule in whitened coordinates (module doc)
        net = adaptive.net
        rules = adaptive.rules(rule, pipe)
        if adaptive.precond is None:  # "stationary": P of a run at lr (module doc)
            if curvature != "hessian":
                raise ValueError(
                    "curvature: precond_from stationary takes the mean square of the gradient "
                    "H_B(w − w*) + ξ_B with the per-sample Hessians; use curvature hessian"
                )
            if lr is None:
                raise ValueError(
                    "lr: precond_from stationary is the preconditioner of a run at one step "
                    "size: give one"
                )
            fixed_point = stationary_preconditioner(
                net, rules, lr=lr, batch=batch, k=k, uniform=uniform,
                beta2=adaptive.hyper("beta2"), eps=adaptive.hyper("eps"),
            )  # fmt: skip
            adaptive = dataclasses.replace(adaptive, precond=fixed_point)
        curv = preconditioned_curvature(net, adaptive.scale, k2, stage_blocks=False)
        scale, evaluated = adaptive.scale.numpy(), evaluation_problem(net)[0]
        lam_h = top_curvature(net, 1, stage_blocks=False, negative_k=0).lam_max
    lam = curv.eigenvalues
    proj = project(
        evaluated, lam, curv.eigenvectors, scale, k=k, batch=batch, curvature=curvature,
        rules=rules, uniform=uniform,
    )  # fmt: skip
    Q, cols, moments, sizes = proj.Q, proj.cols, proj.moments, proj.sizes
    v1 = (
        curv.eigenvectors[:, 0] if adaptive is None else adaptive.direction(curv.eigenvectors[:, 0])
    )
    w0 = start_weights(net, v1, perturbation)
    e_full = Q.T @ ((w0 - net.w_star).cpu().numpy().astype(float) / scale)
    small = subspace(moments, rules, sizes, e_full[cols], uniform)
    limits = thresholds(
        small.builder,
        moments,
        small.full_batch,
        steps=lyapunov_steps,
        runs=lyapunov_runs,
        seed=seed,
    )
    ms, as_lr = limits["ms_max_lr"], limits["as_max_lr"]
    if lr is None:
        if not ms:
            raise ValueError("lr: no mean-square threshold to take 0.25 × ms_max_lr of; give lr")
        lr = 0.25 * ms
    lr = check_number("lr", lr, low=0.0, low_open=True)
    at_lr = predict_at(small.builder(lr), moments, small.e0, times)
    change = 0.0
    if len(cols) < Q.shape[1]:
        big = subspace(proj.moments2, rules, proj.sizes2, e_full, uniform)
        change = _change(big, lr, ms, at_lr["floor"])
    r10 = quadratic_radius(net, v1)
    protocol: dict[str, Any] = {
        "start": (
            "w* + perturbation·√p·v1 (v1: unit top Hessian eigenvector), constant history"
            if adaptive is None
            else "w* + perturbation·√p·v1 (v1: the unit weight-space direction P^1/2·x1 of the "
            "top eigenvector x1 of P^1/2 H P^1/2), constant history"
        ),
        "perturbation": perturbation,
        "gradient": "minibatch gradient tilted by the full-batch one at w*: ∇f_B(u) − ∇f(w*)",
        "quadratic_radius": r10,
        "quadratic_radius_means": "distance from w* along ±v1 where v1ᵀ∇²f v1 changes by 10 %",
        "gradient_norm_at_w_star": float(torch.linalg.vector_norm(net.gradient(net.w_star))),
    }
    from stability.nets.minimum import nearness

    negatives = np.sort(lam[lam < 0]) if adaptive is None else None  # H̃'s are not H's
    near = nearness(net, lam_h, negatives)
    start = start_warning(perturbation * p**0.5, r10, p)
    jensen = jensen_warning(limits, lyapunov_runs, lyapunov_steps)
    warnings = [
        w for w in (near.warning, curv.warning, subspace_warning(change, k, k2), start, jensen) if w
    ]
    measured = measured_real = None
    if measure:
        separation = min(SEPARATION * r10, perturbation * p**0.5)
        wide, protocol["precision"], precision_note = measured_problem(net)
        if precision_note is not None:
            warnings.append(precision_note)
        on_wide = None if adaptive is None else dataclasses.replace(adaptive, net=wide)
        stage_rules = rules if adaptive is None else on_wide.frozen(rules, centred=True)
        real = (
            None
            if adaptive is None
            else RunSetup(
                wide, on_wide.real(rules, first_moment=False, centred=True), batch, sampling, seed
            )
        )
        measured, wander, as_wander, measured_real = measure_runs(
            RunSetup(wide, stage_rules, batch, sampling, seed), lr, times, wide.vector(w0), as_lr,
            runs=runs, pairs=pairs, pair_steps=pair_steps, steps=steps, separation=separation,
            real=real, progress=progress,
        )  # fmt: skip
        if measured_real is not None:
            measured_real["v_hat_ratio"] = _v_hat_ratio(real.rules, adaptive.precond, runs)
        ratio = wander / r10 if np.isfinite(r10) else 0.0
        as_ratio = as_wander / r10 if np.isfinite(r10) else 0.0
        protocol.update(
            runs_max_distance=wander,
            runs_max_distance_ratio=ratio,
            as_gradient="offsets removed: ∇f_B(u) − mean over the batch of ∇ℓ_i(w*) (w* rests)",
            as_separation=separation,
            as_renormalised_every=EVERY,
            as_decision=f"unstable if mean γ > {Z_DECIDE:g} se, stable if < −{Z_DECIDE:g} se",
            as_max_distance=as_wander,
            as_max_distance_ratio=as_ratio,
            pair_steps=pair_steps,
        )
        left = [("loss runs", ratio, measured), ("almost-sure runs", as_ratio, None)]
        if measured_real is not None:
            real_ratio = measured_real["max_distance"] / r10 if np.isfinite(r10) else 0.0
            measured_real["max_distance_ratio"] = real_ratio
            left.append(("real-Adam runs", real_ratio, measured_real))
        warnings.extend(blowup_warnings([(what, block) for what, _, block in left if block]))
        survived = [(what, r) for what, r, b in left if not b or b["blowup_fraction"] < 1]
        warnings.extend(wander_warnings(survived))  # all blown up: blowup_warnings said so
    notes = [
        "Galerkin: per-sample Hessians and gradients at w* projected onto the span of the top-k "
        "Hessian eigenvectors" + ("" if uniform else ", per stage (block-diagonal basis)"),
        "the theory is exact for iid sampling of the linearised gradient H_B(w − w*) + ξ_B; "
        "reshuffled epochs are only measured",
        "expected_loss and floor are E f − f* over the sampling from w* + perturbation·√p·v1",
        bracket_note(lyapunov_runs, lyapunov_steps),
    ]
    if adaptive is not None:
        notes.insert(
            1,
            f"Adam: the frozen-P rule, P from {adaptive.precond.source}, in whitened coordinates "
            "x = P^-1/2 w: per-sample curvatures P^1/2 ∇²ℓ_i P^1/2 and gradients P^1/2 ∇ℓ_i on "
            "the top-k eigenvectors of P^1/2 H P^1/2 (evaluated in float64); the measured runs "
            "step w ← w − lr·(P·m + wd·(w − w*)) in weight space"
            + ("" if measured_real is None else "; measured_real steps real Adam/AdamW (v̂ "
               "adapting) from the same start, continuing v and t with m = 0"),
        )  # fmt: skip
        if adaptive.precond.stationary is not None:
            notes.insert(
                2,
                "P = 1/(√v̂ + ε) with v̂ the stationary mean square of real Adam's minibatch "
                "gradients at this lr and batch: the fixed point v̂ = E[g_B²] over the stationary "
                "distribution of the frozen-P rule (stability.nets.stationary_adam); "
                "the thresholds are the frozen-P rule's at that P",
            )
    return NetNoise(
        **MinibatchPrediction.of(rule, batch, lr, sampling, net.samples, limits, at_lr),
        n_params=p,
        k=k,
        subspace=moments.dim,
        dropped=int(k - proj.k_kept),
        curvature=curvature,
        subspace_change=change,
        eigenvalues=lam[:k].tolist(),
        schedule=pipe.schedule,
        stage_taus=pipe.tau_fwd.tolist(),
        stage_sizes=list(net.stage_sizes),
        preconditioner=None if adaptive is None else adaptive.describe(),
        measured=measured,
        measured_real=measured_real,
        protocol=protocol,
        warnings=tuple(warnings),
        notes=notes,
        seconds=time.perf_counter() - started,
    )


SUBSPACE_WARN = 0.05
"""A `subspace_change` above this puts a warning in ``warnings`` (`subspace_warning`)."""


def subspace_warning(change: float, k: int, larger: int) -> str | None:
    """One line when ``ms_max_lr`` or ``floor`` moved by more than `SUBSPACE_WARN` from ``k``
    eigenvectors to ``larger`` = min(2k, p): both converge slowly in k (docs/noise.md; every
    direction's gradient noise adds about lr·Var(ξ)/4 to the floor whatever its curvature, so
    on digits_mlp the floor grows 1.30e-6, 1.53e-6, 1.72e-6 at k = 10, 20, 30 against 2.3e-6
    measured): the numbers printed may be further off than the change says."""
    if change <= SUBSPACE_WARN:
        return None
    moved = (
        f"on {larger} eigenvectors the floor does not exist (not mean-square stable at this lr)"
        if not np.isfinite(change)
        else f"ms_max_lr or floor moved by {change:.0%} from k = {k} to {larger} eigenvectors"
    )
    return (
        f"subspace_change: {moved}, and they converge slowly in k (every direction's gradient "
        "noise adds to the floor whatever its curvature); raise --k (docs/limits.md), or read "
        "floor as a lower and ms_max_lr as an upper estimate"
    )


def start_warning(distance: float, r10: float, p: int) -> str | None:
    """One line when the start w* + perturbation·√p·v1 lies beyond r₁₀ (``distance`` > ``r10``):
    the predicted expected_loss begins at the quadratic model's loss there, not the network's
    (an outsider's 627-parameter transformer at the default start, 26 × r₁₀: 0.0090 predicted
    at t = 0, 0.0068 and 0.0020 on the network at w* ± εv1).  The thresholds and the floor do
    not depend on the start."""
    if not distance > r10:  # r₁₀ = inf (a linear model): never
        return None
    return (
        f"perturbation: the start lies {distance / r10:.3g} × quadratic_radius from w*, where "
        "the curvature along v1 has changed by more than 10 %: expected_loss's first values are "
        "the quadratic model's, not the network's (the thresholds and the floor do not depend "
        f"on the start); a perturbation below {r10 / p**0.5:.2g} starts inside"
    )


def wander_warnings(left: list[tuple[str, float]]) -> list[str]:
    """A warning for each (measured runs, max ‖w − w*‖/r₁₀) whose runs left the quadratic
    region (ratio > 1) or diverged (not finite: the runs blew up, no distance to print)."""
    out = []
    for what, value in left:
        if not np.isfinite(value):
            out.append(
                f"the measured {what} diverged (‖w − w*‖ not finite): the linearisation does "
                "not describe them; lower lr"
            )
        elif value > 1:
            out.append(
                f"the measured {what} left the quadratic region: max ‖w − w*‖ = {value:.3g} × "
                "the distance at which the curvature along v1 changes by 10 %; a smaller lr, a "
                "larger batch (the gradient noise drives the runs) or a smaller perturbation "
                "(the start) keeps them inside it"
            )
    return out


def _v_hat_ratio(stages, precond, runs: int) -> float:
    """Median over coordinates (those with v̂ > 0 at the start) of the runs' mean final v̂ over
    the start's: v̂ = (1/P − ε)², P of each stage's last update (`RealStage.preconditioners`)."""
    end = torch.cat([stage.preconditioners() for stage in stages], dim=-1).double().cpu()
    end = end.expand(runs, -1)  # one run: (p,)

    def v_hat(P: torch.Tensor) -> torch.Tensor:
        return (1.0 / P - precond.eps).clamp(min=0) ** 2

    start = v_hat(precond.P)
    moving = start > 0
    return float((v_hat(end).mean(dim=0)[moving] / start[moving]).median())


def _change(big: Subspace, lr: float, ms: float | None, floor: float | None) -> float:
    """Max relative change of ms_max_lr and floor (at ``lr``) on the larger subspace."""
    from stability.noise.gramian import stationary
    from stability.noise.threshold import ms_max_lr

    changes = []
    if ms and big.full_batch:
        ms2 = ms_max_lr(big.builder, big.moments, big.full_batch)
        changes.append(abs(ms2 - ms) / ms2)
    if floor:
        fixed = stationary(big.builder(lr), big.moments)
        if fixed is not None and fixed.floor > 0:
            changes.append(abs(fixed.floor - floor) / fixed.floor)
        else:
            changes.append(float("inf"))
    return max(changes, default=0.0)


__all__ = [
    "DEFAULT_K",
    "NetNoise",
    "SUBSPACE_WARN",
    "net_noise",
    "subspace_warning",
    "wander_warnings",
]
