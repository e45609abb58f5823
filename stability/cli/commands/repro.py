"""``stability repro NAME|--all [--quick]``: run the paper reproductions in ``paper_repro/``.

Each script runs in its own process with this interpreter (``MPLBACKEND=Agg``) and writes
``<out-dir>/<name>.png`` and ``<name>.json``; the result lists the files and every claim's
verdict.  A new reproduction is one new script in ``paper_repro/``: it is found by name.
"""

from __future__ import annotations

from pathlib import Path

from stability.cli.args import add_output_arguments, output_dir_arg

REPRO_DIR = Path(__file__).resolve().parents[3] / "paper_repro"


def available() -> list[str]:
    """The reproduction scripts (``paper_repro/*.py`` not starting with ``_``), by name."""
    if not REPRO_DIR.is_dir():
        raise ValueError(f"no paper_repro/ directory at {REPRO_DIR} (run from a source checkout)")
    return sorted(p.stem for p in REPRO_DIR.glob("*.py") if not p.stem.startswith("_"))


def register(sub) -> None:
    p = sub.add_parser(
        "repro",
        help="run the paper reproductions (figures/<name>.png and .json)",
        description="Run reproduction scripts of paper_repro/ by NAME (or --all); each writes "
        "<out-dir>/<name>.png and <name>.json with the numbers, the paper's claims and "
        "whether they hold.  --list shows the names.",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="scripts to run")
    p.add_argument("--all", action="store_true", help="run every script")
    p.add_argument("--list", action="store_true", help="list the scripts and exit")
    p.add_argument("--quick", action="store_true", help="coarse grids (seconds per script)")
    p.add_argument(
        "--out-dir",
        type=output_dir_arg("--out-dir"),
        default=None,
        help="default: the repo's figures/",
    )
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args) -> dict:
    names = available()
    if args.list:
        return {"available": names, "results": []}
    if args.all == bool(args.names):
        raise ValueError("give script NAMEs or --all (not both); --list shows the names")
    chosen = names if args.all else args.names
    for name in chosen:
        if name not in names:
            raise ValueError(f"unknown reproduction {name!r}; available: {', '.join(names)}")
    out_dir = (args.out_dir or REPRO_DIR.parent / "figures").resolve()
    results = [_run_one(name, out_dir, args.quick) for name in chosen]
    return {
        "out_dir": str(out_dir),
        "quick": bool(args.quick),
        "all_hold": all(r["holds"] for r in results),
        "results": results,
    }


def _run_one(name: str, out_dir: Path, quick: bool) -> dict:
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
    return {
        "name": name,
        "png": str(out_dir / f"{name}.png"),
        "json": str(out_dir / f"{name}.json"),
        "holds": record["holds"],
        "claims": [{"claim": c["claim"], "holds": c["holds"]} for c in record["claims"]],
        "seconds": round(time.perf_counter() - start, 2),
    }


def report(result: dict) -> str:
    if not result["results"]:
        return "\n".join(result.get("available", []))
    lines = []
    for r in result["results"]:
        verdict = "holds" if r["holds"] else "DOES NOT HOLD"
        lines.append(f"{r['name']:<16} {verdict:<14} {r['seconds']:6.1f} s  {r['png']}")
    lines.append(f"files in {result['out_dir']}")
    return "\n".join(lines)
