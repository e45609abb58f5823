"""What a checked claim is: what it asserts, how much, where, and the graded verdict.

A paper's claim is split into what it asserts:

* a **direction** ("LWP_D's max stable ηλ is below GDM's", "T2 raises the max stable lr"),
  checked at every point of
* its **scope**, the range of parameters it speaks about (in words: grids, delays, λ), and
* a **size** where the wording gives one ("slightly", "≈ 2D"): the measured quantity the word
  refers to, read through the lexicon (`stability.claims.lexicon`).

The verdict is a `Grade`; the first that applies wins:

=================  ==========================================================================
``holds``          the direction holds throughout the scope, and the size (if the wording
                   gives one) satisfies its word
``direction_only`` the direction holds throughout the scope, the size does not satisfy its word
                   (``range_where_it_holds``: where it does, if anywhere)
``partial_range``  the claim holds only in part of the scope: ``range_where_it_holds`` gives
                   that part, its ends computed (root-finding on the computed quantity)
``fails``          none of the above
=================  ==========================================================================

Where the paper names an optimum (T ≈ 2D, γ*, the optimal momentum) the claim carries
`Optimum` records: the computed optimum, the paper's value and the cost of using the paper's
value.  ``Claim.as_dict()`` is the claim's JSON object (docs/claims.md lists its keys).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import Any

from stability.claims.lexicon import Qualifier
from stability.result import output


class Grade(enum.StrEnum):
    """The graded verdict (JSON tokens); the first that applies wins (module docstring)."""

    HOLDS = "holds"
    DIRECTION_ONLY = "direction_only"
    PARTIAL_RANGE = "partial_range"
    FAILS = "fails"


@dataclass(frozen=True)
class Size:
    """The measured size a claim's wording refers to (or, without a size word, the measured
    size of the effect): ``value`` in ``unit``, what it ``measures``, and the ``qualifier``
    (the size word, None when the wording gives none)."""

    value: float = output("the measured size", "see unit")
    unit: str = output("unit of value (e.g. '%' for a relative change, '× D')")
    measures: str = output("what value is: the quantity, and at which point of the scope")
    qualifier: Qualifier | None = output(
        "the size word of the wording (None/null: none)", default=None
    )

    @property
    def met(self) -> bool | None:
        """Whether the value satisfies the qualifier (None without a qualifier)."""
        return None if self.qualifier is None else self.qualifier.admits(self.value)

    def as_dict(self) -> dict[str, Any]:
        """``{"value", "unit", "qualifier"}`` (the qualifier as text, e.g. "≈ 2")."""
        qualifier = None if self.qualifier is None else str(self.qualifier)
        return {"value": _number(self.value), "unit": self.unit, "qualifier": qualifier}

    def reading(self) -> dict[str, Any]:
        """Which words were read as a size, what they were taken to mean, and the outcome."""
        return {
            "measures": self.measures,
            "qualifier_means": None if self.qualifier is None else self.qualifier.meaning,
            "met": self.met,
        }


@dataclass(frozen=True)
class Range:
    """An interval of one parameter: ``{"parameter", "from", "to"}`` in JSON."""

    parameter: str = output("the parameter (a CLI flag name, e.g. 'lr', 'momentum', 'tau')")
    low: float = output("lower end (JSON 'from')", "unit of the parameter")
    high: float = output("upper end (JSON 'to')", "unit of the parameter")

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise ValueError(f"range of {self.parameter}: from {self.low} > to {self.high}")

    def as_dict(self) -> dict[str, Any]:
        return {"parameter": self.parameter, "from": _number(self.low), "to": _number(self.high)}


@dataclass(frozen=True)
class Optimum:
    """An optimum the paper names, against the computed one.

    ``objective`` is minimised (``lower_is_better``, e.g. the half-life) or maximised (the max
    stable lr); ``cost`` is the relative loss of using the paper's value instead of the
    computed optimum, in %: half-life at the paper's value / at the optimum − 1, or
    1 − max lr at the paper's value / at the optimum.
    """

    parameter: str = output("the optimised parameter")
    setting: str = output("where the optimum is computed (the other parameters)")
    computed: float = output("the computed optimum", "unit of the parameter")
    paper: float = output("the paper's value", "unit of the parameter")
    objective: str = output("what is optimised (e.g. 'half-life (steps)')")
    at_computed: float = output("objective at the computed optimum", "unit of the objective")
    at_paper: float = output("objective at the paper's value", "unit of the objective")
    lower_is_better: bool = output("True if the objective is minimised")

    @property
    def cost(self) -> float:
        """Relative cost of the paper's value, in % (≥ 0 when the optimum is one)."""
        ratio = self.at_paper / self.at_computed
        return 100.0 * (ratio - 1.0 if self.lower_is_better else 1.0 - ratio)

    def as_dict(self) -> dict[str, Any]:
        unit = "% longer" if self.lower_is_better else "% smaller"
        return {
            "parameter": self.parameter,
            "setting": self.setting,
            "computed": _number(self.computed),
            "paper": _number(self.paper),
            "objective": self.objective,
            "at_computed": _number(self.at_computed),
            "at_paper": _number(self.at_paper),
            "lower_is_better": self.lower_is_better,
            "cost": {"value": _number(self.cost), "unit": f"{unit} {self.objective}"},
        }


