"""The option tables of the commands beside the scalar and trainer ones (`stability.api.commands`
holds those and the registry): the problem's and the pipeline's, ``heatmap``, ``claims``,
``repro``, ``rules``, ``sweep``, ``noise``, ``tradeoff`` (the ``net`` subcommands':
`stability.api.net_tables`).  Each option is declared once here
(`stability.options.option`) and serves the public function's keyword, the command line's
flag with its help and default, and the docs.  Imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from stability.checks import MAX_DELAY
from stability.limits import LAM_RANGE
from stability.options import Option, option
from stability.pipeline import SCHEDULES
from stability.trainer.data import STANDARDIZE
from stability.trainer.mlp import ACTIVATIONS, TASKS
from stability.trainer.problems import PROBLEMS

MAX_STEPS = 1_000_000
"""Most steps of a minibatch analysis or a simulator run (`stability.noise.minibatch`)."""
MAX_LYAPUNOV_RUNS = 10_000
"""Largest number of paths of a Lyapunov exponent estimate (``--lyapunov-runs``)."""
MAX_PAIRS = 4096
"""Largest number of measured almost-sure runs per step size (``net noise --pairs``; a round of
`stability.nets.minibatch_lyapunov.measure_almost_sure` runs 8 step sizes × this many runs in
lockstep)."""

PAIR_STEPS_DEFAULT = 1000
"""``net noise --pair-steps`` when not given: --lyapunov-steps, at most this.  At the predicted
exponent's 4,000 steps the measured bracket alone took 36 s of CPU on the 11-parameter
diabetes example (4–5 rounds of 8 step sizes × 32 runs × 4,800 lockstep steps, ~1.5 ms each:
the per-call cost of `torch.func`); at 1,000, 12–15 s, its exponents' standard errors ~2× larger
(the bracket [0.484, 0.497] instead of [0.484, 0.492], the predicted as_max_lr 0.506)."""
HEATMAP_METRICS = ("radius", "half-life", "stable")
"""What the heatmap's colours show."""
REPRO_DIR = Path("paper_repro")
"""The reproduction scripts, in the source checkout of the working directory."""
REPRO_OUT_DIR = Path("out") / "repro"
"""Where ``repro`` writes unless told otherwise (``figures/``: the committed ones)."""
SWEEP_MAX_WORKERS = 256
"""Largest local sweep cluster."""

PIPELINE_GROUP = "pipeline (per-stage delays, PipeMare Table 1)"
PIPELINE_OPTIONS: tuple[Option, ...] = (
    option(
        "schedule",
        "per-stage delays of this schedule over --stages P, --microbatches N (PipeMare Table 1); "
        "uniform: every stage at the rule's delay",
        "str",
        default=None,
        choices=SCHEDULES,
        group=PIPELINE_GROUP,
    ),
    option(
        "stage_delays",
        "explicit forward delay of each stage, stage 1 first (e.g. 7,5,3,1; one value: every "
        "stage): the delay profile itself; with --schedule it overrides that schedule's "
        "forward delays",
        "ints",
        "steps",
        default=None,
        metavar="T1,T2,...",
        group=PIPELINE_GROUP,
    ),
    option(
        "stages",
        "pipeline stages P (2 with a schedule)",
        "int",
        default=None,
        low=1,
        high=MAX_DELAY,
        group=PIPELINE_GROUP,
    ),
    option(
        "microbatches",
        "microbatches N per update (1)",
        "int",
        default=None,
        low=1,
        high=MAX_DELAY,
        metavar="N",
        group=PIPELINE_GROUP,
    ),
)
"""The pipeline's inputs, wherever a command takes a pipeline."""

PROBLEM_GROUP = "problem and data"
PROBLEM_OPTIONS: tuple[Option, ...] = tuple(
    dataclasses.replace(o, group=PROBLEM_GROUP)
    for o in (
        option(
            "problem",
            "linreg: least squares on the data; mlp: a small MLP fitted to it",
            "str",
            default="linreg",
            choices=PROBLEMS,
        ),
        option(
            "data",
            "CSV (target in column 0) or LIBSVM file; default: cpusmall",
            "str",
            default=None,
            metavar="PATH",
        ),
        option(
            "standardize",
            "none: as stored; features: z-score features, centre the target; all: also scale the "
            "target (default: features for linreg, all for mlp)",
            "str",
            default=None,
            choices=STANDARDIZE,
        ),
        option("bias", "append an intercept column", "bool", default=False),
        option(
            "samples",
            "train on a seeded random subset of this many rows (mlp default: at most 128)",
            "int",
            default=None,
            low=1,
        ),
        option(
            "hidden",
            "MLP hidden widths (4,4: with one hidden layer the backward weights do not enter the "
            "gradient's linearization at a minimum)",
            "ints",
            default=(4, 4),
            low=1,
        ),
        option("activation", "MLP activation", "str", default="tanh", choices=ACTIVATIONS),
        option(
            "task",
            "MLP loss: squared error, or softmax cross-entropy on integer labels 0 … C−1",
            "str",
            default="regression",
            choices=TASKS,
        ),
        option(
            "l2",
            "MLP loss regularization l2/2·‖w‖² (a strict minimum)",
            "real",
            default=0.1,
            low=0.0,
            high=LAM_RANGE[1],  # it is a curvature: squared in the noise moments
        ),
    )
)
"""The trainer's problem and its data (`stability.api.setup.problem_options` builds the
`stability.trainer.problems.ProblemOptions` from them)."""


