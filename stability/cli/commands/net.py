"""``stability net curvature|max-lr|train|noise --problem FILE.py:FUNC ...``: a user's PyTorch model
(`stability.nets.public`: ``st.net_curvature``, ``st.net_max_lr``, ``st.net_train``).

* ``curvature [--k K] [--stages P] [--stage-blocks] [--negative]``: ``eigenvalues``
  (descending), ``stage_eigenvalues`` (with ``--stage-blocks``), ``negative_eigenvalues`` (with
  ``--negative``), ``stage_sizes``, ``n_params``, ``hvps``, ``seconds``, ``method``;
* ``max-lr --rule R [rule flags] [--stages P --schedule S --microbatches N | --tau T]
  [--k K] [--measure]``: the coupled per-stage ``max_lr`` on the network's curvature,
  ``scalar_bound``, ``eigenvalues``, ``stage_taus``, ``stage_sizes``, ``method``, the rates at
  half the threshold, and with ``--measure`` the simulator's ``measured_max_lr`` and
  ``measured_bracket`` under ``protocol``;
* ``train --rule R [rule flags] --lr X --steps N [--batch B] [delays]
  [--backward stashed|current] [--sharpness-every K]``: ``diverged``, ``final_loss``,
  ``loss_curve``, ``measured_rate``, ``protocol``; with ``--backward current`` no weight
  stashing (backward delays from the schedule, or ``--tau-bkwd`` with a uniform ``--tau``;
  ``--tau-recomp`` for rule recompute); with ``--sharpness-every K`` the edge of stability:
  ``sharpness``, ``predicted_edge``, ``plateau``, ``reached``, ``edge_ratio`` (and
  ``edge_delta``, ``edge_without_delta`` with ``--backward current``); ``--batch B
  --sampling reshuffle|iid`` trains with minibatches;
* ``noise --rule R [rule flags] [--tau T | --stages P --schedule S] --batch B [--k K] [--lr X]
  [--curvature hessian|ggn] [--measure --runs N]``: the minibatch theory near a minimum
  (`stability.nets.noise_public`, ``st.net_noise``): ``full_batch_max_lr``, ``ms_max_lr``,
  ``as_max_lr``, ``as_bracket``, ``expected_loss``, ``floor``, ``rate``,
  ``subspace_change``, ``protocol``, with ``--measure`` the simulator's ``measured`` runs.

Adam/AdamW (``--rule adam``, ``pipeoptim --optimizer adam|adamw``): ``--precond-from
STATE|warmup:N:LR`` gives the optimizer's preconditioner P (``curvature``: also
``preconditioned_eigenvalues``; ``max-lr``: the prediction on P^1/2 H P^1/2, with ``--measure``
also ``measured_bracket_real``), ``train --update real`` runs real Adam (docs/adam.md).

Every subcommand takes ``--dtype float32|float64`` and ``--device DEVICE`` (default: the
model's own).  Needs PyTorch (``pip install -e '.[torch]'`` in the checkout); without it each
subcommand says so on one line and exits with code 2.  See docs/nets.md.
"""

from __future__ import annotations

import argparse

from stability.cli.args import (
    HelpFormatter,
    Parser,
    add_command,
    add_options,
    add_output_arguments,
    add_rule_arguments,
    examples_epilog,
    float_arg,
    int_arg,
)

API = "net_max_lr"
EXAMPLES = (
    "net curvature --problem examples/diabetes_linear.py:problem --stages 2 --k 3",
    "net max-lr --problem examples/diabetes_linear.py:problem --rule momentum --momentum 0.5 "
    "--stages 2 --tau 2 --k 3 --json",
)
SUBCOMMAND_EXAMPLES = {
    "curvature": EXAMPLES[0],
    "max-lr": EXAMPLES[1],
    "train": "net train --problem examples/diabetes_linear.py:problem --rule sgd --stages 2 "
    "--tau 1 --lr 0.1 --steps 50",
    "noise": "net noise --problem examples/diabetes_linear.py:problem --rule sgd --tau 1 "
    "--batch 16 --k 4 --steps 100 --lyapunov-steps 400 --json",
}
MAX_STEPS = 1_000_000
"""Largest number of simulator steps accepted on the command line."""
NOT_RULE_FLAGS = ("tau", "stages", "microbatches", "lam")
"""Rule parameters the network sets itself: the delays come from the pipeline flags, the
curvature from the model (so ``--lam`` is not a flag here)."""


