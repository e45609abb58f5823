r"""``st.net_curvature``, ``st.net_max_lr``, ``st.net_train``: the ``stability net`` commands.

Each takes the problem as ``"FILE.py:FUNCTION"``, as the dict such a function returns, or as a
`NetProblem`; the rule by name with its parameters as keywords named like the CLI flags, and
returns a frozen `Result` whose attributes are the command's JSON keys.  Delays: a uniform
``tau`` (every stage), or a pipeline ``schedule`` over the problem's stages (default
``pipemare``, PipeMare Table 1) with ``microbatches``, or an explicit profile ``stage_delays``
(keywords, `PIPELINE_KEYWORDS`), or ``pipeline=`` a `stability.pipeline.Pipeline` of the
network's stages; weight stashing unless ``backward="current"``
(`stability.pipeline.Pipeline.from_options`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.checks import check_integer
from stability.nets.bracket import NetProtocol, linear_start, measure_log_rate, measure_max_lr
from stability.nets.curvature import HessianOperator, curvature, negative_end
from stability.nets.minimum import (
    nearness,
    nearness_output,
    nearness_searched,
    saddle_measure_warning,
)
from stability.nets.prediction import (
    DEFAULT_SCHEDULE,
    net_rules,
    predict,
    predicted_log_rate,
)
from stability.nets.problem import (
    NetProblem,
    dtype_name,
    load_problem,
    problem_from_dict,
    refusing_torch_func_limits,
)
from stability.nets.rates import predict_rate
from stability.nets.saddle_flip import saddle_flip
from stability.nets.simulator import simulate
from stability.nets.step_counter import chained, counter
from stability.nets.torch_settings import analysis_settings
from stability.options import check_given
from stability.pipeline import Pipeline
from stability.result import Result, output
from stability.trainer.measure import log_rate

RATE_FRACTION = 0.5
"""Rates are predicted and measured at this fraction of the predicted max lr."""
MEASURED_PRECISION = (
    "float64 (a float32 problem's weights and data converted exactly): float32 rounding drives "
    "runs started this close to w* — times Adam's P up to 1/ε, and between the almost-sure "
    "runs' pairs (docs/nets.md)"
)
"""How the measured runs of ``net max-lr --measure`` and ``net noise --measure`` evaluate
(`NetProblem.in_float64`)."""


def measured_problem(net: NetProblem) -> tuple[NetProblem, str, str | None]:
    """(the problem the measured runs use, its ``protocol.precision``, a warning or None): the
    float64 copy, or — where the loss does not run in float64 (a function holding float32
    tensors) — the problem itself, with a warning."""
    runs, failed = net.in_float64_or_self()
    if failed is None:
        return runs, MEASURED_PRECISION, None
    dtype = dtype_name(net.dtype)
    return (
        net,
        f"{dtype} (the float64 copy failed)",
        (
            f"the measured runs stay in {dtype}: in float64 {failed}; float32 rounding can move "
            "a measurement started this close to w* (docs/nets.md)"
        ),
    )


def _problem(
    problem: str | dict | NetProblem, stages: int | None, dtype: Any = None, device: Any = None
) -> NetProblem:
    """The problem ``FILE.py:FUNC`` loaded, or a problem dict (what that function returns)
    checked (``dtype``/``device``: `stability.nets.problem.problem_from_dict`'s overrides), or
    a `NetProblem` as it is (then ``dtype``/``device`` must be its own)."""
    if isinstance(problem, dict):
        return problem_from_dict(problem, stages=stages, dtype=dtype, device=device)
    if not isinstance(problem, (str, NetProblem)):
        raise ValueError(
            "problem must be 'FILE.py:FUNC', a problem dict (model, loss, inputs and targets "
            f"or data) or a NetProblem, got {type(problem).__name__}"
        )
    if isinstance(problem, NetProblem):
        if stages is not None and stages != len(problem.stage_sizes):
            raise ValueError(f"stages: the problem has {len(problem.stage_sizes)} stages")
        if dtype is not None and dtype_name(dtype) != dtype_name(problem.dtype):
            raise ValueError("dtype: a NetProblem keeps its dtype; pass dtype when loading it")
        if device is not None and str(device) != str(problem.device):
            raise ValueError("device: a NetProblem keeps its device; pass device when loading it")
        return problem
    return load_problem(problem, stages=stages, dtype=dtype, device=device)


def _granularity(net: NetProblem, backward: str, granularity: str) -> NetProblem:
    """The problem whose backward passes with other weights have ``granularity``'s units
    (`stability.nets.inconsistent`); only ``backward="current"`` has such passes."""
    from stability.checks import check_choice
    from stability.nets.inconsistent import GRANULARITIES

    check_choice("granularity", granularity, GRANULARITIES)
    if granularity != "layer" and backward != "current":
        raise ValueError("granularity: stage applies to backward passes with other weights; "
                         "it needs --backward current")  # fmt: skip
    return dataclasses.replace(net, granularity=granularity)


PIPELINE_KEYWORDS = ("schedule", "stage_delays", "microbatches", "tau")
"""The keywords of a network's pipeline (besides ``stages``, the network's own split):
`stability.pipeline.Pipeline.from_options`'s, ``tau`` the uniform delay."""


