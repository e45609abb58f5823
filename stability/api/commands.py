"""The commands as data: each command's public function, result type and option table.

A `Command` names its public function (``st.max_lr``) and result type by module, so that this
registry imports no analysis (the command line reads it to build its parser), and declares the
command's inputs besides the rule and its parameters once, as `stability.options.Option`
values.  From one entry follow

* the public function's validation (``check_options(command("max-lr").options, ...)``),
* the command line's flags, help texts and defaults (`stability.cli.declared.add_options`; the
  command's module adds only its text report),
* the sweep's keyword tables (`stability.sweep.catalog`),
* the docs' option tables (docs/reference/cli.md, generated from `COMMANDS`).

``pipeline``: the command takes a `stability.pipeline.Pipeline` (keyword ``pipeline=``; on the
command line the flags of `PIPELINE_OPTIONS`, which build it with
`stability.pipeline.Pipeline.from_options`).  ``keywords``: tables the function takes through
its ``**keywords`` (the problem's, or a pipeline's keywords where the function builds the
pipeline itself).  ``rule``: how the command line names the rule (``RULE``, ``--rule``,
``--rules`` or not at all).  The tables of the commands besides the scalar and trainer ones are
in `stability.api.tables` and `stability.api.net_tables`.  How to add a command:
docs/development.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from stability.api import net_tables as nt
from stability.api import tables as t
from stability.api.tables import BATCH, DIVERGENCE, LR, PIPELINE_OPTIONS, PROBLEM_OPTIONS
from stability.limits import (
    DENSE_SEARCH_MAX_STATES,
    HALFLIFE_MAX_KAPPA,
    SCAN_MAX_PARAMETERS,
    TRAIN_MAX_STEPS,
)
from stability.options import Option, option


@dataclass(frozen=True)
class Command:
    """One command (module doc): CLI name, the public function's module and name, its result
    type's name, its option table (each a keyword of the function), whether it takes a
    pipeline, whether it can be swept; ``keywords``: the tables it takes through its
    ``**keywords``; ``arguments``: positional values (``rules RULE ...``: ``function(*names)``);
    ``rule``: ``"positional"`` (RULE), ``"--rule"``, ``"--rules"`` or None (no rule);
    ``rule_exclude``: rule parameters the command sets itself (no flag)."""

    name: str
    module: str
    function_name: str
    result_name: str
    options: tuple[Option, ...] = ()
    pipeline: bool = False
    sweepable: bool = False
    keywords: tuple[Option, ...] = ()
    arguments: tuple[Option, ...] = ()
    rule: str | None = "positional"
    rule_exclude: tuple[str, ...] = ()

    @property
    def function(self) -> Callable[..., Any]:
        return getattr(importlib.import_module(self.module), self.function_name)

    @property
    def result(self) -> type:
        return getattr(importlib.import_module(self.module), self.result_name)

    @property
    def all_options(self) -> tuple[Option, ...]:
        """Every input: positional arguments, the options, the keyword tables, then the
        pipeline's when the command takes one."""
        pipeline = PIPELINE_OPTIONS if self.pipeline else ()
        return self.arguments + self.options + self.keywords + pipeline


TRAINER_NOT_RULE_FLAGS = ("stages", "microbatches")
"""gpipe's parameters, which the trainer commands' pipeline flags set."""

# -- the trainer commands (train, validate, coupled) -------------------------------------------

PROTOCOL_STEPS = option(
    "steps",
    "steps per stability run (default 20000; 5000 for mlp)",
    "int",
    default=None,
    low=10,
    high=TRAIN_MAX_STEPS,
)
REL_TOL = option(
    "rel_tol",
    "bisection bracket width (default 1e-3; 1e-2 for mlp)",
    "real",
    default=None,
    low=0.0,
    high=1.0,
    low_open=True,
)
FIT_SEED = option(
    "fit_seed", "mlp: initialization the minimizer is fitted from", "int", default=0, low=0
)

TRAIN_OPTIONS: tuple[Option, ...] = (
    LR,
    option("steps", "training steps", "int", "steps", default=10_000, low=1, high=TRAIN_MAX_STEPS),
    BATCH,
    option("seed", "minibatch and mlp initialization seed", "int", default=0, low=0),
    DIVERGENCE,
    option(
        "t1",
        "T1 step-size rescheduling over K steps (PipeMare eq. 4)",
        "int",
        default=None,
        low=1,
        metavar="K",
    ),
    option(
        "warmup_epochs", "synchronous warm-up epochs first (PipeMareW)", "int", default=0, low=0
    ),
    option(
        "start",
        "mlp: seeded initialization, or next to the fitted minimizer",
        "str",
        default="init",
        choices=("init", "minimum"),
    ),
    option(
        "curve_points", "points of the reported loss curve (subsampled)", "int", default=200, low=2
    ),
    option(
        "update",
        "train the rule as analysed or its real update where the analysis linearises it (adam, "
        "pipeoptim with adam/adamw: real Adam; dc: outer-product DC)",
        "str",
        default="analysed",
        choices=("analysed", "real"),
    ),
)
"""``train``'s options (with the problem's and the pipeline's)."""

