"""stability: stability analysis of delayed-gradient (pipeline-parallel) training dynamics.

``import stability as st`` gives one function per command, the rule by name and its
parameters as keywords (the CLI flags in snake case); results are frozen values whose
attributes are the command's JSON keys (``result.to_json()`` is the ``--json`` object)::

    >>> import stability as st
    >>> st.max_lr("sgd", tau=10).max_lr  # doctest: +ELLIPSIS
    0.14946018717284...

Names are imported on first use, so ``import stability`` stays fast; each lives in its home
module (listed in `_HOMES`), where its docstring cites the equations it implements.

Three public functions share their name with a subpackage (``st.rules`` and `stability.rules`,
``st.claims``, ``st.coupled``): the attribute of the package is the function, and the
subpackages are imported by their full names (``from stability.rules.registry import RULES``).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from stability.version import __version__ as __version__

_FUNCTIONS: dict[str, tuple[str, ...]] = {
    # module of stability.api → its public names: the function(s), then the result types
    "rules": ("rules", "describe", "Rules", "RuleInfo", "ParamInfo"),
    "poly": ("poly", "Poly"),
    "radius": ("radius", "Radius"),
    "max_lr": ("max_lr", "MaxLr"),
    "bounds": ("bounds", "BoundReport"),
    "halflife": ("halflife", "HalfLife"),
    "heatmap": ("heatmap", "Heatmap", "Axis"),
    "train": ("train", "Training"),
    "validate": ("validate", "Validation"),
    "coupled": ("coupled", "Coupled"),
    "claims": ("claims", "Claims"),
    "t1_audit": ("t1_audit", "Audit", "UnsafeWindow"),
    "repro": ("repro", "Repro", "ReproRun"),
}

_HOMES: dict[str, str] = {
    name: f"stability.api.{module}" for module, names in _FUNCTIONS.items() for name in names
} | {
    "Result": "stability.result",
    # the rooms above the API (they use it): minibatch noise, PyTorch networks, sweeps
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
    "net_noise": "stability.nets.noise_public",
    "NetNoise": "stability.nets.noise_public",
    "run_sweep": "stability.sweep.runner",
    "SweepSummary": "stability.sweep.runner",
    "read_spec": "stability.sweep.specfile",
    "SweepSpec": "stability.sweep.specfile",
    "SweepStatus": "stability.sweep.store",
}
"""Public name → the module that defines it (or re-exports it from its home in the analysis)."""

__all__ = sorted(_HOMES)


class _Package(types.ModuleType):
    """The package module: a subpackage never takes the attribute of a public function of the
    same name (the import system records every imported subpackage on its parent)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'stability' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
