"""Update rules: immutable values with a pure step, one family per module, and a registry.

The names below are imported on first use (`stability.lazy`), so importing the package (which
`import stability` does) costs nothing.
"""

from stability.lazy import lazy_names as _lazy_names

_MODULES = {
    "base": ("History", "Passes", "step"),
    "delayed_momentum": ("DelayedMomentum",),
    "registry": ("RULES", "build_rule", "get_spec"),
}
_HOMES = {name: f"stability.rules.{m}" for m, names in _MODULES.items() for name in names}

__getattr__, __dir__ = _lazy_names(__name__, _HOMES)

__all__ = sorted(_HOMES)