def _pipeline_keywords(params: dict[str, Any]) -> dict[str, Any]:
    """The pipeline keywords given among ``params`` (removed from it)."""
    given = {k: params.pop(k) for k in PIPELINE_KEYWORDS if k in params}
    return {k: v for k, v in given.items() if v is not None}


def _pipeline(
    net: NetProblem, pipeline: Any, keywords: dict[str, Any], backward: str, tau_bkwd: Any
) -> Pipeline:
    """The network's pipeline: ``pipeline`` given whole, or built from its ``keywords`` over the
    network's stages (default schedule pipemare; weight stashing unless ``backward`` is
    "current"; `Pipeline.from_options`)."""
    P = len(net.stage_sizes)
    if pipeline is None:
        return Pipeline.from_options(
            default=DEFAULT_SCHEDULE, stages=P, backward=backward, tau_bkwd=tau_bkwd, **keywords
        )
    if keywords:
        raise ValueError(f"give pipeline= or its keywords ({', '.join(keywords)}), not both")
    if not isinstance(pipeline, Pipeline) or pipeline.stages != P:
        raise ValueError(f"pipeline must be a Pipeline of the network's {P} stages")
    return pipeline


def _protocol(protocol: NetProtocol | None, measure_steps: int | None) -> NetProtocol:
    """The measurement protocol: given whole, or the default one with ``measure_steps`` steps
    per simulator run."""
    if measure_steps is None:
        return protocol or NetProtocol()
    if protocol is not None:
        raise ValueError("give protocol= or measure_steps, not both")
    from stability.api.net_tables import NET_MAX_LR_OPTIONS

    steps = check_given(NET_MAX_LR_OPTIONS, measure_steps=measure_steps)["measure_steps"]
    return NetProtocol(steps=steps)


def _rule_params(rule: str, params: dict[str, Any]) -> dict[str, Any]:
    """The rule parameters given (their names checked); the scalar model's are refused."""
    from stability.rules.registry import get_spec, refuse_model_parameters

    get_spec(rule).check_names(params)
    refuse_model_parameters(params, "here H comes from the network")
    return {k: v for k, v in params.items() if v is not None}


# -- curvature ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NetCurvature(Result):
    """The top of a network's Hessian spectrum at its weights, overall and per stage."""

    eigenvalues: list[float] = output("top-k eigenvalues of the loss Hessian, descending", "1/lr")
    stage_eigenvalues: list[list[float]] = output(
        "per stage: top eigenvalues of its diagonal block", "1/lr"
    )
    negative_eigenvalues: list[float] | None = output(
        "eigenvalues < −1e-9·λ_max found at the bottom of the spectrum (saddle directions; "
        "empty: none there); searched only with negative (--negative), else null",
        "1/lr",
    )
    stage_sizes: list[int] = output("parameters per stage, in pipeline order")
    n_params: int = output("trainable parameters p")
    hvps: int = output("Hessian-vector products used")
    seconds: float = output("wall time of the eigen-solves", "s")
    method: str = output("how the eigenvalues were computed")
    gradient_norm: float | None = nearness_output("gradient_norm")
    gradient_scale: float | None = nearness_output("gradient_scale")
    negative_ratio: float | None = nearness_output("negative_ratio")
    preconditioned_eigenvalues: list[float] | None = output(
        "--precond-from: top-k eigenvalues of P^1/2 ∇²f P^1/2 (descending)", "1/lr", default=None
    )
    preconditioned_stage_eigenvalues: list[list[float]] | None = output(
        "--precond-from: per stage, top eigenvalues of P_i^1/2 H_ii P_i^1/2", "1/lr", default=None
    )
    preconditioner: dict[str, Any] | None = output(
        "--precond-from: source, step t, β2, ε, min/median/max of P", default=None
    )


