"""The optional extras: the modules each one brings, and the one line that installs it.

The distribution is named ``delay-stability`` (pyproject.toml): the package index has an
unrelated project called ``stability``, so an install line naming ``stability`` would fetch
someone else's code.  The import name and the console command stay ``stability``.  The project
is installed from its checkout, so every message names the checkout's install line,
``pip install -e '.[EXTRA]'``.  The CLI prints the message of `MissingExtra` on one line (exit
code 2) and the Python API raises it: the same words on both faces.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

DISTRIBUTION = "delay-stability"
"""The distribution's name on the package index (free there; the import name is ``stability``)."""


@dataclass(frozen=True)
class Extra:
    """An optional extra of pyproject.toml: the top-level modules of it the package imports, and
    what needs them."""

    modules: tuple[str, ...]
    needed_by: str


EXTRAS: dict[str, Extra] = {
    "torch": Extra(("torch",), "stability net and st.net_*"),
    "sweep": Extra(("dask", "distributed", "xarray", "zarr"), "stability sweep and st.run_sweep"),
}


class MissingExtra(ModuleNotFoundError, ValueError):
    """An optional extra is not installed.  A `ModuleNotFoundError` (as the bare import error
    it replaces) and a `ValueError` (the CLI's bad-input class: one line on stderr, exit 2)."""


def install_line(extra: str) -> str:
    """The command that installs ``extra`` into the checkout's environment."""
    if extra not in EXTRAS:
        raise ValueError(f"extra must be one of {', '.join(EXTRAS)}, got {extra!r}")
    return f"pip install -e '.[{extra}]'"


def extra_of(module: str | None) -> str | None:
    """The extra that brings the top-level module of ``module`` (None: no extra does)."""
    top = (module or "").split(".")[0]
    return next((name for name, extra in EXTRAS.items() if top in extra.modules), None)


def missing_extra(module: str) -> MissingExtra:
    """The one-line error for a missing ``module`` of an extra, naming the extra's install line."""
    name = extra_of(module)
    if name is None:
        raise ValueError(f"module {module!r} belongs to no extra ({', '.join(EXTRAS)})")
    return MissingExtra(
        f"{EXTRAS[name].needed_by} need the [{name}] extra ({module.split('.')[0]} is not "
        f"installed): {install_line(name)} in the stability checkout",
        name=module.split(".")[0],
    )


def require(extra: str) -> None:
    """Raise `MissingExtra` unless every module of ``extra`` is importable."""
    install_line(extra)  # validates the name
    for module in EXTRAS[extra].modules:
        if importlib.util.find_spec(module) is None:
            raise missing_extra(module)
