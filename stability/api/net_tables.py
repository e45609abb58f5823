"""The option tables of the ``net`` subcommands (curvature, max-lr, train, noise): a user's
PyTorch model, its stages, precision and device, its per-stage delays (`NET_PIPELINE_OPTIONS`,
built from `stability.api.tables.PIPELINE_OPTIONS`) and each subcommand's own options.
Registered in `stability.api.commands`; imports nothing heavy (no PyTorch).
"""

from __future__ import annotations

import dataclasses

from stability.api.tables import (
    BATCH,
    DIVERGENCE,
    LR,
    MAX_PAIRS,
    MAX_STEPS,
    PAIR_STEPS_DEFAULT,
    PIPELINE_OPTIONS,
    horizon_options,
    minibatch_options,
)
from stability.checks import MAX_DELAY
from stability.options import Option, option
from stability.pipeline import SCHEDULES

NET_PROBLEM = option(
    "problem",
    "a Python file and the function in it that returns the problem dict",
    "str",
    metavar="FILE.py:FUNC",
)
NET_STAGES = option(
    "stages",
    "pipeline stages P (default: the problem's, else 1)",
    "int",
    default=None,
    low=1,
    high=MAX_DELAY,
)
NET_PRECISION: tuple[Option, ...] = (
    option(
        "dtype",
        "evaluate in this precision (default: the model's, promoted to the data's; --measure "
        "runs and --precond-from's P^1/2 H P^1/2 go in float64 whatever it is)",
        "str",
        default=None,
        choices=("float32", "float64"),
    ),
    option(
        "device",
        "evaluate on this torch device, e.g. cpu or cuda:0 (default: the model's)",
        "str",
        default=None,
        metavar="DEVICE",
    ),
)
"""Where and in which precision a network is evaluated."""

NET_DELAYS = "per-stage delays (weight stashing)"
NET_PIPELINE_OPTIONS: tuple[Option, ...] = (
    option(
        "schedule",
        "per-stage delays of this schedule over --stages P, --microbatches N (default "
        "pipemare); or a uniform --tau",
        "str",
        default=None,
        choices=SCHEDULES,
        group=NET_DELAYS,
    ),
    *(
        dataclasses.replace(o, group=NET_DELAYS)
        for o in PIPELINE_OPTIONS
        if o.name in ("stage_delays", "microbatches")
    ),
    option("tau", "uniform delay τ", "int", default=None, low=0, high=MAX_DELAY, group=NET_DELAYS),
)
"""A network's pipeline keywords (`stability.nets.public.PIPELINE_KEYWORDS`; the stages are the
network's own split, ``--stages``)."""

NET_BACKWARD = option(
    "backward",
    "stashed: each stage's backward pass uses its forward weights; current: no stashing, "
    "input-gradients with the current (backward) weights",
    "str",
    default="stashed",
    choices=("stashed", "current"),
)
NET_GRANULARITY = option(
    "granularity",
    "with --backward current, the units the backward pass differentiates at their forward "
    "inputs: each layer or as much of each stage as one module is",
    "str",
    default="layer",
    choices=("layer", "stage"),
)
NET_PRECOND_FROM = option(
    "precond_from",
    "Adam/AdamW's preconditioner P = 1/(√v̂ + ε): a torch.save(opt.state_dict()) file of "
    "torch.optim.Adam/AdamW over model.parameters() or named_parameters() (or a checkpoint "
    "dict holding one), or warmup:N:LR (N full-batch AdamW steps at LR first; the weights are "
    "then those after it); see docs/adam.md",
    "str",
    default=None,
    metavar="STATE|warmup:N:LR",
)

NET_COMMON: tuple[Option, ...] = (NET_PROBLEM, NET_STAGES, *NET_PRECISION)
"""What every ``net`` subcommand (but ``noise``, which loads its problem itself) takes first."""

NET_CURVATURE_OPTIONS: tuple[Option, ...] = (
    *NET_COMMON,
    option(
        "k",
        "eigenvalues (at most p: all of them)",
        "int",
        default=10,
        low=1,
        high=1000,
        metavar="K",
    ),
    option(
        "stage_blocks",
        "also the top eigenvalues of each stage's diagonal block (one eigen-solve a stage)",
        "bool",
        default=False,
    ),
    option(
        "negative",
        "also search the bottom of the spectrum for negative eigenvalues (saddles)",
        "bool",
        default=False,
    ),
    NET_PRECOND_FROM,
)
"""``net curvature``'s options (`stability.nets.public.net_curvature`)."""

NET_MAX_LR_OPTIONS: tuple[Option, ...] = (
    *NET_COMMON,
    NET_BACKWARD,
    NET_GRANULARITY,
    option(
        "k", "rank of the curvature (at most p)", "int", default=20, low=1, high=1000, metavar="K"
    ),
    option("measure", "bracket the max lr by simulation", "bool", default=False),
    option(
        "measure_steps",
        "steps per simulator run (default 2000)",
        "int",
        default=None,
        low=100,
        high=MAX_STEPS,
    ),
    NET_PRECOND_FROM,
)
"""``net max-lr``'s options (`stability.nets.public.net_max_lr`)."""

