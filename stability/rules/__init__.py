"""Update rules: immutable values with a pure step, one family per module, and a registry.

The names below are imported on first use (`stability.lazy`), so importing the package (which
`import stability` does) costs nothing.
"""

from stability.lazy import lazy_names as _lazy_names

_HOMES = {
    "History": "stability.rules.base",
    "Passes": "stability.rules.base",
    "step": "stability.rules.base",
    "DelayedMomentum": "stability.rules.delayed_momentum",
    "RULES": "stability.rules.registry",
    "build_rule": "stability.rules.registry",
    "get_spec": "stability.rules.registry",
}

__getattr__, __dir__ = _lazy_names(__name__, _HOMES)

__all__ = sorted(_HOMES)
