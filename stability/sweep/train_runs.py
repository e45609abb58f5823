"""``train`` points of a sweep: reference-trainer runs, a chunk's runs in lockstep.

A ``train`` point is what ``st.train`` computes for a rule with a uniform delay (no pipeline,
``t1``, ``warmup_epochs``, ``update``) — delayed training by the rule's own step
(`stability.trainer.engine.train`, PipeMare eq. 1 for ``sgd``) on the problem of its problem
keywords (built by the same `stability.api.setup.problem_options` from the same option table)
from the problem's initial weights — and its outcome keys of ``stability train --json``:
``diverged``, ``diverged_step``, ``diverged_loss``, ``initial_loss``, ``final_loss``
(`TrainRun`).  Its keywords are ``st.train``'s option table (`TRAIN_OPTIONS`).  It does not call
``st.train`` point by point because the chunk's runs train as one array computation (below),
which the reproductions' grids (28 × 96 runs of 200 000 steps for PipeMare Fig. 5(b)) need.

A chunk's runs that share the problem, ``steps``, ``batch``, ``seed`` and ``divergence``
train in one lockstep computation (R runs as one array computation; the rule's parameters
that differ between runs become (R, 1) arrays, as in ``paper_repro/pipemare_fig5b.py``), so
a chunk costs about what one run costs.  Every run sees the same minibatch stream (the seed's)
as it does alone.

.. warning:: Two differences from ``stability train``, both in the last place only:
   ``diverged_step`` is the first divergence check (every 10 steps, and the last step) that
   trips — ``stability train`` also checks at its loss-curve points, so it can report a step
   up to 9 earlier; and the lockstep products of R runs can round in the last bit differently
   from one run's (final losses agree to ~1e-16 relative).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stability.api.commands import PROBLEM_OPTIONS, command
from stability.checks import finite_or_none
from stability.options import check_options
from stability.result import Result, output
from stability.sweep.outcome import error_line

_RUN_KEYS = ("lr", "steps", "batch", "seed", "divergence")
RUN_OPTIONS = tuple(o for o in command("train").options if o.name in _RUN_KEYS)
TRAIN_OPTIONS = RUN_OPTIONS + PROBLEM_OPTIONS
"""The keywords of a ``train`` point besides the rule's parameters: ``st.train``'s own
(`stability.api.commands`), those a uniform-delay run takes, and the problem's."""
_PROBLEM_KEYS = tuple(o.name for o in PROBLEM_OPTIONS)


@dataclass(frozen=True)
class TrainRun(Result):
    """The outcome of one reference-trainer run (the keys of ``stability train --json``)."""

    diverged: bool = output("the loss exceeded divergence × its initial value (or overflowed)")
    diverged_step: int | None = output("first divergence check that tripped; null: none", "step")
    diverged_loss: float | None = output("loss at that check; null: none or non-finite", "loss")
    initial_loss: float | None = output("loss at the initial weights", "loss")
    final_loss: float | None = output("loss after the last step; null if diverged", "loss")


def train_chunk(points: Sequence[tuple[str, dict[str, Any]]]) -> list[TrainRun | str]:
    """A `TrainRun` or a one-line error for every ``(rule, keywords)`` point (module doc)."""
    out: list[TrainRun | str | None] = [None] * len(points)
    groups: dict[Any, list[tuple[int, dict[str, Any], float]]] = defaultdict(list)
    for i, (rule, params) in enumerate(points):
        try:
            key, rule_values, lr = _split(rule, params)
        except Exception as err:  # noqa: BLE001 - recorded with the point
            out[i] = error_line(err)
            continue
        groups[key].append((i, rule_values, lr))
    for key, members in groups.items():
        for batch in _lockstep_batches(key, members):
            try:
                runs = _train(key, batch)
            except Exception as err:  # noqa: BLE001 - recorded with each point
                runs = [error_line(err)] * len(batch)
            for (i, _, _), run in zip(batch, runs, strict=True):
                out[i] = run
    return out


def _split(rule: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any], float]:
    """(group key, the rule's validated parameters, lr) of one point."""
    from stability.rules.registry import get_spec

    names = {o.name for o in TRAIN_OPTIONS}
    options = {k: v for k, v in params.items() if k in names}
    rule_params = {k: v for k, v in params.items() if k not in names}
    run = {k: v for k, v in options.items() if k in _RUN_KEYS}
    settings = check_options(RUN_OPTIONS, run)
    lr = settings.pop("lr")
    resolved = get_spec(rule).resolve(**rule_params)  # a parameter the rule lacks raises here
    problem = tuple((k, options[k]) for k in _PROBLEM_KEYS if k in options)
    return (rule, problem, tuple(settings.items())), resolved, lr


def _lockstep_batches(key, members):
    """One batch of all the group's runs, if its rule builds with per-run parameter arrays;
    otherwise one batch per distinct parameter set (only lr differs inside)."""
    from stability.rules.registry import get_spec

    rule = key[0]
    try:
        get_spec(rule).build(**_stacked([values for _, values, _ in members]))
        return [members]
    except Exception:  # noqa: BLE001 - a rule without array parameters: split the group
        by_values = defaultdict(list)
        for m in members:
            by_values[repr(sorted(m[1].items()))].append(m)
        return list(by_values.values())


def _stacked(values: list[dict[str, Any]]) -> dict[str, Any]:
    """Parameters equal across runs as they are; the others as (R, 1) arrays."""
    out = {}
    for name in values[0]:
        column = [v[name] for v in values]
        if all(c == column[0] for c in column):
            out[name] = column[0]
        elif any(c is None or isinstance(c, bool | str) for c in column):
            raise TypeError(f"{name} differs between runs and is not a number")
        else:
            dtype = np.int64 if all(isinstance(c, int) for c in column) else float
            out[name] = np.array(column, dtype=dtype).reshape(-1, 1)
    return out


def _train(key, batch) -> list[TrainRun]:
    from stability.rules.registry import get_spec
    from stability.trainer.engine import train

    rule_name, problem_items, settings = key
    problem = _problem(problem_items)
    rule, _ = get_spec(rule_name).build(**_stacked([values for _, values, _ in batch]))
    res = train(problem, rule, np.array([lr for _, _, lr in batch]), **dict(settings))
    return [
        TrainRun(
            diverged=bool(res.diverged[r]),
            diverged_step=int(res.diverged_step[r]) if res.diverged[r] else None,
            diverged_loss=finite_or_none(res.diverged_loss[r]),
            initial_loss=finite_or_none(res.initial_loss[r]),
            final_loss=finite_or_none(res.final_loss[r]),
        )
        for r in range(len(batch))
    ]


@functools.lru_cache(maxsize=4)
def _problem(items: tuple[tuple[str, Any], ...]):
    """The problem of ``stability train``'s problem flags (its defaults), built once per
    process."""
    from stability.api.setup import problem_options
    from stability.trainer.problems import build_problem

    given = dict(items)
    if "hidden" in given:
        given["hidden"] = tuple(given["hidden"])
    return build_problem(problem_options(**given))[0]