NET_TRAIN_OPTIONS: tuple[Option, ...] = (
    *NET_COMMON,
    NET_BACKWARD,
    NET_GRANULARITY,
    LR,
    option("steps", "simulator steps", "int", low=1, high=MAX_STEPS),
    BATCH,
    option("seed", "minibatch stream seed", "int", default=0, low=0),
    DIVERGENCE,
    option(
        "curve_points",
        "points of the reported loss curve (subsampled)",
        "int",
        default=200,
        low=2,
        high=100_000,
    ),
    option(
        "sharpness_every",
        "record the top Hessian eigenvalue every K steps and read the edge of stability",
        "int",
        default=None,
        low=1,
        high=MAX_STEPS,
        metavar="K",
    ),
    NET_PRECOND_FROM,
    option(
        "update",
        "adam, pipeoptim adam|adamw: the frozen-P rule as analysed (needs --precond-from) or "
        "real Adam/AdamW as torch.optim.AdamW steps (from the --precond-from state, else a "
        "fresh one)",
        "str",
        default="analysed",
        choices=("analysed", "real"),
    ),
    option(
        "sampling",
        "minibatches: reshuffled epochs or B distinct indices drawn iid per step",
        "str",
        default="reshuffle",
        choices=("reshuffle", "iid"),
    ),
)
"""``net train``'s options (`stability.nets.public.net_train`)."""

NET_MEASURE = "measurement (the simulator's seeded minibatch runs)"
NET_NOISE_OPTIONS: tuple[Option, ...] = (
    NET_PROBLEM,
    NET_STAGES,
    option("batch", "minibatch size B", "int", low=1, metavar="B"),
    option(
        "k",
        "Hessian eigenvectors (subspace; at most p)",
        "int",
        default=10,
        low=1,
        high=1000,
        metavar="K",
    ),
    option(
        "curvature",
        "per-sample curvature: the Hessian or its Gauss-Newton part",
        "str",
        default="hessian",
        choices=("hessian", "ggn"),
    ),
    option(
        "lr", "step size (default 0.25 × ms_max_lr)", "real", default=None, low=0.0, low_open=True
    ),
    *horizon_options(None, "horizon"),
    option(
        "perturbation",
        "start w* + perturbation·√p·v1",
        "real",
        default=1e-3,
        low=0.0,
        low_open=True,
    ),
    *minibatch_options(None),
    option("measure", "N seeded runs in lockstep", "bool", default=False, group=NET_MEASURE),
    option(
        "runs",
        "seeded minibatch runs of the simulator for the measured loss",
        "int",
        default=256,
        low=2,
        high=65_536,
        group=NET_MEASURE,
    ),
    option(
        "pairs",
        "runs per step size for the measured almost-sure bracket (offsets removed; each run "
        "paired with the rest point w*, sharing its batches) (default: --lyapunov-runs, the "
        f"predicted exponent's runs, at most {MAX_PAIRS})",
        "int",
        default=None,
        low=2,
        high=MAX_PAIRS,
        group=NET_MEASURE,
    ),
    option(
        "pair_steps",
        "steps of each almost-sure run (the first fifth is burn-in) (default: "
        f"--lyapunov-steps, the predicted exponent's length, at most {PAIR_STEPS_DEFAULT:,})",
        "int",
        default=None,
        low=100,
        high=MAX_STEPS,
        group=NET_MEASURE,
    ),
    dataclasses.replace(
        NET_PRECOND_FROM,
        doc=NET_PRECOND_FROM.doc.replace(
            "; see docs/adam.md",
            "; or stationary: real Adam's own stationary v̂ at --lr and --batch (the fixed "
            "point of its minibatch gradients' mean square); see docs/adam.md",
        ),
        metavar="STATE|warmup:N:LR|stationary",
    ),
)
"""``net noise``'s options (`stability.nets.noise_public.net_noise`); its delays come from
`NET_PIPELINE_OPTIONS` (without ``--backward``: weight stashing) and ``tau``."""

NET_NOT_RULE_FLAGS = ("tau", "stages", "microbatches", "lam")
"""Rule parameters a network sets itself: the delays come from the pipeline flags, the
curvature from the model (so ``--lam`` is not a flag there)."""

__all__ = [
    "NET_BACKWARD",
    "NET_COMMON",
    "NET_CURVATURE_OPTIONS",
    "NET_DELAYS",
    "NET_MAX_LR_OPTIONS",
    "NET_MEASURE",
    "NET_NOISE_OPTIONS",
    "NET_NOT_RULE_FLAGS",
    "NET_PIPELINE_OPTIONS",
    "NET_PRECISION",
    "NET_PRECOND_FROM",
    "NET_PROBLEM",
    "NET_STAGES",
    "NET_TRAIN_OPTIONS",
]