@analysis_settings()
@refusing_torch_func_limits
def net_curvature(
    problem: str | dict | NetProblem,
    *,
    k: int = 10,
    stages: int | None = None,
    negative: bool = False,
    stage_blocks: bool = False,
    dtype: str | None = None,
    device: str | None = None,
    precond_from: str | None = None,
) -> NetCurvature:
    """Top-``k`` eigenvalues of ∇²f at the model's weights; per stage with ``stage_blocks``,
    the negative end with ``negative`` (each an extra eigen-solve: off by default).

    Lanczos (ARPACK) on Hessian-vector products by reverse-over-reverse differentiation
    (`stability.nets.curvature`), in the model's dtype on its device unless ``dtype``
    (``"float32"``/``"float64"``) or ``device`` say otherwise.  ``precond_from``: also the
    top-k of P^{1/2}∇²f P^{1/2} (and each stage's block) with an Adam/AdamW optimizer's P
    (`stability.nets.preconditioner`, `stability.nets.preconditioned`; a warm-up source moves
    the weights first).
    """
    net = _problem(problem, stages, dtype, device)
    k = check_integer("k", k, low=1)
    extra: dict[str, Any] = {}
    unseen = precision = None
    if precond_from is not None:
        from stability.nets.preconditioned import preconditioned_curvature
        from stability.nets.preconditioner import load_preconditioner, unseen_note

        pre = load_preconditioner(net, precond_from)
        if pre.weights is not None:
            net = dataclasses.replace(net, w_star=pre.weights)
        pc = preconditioned_curvature(net, pre.scale, k)
        unseen = unseen_note(pre, net.names, net.sizes, pc.eigenvectors[:, 0])
        precision = pc.warning
        extra = {
            "preconditioned_eigenvalues": pc.eigenvalues.tolist(),
            "preconditioned_stage_eigenvalues": [v.tolist() for v in pc.stage_eigenvalues],
            "preconditioner": pre.describe(),
        }
    c = curvature(net, k, negative_k=5 if negative else 0, stage_blocks=bool(stage_blocks))
    near = nearness(
        net, c.lam_max, c.negative_eigenvalues if negative else None, None, c.negative_complete
    )
    return NetCurvature(
        eigenvalues=c.eigenvalues.tolist(),
        stage_eigenvalues=[v.tolist() for v in c.stage_eigenvalues],
        negative_eigenvalues=c.negative_eigenvalues.tolist() if negative else None,
        stage_sizes=list(c.stage_sizes),
        n_params=net.dim,
        hvps=c.hvps,
        seconds=c.seconds,
        method=c.method,
        **_near_fields(near, unseen, precision),
        **extra,
    )


def _rate_error(predicted: float | None, measured: float | None) -> float | None:
    """ln ρ̂ / ln ρ − 1 where both rates are in (0, 1) (issue 25's acceptance quantity)."""
    if not predicted or not measured or not 0 < predicted < 1 or not 0 < measured < 1:
        return None
    return math.log(measured) / math.log(predicted) - 1


def _nearness(net: NetProblem, lam_max: float, negative: bool | None):
    """(`Nearness`, negative eigenvalues or None) with the negative end searched as
    ``negative`` says (None: where the warning needs it; `net_max_lr`)."""
    if negative is False:
        return nearness(net, lam_max, None), None

    def search():
        op = HessianOperator(net)
        negatives, _, complete = negative_end(op, lam_max, seed=1)
        return negatives, complete

    return nearness_searched(net, lam_max, search, always=bool(negative))


def _near_fields(near, *notes: str | None) -> dict[str, Any]:
    """The not-at-a-minimum fields and warnings (`stability.nets.minimum`, issue 26 item 3),
    with the call's other ``notes`` (a saddle's bracket, a rate left out) as warnings too."""
    return {
        "gradient_norm": near.gradient_norm,
        "gradient_scale": near.gradient_scale,
        "negative_ratio": near.negative_ratio,
        "warnings": tuple(w for w in (near.warning, near.unknown, *notes) if w is not None),
    }


def _rate_left_out(curv, rules) -> str:
    """The warning of a rate prediction left out: not even v₁'s stage pieces fit the model's
    state limit (`stability.limits.NET_RATE_MAX_STATE`)."""
    from stability.limits import NET_RATE_MAX_STATE
    from stability.nets.rates import model_state_size

    rows = model_state_size(curv, rules, 1)
    return (
        f"predicted_rate left out: the rate model's state would have {rows:,} rows with v₁'s "
        f"stage pieces alone (> {NET_RATE_MAX_STATE:,}): the delays are too long for it"
    )


