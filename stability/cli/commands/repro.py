"""``stability repro NAME|--all [--quick]``: run the paper reproductions in ``paper_repro/``.

Each script runs in its own process with this interpreter and writes ``<out-dir>/<name>.png``
and ``<name>.json`` (`stability.api.repro`); the report lists the files written and every
claim's graded verdict.  The scripts are those of the source checkout in the working
directory (``--repro-dir`` elsewhere); outputs go to ``out/repro/`` unless ``--out-dir``
says otherwise (``--out-dir figures`` rewrites the committed figures).
"""

from __future__ import annotations

from pathlib import Path

from stability.api.repro import DEFAULT_OUT_DIR, DEFAULT_REPRO_DIR
from stability.cli.args import add_command, add_output_arguments, output_dir_arg

API = "repro"
EXAMPLES = ("repro --list", "repro pipemare_table1 --quick --out-dir quick-figures")


def register(sub) -> None:
    p = add_command(
        sub,
        "repro",
        usage="NAME ... | --all | --list [--quick] [--out-dir DIR] [--json]",
        help="run the paper reproductions (<out-dir>/<name>.png and .json)",
        description="Run reproduction scripts of paper_repro/ by NAME (or --all); each writes "
        "<out-dir>/<name>.png and <name>.json with the numbers, the paper's claims and "
        "whether they hold.  --list shows the names.  The scripts are those of the source "
        "checkout in the working directory.",
        examples=EXAMPLES,
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


def run(args):
    from stability.api.repro import repro
    from stability.cli.progress import progress_bar

    with progress_bar("repro", json=args.json) as progress:
        return repro(
            args.names,
            all=args.all,
            quick=args.quick,
            out_dir=args.out_dir,
            repro_dir=args.repro_dir,
            list_only=args.list,
            progress=progress,
        )


def report(result) -> str:
    if not result.results:
        return "\n".join(result.available)
    lines = []
    for r in result.results:
        failing = sum(not c["holds"] for c in r.claims)
        verdict = (
            "the paper's claims hold"
            if r.holds
            else f"the paper's claim does not hold ({failing} of {len(r.claims)} claims)"
        )
        lines.append(f"{r.name}: {verdict} ({r.seconds:.1f} s)")
        lines += [f"  {c['grade']:<15}{c['id']}" for c in r.claims]
        lines.append(f"  wrote {r.png}, {Path(r.json).name}")
    lines += [f"skipped {name}" for name in result.skipped]
    verdict = "every paper claim holds" if result.all_hold else "not every paper claim holds"
    lines.append(f"{len(result.results)} reproductions in {result.out_dir}: {verdict}")
    return "\n".join(lines)
