"""``train`` points of a sweep: ``st.train``'s runs, a chunk's runs in lockstep.

A ``train`` point is what ``st.train`` computes for a rule with a uniform delay — delayed
training by the rule's own step (`stability.trainer.engine`, PipeMare eq. 1 for ``sgd``) on the
problem of its problem keywords from the problem's initial weights — and the outcome keys it
shares with ``stability train --json``: ``diverged``, ``diverged_step``, ``diverged_loss``,
``initial_loss``, ``final_loss`` (`stability.api.train.TrainRun`).  Its keywords are
``st.train``'s option table (`TRAIN_OPTIONS`).  The runs are ``st.train``'s own: a chunk's
runs that share the problem, ``steps``, ``batch``, ``seed`` and ``divergence`` go to
`stability.api.train.train_runs` (``st.train`` for R runs in one array computation: the
rule's parameters that differ between runs become (R, 1) arrays, as in
``paper_repro/pipemare_fig5b.py``), so a chunk costs about what one run costs, which the
reproductions' grids (28 × 96 runs of 200 000 steps for PipeMare Fig. 5(b)) need.  Every run
sees the same minibatch stream (the seed's) as it does alone.

.. warning:: The lockstep products of R runs can round in the last bit differently from one
   run's (final losses agree with ``stability train`` to ~1e-16 relative).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from stability.api.commands import PROBLEM_OPTIONS, command
from stability.api.train import TrainRun
from stability.options import check_options
from stability.sweep.outcome import error_line

_RUN_KEYS = ("lr", "steps", "batch", "seed", "divergence")
RUN_OPTIONS = tuple(o for o in command("train").options if o.name in _RUN_KEYS)
TRAIN_OPTIONS = RUN_OPTIONS + PROBLEM_OPTIONS
"""The keywords of a ``train`` point besides the rule's parameters: ``st.train``'s own
(`stability.api.commands`), those a uniform-delay run takes, and the problem's."""
_PROBLEM_KEYS = tuple(o.name for o in PROBLEM_OPTIONS)


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
    """(group key, the rule parameters given (validated), lr) of one point."""
    from stability.rules.registry import get_spec

    names = {o.name for o in TRAIN_OPTIONS}
    options = {k: v for k, v in params.items() if k in names}
    rule_params = {k: v for k, v in params.items() if k not in names}
    run = {k: v for k, v in options.items() if k in _RUN_KEYS}
    settings = check_options(RUN_OPTIONS, run)
    lr = settings.pop("lr")
    get_spec(rule).resolve(**rule_params)  # a parameter the rule lacks raises here
    problem = tuple((k, options[k]) for k in _PROBLEM_KEYS if k in options)
    return (rule, problem, tuple(settings.items())), rule_params, lr


def _lockstep_batches(key, members):
    """One batch of all the group's runs, if its rule builds with per-run parameter arrays;
    otherwise one batch per distinct parameter set (only lr differs inside)."""
    from stability.api.train import stacked
    from stability.rules.registry import get_spec

    rule = key[0]
    try:
        get_spec(rule).build(**stacked([values for _, values, _ in members]))
        return [members]
    except Exception:  # noqa: BLE001 - a rule without array parameters: split the group
        by_values = defaultdict(list)
        for m in members:
            by_values[repr(sorted(m[1].items()))].append(m)
        return list(by_values.values())


def _train(key, batch) -> tuple[TrainRun, ...]:
    """``st.train``'s runs of one lockstep batch (`stability.api.train.train_runs`)."""
    from stability.api.train import train_runs

    rule, problem, settings = key
    columns = {name: [values[name] for _, values, _ in batch] for name in batch[0][1]}
    shared = {k: c[0] for k, c in columns.items() if all(v == c[0] for v in c)}
    per_run = {k: c for k, c in columns.items() if k not in shared}
    lrs = [lr for _, _, lr in batch]
    return train_runs(rule, lr=lrs, **dict(problem), **dict(settings), **shared, **per_run)
