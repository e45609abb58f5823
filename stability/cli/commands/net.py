"""``stability net curvature|max-lr|train --problem FILE.py:FUNC ...``: a user's PyTorch model.

* ``curvature [--k K] [--stages P]``: ``eigenvalues`` (descending), ``stage_eigenvalues``,
  ``negative_eigenvalues``, ``stage_sizes``, ``n_params``, ``hvps``, ``seconds``, ``method``;
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
  ``sharpness``, ``predicted_edge``, ``plateau``, ``reached``, ``edge_ratio``.

Needs PyTorch (``pip install stability[torch]``); without it each subcommand says so on one line
and exits with code 2.  See docs/nets.md.
"""

from __future__ import annotations

import argparse

from stability.cli.args import (
    Parser,
    add_output_arguments,
    add_rule_arguments,
    float_arg,
    int_arg,
    rule_values,
)

SCHEDULES = ("pipemare", "pipedream", "gpipe", "pb", "uniform")


def _common(p: argparse.ArgumentParser, *, stages: bool) -> None:
    p.add_argument(
        "--problem",
        required=True,
        metavar="FILE.py:FUNC",
        help="a Python file and the function in it that returns the problem dict",
    )
    if stages:
        p.add_argument(
            "--stages",
            type=int_arg("stages", 1),
            default=None,
            help="pipeline stages P (default: the problem's, else 1)",
        )
    add_output_arguments(p)


def _rule(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rule", required=True, metavar="RULE", help="rule name (stability rules)")
    add_rule_arguments(p, positional=False)
    p.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=None,
        help="per-stage delays of this schedule over --stages P, --microbatches N (default "
        "pipemare); or a uniform --tau",
    )
    p.add_argument(
        "--backward",
        choices=("stashed", "current"),
        default="stashed",
        help="stashed: each stage's backward pass uses its forward weights (default); current: "
        "no stashing, input-gradients with the current (backward) weights",
    )


def register(sub) -> None:
    p = sub.add_parser(
        "net",
        help="a PyTorch model: curvature per stage, predicted max lr, delayed-pipeline simulator",
        description=__doc__.split("\n\n")[0],
    )
    net = p.add_subparsers(dest="net_command", metavar="SUBCOMMAND", parser_class=Parser)
    net.required = True

    c = net.add_parser("curvature", help="top Hessian eigenvalues, overall and per stage")
    _common(c, stages=True)
    c.add_argument("--k", type=int_arg("k", 1), default=10, help="eigenvalues (default 10)")
    c.set_defaults(run=run_curvature)

    m = net.add_parser("max-lr", help="predicted (and measured) max stable lr per stage delays")
    _common(m, stages=False)
    _rule(m)
    m.add_argument(
        "--k", type=int_arg("k", 1), default=20, help="rank of the curvature (default 20)"
    )
    m.add_argument("--measure", action="store_true", help="bracket the max lr by simulation")
    m.add_argument(
        "--measure-steps",
        type=int_arg("measure_steps", 100),
        default=None,
        help="steps per simulator run (default 2000)",
    )
    m.set_defaults(run=run_max_lr)

    t = net.add_parser("train", help="train the model with per-stage delays (the simulator)")
    _common(t, stages=False)
    _rule(t)
    t.add_argument("--lr", type=float_arg("lr"), required=True, help="step size > 0")
    t.add_argument("--steps", type=int_arg("steps", 1), required=True)
    t.add_argument("--batch", type=int_arg("batch", 1), default=None, help="minibatch size")
    t.add_argument("--seed", type=int_arg("seed"), default=0, help="minibatch stream seed")
    t.add_argument("--divergence", type=float_arg("divergence"), default=1e6)
    t.add_argument("--curve-points", type=int_arg("curve_points", 2), default=200)
    t.add_argument(
        "--sharpness-every",
        type=int_arg("sharpness_every", 1),
        default=None,
        metavar="K",
        help="record the top Hessian eigenvalue every K steps and read the edge of stability",
    )
    t.set_defaults(run=run_train)


def _public():
    from stability.nets import require_torch

    require_torch()
    import stability.nets.public as public

    return public


def _delays(args) -> dict:
    return {
        "stages": args.stages,
        "schedule": args.schedule,
        "microbatches": args.microbatches,
        "tau": args.tau,
    }


def _params(args) -> dict:
    from stability.rules.registry import get_spec

    skip = {"tau", "stages", "microbatches", "lam", "tau_bkwd", "tau_recomp"}
    names = set(get_spec(args.rule).param_names) - skip
    return {k: v for k, v in rule_values(args).items() if k in names}


def _backward(args) -> dict:
    return {
        "backward": args.backward,
        "tau_bkwd": getattr(args, "tau_bkwd", None),
        "tau_recomp": getattr(args, "tau_recomp", None),
    }


def run_curvature(args) -> dict:
    return _public().net_curvature(args.problem, k=args.k, stages=args.stages).to_json()


def run_max_lr(args) -> dict:
    public = _public()
    protocol = None
    if args.measure_steps is not None:
        from stability.nets.bracket import NetProtocol

        protocol = NetProtocol(steps=args.measure_steps)
    result = public.net_max_lr(
        args.problem,
        args.rule,
        k=args.k,
        measure=args.measure,
        protocol=protocol,
        **_backward(args),
        **_delays(args),
        **_params(args),
    )
    return result.to_json()


def run_train(args) -> dict:
    result = _public().net_train(
        args.problem,
        args.rule,
        lr=args.lr,
        steps=args.steps,
        batch=args.batch,
        seed=args.seed,
        divergence=args.divergence,
        curve_points=args.curve_points,
        sharpness_every=args.sharpness_every,
        **_backward(args),
        **_delays(args),
        **_params(args),
    )
    return result.to_json()