# -- max lr --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NetMaxLr(Result):
    """Predicted (and measured) max stable step size of a network under per-stage delays."""

    rule: str = output("the rule's registry name")
    max_lr: float | None = output("coupled per-stage max stable lr on the rank-k curvature", "lr")
    scalar_bound: float | None = output("the rule's max lr at (λ_max, largest stage delay)", "lr")
    crossing_angle: float | None = output("θ of the critical root e^{iθ}", "rad")
    critical_stage: int | None = output("stage (1 … P) carrying most of the critical mode")
    eigenvalues: list[float] = output(
        "top-k eigenvalues, descending (only the positive ones enter the analysis)", "1/lr"
    )
    negative_eigenvalues: list[float] | None = output(
        "eigenvalues < −1e-9·λ_max found (left out, see docs; empty: none there); null where "
        "not searched: the gradient already shows the weights are not at a minimum",
        "1/lr",
    )
    rank: int = output("k: eigenpairs of the curvature in the coupled analysis")
    truncation_change: float | None = output("relative change of max_lr from rank k/2 to k")
    schedule: str = output("pipemare, pipedream, pb, gpipe or uniform")
    backward: str = output("stashed (backward uses the forward weights) or current")
    stage_taus: list[int] = output("forward delay per stage")
    stage_taus_bkwd: list[int] = output("backward delay per stage (= stage_taus when stashed)")
    delta: float | None = output(
        "effective Δ₁ = −v₁ᵀH_b v₁ along the top eigenvector (--backward current)", "1/lr"
    )
    stage_sizes: list[int] = output("parameters per stage")
    method: str = output("how max_lr was computed")
    rate_lr: float | None = output("the lr of the rates: 0.5 × max_lr", "lr")
    predicted_rate: float | None = output(
        "ρ at rate_lr of the run from w* + ε·v₁, read from the Galerkin model on the stage "
        "pieces of the top k eigenvectors by the measurement's estimator (stability.nets.rates)"
    )
    measured_max_lr: float | None = output("simulator: midpoint of the bracket (--measure)", "lr")
    measured_bracket: list[float] | None = output("simulator: [stable, unstable] lr", "lr")
    measured_rate: float | None = output("simulator: measured ρ at rate_lr (per step)")
    protocol: dict[str, Any] | None = output("the measurement protocol")
    rate_mode: dict[str, Any] | None = output(
        "the mode carrying predicted_rate: root ω [re, im] per step, its modulus, the curvature "
        "its weights see (Rayleigh quotient) and the stage holding most of them",
        default=None,
    )
    rate_method: str | None = output("how predicted_rate was computed", default=None)
    rate_truncation_change: float | None = output(
        "relative change of ln predicted_rate from the stage pieces of the top k/2 eigenvectors "
        "to k (large: raise --k)",
        default=None,
    )
    rate_error: float | None = output(
        "ln measured_rate / ln predicted_rate − 1 (--measure): the prediction's error on this "
        "network; docs/nets.md says where it misses and why",
        default=None,
    )
    gradient_norm: float | None = nearness_output("gradient_norm")
    gradient_scale: float | None = nearness_output("gradient_scale")
    negative_ratio: float | None = nearness_output("negative_ratio")
    preconditioned_eigenvalues: list[float] | None = output(
        "adaptive rules: top eigenvalues of P^1/2 H P^1/2 (= eigenvalues)", "1/lr", default=None
    )
    preconditioner: dict[str, Any] | None = output(
        "adaptive rules: source, step t, β2, ε, min/median/max of P", default=None
    )
    measured_bracket_real: list[float] | None = output(
        "--measure, adaptive rules: [stable, unstable] lr of real Adam from the same weights and "
        "optimizer state",
        "lr",
        default=None,
    )
    real_ratio: float | None = output(
        "midpoint of measured_bracket_real / max_lr (real Adam vs the frozen-P prediction)",
        default=None,
    )


