r"""``st.noise``: minibatch training of least squares predicted exactly (``stability noise``).

For a rule (uniform delays, or per-stage delays of a pipeline schedule), a data set, a batch
size B and a step size lr, with B distinct indices drawn uniformly at every step
(``sampling="iid"``, what the theory covers):

* ``full_batch_max_lr`` — the deterministic threshold (PipeMare Sec. 3.1 / Kosson eq. 19 per
  eigenvalue of H; the coupled analysis for a schedule);
* ``ms_max_lr`` — the exact mean-square threshold: ρ(𝒯) = 1 for the second-moment map
  S ↦ E[A(H_B) S A(H_B)ᵀ] with E[H_B ⊗ H_B] = H ⊗ H + p(E[xxᵀ ⊗ xxᵀ] − H ⊗ H),
  p = (n − B)/(B(n − 1)) (`stability.noise.second_moment`, `stability.noise.gramian`);
* ``as_max_lr``, ``as_bracket`` — the almost-sure threshold (top Lyapunov exponent = 0,
  `stability.noise.lyapunov`) with its confidence interval;
* ``expected_loss`` — [[t, E f(w_t) − f*], ...] from the exact recursion, w₀ = 0;
* ``floor`` — lim E f − f* (null unless mean-square stable); ``rate`` — the per-step factor
  at which E f − f* approaches it, max(ρ(𝒯), ρ(Ā)).

``measure=True`` adds ``measured`` from the reference trainer (`stability.noise.runs`): the
mean and standard error of f − f* over ``runs`` independently seeded runs at the same times,
the late-window mean (``floor``), the blow-up fraction of the trainer's level criterion, and
the bracket where two runs sharing their batches drift apart (``as_bracket``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.api.resolve import resolve
from stability.api.tables import MAX_PAIRS
from stability.api.tables import MAX_STEPS as TABLE_MAX_STEPS
from stability.checks import (
    check_choice,
    check_integer,
    check_path,
    finite_or_none,
    one_or_many,
)
from stability.limits import NOISE_MAX_STATE
from stability.noise.runs import blowup_warnings
from stability.pipeline import Pipeline, worst_delay
from stability.result import Result, output
from stability.rules.registry import refuse_model_parameters

MAX_PARAMETERS = 32
"""Largest number of parameters d (the reduced problems are d(d+1)/2-dimensional)."""
MAX_STATE = NOISE_MAX_STATE
"""Largest state d·s (parameters × slots per parameter; `stability.limits`)."""
MAX_STEPS = TABLE_MAX_STEPS
"""Largest horizon of the exact recursion (the ``--steps`` range of `stability.api.tables`)."""


def time_points(at: Any, steps: int) -> list[int]:
    """The steps of an expected-loss curve: ``at`` (one step or several, each in [0, steps]),
    by default 0 and the 1-2-5 sequence up to ``steps`` (and ``steps`` itself)."""
    if at is not None:
        times = sorted({check_integer("at", t, low=0, high=steps) for t in one_or_many(at)})
        if not times:
            raise ValueError("at must give at least one step")
        return times
    out = {0, steps}
    k = 1
    while k <= steps:
        out |= {m * k for m in (1, 2, 5) if m * k <= steps}
        k *= 10
    return sorted(out)


@dataclass(frozen=True)
class MinibatchPrediction(Result):
    """What the second-moment theory predicts for a rule trained on minibatches of B rows
    drawn iid per step (module doc): the full-batch, mean-square and almost-sure max stable
    lr, and at ``lr`` the expected excess loss over time, its floor and rate.  The fields that
    `Noise` (least squares) and `stability.nets.noise_public.NetNoise` (a network near a
    minimum) share."""

    rule: str = output("the rule's registry name")
    batch: int = output("minibatch size B")
    lr: float = output("step size of the predictions", "lr")
    sampling: str = output("sampling of the measured runs (the theory is for iid)")
    samples: int = output("data rows n")
    sampling_factor: float = output("p = (n − B)/(B(n − 1))")
    full_batch_max_lr: float | None = output("deterministic (B = n) max stable lr", "lr")
    ms_max_lr: float | None = output("mean-square max stable lr (ρ(𝒯) = 1)", "lr")
    as_max_lr: float | None = output("almost-sure max stable lr (Lyapunov exponent 0)", "lr")
    as_bracket: list[float] | None = output("confidence interval of as_max_lr (≈95 %)", "lr")
    expected_loss: list[list[float | None]] = output(
        "[[t, E f(w_t) − f*], ...] (exact recursion from the start the notes give; null: "
        "beyond floating point, above the mean-square threshold)",
        "loss",
    )
    floor: float | None = output("lim E f − f* (null if not mean-square stable)", "loss")
    rate: float | None = output("per-step factor of E f − f* − floor (null if unstable)")
    half_life: float | None = output("steps to halve E f − f* − floor: ln 2/−ln(rate)", "steps")
    ms_radius: float | None = output("ρ(𝒯), spectral radius of the second-moment map")
    mean_radius: float = output("ρ(Ā), spectral radius of the mean (full-batch) dynamics")

    @staticmethod
    def of(
        rule: str, batch: int, lr: float, sampling: str, samples: int, limits: dict, at_lr: dict
    ) -> dict[str, Any]:
        """The `MinibatchPrediction` fields of a prediction: its setting, the thresholds
        ``limits`` (`thresholds`) and the predictions at ``lr`` ``at_lr`` (`predict_at`)."""
        return {
            "rule": rule,
            "batch": batch,
            "lr": lr,
            "sampling": sampling,
            "samples": samples,
            **limits,
            **at_lr,
        }


@dataclass(frozen=True)
class Noise(MinibatchPrediction):
    """Minibatch least squares with B rows drawn iid per step: the full-batch, exact
    mean-square (second-moment map, ρ(𝒯) = 1) and almost-sure (top Lyapunov exponent = 0) max
    stable lr, the expected excess loss E f − f* over time from the exact second-moment
    recursion, its floor and rate; with ``measure``, the trainer's independent runs."""

    parameters: int = output("parameters d")
    stages: list[int] | None = output("per-stage forward delays (schedule), null for uniform")
    measured: dict[str, Any] | None = output(
        "the trainer's independent runs (null without measure)"
    )
    notes: list[str] = output("what the numbers assume")


