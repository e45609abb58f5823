"""stability: stability analysis of delayed-gradient (pipeline-parallel) training dynamics.

``import stability as st`` gives one function per command, the rule by name and its
parameters as keywords (the CLI flags in snake case); results are frozen values whose
attributes are the command's JSON keys (``result.to_json()`` is the ``--json`` object)::

    >>> import stability as st
    >>> st.max_lr("sgd", tau=10).max_lr  # doctest: +ELLIPSIS
    0.14946018717284...

Names are imported on first use, so ``import stability`` stays fast; each lives in its home
module (listed in `_HOMES`), where its docstring cites the equations it implements.

Four public functions share their name with a subpackage (``st.rules`` and `stability.rules`,
``st.claims``, ``st.coupled``, ``st.noise``; `_SHADOWED`): the attribute of the package is the
function.  The import system binds a subpackage to its parent's attribute once, when it is first
imported; those subpackages are imported here (their ``__init__`` modules are lazy or empty, so
this costs nothing) and their attributes handed back to the functions, so that no later import
can shadow them.  Their contents are
imported by full name (``from stability.rules.registry import RULES``).
"""

from __future__ import annotations

from importlib import import_module as _import_module
from os.path import dirname as _dirname
from os.path import isdir as _isdir
from os.path import join as _join

from stability.lazy import lazy_names as _lazy_names
from stability.version import __version__ as __version__

_FUNCTIONS: dict[str, tuple[str, ...]] = {
    # module of stability.api → its public names: the function(s), then the result types
    "rules": ("rules", "describe", "Rules", "RuleInfo", "ParamInfo"),
    "poly": ("poly", "Poly"),
    "radius": ("radius", "Radius", "PipelineRadius"),
    "max_lr": ("max_lr", "MaxLr", "PipelineMaxLr"),
    "bounds": ("bounds", "BoundReport"),
    "halflife": ("halflife", "HalfLife", "PipelineHalfLife"),
    "heatmap": ("heatmap", "Heatmap", "Axis"),
    "train": ("train", "Training", "train_runs", "TrainRun"),
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
    "Pipeline": "stability.pipeline",
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

_RECORDING = {names[0] for names in _FUNCTIONS.values()} | {
    "describe", "noise", "tradeoff", "net_curvature", "net_max_lr", "net_train"
}  # fmt: skip
"""The public functions that return a `stability.result.Result`: their warnings are recorded
on it (``result.warnings``, the CLI's ``warnings`` key) instead of printed."""


def _record(name: str, value: object) -> object:
    """A public function returning a `stability.result.Result` records its warnings on it."""
    if name not in _RECORDING:
        return value
    return _import_module("stability.result").recording_warnings(value)


__getattr__, __dir__ = _lazy_names(__name__, _HOMES, wrap=_record)

_SHADOWED = tuple(n for n in _HOMES if _isdir(_join(_dirname(__file__), n)))
"""Public functions named like a subpackage (module doc): the functions keep these names."""

for _name in _SHADOWED:
    _import_module(f"{__name__}.{_name}")
    del globals()[_name]
del _name