VALIDATE_OPTIONS: tuple[Option, ...] = (
    option(
        "taus",
        "uniform delays τ, one row per rule × τ (the rule's tau, or tau_fwd)",
        "ints",
        default=(0, 1, 4, 16),
    ),
    BATCH,
    PROTOCOL_STEPS,
    option(
        "rate_steps",
        "first length of the rate runs, doubled until the rate settles (default 20000; 5000 "
        "for mlp); rate_steps × 2^rate_doublings ≤ the steps limit",
        "int",
        default=None,
        low=10,
        high=TRAIN_MAX_STEPS,
    ),
    option(
        "rate_doublings",
        "most doublings of the rate runs (default 5; 1 for mlp)",
        "int",
        default=None,
        low=0,
        high=20,
    ),
    option("seeds", "minibatch seeds (unstable if any diverges)", "ints", default=(0, 1, 2)),
    DIVERGENCE,
    REL_TOL,
    FIT_SEED,
)
"""``validate``'s options (with the problem's and the pipeline's)."""

COUPLED_OPTIONS: tuple[Option, ...] = (
    option(
        "taus",
        "forward delays per stage (or one for all), overriding the schedule's",
        "ints",
        "steps",
        default=None,
    ),
    option(
        "t1_power",
        "T1 exponent p: stage i steps with lr·τ_i^(−p) (PipeMare eq. 4)",
        "real",
        default=0.0,
        low=0.0,
        high=1.0,
    ),
    option(
        "method",
        f"frequency scan (≤ {SCAN_MAX_PARAMETERS} parameters) or block-state-matrix search "
        f"(≤ {DENSE_SEARCH_MAX_STATES} rows) (docs/limits.md)",
        "str",
        default="scan",
        choices=("scan", "dense"),
    ),
    option("measure", "measure the max lr on the trainer", "bool", default=False),
    PROTOCOL_STEPS,
    REL_TOL,
    FIT_SEED,
)
"""``coupled``'s options (with the problem's and the pipeline's)."""
COUPLED_PIPELINE_OPTIONS: tuple[Option, ...] = tuple(
    replace(
        o,
        doc="per-stage delays of this schedule over --stages P, --microbatches N (PipeMare "
        "Table 1); uniform: every stage at PipeMare's largest delay ⌈(2P−1)/N⌉ unless --taus",
    )
    if o.name == "schedule"
    else o
    for o in PIPELINE_OPTIONS
    if o.name != "stage_delays"  # --taus gives the profile
)
"""The pipeline's flags as ``coupled`` reads them (no --tau: the schedule sets the delays)."""

T1_AUDIT_OPTIONS: tuple[Option, ...] = (
    option(
        "lr_schedule",
        "base schedule: constant:LR | step:LR:FACTOR:B1,B2,... | warmup:LR:W | cosine:LR:T",
        "str",
        metavar="S",
    ),
    option("anneal_steps", "T1's K (PipeMare eq. 4)", "int", "steps", low=1, metavar="K"),
    option("steps", "steps to audit", "int", "steps", low=1, metavar="N"),
    option("taus", "stage delays τ_i", "ints", "steps", default=None, metavar="T1,T2,..."),
    option(
        "pipeline",
        "take τ_fwd,i of a pipeline schedule (pipemare, pipedream, pb, ...) with P stages and "
        "N microbatches (default 1); from Python also a Pipeline",
        "str",
        default=None,
        metavar="NAME:P[:N]",
    ),
)
"""``t1-audit``'s options: the stage delays come from ``taus`` or ``pipeline``."""