@analysis_settings()
@refusing_torch_func_limits
def net_max_lr(
    problem: str | dict | NetProblem,
    rule: str,
    *,
    stages: int | None = None,
    pipeline: Any = None,
    backward: str = "stashed",
    tau_bkwd: int | None = None,
    tau_recomp: int | None = None,
    k: int = 20,
    measure: bool = False,
    protocol: NetProtocol | None = None,
    measure_steps: int | None = None,
    dtype: str | None = None,
    device: str | None = None,
    negative: bool | None = None,
    precond_from: str | None = None,
    granularity: str = "layer",
    progress: Callable[[int, int], None] | None = None,
    **params: Any,
) -> NetMaxLr:
    """Max stable lr of ``rule`` on a network split into pipeline stages, each with its delay.

    The exact coupled per-stage analysis (`stability.coupled.scan`; PipeMare eq. 3-5 and
    Kosson eq. 20-23 per stage, coupled through the Hessian) on the rank-``k`` curvature
    (`stability.nets.lowrank`), beside the scalar bound (PipeMare Lemma 1-3 at (λ_max, τ_max));
    with ``measure`` the simulator's bracket and rates (`stability.nets.bracket`; its
    ``protocol``, or the default one with ``measure_steps`` steps per run);
    ``dtype``/``device``: as in `net_curvature`; the search for negative eigenvalues (reported
    and in the not-at-a-minimum warning, never used by the prediction) runs only where its
    answer can change the warning, when the gradient alone does not already show the weights
    are not at a minimum (`stability.nets.minimum.nearness_searched`), and with ``measure``
    (a bracket below the prediction at a saddle is then said to be the saddle's growth:
    `stability.nets.minimum.saddle_measure_warning`); ``negative=True`` always, ``False``
    never.
    ``backward="current"`` (no weight stashing): the analysis carries the network's H_b
    (`stability.nets.sensitivity`; PipeMare eq. 5, App. B.4, D.1 in matrix form) and reports
    the effective Δ₁; ``granularity``: ``"layer"`` or ``"stage"``, the units of that backward
    pass (`stability.nets.inconsistent`).  The rate at 0.5 × max_lr is predicted on the
    Galerkin model of v₁'s stage pieces (with QᵀH_bQ under ``backward="current"``) and named
    by ``rate_mode`` (`stability.nets.rates`).  Adaptive rules (adam, pipeoptim with Adam)
    need ``precond_from`` and are analysed on P^{1/2}HP^{1/2} (`stability.nets.adaptive`);
    ``measure`` then also brackets real Adam (``measured_bracket_real``); their rate is that of
    the top preconditioned eigen-direction's roots
    (`stability.nets.prediction.predicted_log_rate`), with stashing.  ``progress(done,
    total)``: the measurement's simulator steps (`stability.nets.step_counter`).
    """
    from stability.nets.adaptive import adaptive_setup, measure_real_max_lr
    from stability.nets.preconditioner import unseen_note
    from stability.nets.sensitivity import effective_delta, predict_inconsistent

    net = _granularity(_problem(problem, stages, dtype, device), backward, granularity)
    delays = _pipeline_keywords(params)
    k = check_integer("k", k, low=1)
    params = _rule_params(rule, params)
    adaptive = adaptive_setup(net, rule, params, precond_from, measure=measure)
    if adaptive is not None:
        net, params = adaptive.net, adaptive.params
    pipe = _pipeline(net, pipeline, delays, backward, tau_bkwd)
    out: dict[str, Any] = {}
    if adaptive is None:
        rules = net_rules(rule, params, pipe, tau_recomp=tau_recomp)
        curv = curvature(net, k, stage_blocks=False, negative_k=0)
        lam_max = curv.lam_max
    else:
        rules = adaptive.rules(rule, pipe, tau_recomp)
        curv = adaptive.curvature(k, 1)
        lam_max = curvature(net, 1, stage_blocks=False, negative_k=0).lam_max
        out["unseen"] = unseen_note(adaptive.precond, net.names, net.sizes, curv.eigenvectors[:, 0])
        out["curvature_precision"] = curv.warning
    # with --measure the negative end is searched: at a saddle the bracket means something else
    near, negatives = _nearness(net, lam_max, True if measure and negative is None else negative)
    stashed = pipe.tau_bkwd is None
    scale = None if adaptive is None else adaptive.scale.numpy()
    pred = predict(curv, rules) if stashed else predict_inconsistent(net, curv, rules, scale)
    a = pred.analysis
    rate_lr = None if not a.max_lr else RATE_FRACTION * a.max_lr
    protocol = _protocol(protocol, measure_steps)
    if rate_lr is not None and adaptive is not None and stashed:
        out["predicted_rate"] = math.exp(predicted_log_rate(curv, rules, rate_lr))
    elif rate_lr is not None and adaptive is None:
        rp = predict_rate(net, curv, rules, rate_lr, protocol.rate_steps, backward=not stashed)
        if rp is None:
            out["rate_note"] = _rate_left_out(curv, rules)
        else:
            out.update(
                predicted_rate=math.exp(rp.log_rate) if math.isfinite(rp.log_rate) else None,
                rate_mode=rp.mode(),
                rate_method=rp.method,
                rate_truncation_change=rp.truncation_change,
            )
    if measure:
        if not a.max_lr:
            raise ValueError("measure: nothing to measure, the prediction has no finite max lr")
        v1 = curv.eigenvectors[:, 0]
        sim = rules
        brackets = 1 if adaptive is None else 2
        counted = counter(progress, brackets * protocol.expected_steps() + protocol.rate_steps)
        runs, precision, out["precision_note"] = measured_problem(net)
        # at a saddle the runs turn its directions into minima (docs/nets.md); of H itself the
        # search above found the most negative, of P^1/2 H P^1/2 only that there are some
        flip = None
        if negatives is not None and negatives.size and (adaptive is not None or near.saddle):
            flip = saddle_flip(runs, float(curv.eigenvalues[0]), scale=scale)
        if adaptive is not None:  # frozen P in weight space, along P^1/2·x̃₁
            adaptive = dataclasses.replace(adaptive, net=runs)
            sim, v1 = adaptive.frozen(rules, centred=True), adaptive.direction(v1)
        start = linear_start(runs, v1, protocol, None if adaptive is None else adaptive.scale)
        given, protocol = protocol, dataclasses.replace(protocol, perturbation=start.perturbation)
        if adaptive is not None:
            real = measure_real_max_lr(adaptive, rules, v1, a.max_lr, protocol, counted, flip)
            out["measured_bracket_real"] = [real.stable, real.unstable]
            out["real_ratio"] = None if real.max_lr is None else real.max_lr / a.max_lr
        m = measure_max_lr(runs, sim, v1, a.max_lr, protocol, observe=counted, flip=flip)
        rate = measure_log_rate(runs, sim, v1, [rate_lr], protocol, observe=counted, flip=flip)
        if counted is not None:
            counted.finish()
        bracket = [m.stable, m.unstable]
        described = protocol.describe() | {"precision": precision}
        start_note = start.describe(given)
        if start_note is not None:
            described["start_note"] = start_note
        if flip is not None:
            described["saddle_flip"] = flip.describe()
        out.update(
            saddle=saddle_measure_warning(near, lam_max, protocol.steps, a.max_lr, bracket, flip),
            measured_max_lr=m.max_lr,
            measured_bracket=bracket,
            measured_rate=math.exp(rate[0]) if math.isfinite(rate[0]) else None,
            protocol=described,
        )
    return NetMaxLr(
        rule=rule,
        max_lr=a.max_lr,
        scalar_bound=a.scalar_bound,
        crossing_angle=a.crossing_angle,
        critical_stage=a.critical_stage,
        eigenvalues=curv.eigenvalues.tolist(),
        negative_eigenvalues=None if negatives is None else negatives.tolist(),
        rank=pred.rank,
        truncation_change=pred.truncation_change,
        schedule=pipe.schedule,
        backward=backward,
        stage_taus=pipe.tau_fwd.tolist(),
        stage_taus_bkwd=pipe.backward_delays.tolist(),
        delta=None if stashed else float(effective_delta(net, curv, 1, scale)[0]),
        stage_sizes=list(net.stage_sizes),
        method=f"{a.method}, on the rank-{pred.rank} curvature (Lanczos)"
        + ("" if adaptive is None else " of P^1/2 H P^1/2, the rule at P = 1 (docs/adam.md)")
        + ("" if stashed else " with the projected H_b (Galerkin on the stage bases)"),
        rate_lr=rate_lr,
        predicted_rate=out.get("predicted_rate"),
        measured_max_lr=out.get("measured_max_lr"),
        measured_bracket=out.get("measured_bracket"),
        measured_rate=out.get("measured_rate"),
        protocol=out.get("protocol"),
        rate_mode=out.get("rate_mode"),
        rate_method=out.get("rate_method"),
        rate_truncation_change=out.get("rate_truncation_change"),
        rate_error=_rate_error(out.get("predicted_rate"), out.get("measured_rate")),
        **_near_fields(
            near,
            *(
                out.get(k)
                for k in ("unseen", "curvature_precision", "precision_note", "saddle", "rate_note")
            ),
        ),
        preconditioned_eigenvalues=None if adaptive is None else curv.eigenvalues.tolist(),
        preconditioner=None if adaptive is None else adaptive.describe(),
        measured_bracket_real=out.get("measured_bracket_real"),
        real_ratio=out.get("real_ratio"),
    )