NOISE_PROBLEM_KEYS = ("problem", "standardize", "bias", "samples")
"""The problem keywords of the minibatch commands (linear regression: `PROBLEM_OPTIONS`' data
preprocessing), given among a function's keywords."""


def _problem(data: Any, params: dict[str, Any]):
    """The linear regression of ``data`` (a path, None: cpusmall, a `Dataset` or a
    `LinearRegression`) with the problem keywords among ``params`` (removed from it)."""
    from stability.api.setup import problem_options
    from stability.trainer.data import Dataset
    from stability.trainer.linreg import LinearRegression
    from stability.trainer.problems import build_problem

    given = {k: params.pop(k) for k in NOISE_PROBLEM_KEYS if k in params}
    check_choice("problem", given.pop("problem", "linreg"), ("linreg",))
    if isinstance(data, LinearRegression):
        return data
    if isinstance(data, Dataset):
        return LinearRegression.from_dataset(data)
    path = None if data is None else str(check_path("data", data))
    return build_problem(problem_options(problem="linreg", data=path, **given))[0]


@dataclass(frozen=True)
class RuleOnData:
    """A rule on a problem: the state builder, the trainer's rule, the full-batch threshold."""

    name: str
    problem: Any
    builder: Any
    trainer_rule: Any
    full_batch: float | None
    stages: list | None


def setup(rule: Any, problem, pipe: Pipeline | None, params) -> RuleOnData:
    """Resolve the rule (uniform, or per stage of the pipeline ``pipe``) on ``problem``.

    Refuses a state beyond `MAX_STATE` (`check_state`) from the rule's slots, before any state
    matrix is probed (``noise wp --tau 5000`` probed 10⁴ slots for 12 s of CPU to refuse)."""
    from stability.noise.state import rule_slots, state_space, uniform_state
    from stability.noise.threshold import uniform_full_batch

    refuse_model_parameters(params, "here H comes from the data")
    d = problem.dim
    if pipe is None:
        r = resolve(rule, **params)
        built = r.rule
        check_state(d, len(rule_slots([built])))
        fb = uniform_full_batch(built, problem.hessian_eigenvalues())
        return RuleOnData(r.name, problem, lambda lr: uniform_state(built, lr, d), built, fb, None)
    from stability.agreement.coupled_runs import problem_system
    from stability.coupled.quadratic_lr import quadratic_max_lr
    from stability.trainer.linearize import linreg_linearization
    from stability.trainer.schedules import pipeline_rule

    if not isinstance(rule, str):
        raise ValueError("a schedule needs the rule by name")
    built = problem_system(linreg_linearization(problem), pipe, rule, params)
    system = built.system
    check_state(d, len(rule_slots(system.rules)))
    trainer = pipeline_rule(rule, params, pipe, system.stage_sizes)
    fb = quadratic_max_lr(system).max_lr  # the scan; PipeOptim-AdamW: quadratic in lr
    return RuleOnData(
        rule,
        problem,
        lambda lr: state_space(system.rules, lr, system.stage_sizes),
        trainer,
        fb,
        pipe.tau_fwd.tolist(),
    )