@dataclass(frozen=True)
class Claim:
    """One checked claim of a paper, split into direction, size and range, with its grade.

    Build it with the measured facts; the grade follows (`Claim.grade`): ``direction_holds``
    says whether the direction holds at every point of the scope; ``range_where_it_holds`` is
    the part of the scope where the whole claim (direction and size) holds when it does not
    hold throughout (grades ``partial_range`` and ``direction_only``), None when it holds
    throughout or nowhere.
    """

    id: str = output("stable identifier (kebab-case)")
    source: str = output("paper, figure / equation / section")
    statement: str = output("the claim exactly as checked: the paper's words, grids, parameters")
    direction: str = output("what the claim asserts, stripped of its size")
    scope: str = output("the range of parameters the claim speaks about, in words")
    direction_holds: bool = output("whether the direction holds at every point of the scope")
    size: Size | None = output(
        "the measured size (None/null where no size is meaningful)", default=None
    )
    range_where_it_holds: Range | None = output(
        "the part of the scope where the whole claim (direction and size) holds, when it does "
        "not hold throughout; None/null when it holds throughout or nowhere",
        default=None,
    )
    optima: tuple[Optimum, ...] = output(
        "optima the paper names, against the computed ones", default=()
    )
    numbers: dict[str, Any] = output(
        "the numbers behind the verdict (JSON-ready)", default_factory=dict
    )

    def __post_init__(self) -> None:
        if self.grade is Grade.HOLDS and self.range_where_it_holds is not None:
            raise ValueError(f"claim {self.id} holds throughout: it has no partial range")

    @property
    def grade(self) -> Grade:
        """The graded verdict; the first that applies wins (module docstring)."""
        if self.direction_holds:
            size_missed = self.size is not None and self.size.met is False
            return Grade.DIRECTION_ONLY if size_missed else Grade.HOLDS
        return Grade.FAILS if self.range_where_it_holds is None else Grade.PARTIAL_RANGE

    @property
    def holds(self) -> bool:
        """True exactly for the grade ``holds``."""
        return self.grade is Grade.HOLDS

    def as_dict(self) -> dict[str, Any]:
        """The claim's JSON object (keys documented in docs/claims.md)."""
        return {
            "id": self.id,
            "source": self.source,
            "statement": self.statement,
            "direction": self.direction,
            "scope": self.scope,
            "direction_holds": self.direction_holds,
            "holds": self.holds,
            "grade": self.grade.value,
            "size": None if self.size is None else self.size.as_dict(),
            "size_reading": None if self.size is None else self.size.reading(),
            "range_where_it_holds": (
                None if self.range_where_it_holds is None else self.range_where_it_holds.as_dict()
            ),
            "optima": [o.as_dict() for o in self.optima],
            "summary": self.summary(),
            "numbers": self.numbers,
        }

    def summary(self) -> str:
        """The verdict in one line: grade, size (with its word and outcome), range, optima."""
        parts = [self.grade.value]
        if self.size is not None:
            parts.append(f"size {describe_size(self.size)}")
        if self.range_where_it_holds is not None:
            parts.append(f"holds for {describe_range(self.range_where_it_holds)}")
        for o in self.optima:
            parts.append(
                f"optimum {o.parameter} = {o.computed:.4g} vs paper {o.paper:.4g} "
                f"({o.setting}): cost {o.cost:.3g} %"
            )
        return "; ".join(parts)

    @classmethod
    def schema(cls) -> list[dict[str, str]]:
        """The fields with meaning and unit (docs/claims.md's key table)."""
        return field_docs(cls)


DERIVED_KEYS: dict[str, tuple[str, str]] = {
    "holds": ("", "true exactly for the grade holds"),
    "grade": ("", "holds, direction_only, partial_range or fails: the first that applies"),
    "size_reading": ("", "how the size was read (null without a size)"),
    "size_reading.measures": ("", "what size.value is: the quantity, at which point"),
    "size_reading.qualifier_means": ("", "what the size word is taken to mean (the lexicon)"),
    "size_reading.met": ("", "whether size.value satisfies the word (null without a word)"),
    "summary": ("", "the verdict in one line"),
    "optima[].cost": ("", "the relative cost of the paper's value: {value, unit}"),
    "optima[].cost.value": ("%", "at_paper/at_computed − 1 (minimised) or 1 − that ratio"),
    "optima[].cost.unit": ("", "'% longer <objective>' or '% smaller <objective>'"),
    "range_where_it_holds.from": ("unit of the parameter", "lower end"),
    "range_where_it_holds.to": ("unit of the parameter", "upper end"),
}
"""Docs of the JSON keys that are not dataclass fields (`Claim.as_dict`)."""


def field_docs(cls) -> list[dict[str, str]]:
    """``{"name", "unit", "doc"}`` of each field of one of this module's dataclasses."""
    return [
        {"name": f.name, "unit": f.metadata["unit"], "doc": f.metadata["doc"]} for f in fields(cls)
    ]


def describe_size(size: Size) -> str:
    """ "-38.2 % (slightly: not met)" — the value, its unit, the word and the outcome."""
    text = f"{size.value:.4g} {size.unit}"
    if size.qualifier is not None:
        text += f" ({size.qualifier}: {'met' if size.met else 'not met'})"
    return text


def describe_range(part: Range) -> str:
    """ "lr ∈ [0.02258, 0.2]"."""
    return f"{part.parameter} ∈ [{part.low:.4g}, {part.high:.4g}]"


def _number(x: float) -> float | None:
    """A float for JSON (None for NaN/inf)."""
    x = float(x)
    return x if math.isfinite(x) else None


def relative_change(new: Any, old: Any) -> Any:
    """(new − old)/old in %."""
    return 100.0 * (new / old - 1.0)


def intervals(x, mask) -> list[tuple[float, float]]:
    """Maximal runs of True in ``mask`` over the sorted sample points ``x``, as (first, last)."""
    runs, start = [], None
    for i, flag in enumerate(mask):
        if flag and start is None:
            start = i
        if not flag and start is not None:
            runs.append((float(x[start]), float(x[i - 1])))
            start = None
    if start is not None:
        runs.append((float(x[start]), float(x[len(mask) - 1])))
    return runs
