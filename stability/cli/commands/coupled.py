"""``stability coupled``: exact max stable lr of per-stage delays on a problem's full Hessian.

``stability coupled --problem linreg|mlp [--data PATH] --stages P [--microbatches N]
--schedule pipemare|pipedream|uniform|gpipe|pb [--taus t1,t2,...] --rule RULE [rule flags]
[--t1-power p] [--measure] --json`` prints the coupled ``max_lr`` (`stability.coupled.scan`)
with its ``crossing_angle``, ``critical_stage`` (1 … P) and ``stage_shares``; the scalar
theory beside it — ``scalar_bound`` at (λ_max, τ_max) with ``scalar_ratio`` = scalar/coupled
(its error), ``per_stage_bounds`` with ``min_stage_ratio``; with ``--measure`` the trainer's
``measured_max_lr`` on the same per-stage rule and ``measured_ratio`` = measured/coupled;
``hessian_shape``, ``stage_sizes`` (contiguous blocks in parameter order, after the
preprocessing of ``stability validate``), ``stage_taus`` and ``stage_tau_bkwd``, and for the
MLP ``hessian_norms`` with ``backward_to_forward`` = ‖H_b‖/‖H_f‖ (the network's Δ).
"""

from __future__ import annotations

from stability.cli.args import UsageError, add_output_arguments, add_rule_arguments, float_arg
from stability.cli.commands.train import _int_arg, _int_list, add_problem_arguments, problem_options


