"""Names of a package imported on first use (PEP 562), so that importing the package is cheap.

``__getattr__, __dir__ = lazy_names(__name__, {"RULES": "stability.rules.registry", ...})``
in a package's ``__init__`` makes ``package.RULES`` (and ``from package import RULES``) import
its home module the first time and keep the value in the package's namespace.  ``__dir__``
lists the package's public names once each, without the modules it imported to build itself.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(
    package: str,
    homes: dict[str, str],
    wrap: Callable[[str, Any], Any] = lambda name, value: value,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose public names live in ``homes``
    (name → module); ``wrap(name, value)`` gives the value the package keeps (default: the
    home's own)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(home)
        except ModuleNotFoundError as err:  # an optional extra (torch, dask): say what installs it
            from stability.extras import extra_of, missing_extra

            if extra_of(err.name) is None:
                raise
            raise missing_extra(err.name) from None
        value = wrap(name, getattr(module, name))
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        namespace = vars(sys.modules[package])
        dunders = {n for n in namespace if n.startswith("__") and n.endswith("__")}
        return sorted(dunders | set(homes))

    return __getattr__, __dir__


__all__ = ["lazy_names"]
