"""What every public function returns: a frozen value whose attributes are the JSON keys.

A result type is a frozen dataclass deriving from `Result` whose fields are declared with
`output` (a one-line meaning and a unit), so that one definition gives

* the Python attributes (``st.max_lr("sgd", tau=10).max_lr``),
* the ``--json`` object of the command (`Result.to_json`: ``schema_version`` first, then the
  fields in order; NaN and infinities as null, arrays as lists),
* the documented schema (`Result.schema`: name, type, unit, meaning), from which the docs'
  JSON reference is generated.

``SCHEMA_VERSION`` changes whenever a key of any result is removed or changes meaning (adding
a key does not change it).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar

from stability.files import strict_json

SCHEMA_VERSION = 1
"""Version of the JSON objects the commands print (the ``schema_version`` key)."""


def output(doc: str, unit: str = "", **kwargs: Any) -> Any:
    """A result field with its meaning and unit (``""``: dimensionless or not a number)."""
    return dataclasses.field(metadata={"doc": doc, "unit": unit}, **kwargs)


@dataclasses.dataclass(frozen=True)
class SchemaEntry:
    """One JSON key of a result: ``name``, Python ``type`` (as text), ``unit``, ``doc``."""

    name: str
    type: str
    unit: str
    doc: str


@dataclasses.dataclass(frozen=True)
class Result:
    """Base of the public results (frozen; attributes = the command's JSON keys)."""

    schema_version: ClassVar[int] = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        """The command's ``--json`` object: ``schema_version``, then every field (strict JSON)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"schema_version": SCHEMA_VERSION, **strict_json(_plain(values))}

    @classmethod
    def schema(cls) -> tuple[SchemaEntry, ...]:
        """The JSON keys with type, unit and meaning (``schema_version`` first)."""
        hints = typing.get_type_hints(cls)
        entries = [SchemaEntry("schema_version", "int", "", "version of this JSON layout")]
        for f in dataclasses.fields(cls):
            if "doc" not in f.metadata:
                raise TypeError(f"{cls.__name__}.{f.name} is not declared with output(...)")
            kind = hints[f.name]
            text = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
            entries.append(SchemaEntry(f.name, str(text), f.metadata["unit"], f.metadata["doc"]))
        return tuple(entries)


def _plain(x: Any) -> Any:
    """Nested results as dicts (without their own schema_version), tuples as lists."""
    if isinstance(x, Result):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, complex):
        return [x.real, x.imag]
    return x
