"""Flags shared by the trainer commands (``train``, ``validate``, ``coupled``): the problem and
data, and the pipeline schedule that gives per-stage delays.  Their values go to the public
functions as the keywords of `stability.api.setup`."""

from __future__ import annotations

import argparse
from typing import Any

from stability.cli.args import add_stage_delays_argument, float_arg, int_arg, int_list

PROBLEM_FLAGS = ("problem", "data", "standardize", "bias", "samples", "hidden", "activation",
                 "task", "l2")  # fmt: skip


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """``--problem``, ``--data`` and the preprocessing / MLP flags."""
    from stability.trainer.data import STANDARDIZE
    from stability.trainer.mlp import ACTIVATIONS, TASKS

    g = parser.add_argument_group("problem and data")
    g.add_argument(
        "--problem",
        choices=("linreg", "mlp"),
        default="linreg",
        help="linreg: least squares on the data; mlp: a small MLP fitted to it",
    )
    g.add_argument(
        "--data",
        default=None,
        metavar="PATH",
        help="CSV (target in column 0) or LIBSVM file; default: cpusmall",
    )
    g.add_argument(
        "--standardize",
        choices=STANDARDIZE,
        default=None,
        help="none: as stored; features: z-score features, centre the target; all: also "
        "scale the target (default: features for linreg, all for mlp)",
    )
    g.add_argument("--bias", action="store_true", help="append an intercept column")
    g.add_argument(
        "--samples",
        type=int_arg("--samples", 1),
        default=None,
        help="train on a seeded random subset of this many rows (mlp default: at most 128)",
    )
    g.add_argument(
        "--hidden",
        type=int_list("--hidden", 1),
        default=(4, 4),
        help="MLP hidden widths (default 4,4: with one hidden layer the backward weights do "
        "not enter the gradient's linearization at a minimum)",
    )
    g.add_argument("--activation", choices=ACTIVATIONS, default="tanh", help="MLP activation")
    g.add_argument(
        "--task",
        choices=TASKS,
        default="regression",
        help="MLP loss: squared error, or softmax cross-entropy on integer labels 0 … C−1",
    )
    g.add_argument(
        "--l2",
        type=float_arg("--l2"),
        default=0.1,
        help="MLP loss regularization l2/2·‖w‖² (a strict minimum; default 0.1)",
    )


def add_pipeline_arguments(
    parser: argparse.ArgumentParser, *, schedule_default=None, stage_delays: bool = True
) -> None:
    """``--schedule``, ``--stage-delays``, ``--stages`` P and ``--microbatches`` N (PipeMare
    Table 1); ``stage_delays=False`` where the command has its own per-stage delays flag."""
    from stability.checks import MAX_DELAY
    from stability.pipeline import SCHEDULES

    g = parser.add_argument_group("pipeline (per-stage delays, PipeMare Table 1)")
    g.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=schedule_default,
        help="per-stage delays of this schedule over --stages P stage blocks, --microbatches "
        "N; uniform takes the rule's delay",
    )
    if stage_delays:
        add_stage_delays_argument(g)
    g.add_argument(
        "--stages", type=int_arg("--stages", 1, MAX_DELAY), default=None, help="stages P"
    )
    g.add_argument(
        "--microbatches",
        type=int_arg("--microbatches", 1, MAX_DELAY),
        default=None,
        help="microbatches N (default 1)",
    )


def pipeline_values(args: argparse.Namespace) -> dict[str, Any]:
    """The pipeline keywords of the public functions (`add_pipeline_arguments`)."""
    names = ("schedule", "stage_delays", "stages", "microbatches")
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def problem_values(args: argparse.Namespace) -> dict[str, Any]:
    """The problem keywords of the public functions."""
    return {name: getattr(args, name) for name in PROBLEM_FLAGS}