# -- train ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NetTrain(Result):
    """One simulator run of a rule on a network under per-stage delays."""

    rule: str = output("the rule's registry name")
    diverged: bool = output("the loss became non-finite or exceeded divergence × initial loss")
    diverged_step: int | None = output("step at which divergence was detected")
    final_loss: float | None = output("loss at the last step (null if diverged)")
    loss_curve: list[list[float | None]] = output(
        "[step, loss] pairs, subsampled; null after divergence"
    )
    measured_rate: float | None = output("ρ̂ of ‖w_t − w_(t−1)‖ over the last half (full batch)")
    schedule: str = output("pipemare, pipedream, pb, gpipe or uniform")
    backward: str = output("stashed (backward uses the forward weights) or current")
    stage_taus: list[int] = output("forward delay per stage")
    stage_taus_bkwd: list[int] = output("backward delay per stage (= stage_taus when stashed)")
    stage_sizes: list[int] = output("parameters per stage")
    sharpness: list[list[float]] | None = output(
        "[step, λ₁] every sharpness_every steps (Lanczos)", "1/lr"
    )
    predicted_edge: float | None = output(
        "max_lr(rule, delays; λ = 1)/lr; per-stage delays: the coupled edge along v₁", "1/lr"
    )
    plateau: float | None = output(
        "median λ₁ over the last quarter of the steps, samples from the first reach on "
        "(null: diverged or edge not reached)",
        "1/lr",
    )
    reached: bool | None = output("some λ₁ sample came within 10 % of predicted_edge (≥ 0.9×)")
    edge_ratio: float | None = output("plateau / predicted_edge")
    protocol: dict[str, Any] = output("how the run was made and judged")
    update: str = output("analysed (the rule as analysed) or real (real Adam/AdamW)", default="")
    sharpness_kind: str | None = output(
        "hessian: λ₁(∇²f); preconditioned: λ₁(P_t ∇²f) with the run's current P_t", default=None
    )
    preconditioner: dict[str, Any] | None = output(
        "adaptive rules with --precond-from: source, step t, β2, ε, min/median/max of P",
        default=None,
    )
    edge_delta: float | None = output(
        "Δ₁/λ₁ = −v₁ᵀH_bv₁/λ₁ at the last sharpness sample (--backward current; it enters "
        "predicted_edge)",
        default=None,
    )
    edge_without_delta: float | None = output(
        "the coupled edge along v₁ with H_b left out (--backward current): predicted_edge if "
        "the backward weights did not matter",
        "1/lr",
        default=None,
    )
    oscillation_curvature: float | None = output(
        "Rayleigh quotient of the (preconditioned) Hessian over the run's oscillation near the "
        "crossing angle, last quarter (uniform delays, full batch, edge reached before the last "
        "quarter; stability.nets.oscillation)",
        "1/lr",
        default=None,
    )
    oscillation_ratio: float | None = output("oscillation_curvature / predicted_edge", default=None)