def _net(name: str, module: str, result: str, options: tuple[Option, ...], precision=()) -> Command:
    """``net NAME`` with a rule (``--rule``): its pipeline keywords are the network's."""
    return Command(
        f"net {name}",
        module,
        "net_" + name.replace("-", "_"),
        result,
        options,
        keywords=precision + nt.NET_PIPELINE_OPTIONS,
        rule="--rule",
        rule_exclude=nt.NET_NOT_RULE_FLAGS,
    )


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "poly",
            "stability.api.poly",
            "poly",
            "Poly",
            (LR, option("symbolic", "add the sympy polynomial", "bool", default=False)),
        ),
        Command(
            "radius",
            "stability.api.radius",
            "radius",
            "Radius",
            (
                LR,
                option(
                    "certify",
                    "decide stability exactly (Schur-Cohn in rational arithmetic; decimals "
                    "read exactly)",
                    "bool",
                    default=False,
                ),
            ),
            pipeline=True,
            sweepable=True,
        ),
        Command(
            "max-lr",
            "stability.api.max_lr",
            "max_lr",
            "MaxLr",
            (
                option(
                    "method",
                    "boundary locus (polynomials affine in lr) or bisection on the spectral radius",
                    "str",
                    default="auto",
                    choices=("auto", "locus", "bisection"),
                ),
            ),
            pipeline=True,
            sweepable=True,
        ),
        Command("bounds", "stability.api.bounds", "bounds", "BoundReport", sweepable=True),
        Command("t1-audit", "stability.api.t1_audit", "t1_audit", "Audit", T1_AUDIT_OPTIONS),
        Command(
            "train",
            "stability.api.train",
            "train",
            "Training",
            TRAIN_OPTIONS,
            keywords=PROBLEM_OPTIONS + PIPELINE_OPTIONS,
            rule="--rule",
            rule_exclude=TRAINER_NOT_RULE_FLAGS,
        ),
        Command(
            "validate",
            "stability.api.validate",
            "validate",
            "Validation",
            VALIDATE_OPTIONS,
            keywords=PROBLEM_OPTIONS + PIPELINE_OPTIONS,
            rule="--rules",
            rule_exclude=TRAINER_NOT_RULE_FLAGS,
        ),
        Command(
            "coupled",
            "stability.api.coupled",
            "coupled",
            "Coupled",
            COUPLED_OPTIONS,
            keywords=PROBLEM_OPTIONS + COUPLED_PIPELINE_OPTIONS,
            rule="--rule",
            rule_exclude=TRAINER_NOT_RULE_FLAGS,
        ),
        Command(
            "halflife",
            "stability.api.halflife",
            "halflife",
            "HalfLife",
            (
                option(
                    "kappa",
                    "condition number κ of the spectrum [λ, κλ]",
                    "real",
                    low=1.0,
                    high=HALFLIFE_MAX_KAPPA,
                ),
                option(
                    "optimize",
                    "also minimise over this parameter (the momentum m or the LWP horizon T)",
                    "str",
                    default=None,
                    choices=("momentum", "horizon"),
                    switches=True,
                ),
            ),
            pipeline=True,
            sweepable=True,
        ),
        Command("heatmap", "stability.api.heatmap", "heatmap", "Heatmap", t.HEATMAP_OPTIONS),
        Command("claims", "stability.api.claims", "claims", "Claims", t.CLAIMS_OPTIONS, rule=None),
        Command("repro", "stability.api.repro", "repro", "Repro", t.REPRO_OPTIONS, rule=None),
        Command(
            "rules",
            "stability.api.rules",
            "rules",
            "Rules",
            arguments=t.RULES_ARGUMENTS,
            rule=None,
        ),
        Command(
            "sweep", "stability.sweep.runner", "sweep", "SweepSummary", t.SWEEP_OPTIONS, rule=None
        ),
        Command(
            "noise",
            "stability.noise.minibatch",
            "noise",
            "Noise",
            t.NOISE_OPTIONS,
            keywords=t.NOISE_PROBLEM_OPTIONS + PIPELINE_OPTIONS,
            rule_exclude=("stages", "microbatches"),
        ),
        Command(
            "tradeoff",
            "stability.noise.tradeoff",
            "tradeoff",
            "Tradeoff",
            t.TRADEOFF_OPTIONS,
            keywords=t.NOISE_PROBLEM_OPTIONS,
            rule=None,
        ),
        Command(
            "net curvature",
            "stability.nets.public",
            "net_curvature",
            "NetCurvature",
            nt.NET_CURVATURE_OPTIONS,
            rule=None,
        ),
        _net("max-lr", "stability.nets.public", "NetMaxLr", nt.NET_MAX_LR_OPTIONS),
        _net("train", "stability.nets.public", "NetTrain", nt.NET_TRAIN_OPTIONS),
        _net(
            "noise",
            "stability.nets.noise_public",
            "NetNoise",
            nt.NET_NOISE_OPTIONS,
            nt.NET_PRECISION,
        ),
    )
}
"""The commands, by CLI name (``net max-lr``: a subcommand).
``train``, ``validate`` and ``coupled`` also take the problem's and the pipeline's keywords
(`PROBLEM_OPTIONS`, `PIPELINE_OPTIONS`), which their functions turn into values
(`stability.api.setup`)."""


def command(name: str) -> Command:
    """The registry entry of command ``name``."""
    try:
        return COMMANDS[name]
    except KeyError:
        raise ValueError(f"unknown command {name!r} (declared: {', '.join(COMMANDS)})") from None


__all__ = ["COMMANDS", "PIPELINE_OPTIONS", "PROBLEM_OPTIONS", "Command", "command"]