def _common(p: argparse.ArgumentParser) -> None:
    from stability.checks import MAX_DELAY

    p.add_argument(
        "--problem",
        required=True,
        metavar="FILE.py:FUNC",
        help="a Python file and the function in it that returns the problem dict",
    )
    p.add_argument(
        "--stages",
        type=int_arg("--stages", 1, MAX_DELAY),
        default=None,
        help="pipeline stages P (default: the problem's, else 1)",
    )
    p.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default=None,
        help="evaluate in this precision (default: the model's, promoted to the data's)",
    )
    p.add_argument(
        "--device",
        default=None,
        metavar="DEVICE",
        help="evaluate on this torch device, e.g. cpu or cuda:0 (default: the model's)",
    )


def _rule(p: argparse.ArgumentParser, *, backward: bool = True) -> None:
    from stability.checks import MAX_DELAY
    from stability.pipeline import SCHEDULES

    add_rule_arguments(p, rule="--rule", exclude=NOT_RULE_FLAGS)
    g = p.add_argument_group("per-stage delays (weight stashing)")
    g.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=None,
        help="per-stage delays of this schedule over --stages P, --microbatches N (default "
        "pipemare); or a uniform --tau",
    )
    from stability.api.commands import PIPELINE_OPTIONS

    add_options(g, tuple(o for o in PIPELINE_OPTIONS if o.name in ("stage_delays", "microbatches")))
    g.add_argument(
        "--tau", type=int_arg("--tau", 0, MAX_DELAY), default=None, help="uniform delay τ"
    )
    if not backward:
        return
    p.add_argument(
        "--backward",
        choices=("stashed", "current"),
        default="stashed",
        help="stashed: each stage's backward pass uses its forward weights (default); current: "
        "no stashing, input-gradients with the current (backward) weights",
    )
    p.add_argument(
        "--granularity",
        choices=("layer", "stage"),
        default="layer",
        help="with --backward current, the units the backward pass differentiates at their "
        "forward inputs: each layer (default) or as much of each stage as one module is",
    )


def _precond_from(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--precond-from",
        default=None,
        metavar="STATE|warmup:N:LR",
        help="Adam/AdamW's preconditioner P = 1/(√v̂ + ε): a torch.save(opt.state_dict()) file "
        "of torch.optim.Adam/AdamW over model.parameters(), or warmup:N:LR (N full-batch AdamW "
        "steps at LR first; the weights are then those after it); see docs/adam.md",
    )


def _subcommand(net, name: str, help: str):  # noqa: A002 - argparse's name
    return net.add_parser(
        name,
        help=help,
        description=help,
        usage=f"stability net {name} --problem FILE.py:FUNC [options]",
        epilog=examples_epilog([SUBCOMMAND_EXAMPLES[name]]),
        formatter_class=HelpFormatter,
    )


