"""The sweepable commands: command name → public function, its keywords, how a chunk is run.

A `SweepCommand` says everything the sweep needs to know about a command:

* ``function``: the public API function (``stability.max_lr``: the rule by name, then the
  rule's parameters and the command's options as keywords) returning a `Result`;
* ``result``: that result type; its scalar fields (numbers, booleans, strings) become the
  dataset's variables (`output_fields`), its other fields (lists, nested objects) are not
  stored;
* ``options``: the command's keywords besides the rule's parameters, with their types
  (``model_params``: whether the quadratic model's ``lam``, ``delta``, ``phi`` apply);
* ``evaluate_chunk`` (optional): a batched evaluation of a chunk of points that gives what
  ``function`` gives point by point (e.g. training runs in lockstep); without it the chunk is
  evaluated point by point.

A point that fails (a `ValueError` naming a parameter, a rule that lacks a parameter of a
``rule`` axis, a numerical failure) yields its one-line error (`error_line`) instead of a
result: it is recorded, never dropped.

The declared commands marked ``sweepable`` in `stability.api.commands` are sweepable as they
are (their function, result type and option table); ``train`` adds its lockstep chunks.  To add
a command: declare it there with ``sweepable=True``;
the spec reader, the dataset layout and the CLI follow from it (docs/sweep.md).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stability.api.commands import COMMANDS as DECLARED
from stability.options import Option
from stability.result import Result
from stability.rules.spec import MODEL_PARAMS
from stability.sweep.outcome import error_line
from stability.sweep.train_runs import TRAIN_OPTIONS, TrainRun, train_chunk

Point = tuple[str, dict[str, Any]]
"""A grid point: the rule's name and the keywords of the call."""

_PARAM_KINDS = {"delay": "int", "real": "real", "bool": "bool", "choice": "str"}
"""Rule parameter kinds (`stability.rules.spec.Param`) → spec value types."""


@dataclass(frozen=True)
class SweepCommand:
    """One sweepable command (module doc)."""

    name: str
    function: Callable[..., Result] | None
    result: type[Result]
    options: tuple[Option, ...] = ()
    model_params: bool = True
    evaluate_chunk: Callable[[Sequence[Point]], list[Result | str]] | None = None

    def evaluate(self, points: Sequence[Point]) -> list[Result | str]:
        """A result or a one-line error for every point, in order."""
        if self.evaluate_chunk is not None:
            return self.evaluate_chunk(points)
        return [self.call(rule, params) for rule, params in points]

    def call(self, rule: str, params: dict[str, Any]) -> Result | str:
        """``function(rule, **params)``, or its one-line error."""
        try:
            return self.function(rule, **params)
        except Exception as err:  # noqa: BLE001 - every failure is recorded with its point
            return error_line(err)

    def output_fields(self, inputs: set[str]) -> tuple[tuple[str, str], ...]:
        """``(name, "number" | "text")`` of the result's scalar fields, without the echoed
        inputs (``rule`` and the spec's fixed and axis names)."""
        hints = typing.get_type_hints(self.result)
        out = []
        for f in dataclasses.fields(self.result):
            if f.name in inputs or f.name == "rule":
                continue
            args = typing.get_args(hints[f.name]) or (hints[f.name],)
            types = {t for t in args if t is not type(None)}
            if types and types <= {float, int, bool}:
                out.append((f.name, "number"))
            elif types == {str}:
                out.append((f.name, "text"))
        return tuple(out)


COMMANDS: dict[str, SweepCommand] = {
    c.name: c
    for c in (
        *(
            SweepCommand(c.name, c.function, c.result, options=c.options)
            for c in DECLARED.values()
            if c.sweepable
        ),
        SweepCommand(
            "train",
            None,  # st.train's uniform-delay runs, a chunk in lockstep (train_runs.py)
            TrainRun,
            options=TRAIN_OPTIONS,
            model_params=False,
            evaluate_chunk=train_chunk,
        ),
    )
}
"""The sweepable commands by CLI name."""


def get_command(name: str) -> SweepCommand:
    """The entry for ``name``; unknown names raise `ValueError` listing the sweepable ones."""
    try:
        return COMMANDS[name]
    except KeyError:
        raise ValueError(
            f"unknown command {name!r} (sweepable commands: {', '.join(COMMANDS)})"
        ) from None


def keyword_kinds(command: SweepCommand, rules: Sequence[str]) -> dict[str, str]:
    """Every keyword a point of ``command`` may take with one of ``rules``, and its type:
    the command's options, then the rules' parameters (without the model's, where they do
    not apply)."""
    from stability.rules.registry import get_spec

    kinds = {o.name: o.kind for o in command.options}
    for rule in rules:
        for p in get_spec(rule).params:
            if command.model_params or p.name not in MODEL_PARAMS:
                kinds.setdefault(p.name, _PARAM_KINDS[p.kind])
    return kinds