def register(sub) -> None:
    p = sub.add_parser(
        "coupled",
        help="per-stage delays on a full Hessian: exact coupled max lr vs the scalar bounds",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--rule", required=True, metavar="RULE", help="rule name (stability rules)")
    add_rule_arguments(p, positional=False)
    add_problem_arguments(p)
    g = p.add_argument_group("pipeline (PipeMare Table 1); --stages P, --microbatches N")
    g.add_argument(
        "--schedule",
        default="pipemare",
        metavar="S",
        help="pipemare, pipedream, uniform, gpipe or pb (default pipemare)",
    )
    g.add_argument(
        "--taus",
        type=_int_list("taus"),
        default=None,
        help="forward delays per stage (or one for all), overriding the schedule's",
    )
    g.add_argument(
        "--t1-power",
        type=float_arg("t1_power"),
        default=0.0,
        help="T1 exponent p: stage i steps with lr·τ_i^(−p) (PipeMare eq. 4)",
    )
    g.add_argument(
        "--method",
        choices=("scan", "dense"),
        default="scan",
        help="frequency scan (any size) or block-state-matrix bisection (small)",
    )
    m = p.add_argument_group("measurement (--measure: the trainer's max-lr bisection)")
    m.add_argument("--measure", action="store_true", help="measure the max lr on the trainer")
    m.add_argument(
        "--steps",
        type=_int_arg("steps", 10),
        default=None,
        help="steps per run (default 20000; 5000 for mlp)",
    )
    m.add_argument(
        "--rel-tol",
        type=float_arg("rel_tol"),
        default=None,
        help="bisection bracket width (default 1e-3; 1e-2 for mlp)",
    )
    m.add_argument(
        "--fit-seed",
        type=_int_arg("fit_seed"),
        default=0,
        help="mlp: initialization the minimizer is fitted from",
    )
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def _setup(args, problem):
    from stability.agreement.validate import linreg_setup, mlp_setup

    if args.problem == "linreg":
        return linreg_setup(problem)
    return mlp_setup(problem, seed=args.fit_seed)


def _protocol(args):
    from stability.agreement.validate import Protocol
    from stability.checks import check_real

    mlp = args.problem == "mlp"
    rel_tol = args.rel_tol if args.rel_tol is not None else (1e-2 if mlp else 1e-3)
    check_real("rel_tol", rel_tol, low=0.0, high=1.0, low_open=True)
    return Protocol(steps=args.steps or (5_000 if mlp else 20_000), rel_tol=rel_tol)


def run(args) -> dict:
    import numpy as np

    from stability.agreement.coupled_runs import SCHEDULES, measure, problem_system, stage_pipeline
    from stability.checks import check_choice, check_real
    from stability.cli.args import rule_values
    from stability.coupled.summary import analyze
    from stability.rules.registry import get_spec
    from stability.trainer.problems import build_problem

    spec = get_spec(args.rule)
    check_choice("schedule", args.schedule, SCHEDULES)
    check_real("t1_power", args.t1_power, low=0.0, high=1.0)
    if args.stages is None:
        raise UsageError("--stages P is required (the number of pipeline stages)")
    names = set(spec.param_names) - {"stages", "microbatches"}
    values = {k: v for k, v in rule_values(args).items() if k in names}
    problem, data = build_problem(problem_options(args))
    setup = _setup(args, problem)
    pipe = stage_pipeline(args.schedule, args.stages, args.microbatches or 1, args.taus)
    built = problem_system(setup, pipe, args.rule, values, args.t1_power)
    system = built.system
    result = analyze(system, method=args.method)
    out = {
        "rule": args.rule,
        "problem": problem.describe(),
        "data": data.describe(),
        "schedule": pipe.schedule,
        "microbatches": pipe.microbatches,
        "t1_power": args.t1_power,
        **result.as_dict(),
        "stage_tau_bkwd": pipe.backward_delays.tolist(),
        "hessian_shape": [system.dim, system.dim],
    }
    norms = system.hessian_norms()
    if "backward" in norms:
        out["backward_to_forward"] = norms["backward"] / norms["forward"]
    notes = []
    if "backward" not in norms:
        notes.append("H_b = 0: the gradient reads the forward weights only")
    if "tau" in spec.param_names and not pipe.consistent:
        notes.append(f"{args.rule} has one delay: its backward pass reads w_(t−τ_bkwd,i)")
    out["notes"] = notes
    if args.measure:
        if not result.max_lr:
            raise ValueError("nothing to measure: the coupled system has no finite max lr")
        m = measure(built, setup, result.max_lr, _protocol(args))
        out.update(
            measured_max_lr=m.max_lr,
            measured_bracket=[m.stable, m.unstable],
            measured_ratio=None if m.max_lr is None else m.max_lr / result.max_lr,
            measured_runs=m.runs,
            protocol=_protocol(args).describe(None),
        )
    out["stage_shares"] = [float(np.round(s, 6)) for s in out["stage_shares"]]
    return out


def report(result: dict) -> str:
    """Coupled, scalar and (measured) max lr side by side, then the per-stage bounds."""

    def f(x):
        return "-" if x is None else f"{x:.6g}"

    lines = [
        f"coupled max lr     {f(result['max_lr'])}   (critical stage {result['critical_stage']}, "
        f"crossing angle {f(result['crossing_angle'])}, {result['method']})",
        f"scalar bound       {f(result['scalar_bound'])}   (λ_max, τ_max; "
        f"scalar/coupled = {f(result['scalar_ratio'])})",
    ]
    if "measured_max_lr" in result:
        lines.append(
            f"measured max lr    {f(result['measured_max_lr'])}   "
            f"(measured/coupled = {f(result['measured_ratio'])})"
        )
    lines.append(
        f"{'stage':>6}{'size':>6}{'τ_fwd':>7}{'τ_bkwd':>8}{'per-stage bound':>18}{'share':>9}"
    )
    shares = result["stage_shares"] or [None] * len(result["stage_sizes"])
    for i, (n, tf, tb, b, sh) in enumerate(
        zip(
            result["stage_sizes"],
            result["stage_taus"],
            result["stage_tau_bkwd"],
            result["per_stage_bounds"],
            shares,
            strict=True,
        ),
        start=1,
    ):
        lines.append(f"{i:>6}{n:>6}{tf:>7}{tb:>8}{f(b):>18}{f(sh):>9}")
    if "backward_to_forward" in result:
        lines.append(f"‖H_b‖/‖H_f‖ = {f(result['backward_to_forward'])}")
    lines += [f"note: {n}" for n in result["notes"]]
    return "\n".join(lines)