def register(sub) -> None:
    p = add_command(
        sub,
        "net",
        usage="curvature|max-lr|train|noise --problem FILE.py:FUNC [options] [--json]",
        help="a PyTorch model: curvature per stage, predicted max lr, delayed-pipeline simulator",
        description="A user's PyTorch model split into pipeline stages: its top Hessian "
        "eigenvalues (curvature), the max stable lr of a rule with per-stage delays on that "
        "curvature (max-lr, --measure: bracketed by simulation), or a delayed training run "
        "(train).  `stability net SUBCOMMAND --help` lists each one's flags.",
        examples=EXAMPLES,
    )
    net = p.add_subparsers(dest="net_command", metavar="SUBCOMMAND", parser_class=Parser)
    net.required = True

    c = _subcommand(net, "curvature", "top Hessian eigenvalues, overall and per stage")
    _common(c)
    c.add_argument("--k", type=int_arg("--k", 1, 1000), default=10, help="eigenvalues")
    c.add_argument(
        "--stage-blocks",
        action="store_true",
        help="also the top eigenvalues of each stage's diagonal block (one eigen-solve a stage)",
    )
    c.add_argument(
        "--negative",
        action="store_true",
        help="also search the bottom of the spectrum for negative eigenvalues (saddles)",
    )
    _precond_from(c)
    add_output_arguments(c)
    c.set_defaults(run=run_curvature, report=report_curvature)

    m = _subcommand(net, "max-lr", "predicted (and measured) max stable lr per stage delays")
    _common(m)
    _rule(m)
    m.add_argument("--k", type=int_arg("--k", 1, 1000), default=20, help="rank of the curvature")
    m.add_argument("--measure", action="store_true", help="bracket the max lr by simulation")
    m.add_argument(
        "--measure-steps",
        type=int_arg("--measure-steps", 100, MAX_STEPS),
        default=None,
        help="steps per simulator run (default 2000)",
    )
    _precond_from(m)
    add_output_arguments(m)
    m.set_defaults(run=run_max_lr, report=report_max_lr)

    t = _subcommand(net, "train", "train the model with per-stage delays (the simulator)")
    _common(t)
    _rule(t)
    t.add_argument("--lr", type=float_arg("--lr"), required=True, help="step size > 0")
    t.add_argument(
        "--steps", type=int_arg("--steps", 1, MAX_STEPS), required=True, help="simulator steps"
    )
    t.add_argument(
        "--batch",
        type=int_arg("--batch", 1),
        default=None,
        help="minibatch size (default: full batch)",
    )
    t.add_argument("--seed", type=int_arg("--seed"), default=0, help="minibatch stream seed")
    t.add_argument(
        "--divergence",
        type=float_arg("--divergence"),
        default=1e6,
        help="a run diverged once its loss is non-finite or exceeds this × its initial loss",
    )
    t.add_argument(
        "--curve-points",
        type=int_arg("--curve-points", 2, 100_000),
        default=200,
        help="points of the reported loss curve (subsampled)",
    )
    t.add_argument(
        "--sharpness-every",
        type=int_arg("--sharpness-every", 1, MAX_STEPS),
        default=None,
        metavar="K",
        help="record the top Hessian eigenvalue every K steps and read the edge of stability",
    )
    _precond_from(t)
    t.add_argument(
        "--update",
        choices=("analysed", "real"),
        default="analysed",
        help="adam, pipeoptim adam|adamw: the frozen-P rule as analysed (needs --precond-from; "
        "default) or real Adam/AdamW as torch.optim.AdamW steps (from the --precond-from state, "
        "else a fresh one)",
    )
    t.add_argument(
        "--sampling",
        choices=("reshuffle", "iid"),
        default="reshuffle",
        help="minibatches: reshuffled epochs (default) or B distinct indices drawn iid per step",
    )
    add_output_arguments(t)
    t.set_defaults(run=run_train, report=report_train)
    _register_noise(net)


def _public():
    from stability.nets import require_torch

    require_torch()
    import stability.nets.public as public

    return public


def _delays(args) -> dict:
    return {
        "stages": args.stages,
        "schedule": args.schedule,
        "stage_delays": args.stage_delays,
        "microbatches": args.microbatches,
        "tau": args.tau,
    }


def _split(args) -> tuple[dict, dict]:
    """(rule parameters, backward-pass options): the backward delays go to the simulator."""
    from stability.cli.args import rule_values

    values = rule_values(args)
    backward = {
        "backward": args.backward,
        "granularity": args.granularity,
        "tau_bkwd": values.pop("tau_bkwd", None),
        "tau_recomp": values.pop("tau_recomp", None),
    }
    return values, backward


def _precision(args) -> dict:
    return {"dtype": args.dtype, "device": args.device}


def run_curvature(args):
    return _public().net_curvature(
        args.problem,
        k=args.k,
        stages=args.stages,
        stage_blocks=args.stage_blocks,
        negative=args.negative,
        precond_from=args.precond_from,
        **_precision(args),
    )