def _pipeline(pipeline: Any, params: dict[str, Any], rule: Any) -> Pipeline | None:
    """The pipeline given whole or by its keywords among ``params`` (removed from it;
    `stability.api.setup.pipeline_of`); ``uniform`` at the rule's own delay where it is given
    (removed from ``params``, as `stability.api.setup.trainer_inputs` does for ``train``),
    else at PipeMare's largest."""
    from stability.api.commands import PIPELINE_OPTIONS
    from stability.api.resolve import rule_name
    from stability.api.setup import pipeline_of
    from stability.rules.registry import get_spec
    from stability.rules.spec import RuleSpec

    given = {o.name: params.pop(o.name) for o in PIPELINE_OPTIONS if o.name in params}
    given = {k: v for k, v in given.items() if v is not None}
    tau = None
    if "stage_delays" not in given:
        key = (
            get_spec(rule_name(rule)).delay_parameter if isinstance(rule, (str, RuleSpec)) else None
        )
        if given.get("schedule") == "uniform" and key and params.get(key) is not None:
            tau = params.pop(key)
        else:
            tau = worst_delay(given.get("schedule"), given.get("stages"), given.get("microbatches"))
    return pipeline_of(pipeline, given, tau=tau)


def noise(
    rule: Any,
    *,
    batch: int,
    lr: float,
    data: Any = None,
    steps: int = 1000,
    at: Any = None,
    sampling: str = "iid",
    pipeline: Any = None,
    measure: bool = False,
    runs: int = 256,
    window: tuple[int, int] | None = None,
    seed: int = 0,
    lyapunov_steps: int = 4000,
    lyapunov_runs: int = 32,
    pairs: int = 32,
    pair_steps: int = 5000,
    **params: Any,
) -> Noise:
    """Exact minibatch predictions (`Noise`; docs/noise.md), and with ``measure`` the
    trainer's runs.

    ``rule``: a registry name (or rule value) with its ``params`` as for `stability.max_lr`;
    ``data``: a CSV/svmlight path, ``None`` (cpusmall), a `Dataset` or a `LinearRegression`,
    with the keywords ``standardize``/``bias``/``samples`` (`NOISE_PROBLEM_KEYS`);
    ``at``: the steps of ``expected_loss`` (default: the 1-2-5 sequence up to ``steps``);
    ``pipeline`` (a `stability.pipeline.Pipeline`) or its keywords
    ``schedule``/``stage_delays``/``stages``/``microbatches``: per-stage delays
    (`stability.pipeline.Pipeline.from_options`; ``uniform`` at PipeMare's largest delay);
    ``window``: [start, end) of the measured floor (default: the second half of ``steps``);
    ``pairs``/``pair_steps``: the measured almost-sure bracket's pairs of runs per step size
    and their length (`stability.noise.runs.measure_almost_sure`); the measurement's work is
    limited (`check_measure_work`).

    Implements the exact second-moment recursion of `stability.noise.second_moment`, the
    mixture E[H_B ⊗ H_B] = H ⊗ H + p(E[xxᵀ ⊗ xxᵀ] − H ⊗ H) (Mulayoff & Michaeli 2023) and
    the threshold rules of PipeMare Sec. 3.1 (Lemma 1 at B = n).
    """
    from stability.api.commands import command
    from stability.noise.lyapunov import bracket_note
    from stability.noise.moments import SampleMoments
    from stability.options import check_given

    o = check_given(
        command("noise").options,
        lr=lr,
        steps=steps,
        sampling=sampling,
        seed=seed,
        lyapunov_steps=lyapunov_steps,
        lyapunov_runs=lyapunov_runs,
        measure=measure,
        runs=runs,
    )
    lr, steps, seed, runs = o["lr"], o["steps"], o["seed"], o["runs"]
    window = _window(window, steps)
    problem = _problem(data, params)
    n, d = problem.samples, problem.dim
    batch = check_integer("batch", batch, low=1, high=n)
    check_problem(problem)
    times = time_points(at, steps)
    if measure:
        pairs = check_integer("pairs", pairs, low=2, high=MAX_PAIRS)
        pair_steps = check_integer("pair_steps", pair_steps, low=10, high=MAX_STEPS)
        check_measure_work(runs, steps, pairs, pair_steps, batch, d)
    pipe = _pipeline(pipeline, params, rule)
    ctx = setup(rule, problem, pipe, params)
    state = ctx.builder(lr)
    check_state(d, state.size)
    check_staged_work(state, problem.hessian, "stages")
    moments = SampleMoments.of(problem, batch)
    limits = thresholds(
        ctx.builder, moments, ctx.full_batch, steps=lyapunov_steps, runs=lyapunov_runs, seed=seed
    )
    at_lr = predict_at(state, moments, -problem.minimizer, times)
    measured = None
    if measure:
        as_lr = limits["as_max_lr"]
        measured = _measure(
            ctx, lr, batch, times, runs, sampling, window, steps, seed, as_lr, pairs, pair_steps
        )
    notes = [
        "the theory is exact for iid sampling (B distinct indices per step, independent "
        "across steps); reshuffled epochs are only measured",
        "expected_loss and floor are E f − f* over the sampling, from w₀ = 0",
        bracket_note(lyapunov_runs, lyapunov_steps),
    ]
    return Noise(
        **MinibatchPrediction.of(ctx.name, batch, lr, sampling, n, limits, at_lr),
        parameters=d,
        stages=ctx.stages,
        measured=measured,
        notes=notes,
        warnings=tuple(
            w
            for w in (
                jensen_warning(limits, lyapunov_runs, lyapunov_steps),
                *(() if measured is None else blowup_warnings([("runs", measured)])),
            )
            if w
        ),
    )


