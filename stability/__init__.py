"""stability: stability analysis of delayed-gradient (pipeline-parallel) training dynamics.

``import stability as st`` gives one function per command, the rule by name and its
parameters as keywords (the CLI flags in snake case); results are frozen values whose
attributes are the command's JSON keys::

    >>> import stability as st
    >>> st.max_lr("sgd", tau=10).max_lr  # doctest: +ELLIPSIS
    0.14946018717284...

Names are imported on first use, so ``import stability`` stays fast; each lives in its home
module (listed in `_HOMES`), where its docstring cites the equations it implements.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_HOMES: dict[str, str] = {
    "max_lr": "stability.api.max_lr",
    "MaxLr": "stability.api.max_lr",
    "noise": "stability.noise.minibatch",
    "Noise": "stability.noise.minibatch",
    "tradeoff": "stability.noise.tradeoff",
    "Tradeoff": "stability.noise.tradeoff",
    "net_curvature": "stability.nets.public",
    "NetCurvature": "stability.nets.public",
    "net_max_lr": "stability.nets.public",
    "NetMaxLr": "stability.nets.public",
    "net_train": "stability.nets.public",
    "NetTrain": "stability.nets.public",
}
"""Public name → the module that defines it."""

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'stability' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