def output_file(name: str, doc: str, metavar: str) -> Option:
    """An optional file the command writes (the command line checks it can be created)."""
    return option(name, doc, "path", default=None, metavar=metavar, path="write-file")


LR = option("lr", "step size", "real", low=0.0, low_open=True)
BATCH = option("batch", "minibatch size (default: full batch)", "int", default=None, low=1)
DIVERGENCE = option(
    "divergence",
    "a run diverged once its loss is non-finite or exceeds this × its initial loss",
    "real",
    default=1e6,
    low=1.0,
    low_open=True,
)
"""The simulators' step size, minibatch and divergence threshold (the trainer's and the
network simulator's commands)."""

# -- the analysis-side commands ------------------------------------------------------------------

HEATMAP_OPTIONS: tuple[Option, ...] = (
    option("x", "horizontal axis", "str", metavar="P:lo:hi:n[:log]"),
    option("y", "vertical axis", "str", metavar="P:lo:hi:n[:log]"),
    option("lr", "step size, when no axis is lr", "real", default=None, low=0.0, low_open=True),
    option("metric", "colour of the PNG", "str", default="radius", choices=HEATMAP_METRICS),
    output_file("out", "write the figure here (missing directories are created)", "F.png"),
    output_file("csv", "write the grid here (missing directories are created)", "F.csv"),
    option("bounds", "overlay PipeMare Lemma 1/3 bounds (sgd, momentum)", "bool", default=False),
    option(
        "max_lr_curve",
        "overlay the exact max-lr curve",
        "bool",
        default=True,
        flag="--no-max-lr",
    ),
)
"""``heatmap``'s options (`stability.api.heatmap.heatmap`)."""

CLAIMS_OPTIONS: tuple[Option, ...] = (
    option(
        "ids",
        "check only this claim (repeatable); default: all",
        "strs",
        default=None,
        flag="--claim",
        repeat=True,
        metavar="ID",
    ),
    option("quick", "coarser grids (same statements)", "bool", default=False),
)
"""``claims``' options (`stability.api.claims.claims`)."""

REPRO_OPTIONS: tuple[Option, ...] = (
    option("names", "scripts to run", "strs", default=(), positional=True, metavar="NAME"),
    option("all", "run every script", "bool", default=False),
    option("list_only", "list the scripts and exit", "bool", default=False, flag="--list"),
    option("quick", "coarse grids (seconds to a minute per script)", "bool", default=False),
    option(
        "out_dir",
        "directory written (the committed figures: --out-dir figures)",
        "path",
        default=REPRO_OUT_DIR,
        path="write-dir",
    ),
    option("repro_dir", "the scripts (of the working directory)", "path", default=REPRO_DIR),
)
"""``repro``'s options (`stability.api.repro.repro`)."""

RULES_ARGUMENTS: tuple[Option, ...] = (
    option(
        "names",
        "rules to describe (default: all)",
        "strs",
        default=(),
        positional=True,
        metavar="RULE",
    ),
)
"""``rules``' positional names (`stability.api.rules.rules`, which takes them as ``*names``)."""

SWEEP_OPTIONS: tuple[Option, ...] = (
    option(
        "spec", "the sweep spec (TOML)", "path", default=None, positional=True, metavar="SPEC.toml"
    ),
    option(
        "out", "directory of the results", "path", default=None, metavar="DIR", path="write-dir"
    ),
    option(
        "scheduler",
        "a running dask scheduler, e.g. tcp://host:8786 (default: a local cluster)",
        "str",
        default=None,
        metavar="ADDRESS",
    ),
    option(
        "workers",
        "local cluster worker processes, one thread each (default: the CPUs)",
        "int",
        default=None,
        low=1,
        high=SWEEP_MAX_WORKERS,
        metavar="N",
    ),
    option(
        "status",
        "the progress of the sweep in DIR",
        "path",
        default=None,
        metavar="DIR",
        path="read-dir",
    ),
)
"""``sweep``'s options (`stability.sweep.runner.sweep`)."""

# -- minibatch least squares (noise, tradeoff) ---------------------------------------------------