def run_max_lr(args):
    values, backward = _split(args)
    public = _public()
    protocol = None
    if args.measure_steps is not None:
        from stability.nets.bracket import NetProtocol

        protocol = NetProtocol(steps=args.measure_steps)
    return public.net_max_lr(
        args.problem,
        args.rule,
        k=args.k,
        measure=args.measure,
        protocol=protocol,
        precond_from=args.precond_from,
        **backward,
        **_delays(args),
        **_precision(args),
        **values,
    )


def run_train(args):
    values, backward = _split(args)
    return _public().net_train(
        args.problem,
        args.rule,
        lr=args.lr,
        steps=args.steps,
        batch=args.batch,
        sampling=args.sampling,
        seed=args.seed,
        divergence=args.divergence,
        curve_points=args.curve_points,
        sharpness_every=args.sharpness_every,
        precond_from=args.precond_from,
        update=args.update,
        **backward,
        **_delays(args),
        **_precision(args),
        **values,
    )


def report_curvature(result) -> str:
    """Every key; the stage eigenvalues one line per stage."""
    from stability.cli.report import aligned, rows, value

    skip = ("schema_version", "stage_eigenvalues", "warnings")  # main prints the warnings
    keys = [k for k in result.to_json() if k not in skip]
    pairs = rows(result, keys)
    after = keys.index("eigenvalues") + 1
    pairs[after:after] = [
        (f"stage {i} eigenvalues", f"{value(v)} 1/lr")
        for i, v in enumerate(result.stage_eigenvalues, start=1)
    ]
    return "\n".join(aligned(pairs))


def report_max_lr(result) -> str:
    from stability.cli.report import lines

    keys = ["rule", "max_lr", "scalar_bound", "crossing_angle", "critical_stage", "schedule",
            "stage_taus", "stage_sizes", "rank", "truncation_change", "eigenvalues", "method",
            "rate_lr", "predicted_rate"]  # fmt: skip
    if result.measured_bracket is not None:
        keys += ["measured_max_lr", "measured_bracket", "measured_rate"]
    if result.preconditioner is not None:  # adaptive rules (docs/adam.md)
        keys += ["preconditioned_eigenvalues", "preconditioner", "measured_bracket_real"]
        keys += ["real_ratio"]
    return "\n".join(lines(result, keys))


def report_train(result) -> str:
    from stability.cli.report import lines, number

    keys = ["rule", "diverged", "diverged_step", "final_loss", "measured_rate", "schedule",
            "backward", "stage_taus", "stage_taus_bkwd", "stage_sizes"]  # fmt: skip
    if result.update == "real" or result.preconditioner is not None:
        keys += ["update", "preconditioner"]
    if result.sharpness:
        keys += ["sharpness_kind", "predicted_edge", "plateau", "reached", "edge_ratio"]
    if result.edge_delta is not None:  # --backward current: H_b in the edge
        keys += ["edge_delta", "edge_without_delta"]
    out = lines(result, keys)
    if result.sharpness:  # [[step, λ₁], ...]
        (s0, l0), (s1, l1) = result.sharpness[0], result.sharpness[-1]
        top = max((v for _, v in result.sharpness if v is not None), default=None)
        out.append(f"sharpness λ₁ {number(l0, 6)} at step {s0} → {number(l1, 6)} at step {s1} "
                   f"(max {number(top, 6)}, {len(result.sharpness)} points)")  # fmt: skip
    if result.loss_curve:
        (first_step, first), (last_step, last) = result.loss_curve[0], result.loss_curve[-1]
        out.append(f"loss {number(first, 6)} at step {first_step} → {number(last, 6)} at step "
                   f"{last_step}")  # fmt: skip
    return "\n".join(out)


# -- net noise (minibatch theory near a minimum) ---------------------------------------------------