@analysis_settings()
@refusing_torch_func_limits
def net_train(
    problem: str | dict | NetProblem,
    rule: str,
    *,
    lr: float,
    steps: int,
    stages: int | None = None,
    pipeline: Any = None,
    backward: str = "stashed",
    tau_bkwd: int | None = None,
    tau_recomp: int | None = None,
    batch: int | None = None,
    sampling: str = "reshuffle",
    seed: int = 0,
    divergence: float = 1e6,
    curve_points: int = 200,
    sharpness_every: int | None = None,
    dtype: str | None = None,
    device: str | None = None,
    precond_from: str | None = None,
    update: str = "analysed",
    granularity: str = "layer",
    progress: Callable[[int, int], None] | None = None,
    **params: Any,
) -> NetTrain:
    """Train the network from its weights with ``rule`` under per-stage delays (the simulator,
    `stability.nets.simulator`; the rule's own equations, e.g. PipeMare eq. 1, Kosson eq. 4-12).

    ``backward="current"``: no weight stashing — backpropagation with the stages' backward
    (and recompute) weights (`stability.nets.inconsistent`; PipeMare Sec. 2, 3.2, App. D.1),
    τ_bkwd from the schedule or the uniform ``tau_bkwd`` (default 0), ``tau_recomp`` for rule
    ``recompute``; ``granularity``: its units, ``"layer"`` or ``"stage"``.
    ``sharpness_every`` K: λ₁ every K steps and the edge of stability reading
    (`stability.nets.sharpness`: λ_edge = max_lr(rule, delays; λ = 1)/lr, Cohen et al. 2021
    at τ = 0; a run shorter than 2.5× its first reach of the edge gets a ``warnings`` entry).
    ``dtype``/``device``: as in `net_curvature`.  Adaptive rules
    (`stability.nets.adaptive`): ``update="analysed"`` runs the frozen-P rule with the P of
    ``precond_from``, ``"real"`` real Adam/AdamW (continuing that optimizer state, or from a
    fresh one); the sharpness is then λ₁(P_t∇²f), P_t the run's current preconditioner
    (`stability.nets.adam_edge`).  ``batch`` B: minibatches drawn by ``sampling`` —
    ``"reshuffle"`` (epochs) or ``"iid"`` (B distinct indices per step, what `st.net_noise`
    predicts).  ``progress(done, total)``: the steps (`stability.nets.step_counter`).
    """
    from stability.api.net_tables import NET_TRAIN_OPTIONS
    from stability.nets.adaptive import adaptive_setup
    from stability.nets.sharpness import SharpnessTracker, coupled_edge, edge_summary

    net = _granularity(_problem(problem, stages, dtype, device), backward, granularity)
    delays = _pipeline_keywords(params)
    given = dict(lr=lr, steps=steps, batch=batch, seed=seed, divergence=divergence)
    given |= dict(curve_points=curve_points, sharpness_every=sharpness_every, sampling=sampling)
    o = check_given(NET_TRAIN_OPTIONS, **given)
    lr, steps, batch, seed = o["lr"], o["steps"], o["batch"], o["seed"]
    curve_points, sharpness_every = o["curve_points"], o["sharpness_every"]
    if batch is not None and batch > net.samples:
        raise ValueError(f"batch must be an integer in [1, {net.samples}], got {batch}")
    pipe = _pipeline(net, pipeline, delays, backward, tau_bkwd)
    values = _rule_params(rule, params)
    adaptive = adaptive_setup(net, rule, values, precond_from, update=update, command="train")
    if adaptive is None:
        rules = net_rules(rule, values, pipe, tau_recomp=tau_recomp)
    else:
        net = adaptive.net
        rules = adaptive.rules(rule, pipe, tau_recomp)
    every = max(1, steps // (curve_points - 1))
    sim = rules if adaptive is None else adaptive.stage_rules(rules)
    tracker = None
    if sharpness_every is not None:
        if adaptive is None:
            tracker = SharpnessTracker(net, sharpness_every)
        else:
            from stability.nets.adam_edge import PreconditionedTracker

            tracker = PreconditionedTracker.of(adaptive, sim, sharpness_every)
    if tracker is not None:
        tracker.start(net.w_star)
        if batch is None and backward == "stashed":  # the oscillation's curvature (full batch)
            from stability.nets.oscillation import oscillation_probe
            from stability.nets.sharpness import PLATEAU_FRACTION

            tracker.probe = oscillation_probe(rules, net.stage_sizes, steps, PLATEAU_FRACTION)
    counted = counter(progress, steps)
    res = simulate(
        net,
        sim,
        [float(lr)],
        steps=steps,
        batch=batch,
        sampling=sampling,
        seed=seed,
        divergence=divergence,
        record_every=every,
        track=("increment",),
        backward=backward,
        observe=chained(tracker, counted),
    )
    if counted is not None:
        counted.finish()
    diverged = bool(res.diverged[0])
    rate = None
    if batch is None and not diverged:
        value = float(log_rate(res.energies["increment"], 1)[0])
        rate = math.exp(value) if math.isfinite(value) else None
    edge, edge_delta, without_delta = None, None, None
    if tracker is not None:
        v1 = tracker.vector
        if v1 is None:  # no sample (a fresh Adam stopped before step K): the uniform direction
            v1 = np.full(net.dim, net.dim**-0.5)
        if backward == "current" and adaptive is None and tracker.point is not None:
            from stability.nets.sharpness import inconsistent_edge

            predicted, edge_delta = inconsistent_edge(
                net, rules, tracker.point, tracker.samples[-1][1], v1, float(lr)
            )
            without_delta = coupled_edge(rules, v1, net.stage_sizes, float(lr))
        else:
            predicted = coupled_edge(rules, v1, net.stage_sizes, float(lr))
        reading = edge_summary(tracker.samples, predicted, steps, diverged)
        probe = None if diverged else tracker.probe
        reached_at = reading.first_reached
        if probe is not None and (reached_at is None or reached_at >= probe.first):
            probe = None  # the window must lie on the edge: reached before it starts
        curvature = None if probe is None else probe.curvature(net)
        edge = {
            "oscillation_curvature": curvature,
            "oscillation_ratio": None
            if curvature is None or not predicted
            else curvature / predicted,
            "sharpness": reading.sharpness,
            "predicted_edge": reading.predicted_edge,
            "plateau": reading.plateau,
            "reached": reading.reached,
            "edge_ratio": reading.edge_ratio,
            "warning": reading.warning,
        }
    weights = (
        "stashed: each stage's backward pass uses its forward weights"
        if backward == "stashed"
        else "current: forward weights u_fwd, input-gradients with backward weights u_bkwd"
        + (", activations recomputed with u_recomp" if tau_recomp is not None else "")
    )
    protocol = {
        "start": "the problem's weights, constant history",
        "batch": batch,
        "sampling": sampling if batch is not None else None,
        "seed": seed,
        "steps": steps,
        "divergence": f"loss non-finite or > {divergence:g} × initial loss",
        "weights": weights,
        "rate": "slope of log ‖w_t − w_(t−1)‖ over the last half of the run (full batch)",
    }
    if adaptive is not None:
        protocol.update(adaptive.protocol())
    if tracker is not None:
        protocol["sharpness"] = (
            f"λ₁ by Lanczos (from the previous eigenvector, stopped at Ritz residual 1e-4·λ₁) "
            f"every {sharpness_every} steps; plateau: median over the last quarter of the "
            "steps, from the first reach on; reached: some λ₁ ≥ 0.9 × predicted_edge; "
            "predicted_edge from the last eigenvector's stage shares"
            + ("" if backward == "stashed" else " and H_b at the last sample (edge_delta)")
            + (
                ""
                if adaptive is None
                else "; λ₁(P_t ∇²f) with the run's current P_t (real) or the frozen P (analysed), "
                "predicted_edge at P = 1"
            )
            + (
                ""
                if batch is None or batch == net.samples
                else f"; λ₁ of the full-batch Hessian along a run of batches of {batch}, "
                "predicted_edge the full-batch edge: no minibatch edge is predicted, and the "
                "gradient noise can hold λ₁ below it"
            )
        )
        protocol["hvps"] = tracker.hvps
    return NetTrain(
        rule=rule,
        diverged=diverged,
        diverged_step=int(res.diverged_step[0]) if diverged else None,
        final_loss=None if diverged else float(res.final_loss[0]),
        loss_curve=[[int(s), float(v)] for s, v in zip(res.curve_steps, res.curve[0], strict=True)],
        measured_rate=rate,
        schedule=pipe.schedule,
        backward=backward,
        stage_taus=pipe.tau_fwd.tolist(),
        stage_taus_bkwd=pipe.backward_delays.tolist(),
        stage_sizes=list(net.stage_sizes),
        sharpness=None if edge is None else edge["sharpness"],
        predicted_edge=None if edge is None else edge["predicted_edge"],
        plateau=None if edge is None else edge["plateau"],
        reached=None if edge is None else edge["reached"],
        edge_ratio=None if edge is None else edge["edge_ratio"],
        protocol=protocol,
        update=update,
        sharpness_kind=None
        if tracker is None
        else ("hessian" if adaptive is None else "preconditioned"),
        preconditioner=None if adaptive is None else adaptive.describe(),
        edge_delta=edge_delta,
        edge_without_delta=without_delta,
        oscillation_curvature=None if edge is None else edge["oscillation_curvature"],
        oscillation_ratio=None if edge is None else edge["oscillation_ratio"],
        warnings=() if edge is None or edge["warning"] is None else (edge["warning"],),
    )


__all__ = ["NetCurvature", "NetMaxLr", "NetTrain", "net_curvature", "net_max_lr", "net_train"]