LSQ_GROUP = "problem and data (least squares)"
_TRAINER_PROBLEM = {o.name: dataclasses.replace(o, group=LSQ_GROUP) for o in PROBLEM_OPTIONS}
NOISE_DATA_OPTIONS: tuple[Option, ...] = (
    dataclasses.replace(_TRAINER_PROBLEM["data"], doc="CSV or LIBSVM file (cpusmall)"),
    option("batch", "minibatch size B", "int", low=1, metavar="B", group=LSQ_GROUP),
)
"""The data and the batch of the least-squares minibatch commands."""
NOISE_PROBLEM_OPTIONS: tuple[Option, ...] = (
    dataclasses.replace(
        _TRAINER_PROBLEM["problem"],
        doc="least squares (the only problem with exact second moments)",
        choices=("linreg",),
    ),
    dataclasses.replace(
        _TRAINER_PROBLEM["standardize"],
        doc="none: as stored; features: z-score features, centre the target; all: also scale "
        "the target",
        default="features",
    ),
    _TRAINER_PROBLEM["bias"],
    dataclasses.replace(
        _TRAINER_PROBLEM["samples"],
        doc="use a seeded random subset of N rows (default: every row)",
        metavar="N",
    ),
)
"""The problem keywords of ``noise`` and ``tradeoff`` (`PROBLEM_OPTIONS`' least-squares ones,
`stability.noise.minibatch`'s ``NOISE_PROBLEM_KEYS``, taken through their keywords)."""


def minibatch_options(group: str | None, sampling: str = "iid") -> tuple[Option, ...]:
    """How the measured runs draw their batches, their seed, and the almost-sure threshold's
    Lyapunov estimate: shared by ``noise`` and ``net noise``."""
    return (
        option(
            "sampling",
            "minibatches of the measured runs: B rows drawn iid each step (what the theory "
            "covers) or epochs of a reshuffled order",
            "str",
            default=sampling,
            choices=("iid", "reshuffle"),
            group=group,
        ),
        option(
            "seed", "seed of the Lyapunov and measured runs", "int", default=0, low=0, group=group
        ),
        option(
            "lyapunov_steps",
            "steps per run of the almost-sure (top Lyapunov exponent) estimate",
            "int",
            default=4000,
            low=100,
            high=MAX_STEPS,
            metavar="LYAPUNOV_STEPS",
            group=group,
        ),
        option(
            "lyapunov_runs",
            "independent runs of the Lyapunov estimate (its confidence interval)",
            "int",
            default=32,
            low=2,
            high=MAX_LYAPUNOV_RUNS,
            metavar="LYAPUNOV_RUNS",
            group=group,
        ),
    )


def horizon_options(group: str | None, doc: str) -> tuple[Option, ...]:
    """The length of an expected-loss curve and its time points (``noise``, ``net noise``)."""
    return (
        option("steps", doc, "int", default=1000, low=1, high=MAX_STEPS, group=group),
        option(
            "at",
            "time points t1,t2,... of the curve (default: 0, 1, 2, 5, 10, …, steps)",
            "ints",
            default=None,
            group=group,
        ),
    )


NOISE_OPTIONS: tuple[Option, ...] = (
    *NOISE_DATA_OPTIONS,
    option("lr", "step size", "real", low=0.0, low_open=True, group="prediction"),
    *horizon_options("prediction", "horizon of the expected-loss curve"),
    *minibatch_options("prediction"),
    option("measure", "independent trainer runs", "bool", default=False, group="measurement"),
    option(
        "runs",
        "independently seeded trainer runs of --measure",
        "int",
        default=256,
        low=2,
        high=100_000,
        group="measurement",
    ),
)
"""``noise``'s options (`stability.noise.minibatch.noise`)."""

TRADEOFF_OPTIONS: tuple[Option, ...] = (
    *NOISE_DATA_OPTIONS,
    option("tau", "delay τ", "int", "steps", low=0, high=MAX_DELAY),
    option(
        "rules", "rule names", "rules", default=("sgd", "momentum", "lwp+sc"), metavar="R1,R2,..."
    ),
    option("target", "excess loss > 0", "real", default=None, low=0.0, low_open=True),
    output_file("out", "figure", "F.png"),
)
"""``tradeoff``'s options (`stability.noise.tradeoff.tradeoff`)."""

__all__ = [
    "MAX_LYAPUNOV_RUNS",
    "MAX_PAIRS",
    "MAX_STEPS",
    "horizon_options",
    "minibatch_options",
    "PROBLEM_OPTIONS",
    "PIPELINE_GROUP",
    "PIPELINE_OPTIONS",
    "CLAIMS_OPTIONS",
    "HEATMAP_OPTIONS",
    "NOISE_OPTIONS",
    "NOISE_PROBLEM_OPTIONS",
    "REPRO_OPTIONS",
    "RULES_ARGUMENTS",
    "SWEEP_OPTIONS",
    "TRADEOFF_OPTIONS",
]