def check_problem(problem) -> None:
    """Refuse, naming data, more than `MAX_PARAMETERS` parameters or a singular Hessian (no
    strict minimum: a flat direction is a marginal mode, ρ(Ā) = 1 at every lr)."""
    d = problem.dim
    if d > MAX_PARAMETERS:
        raise ValueError(
            f"data: the problem has {d} parameters (features, with the bias); at most "
            f"{MAX_PARAMETERS} are supported"
        )
    lam = problem.hessian_eigenvalues()
    if not lam[0] > 1e-12 * max(float(lam[-1]), 1e-300):
        rank = int(np.sum(lam > 1e-12 * max(float(lam[-1]), 1e-300)))
        raise ValueError(
            f"data: the Hessian XᵀX/n is singular (rank {rank} < {d} parameters, "
            f"{problem.samples} rows): the minibatch analysis needs a strict minimum; use more "
            "rows (samples) or drop collinear features"
        )


def check_state(d: int, size: int) -> None:
    """Refuse, naming tau, a state d × size beyond `MAX_STATE` (docs/limits.md)."""
    if d * size > MAX_STATE:
        raise ValueError(
            f"tau: the minibatch analysis's state (parameters × state size) must be ≤ "
            f"{MAX_STATE} (docs/limits.md), got {d} × {size} = {d * size}"
        )


def check_staged_work(state, hessian: np.ndarray, name: str, limit: float | None = None) -> None:
    """Refuse, naming ``name``, per-stage delays whose loop evaluations cost more than ``limit``
    (default `stability.limits.NOISE_MAX_STAGED_WORK`; uniform delays use the cheap modal
    form): `stability.noise.modal.staged_work`, Stein solves per evaluation × (slots read)³."""
    from stability.limits import NOISE_MAX_STAGED_WORK
    from stability.noise.modal import FREE_LOOP_SOLVES, staged_solves, staged_work

    if state.uniform:
        return
    limit = NOISE_MAX_STAGED_WORK if limit is None else limit
    n, work = staged_work(state, hessian)
    if work > limit:
        d = state.dim
        raise ValueError(
            f"{name}: the per-stage minibatch analysis costs min(d(d+1)/2, "
            f"{FREE_LOOP_SOLVES}) × (state slots read)³ = {staged_solves(d)} × {n}³ = "
            f"{work:.2e} per evaluation, at most {limit:.1e} (docs/limits.md): fewer stages or "
            "shorter stage_delays (more microbatches), or fewer parameters"
        )


