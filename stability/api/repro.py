"""``st.repro``: run the paper reproductions of ``paper_repro/`` (``stability repro``).

Each script runs in its own process with this interpreter (``MPLBACKEND=Agg``) and writes
``<out_dir>/<name>.png`` and ``<name>.json``; the result lists the files and every claim's
graded verdict (``grade``, ``size``, ``range_where_it_holds``; `stability.claims.Claim`).
A new reproduction is one new script in ``paper_repro/``: it is found by name.

The scripts belong to the source checkout, not to the installed package: they are found in
``paper_repro/`` of the working directory (``repro_dir`` elsewhere), so an installed
``stability`` (editable or not) runs a checkout's scripts from its root.  Outputs go to
``out/repro/`` of the working directory (git-ignored in the checkout); the committed
full-mode figures are rewritten only by an explicit ``out_dir="figures"`` (``make figures``).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stability.api.tables import REPRO_DIR, REPRO_OUT_DIR
from stability.checks import Interrupted, check_path
from stability.result import Result, output

DEFAULT_REPRO_DIR = REPRO_DIR
"""Where the scripts are looked for: relative to the working directory."""
DEFAULT_OUT_DIR = REPRO_OUT_DIR


def available(repro_dir: Path = DEFAULT_REPRO_DIR) -> list[str]:
    """The reproduction scripts (``*.py`` not starting with ``_`` in ``repro_dir``), by name."""
    repro_dir = Path(repro_dir)
    if not repro_dir.is_dir():
        raise ValueError(
            f"no {repro_dir}/ in {Path.cwd()}: the reproductions are scripts of a source "
            "checkout (run from its root, or pass --repro-dir DIR)"
        )
    return sorted(p.stem for p in repro_dir.glob("*.py") if not p.stem.startswith("_"))


def missing_requirements(repro_dir: Path, name: str) -> list[str]:
    """The optional modules a script declares in its top-level ``REQUIRES = ("torch", ...)``
    (read without running it) that are not installed."""
    import ast
    import importlib.util

    tree = ast.parse((Path(repro_dir) / f"{name}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "REQUIRES" for t in node.targets
        ):
            needed = ast.literal_eval(node.value)
            return [m for m in needed if importlib.util.find_spec(m) is None]
    return []


def _install_hint(missing: list[str]) -> str:
    """The install lines of the extras that bring the ``missing`` modules."""
    from stability.extras import extra_of, install_line

    extras = dict.fromkeys(extra_of(m) for m in missing)
    return "; ".join(install_line(e) for e in extras if e is not None) or "install them"


@dataclass(frozen=True)
class ReproRun(Result):
    """One reproduction: the files it wrote and its claims' verdicts."""

    name: str = output("script name (paper_repro/<name>.py)")
    png: str = output("figure written")
    json: str = output("numbers written")
    holds: bool = output("every claim of the figure holds")
    claims: tuple[dict[str, Any], ...] = output(
        "each claim: id, holds, grade, size, range_where_it_holds"
    )
    seconds: float = output("wall time", "s")


@dataclass(frozen=True)
class Repro(Result):
    """The reproductions run (or, with ``list_only``, the ones available)."""

    available: tuple[str, ...] = output("every reproduction script, by name")
    out_dir: str | None = output("directory written (null: nothing run)")
    quick: bool = output("coarse grids (seconds to a minute per script)")
    all_hold: bool | None = output("every claim of every reproduction run holds")
    results: tuple[ReproRun, ...] = output("one entry per reproduction run")
    skipped: tuple[str, ...] = output(
        "reproductions of --all not run: an optional dependency is not installed (which one)"
    )


def repro(
    names: Sequence[str] = (),
    *,
    all: bool = False,  # noqa: A002 - the command's flag
    quick: bool = False,
    out_dir: Any = DEFAULT_OUT_DIR,
    repro_dir: Any = DEFAULT_REPRO_DIR,
    list_only: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Repro:
    """Run the reproductions ``names`` (or ``all``) of ``repro_dir`` into ``out_dir``.

    Each script recomputes one figure or table of the papers (PipeMare, Kosson) from this
    package and states whether the paper's claims hold.  ``progress(done, total)`` counts
    scripts.
    """
    repro_dir = check_path("repro_dir", repro_dir)
    known = available(repro_dir)
    if list_only:
        return Repro(tuple(known), None, bool(quick), None, (), ())
    if all == bool(names):
        raise ValueError("give script NAMEs or --all (not both); --list shows the names")
    chosen = list(known) if all else list(names)
    for name in chosen:
        if name not in known:
            raise ValueError(f"unknown reproduction {name!r}; available: {', '.join(known)}")
    skipped = []
    for name in list(chosen):
        missing = missing_requirements(repro_dir, name)
        if missing and not all:
            raise ValueError(
                f"reproduction {name!r} needs {', '.join(missing)} ({_install_hint(missing)})"
            )
        if missing:
            chosen.remove(name)
            skipped.append(f"{name} (needs {', '.join(missing)}: {_install_hint(missing)})")
    out = Path(out_dir).resolve()
    results = []
    for name in chosen:
        try:
            results.append(_run_one(repro_dir, name, out, quick))
        except KeyboardInterrupt:
            done = ", ".join(r.name for r in results) or "none"
            raise Interrupted(
                f"{len(results)} of {len(chosen)} reproductions completed ({done}), written to "
                f"{out}; {name} was stopped before writing"
            ) from None
        if progress is not None:
            progress(len(results), len(chosen))
    holds = builtins.all(r.holds for r in results)
    return Repro(tuple(known), str(out), bool(quick), holds, tuple(results), tuple(skipped))


def _run_one(repro_dir: Path, name: str, out_dir: Path, quick: bool) -> ReproRun:
    import json
    import os
    import subprocess
    import sys
    import time

    cmd = [sys.executable, str(repro_dir / f"{name}.py"), "--out-dir", str(out_dir)]
    if quick:
        cmd.append("--quick")
    start = time.perf_counter()
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"}
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{repro_dir}/{name}.py failed (exit {done.returncode}): {last}")
    record = json.loads((out_dir / f"{name}.json").read_text())
    return ReproRun(
        name,
        str(out_dir / f"{name}.png"),
        str(out_dir / f"{name}.json"),
        record["holds"],
        tuple(
            {key: c[key] for key in ("id", "holds", "grade", "size", "range_where_it_holds")}
            for c in record["claims"]
        ),
        round(time.perf_counter() - start, 2),
    )


__all__ = ["DEFAULT_OUT_DIR", "DEFAULT_REPRO_DIR", "Repro", "ReproRun", "available", "repro"]
