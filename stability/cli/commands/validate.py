"""``stability validate``: predicted vs measured max stable lr and rates, one row per rule × τ.

``stability validate --problem linreg|mlp [--data PATH] --rules r1,r2 --taus t1,t2 [--batch B]
[rule flags] --json`` prints ``rows`` (``predicted_max_lr``, ``measured_max_lr``, ``ratio``,
``predicted_rate``/``measured_rate`` and their logarithms at the step sizes
``rate_lr_fractions`` × the predicted max), ``hessian_eigenvalues`` of the problem as trained
(after the preprocessing in ``data``) and the fixed measurement ``protocol``; for an MLP also
the ``assumptions`` of its linearization.  ``--schedule S --stages P`` replaces the uniform
delays by a pipeline's per-stage delays and reports what the scalar theory predicts for them.

τ sets each rule's main delay: ``tau``, or ``tau_fwd`` for the discrepancy family (whose
``tau_bkwd`` comes from ``--tau-bkwd``, default 0).  Rule flags apply to every rule that takes
them (``--momentum 0.9`` sets the momentum of momentum, sc, lwp, …, not of sgd).
"""

from __future__ import annotations

from stability.cli.args import UsageError, add_output_arguments, add_rule_arguments, float_arg
from stability.cli.commands.train import (
    _int_arg,
    _int_list,
    add_pipeline_arguments,
    add_problem_arguments,
    make_pipeline,
    problem_options,
)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names:
        raise UsageError(f"rules must be comma-separated rule names, got {text!r}")
    return names


def register(sub) -> None:
    p = sub.add_parser(
        "validate",
        help="theory vs trainer: predicted and measured max stable lr and rates",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--rules", type=_names, required=True, help="comma-separated rule names")
    p.add_argument("--taus", type=_int_list("taus"), default=(0, 1, 4, 16))
    add_rule_arguments(p, positional=False)
    add_problem_arguments(p)
    g = p.add_argument_group("measurement protocol")
    g.add_argument("--batch", type=_int_arg("batch", 1), default=None, help="minibatch size")
    g.add_argument(
        "--steps",
        type=_int_arg("steps", 10),
        default=None,
        help="steps per stability run (default 20000; 5000 for mlp)",
    )
    g.add_argument(
        "--rate-steps",
        type=_int_arg("rate_steps", 10),
        default=None,
        help="first length of the rate runs, doubled until the rate settles",
    )
    g.add_argument("--rate-doublings", type=_int_arg("rate_doublings"), default=None)
    g.add_argument(
        "--seeds",
        type=_int_list("seeds"),
        default=(0, 1, 2),
        help="minibatch seeds (unstable if any diverges)",
    )
    g.add_argument("--divergence", type=float_arg("divergence"), default=1e6)
    g.add_argument(
        "--rel-tol",
        type=float_arg("rel_tol"),
        default=None,
        help="bisection bracket width (default 1e-3; 1e-2 for mlp)",
    )
    g.add_argument(
        "--fit-seed",
        type=_int_arg("fit_seed"),
        default=0,
        help="mlp: initialization the minimizer is fitted from",
    )
    g.add_argument("--progress", action="store_true", help="progress bar on stderr")
    add_pipeline_arguments(p)
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def protocol_from(args):
    from stability.agreement.validate import Protocol
    from stability.checks import check_real

    check_real("divergence", args.divergence, low=1.0, low_open=True)
    mlp = args.problem == "mlp"
    default = Protocol()
    rel_tol = args.rel_tol if args.rel_tol is not None else (1e-2 if mlp else default.rel_tol)
    check_real("rel_tol", rel_tol, low=0.0, high=1.0, low_open=True)
    return Protocol(
        steps=args.steps or (5_000 if mlp else default.steps),
        rate_steps=args.rate_steps or (5_000 if mlp else default.rate_steps),
        rate_doublings=args.rate_doublings
        if args.rate_doublings is not None
        else (1 if mlp else default.rate_doublings),
        divergence=args.divergence,
        seeds=tuple(args.seeds),
        rel_tol=rel_tol,
    )


def run(args) -> dict:
    import time

    from stability.agreement.validate import (
        linreg_setup,
        mlp_setup,
        validate_pipeline,
        validate_uniform,
    )
    from stability.cli.args import rule_values
    from stability.cli.progress import Progress
    from stability.rules.registry import get_spec
    from stability.trainer.problems import build_problem

    for name in args.rules:
        get_spec(name)  # unknown names fail before any work
    protocol = protocol_from(args)
    problem, data = build_problem(problem_options(args))
    start = time.monotonic()
    if args.problem == "linreg":
        setup = linreg_setup(problem)
    else:
        setup = mlp_setup(problem, seed=args.fit_seed)
    values = rule_values(args)
    pipe, _ = make_pipeline(args, problem)
    if pipe is None:
        bar = Progress(len(args.rules) * len(args.taus), "validate", force=args.progress)
        rows = validate_uniform(
            setup, args.rules, values, args.taus, protocol, batch=args.batch, progress=bar.update
        )
        bar.close()
    else:
        rows = validate_pipeline(setup, args.rules, values, pipe, protocol, batch=args.batch)
    out = {
        "problem": problem.describe(),
        "data": data.describe(),
        "hessian_eigenvalues": setup.hessian_eigenvalues.tolist(),
        "protocol": protocol.describe(args.batch),
        "rows": rows,
        "assumptions": list(setup.assumptions),
        "seconds": time.monotonic() - start,
    }
    if pipe is not None:
        out["pipeline"] = pipe.describe(problem.stage_sizes(pipe.stages))
    return out


def report(result: dict) -> str:
    """A table: rule, delay, predicted and measured max lr, their ratio, log-rate ratios."""
    lines = [f"{'rule':<12}{'delay':>8}{'predicted':>14}{'measured':>14}{'ratio':>9}  ln ρ ratios"]
    for row in result["rows"]:
        delay = row.get("tau", row.get("schedule", ""))
        pred = row.get("predicted_max_lr", row.get("predicted_max_lr_worst_stage"))
        ratio = row.get("ratio", row.get("ratio_to_worst_stage"))
        rates = row.get("log_rate_ratio") or []
        lines.append(
            f"{row['rule']:<12}{delay!s:>8}{_fmt(pred):>14}{_fmt(row.get('measured_max_lr')):>14}"
            f"{_fmt(ratio, 5):>9}  " + " ".join(_fmt(r, 5) for r in rates)
        )
    return "\n".join(lines)


def _fmt(x, digits: int = 6) -> str:
    return "-" if x is None else f"{x:.{digits}g}"
