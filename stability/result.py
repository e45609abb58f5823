"""What every public function returns: a frozen value whose attributes are the JSON keys.

A result type is a frozen dataclass deriving from `Result` whose fields are declared with
`output` (a one-line meaning and a unit), so that one definition gives

* the Python attributes (``st.max_lr("sgd", tau=10).max_lr``),
* the ``--json`` object of the command (`Result.to_json`: ``schema_version`` first, then the
  fields in order; NaN and infinities as null, arrays as lists, nested results as objects),
* the documented schema (`Result.schema`: name, JSON type, unit, meaning), from which the
  docs' JSON reference is generated (``docs/gen_reference.py``).

It sits at the foundation so that a result computed deep in the analysis (the max lr of
`stability.analysis.boundary`, the coupled analysis, ...) is itself the public value: one type
per concept, no copies.  ``SCHEMA_VERSION`` changes whenever a key of any result is removed
or changes meaning (adding a key does not change it).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import types
import typing
import warnings as _warnings
from pathlib import PurePath
from typing import Any, ClassVar

from stability.files import strict_json

SCHEMA_VERSION = 1
"""Version of the JSON objects the commands print (the ``schema_version`` key)."""


def output(doc: str, unit: str = "", *, kind: str | None = None, **kwargs: Any) -> Any:
    """A result field with its meaning and unit (``""``: dimensionless or not a number).

    ``kind`` spells the JSON type where the annotation cannot (e.g. an array's shape).
    """
    return dataclasses.field(metadata={"doc": doc, "unit": unit, "kind": kind}, **kwargs)


@dataclasses.dataclass(frozen=True)
class SchemaEntry:
    """One JSON key of a result: ``name``, JSON ``type`` (as text), ``unit``, ``doc``."""

    name: str
    type: str
    unit: str
    doc: str


@dataclasses.dataclass(frozen=True)
class Result:
    """Base of the public results (frozen; attributes = the command's JSON keys)."""

    schema_version: ClassVar[int] = SCHEMA_VERSION

    warnings: tuple[str, ...] = output(
        "what may have cost the numbers accuracy (numerical warnings: overflow, "
        "ill-conditioning), or says where they do not answer the question asked; empty: none. "
        "Third-party deprecation notices are not listed",
        default=(),
        kw_only=True,
    )

    def to_json(self) -> dict[str, Any]:
        """The command's ``--json`` object: ``schema_version``, then every field (strict JSON)."""
        return {"schema_version": SCHEMA_VERSION, **strict_json(_plain(self))}

    @classmethod
    def schema(cls) -> tuple[SchemaEntry, ...]:
        """The JSON keys with JSON type, unit and meaning (``schema_version`` first)."""
        hints = typing.get_type_hints(cls)
        entries = [SchemaEntry("schema_version", "integer", "", "version of this JSON layout")]
        for f in dataclasses.fields(cls):
            if "doc" not in f.metadata:
                raise TypeError(f"{cls.__name__}.{f.name} is not declared with output(...)")
            kind = f.metadata.get("kind") or json_type(hints[f.name])
            entries.append(SchemaEntry(f.name, kind, f.metadata["unit"], f.metadata["doc"]))
        return tuple(entries)


_JSON_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    complex: "[re, im]",
    str: "string",
    type(None): "null",
    dict: "object",
}


def json_type(hint: Any) -> str:
    """The JSON type of a field's Python annotation, e.g. ``float | None`` → ``number or null``;
    a union of elements in parentheses: ``list[float] | None`` → ``array of number or null``,
    ``list[float | None]`` → ``array of (number or null)``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(json_type(a) for a in typing.get_args(hint))
    if origin in (tuple, list) or hint in (tuple, list):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        kinds = list(dict.fromkeys(json_type(a) for a in args)) or ["any"]
        union = len(kinds) > 1 or any(
            typing.get_origin(a) in (typing.Union, types.UnionType) for a in args
        )
        return f"array of ({' or '.join(kinds)})" if union else f"array of {kinds[0]}"
    if origin is dict or hint is dict:
        return "object"
    if isinstance(hint, type) and issubclass(hint, Result):
        return f"object ({hint.__name__})"
    if hint in _JSON_NAMES:
        return _JSON_NAMES[hint]
    name = getattr(hint, "__name__", str(hint))
    return "array" if name == "ndarray" else name


def _plain(x: Any, top: bool = True) -> Any:
    """Results as dicts (nested ones without their own schema_version, and without their
    ``warnings`` when empty), tuples as lists."""
    if isinstance(x, Result):
        return {
            f.name: _plain(getattr(x, f.name), False)
            for f in dataclasses.fields(x)
            if top or f.name != "warnings" or x.warnings
        }
    if isinstance(x, dict):
        return {k: _plain(v, False) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v, False) for v in x]
    if isinstance(x, complex):
        return [x.real, x.imag]
    if isinstance(x, PurePath):
        return str(x)
    return x


# -- warnings: what bears on the numbers, recorded on the result ----------------------------

NOTICES = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ImportWarning,
           ResourceWarning, SyntaxWarning)  # fmt: skip
"""Warning categories that announce changes of an API (ours or a third party's, e.g. torch's
``torch.jit.script`` deprecation): they say nothing about the numbers, so they are dropped."""


SPEED_NOTICE = "there is a performance drop"
"""How torch's vmap begins the ``UserWarning`` that it loops over a batch where an operator
has no batching rule (``nn.MultiheadAttention``'s fused path, a weight-norm parametrization):
the values are the same, only slower."""


def bears_on_numbers(w: _warnings.WarningMessage) -> bool:
    """False for deprecation notices (`NOTICES`, or a ``UserWarning`` whose message says
    "deprecated", as torch writes some) and torch's vmap speed notice (`SPEED_NOTICE`): they
    are not results."""
    if issubclass(w.category, NOTICES):
        return False
    text = str(w.message).lower()
    return not (
        issubclass(w.category, UserWarning) and ("deprecat" in text or SPEED_NOTICE in text)
    )


def warning_lines(caught: list[_warnings.WarningMessage]) -> list[str]:
    """One line per distinct recorded warning that bears on the numbers (`bears_on_numbers`):
    ``Category: message (file:line)``, plus "the result may have lost accuracy" for numerical
    ones (RuntimeWarning: overflow, invalid value, …)."""
    out = []
    for w in caught:
        if not bears_on_numbers(w):
            continue
        text = " ".join(str(w.message).split())
        where = f"{os.path.basename(w.filename)}:{w.lineno}"
        lost = (
            "; the result may have lost accuracy" if issubclass(w.category, RuntimeWarning) else ""
        )
        out.append(f"{w.category.__name__}: {text} ({where}){lost}")
    return list(dict.fromkeys(out))


def with_warnings(result: Any, lines: Any) -> Any:
    """``result`` with ``lines`` appended to its ``warnings`` (distinct, in order); results
    that are not a `Result` are returned unchanged."""
    if not isinstance(result, Result) or not lines:
        return result
    merged = tuple(dict.fromkeys((*result.warnings, *lines)))
    return dataclasses.replace(result, warnings=merged)


def recording_warnings(function: Any) -> Any:
    """Decorate a public function: the warnings it raises that bear on the numbers are put in
    its result's ``warnings`` (as the CLI prints them) instead of being printed; notices
    (`NOTICES`) are dropped."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _warnings.catch_warnings(record=True) as caught:
            _warnings.simplefilter("always")
            result = function(*args, **kwargs)
        return with_warnings(result, warning_lines(caught))

    return wrapper
