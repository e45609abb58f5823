"""``st.repro``: run the paper reproductions of ``paper_repro/`` (``stability repro``).

Each script runs in its own process with this interpreter (``MPLBACKEND=Agg``) and writes
``<out_dir>/<name>.png`` and ``<name>.json``; the result lists the files and every claim's
verdict.  A new reproduction is one new script in ``paper_repro/``: it is found by name.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stability.result import Result, output

REPRO_DIR = Path(__file__).resolve().parents[2] / "paper_repro"


def available() -> list[str]:
    """The reproduction scripts (``paper_repro/*.py`` not starting with ``_``), by name."""
    if not REPRO_DIR.is_dir():
        raise ValueError(f"no paper_repro/ directory at {REPRO_DIR} (run from a source checkout)")
    return sorted(p.stem for p in REPRO_DIR.glob("*.py") if not p.stem.startswith("_"))


@dataclass(frozen=True)
class ReproRun(Result):
    """One reproduction: the files it wrote and its claims' verdicts."""

    name: str = output("script name (paper_repro/<name>.py)")
    png: str = output("figure written")
    json: str = output("numbers written")
    holds: bool = output("every claim of the figure holds")
    claims: tuple[dict[str, Any], ...] = output("each claim as checked and its verdict")
    seconds: float = output("wall time", "s")


@dataclass(frozen=True)
class Repro(Result):
    """The reproductions run (or, with ``list_only``, the ones available)."""

    available: tuple[str, ...] = output("every reproduction script, by name")
    out_dir: str | None = output("directory written (null: nothing run)")
    quick: bool = output("coarse grids (seconds per script)")
    all_hold: bool | None = output("every claim of every reproduction run holds")
    results: tuple[ReproRun, ...] = output("one entry per reproduction run")


def repro(
    names: Sequence[str] = (),
    *,
    all: bool = False,  # noqa: A002 - the command's flag
    quick: bool = False,
    out_dir: Any = None,
    list_only: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Repro:
    """Run the reproductions ``names`` (or ``all``) into ``out_dir`` (default ``figures/``).

    Each script recomputes one figure or table of the papers (PipeMare, Kosson) from this
    package and states whether the paper's claims hold.  ``progress(done, total)`` counts
    scripts.
    """
    known = available()
    if list_only:
        return Repro(tuple(known), None, bool(quick), None, ())
    if all == bool(names):
        raise ValueError("give script NAMEs or --all (not both); --list shows the names")
    chosen = known if all else list(names)
    for name in chosen:
        if name not in known:
            raise ValueError(f"unknown reproduction {name!r}; available: {', '.join(known)}")
    out = Path(out_dir or REPRO_DIR.parent / "figures").resolve()
    results = []
    for name in chosen:
        results.append(_run_one(name, out, quick))
        if progress is not None:
            progress(len(results), len(chosen))
    holds = builtins.all(r.holds for r in results)
    return Repro(tuple(known), str(out), bool(quick), holds, tuple(results))


def _run_one(name: str, out_dir: Path, quick: bool) -> ReproRun:
    import json
    import os
    import subprocess
    import sys
    import time

    cmd = [sys.executable, str(REPRO_DIR / f"{name}.py"), "--out-dir", str(out_dir)]
    if quick:
        cmd.append("--quick")
    start = time.perf_counter()
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"}
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"paper_repro/{name}.py failed (exit {done.returncode}): {last}")
    record = json.loads((out_dir / f"{name}.json").read_text())
    return ReproRun(
        name,
        str(out_dir / f"{name}.png"),
        str(out_dir / f"{name}.json"),
        record["holds"],
        tuple({"claim": c["claim"], "holds": c["holds"]} for c in record["claims"]),
        round(time.perf_counter() - start, 2),
    )


__all__ = ["REPRO_DIR", "Repro", "ReproRun", "available", "repro"]
