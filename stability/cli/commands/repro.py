"""``stability repro NAME|--all [--quick]``: run the paper reproductions in ``paper_repro/``.

Each script runs in its own process with this interpreter (``MPLBACKEND=Agg``) and writes
``<out-dir>/<name>.png`` and ``<name>.json``; the result lists the files and every claim's
graded verdict (``grade``, ``size``, ``range_where_it_holds``; `stability.claims.Claim`).
A new reproduction is one new script in ``paper_repro/``: it is found by name.

The scripts belong to the source checkout, not to the installed package: they are found in
``paper_repro/`` of the working directory (``--repro-dir`` elsewhere), so an installed
``stability`` (editable or not) runs a checkout's scripts from its root.  Outputs go to
``out/repro/`` of the working directory (git-ignored in the checkout); the committed
full-mode figures are rewritten only by an explicit ``--out-dir figures`` (``make figures``).
"""

from __future__ import annotations

from pathlib import Path

from stability.cli.args import add_output_arguments, output_dir_arg

DEFAULT_REPRO_DIR = Path("paper_repro")
"""Where the scripts are looked for: relative to the working directory."""
DEFAULT_OUT_DIR = Path("out") / "repro"


def available(repro_dir: Path = DEFAULT_REPRO_DIR) -> list[str]:
    """The reproduction scripts (``*.py`` not starting with ``_`` in ``repro_dir``), by name."""
    if not repro_dir.is_dir():
        raise ValueError(
            f"no {repro_dir}/ in {Path.cwd()}: the reproductions are scripts of a source "
            "checkout (run from its root, or pass --repro-dir DIR)"
        )
    return sorted(p.stem for p in repro_dir.glob("*.py") if not p.stem.startswith("_"))


def register(sub) -> None:
    p = sub.add_parser(
        "repro",
        help="run the paper reproductions (<out-dir>/<name>.png and .json)",
        description="Run reproduction scripts of paper_repro/ by NAME (or --all); each writes "
        "<out-dir>/<name>.png and <name>.json with the numbers, the paper's claims and "
        "whether they hold.  --list shows the names.  The scripts are those of the source "
        "checkout in the working directory.",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="scripts to run")
    p.add_argument("--all", action="store_true", help="run every script")
    p.add_argument("--list", action="store_true", help="list the scripts and exit")
    p.add_argument("--quick", action="store_true", help="coarse grids (seconds per script)")
    p.add_argument(
        "--out-dir",
        type=output_dir_arg("--out-dir"),
        default=DEFAULT_OUT_DIR,
        help=f"default: {DEFAULT_OUT_DIR}/ (the committed figures: --out-dir figures)",
    )
    p.add_argument(
        "--repro-dir",
        type=Path,
        default=DEFAULT_REPRO_DIR,
        help=f"the scripts (default: {DEFAULT_REPRO_DIR}/ of the working directory)",
    )
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args) -> dict:
    names = available(args.repro_dir)
    if args.list:
        return {"available": names, "results": []}
    if args.all == bool(args.names):
        raise ValueError("give script NAMEs or --all (not both); --list shows the names")
    chosen = names if args.all else args.names
    for name in chosen:
        if name not in names:
            raise ValueError(f"unknown reproduction {name!r}; available: {', '.join(names)}")
    out_dir = args.out_dir.resolve()
    results = [_run_one(args.repro_dir, name, out_dir, args.quick) for name in chosen]
    return {
        "out_dir": str(out_dir),
        "quick": bool(args.quick),
        "all_hold": all(r["holds"] for r in results),
        "results": results,
    }


def _run_one(repro_dir: Path, name: str, out_dir: Path, quick: bool) -> dict:
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
    return {
        "name": name,
        "png": str(out_dir / f"{name}.png"),
        "json": str(out_dir / f"{name}.json"),
        "holds": record["holds"],
        "claims": [
            {
                "id": c["id"],
                "holds": c["holds"],
                "grade": c["grade"],
                "size": c["size"],
                "range_where_it_holds": c["range_where_it_holds"],
            }
            for c in record["claims"]
        ],
        "seconds": round(time.perf_counter() - start, 2),
    }


def report(result: dict) -> str:
    """Per script: the verdict, each claim's grade and id, and the files written."""
    if not result["results"]:
        return "\n".join(result.get("available", []))
    lines = []
    for r in result["results"]:
        failing = sum(not c["holds"] for c in r["claims"])
        verdict = "holds" if r["holds"] else f"DOES NOT HOLD ({failing} of {len(r['claims'])})"
        lines.append(f"{r['name']:<16} {verdict:<22} {r['seconds']:6.1f} s")
        lines += [f"  {c['grade']:<15}{c['id']}" for c in r["claims"]]
        lines.append(f"  wrote {r['png']}, {Path(r['json']).name}")
    held = sum(r["holds"] for r in result["results"])
    total = len(result["results"])
    lines.append(f"{held} of {total} reproductions hold; files in {result['out_dir']}")
    return "\n".join(lines)