def _register_noise(net) -> None:
    from stability.cli.args import add_minibatch_arguments, choice_arg, int_list

    n = _subcommand(net, "noise", "minibatch theory near a minimum: thresholds, loss, floor")
    _common(n)
    _rule(n, backward=False)
    n.add_argument("--batch", type=int_arg("--batch", 1), required=True, help="minibatch size B")
    n.add_argument(
        "--k", type=int_arg("--k", 1, 1000), default=10, help="Hessian eigenvectors (subspace)"
    )
    n.add_argument(
        "--curvature",
        type=choice_arg("--curvature", ("hessian", "ggn")),
        default="hessian",
        help="per-sample curvature: the Hessian (default) or its Gauss-Newton part",
    )
    n.add_argument(
        "--lr", type=float_arg("--lr"), default=None, help="step size (default 0.25 × ms_max_lr)"
    )
    n.add_argument("--steps", type=int_arg("--steps", 1, MAX_STEPS), default=1000, help="horizon")
    n.add_argument("--at", type=int_list("--at"), default=None, help="time points t1,t2,...")
    n.add_argument(
        "--perturbation",
        type=float_arg("--perturbation"),
        default=1e-3,
        help="start w* + perturbation·√p·v1 (default 1e-3)",
    )
    add_minibatch_arguments(n, MAX_STEPS)
    m = n.add_argument_group("measurement (the simulator's seeded minibatch runs)")
    m.add_argument("--measure", action="store_true", help="N seeded runs in lockstep")
    m.add_argument(
        "--runs",
        type=int_arg("--runs", 2, 65_536),
        default=256,
        help="seeded minibatch runs of the simulator for the measured loss",
    )
    m.add_argument(
        "--pairs",
        type=int_arg("--pairs", 2, 4096),
        default=32,
        help="runs per step size for the measured almost-sure bracket (offsets removed; "
        "each run paired with the rest point w*, sharing its batches)",
    )
    m.add_argument(
        "--pair-steps",
        type=int_arg("--pair-steps", 100, MAX_STEPS),
        default=4000,
        help="steps of each almost-sure run (the first fifth is burn-in)",
    )
    add_output_arguments(n)
    n.set_defaults(run=run_noise, report=report_noise)


def run_noise(args):
    from stability.cli.args import rule_values

    _public()
    from stability.nets.noise_public import net_noise
    from stability.nets.problem import load_problem
    from stability.pipeline import Pipeline

    net = load_problem(args.problem, stages=args.stages, **_precision(args))
    profile = args.schedule or args.stage_delays is not None or args.tau is not None
    pipe = Pipeline.from_options(
        args.schedule,
        stage_delays=args.stage_delays,
        tau=args.tau,
        stages=len(net.stage_sizes) if profile else None,
        microbatches=args.microbatches,
        backward="stashed",
    )
    return net_noise(
        net,
        args.rule,
        batch=args.batch,
        lr=args.lr,
        pipeline=pipe,
        k=args.k,
        curvature=args.curvature,
        steps=args.steps,
        at=args.at,
        perturbation=args.perturbation,
        sampling=args.sampling,
        measure=args.measure,
        runs=args.runs,
        pairs=args.pairs,
        pair_steps=args.pair_steps,
        seed=args.seed,
        lyapunov_steps=args.lyapunov_steps,
        lyapunov_runs=args.lyapunov_runs,
        **rule_values(args),
    )


def report_noise(result) -> str:
    from stability.cli.report import aligned, lines, number

    out = lines(
        result,
        ["rule", "batch", "lr", "samples", "n_params", "k", "subspace", "curvature",
         "sampling_factor", "full_batch_max_lr", "ms_max_lr", "as_max_lr", "as_bracket", "floor",
         "rate", "half_life", "subspace_change", "schedule", "stage_taus"],
    )  # fmt: skip
    out.append("expected excess loss E f − f*:")
    out += [f"  t = {t:<8}{number(v, 6)}" for t, v in result.expected_loss]
    if result.measured is not None:
        m = result.measured
        out.append("measured (mean ± se):")
        out += [f"  t = {t:<8}{number(a, 6)} ± {number(b, 3)}" for t, a, b in m["expected_loss"]]
        out.append(f"  floor {number(m['floor'][0], 6)} ± {number(m['floor'][1], 3)}")
        pairs = [(k, number(v, 6)) for k, v in m.items() if not isinstance(v, (list, dict))]
        out += ["  " + line for line in aligned(pairs)]
        if m.get("as_bracket"):
            out.append(f"  as_bracket {m['as_bracket']}")
    return "\n".join(out)