def thresholds(
    builder, moments, full_batch: float | None, *, steps: int, runs: int, seed: int
) -> dict[str, Any]:
    """The thresholds (the `MinibatchPrediction` fields ``sampling_factor``,
    ``full_batch_max_lr``, ``ms_max_lr``, ``as_max_lr``, ``as_bracket``) for a state ``builder``,
    the data's ``moments`` (a `stability.noise.moments.Moments`) and the ``full_batch`` max lr:
    the mean-square threshold (`stability.noise.threshold.ms_max_lr`) and the almost-sure one
    from ``runs`` paths of ``steps`` steps (`stability.noise.lyapunov`), between half the former
    and 1.5 × ``full_batch``; both equal ``full_batch`` without noise (p = 0)."""
    from stability.noise.lyapunov import almost_sure_max_lr
    from stability.noise.threshold import ms_max_lr

    ms, as_lr, bracket = None, None, None
    if full_batch is not None:
        ms = ms_max_lr(builder, moments, full_batch)
        as_lr, bracket = full_batch, [full_batch, full_batch]
        if not (moments.p == 0 or full_batch <= 0):  # 0: a marginal root (momentum 1)
            found = almost_sure_max_lr(
                builder, moments, moments.batch, 0.5 * ms if ms > 0 else 1e-6 * full_batch,
                1.5 * full_batch,
                steps=steps, runs=runs, seed=seed,
            )  # fmt: skip
            as_lr, bracket = found.max_lr, list(found.bracket)
    return {
        "sampling_factor": moments.p,
        "full_batch_max_lr": full_batch,
        "ms_max_lr": ms,
        "as_max_lr": as_lr,
        "as_bracket": bracket,
    }


def jensen_warning(limits: dict[str, Any], runs: int, steps: int) -> str | None:
    """One line where the estimated ``as_max_lr`` lies below ``ms_max_lr``: Jensen's inequality
    (γ ≤ ½·ln ρ(𝒯), `stability.noise.lyapunov`) puts the almost-sure threshold at or above the
    mean-square one, so the estimate from ``runs`` paths of ``steps`` steps is off by at least
    the difference — the finite horizon's bias where slow directions (1/(lr·λ) ≫ steps) have
    not mixed (an outsider's 51-parameter classifier, 19 directions kept: as 0.7 % and 1.9 %
    below ms at B = 4, 16, with brackets excluding it)."""
    ms, as_lr = limits["ms_max_lr"], limits["as_max_lr"]
    if ms is None or as_lr is None or not as_lr < ms:
        return None
    return (
        f"as_max_lr {as_lr:.6g} is below ms_max_lr {ms:.6g}, which bounds it from below "
        f"(Jensen): the estimate from {runs} paths of {steps} steps is off by at least "
        f"{1 - as_lr / ms:.2%}; read as_max_lr ≥ ms_max_lr, or raise --lyapunov-steps"
    )


def check_representable(state, hessian: np.ndarray) -> None:
    """Refuse, naming ``lr``, a step size whose lr·|λ|max (the gradient's entry β̃ times the
    largest curvature) exceeds `stability.limits.MAX_STEP_CURVATURE`: the state matrix and
    its second moments would overflow float64 (inf, then NaN) instead of giving a result."""
    from stability.limits import MAX_STEP_CURVATURE

    lam = float(np.max(np.abs(np.linalg.eigvalsh(hessian)), initial=0.0))
    reach = float(np.max(np.abs(state.beta), initial=0.0)) * lam
    if not reach <= MAX_STEP_CURVATURE:
        raise ValueError(
            f"lr: lr·|λ|max = {reach:.3g} would overflow float64 in the second moments; "
            f"at most {MAX_STEP_CURVATURE:.0e} (lr ≤ {MAX_STEP_CURVATURE:.0e}/|λ|max)"
        )


def predict_at(state, moments, e0: np.ndarray, times) -> dict[str, Any]:
    """The predictions at one step size (the `MinibatchPrediction` fields ``expected_loss``,
    ``floor``, ``rate``, ``half_life``, ``ms_radius``, ``mean_radius``) from w₀ − w* = ``e0``:
    the exact recursion (`stability.noise.second_moment`), the stationary point and the rates
    (`stability.noise.gramian`)."""
    from stability.noise.gramian import NoiseMap, mean_radius, ms_radius, stationary
    from stability.noise.second_moment import SecondMoments

    check_representable(state, moments.hessian)
    noise_map = NoiseMap.of(moments)
    curve = SecondMoments(state, moments).expected_loss(e0, times)
    rho_mean = mean_radius(state, moments.hessian)
    rho2 = ms_radius(state, moments, noise_map)
    fixed = stationary(state, moments, noise_map)
    coupled = moments.p > 0 and np.any(moments.cross(np.ones(moments.dim)))
    rate = None
    if np.isfinite(rho2) and rho2 < 1:
        rate = max(rho2, rho_mean) if coupled else rho2
    return {
        "expected_loss": [[int(t), finite_or_none(v)] for t, v in zip(times, curve, strict=True)],
        "floor": None if fixed is None else fixed.floor,
        "rate": rate,
        "half_life": None if rate is None or rate == 0 else float(np.log(2) / -np.log(rate)),
        "ms_radius": finite_or_none(rho2),
        "mean_radius": rho_mean,
    }


def _window(window: Any, steps: int) -> tuple[int, int]:
    """The measured floor's [start, end) steps (default: the second half of ``steps``)."""
    if window is None:
        return steps // 2, steps
    ends = one_or_many(window)
    if len(ends) != 2:
        raise ValueError(f"window must be [start, end) with 0 ≤ start < end, got {window!r}")
    start, end = (check_integer("window", w) for w in ends)
    if not start < end:
        raise ValueError(f"window must be [start, end) with 0 ≤ start < end, got {window!r}")
    return start, end


def check_measure_work(runs: int, steps: int, pairs: int, pair_steps: int, batch: int, d: int):
    """Refuse, naming batch, a measurement above `stability.limits.NOISE_MEASURE_MAX_WORK`:
    (runs × steps + the almost-sure bracket's runs × pair_steps) × B·d, the bracket's runs
    `stability.noise.runs.almost_sure_runs` (3 rounds × 8 step sizes × 2·pairs)."""
    from stability.limits import NOISE_MEASURE_MAX_WORK
    from stability.noise.runs import almost_sure_runs

    paired = almost_sure_runs(pairs)
    work = (runs * steps + paired * pair_steps) * batch * d
    if work > NOISE_MEASURE_MAX_WORK:
        raise ValueError(
            f"batch: the measurement's runs ({runs} × {steps} steps, and the almost-sure "
            f"bracket's {paired} × {pair_steps} steps) × B·d = {batch}·{d} come to "
            f"{work:.2g}, at most {NOISE_MEASURE_MAX_WORK:.1g} (docs/limits.md): a smaller "
            "batch, fewer runs or steps, or no --measure"
        )


def _measure(
    ctx, lr, batch, times, runs, sampling, window, steps, seed, as_lr, pairs, pair_steps
) -> dict:
    from stability.noise.runs import measure_almost_sure, measure_loss

    m = measure_loss(
        ctx.problem,
        ctx.trainer_rule,
        lr,
        batch,
        times,
        runs=runs,
        sampling=sampling,
        window=window,
        seed=seed,
    )
    out = {
        "runs": runs,
        "expected_loss": [
            [int(t), finite_or_none(a), finite_or_none(b)]
            for t, a, b in zip(times, m.mean, m.se, strict=True)
        ],
        "floor": [finite_or_none(m.window_mean), finite_or_none(m.window_se)],
        "floor_window": list(window),
        "blowup_fraction": m.blowups / runs,
        "blowup_criterion": "loss > 1e6 × initial loss within the run (the trainer's test)",
    }
    if as_lr:
        a = measure_almost_sure(ctx.problem, ctx.trainer_rule, as_lr, batch, sampling=sampling,
                                seed=seed, pairs=pairs, steps=pair_steps)  # fmt: skip
        out["as_bracket"] = [a.stable, a.unstable]
        out["pairs"] = pairs
    return out


__all__ = [
    "MAX_PARAMETERS",
    "MAX_STATE",
    "MAX_STEPS",
    "Noise",
    "time_points",
    "noise",
    "predict_at",
    "setup",
    "thresholds",
]
