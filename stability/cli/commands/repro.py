"""``stability repro NAME|--all [--quick]``: run the paper reproductions in ``paper_repro/``.

Each script runs in its own process with this interpreter and writes ``<out-dir>/<name>.png``
and ``<name>.json`` (`stability.api.repro`); the report lists the files written and every
claim's verdict.
"""

from __future__ import annotations

from stability.api.repro import REPRO_DIR, available
from stability.cli.args import add_command, add_output_arguments, output_dir_arg

API = "repro"
EXAMPLES = ("repro --list", "repro pipemare_table1 --quick --out-dir quick-figures")


def register(sub) -> None:
    p = add_command(
        sub,
        "repro",
        usage="NAME ... | --all | --list [--quick] [--out-dir DIR] [--json]",
        help="run the paper reproductions (figures/<name>.png and .json)",
        description="Run reproduction scripts of paper_repro/ by NAME (or --all); each writes "
        "<out-dir>/<name>.png and <name>.json with the numbers, the paper's claims and "
        "whether they hold.  --list shows the names.",
        examples=EXAMPLES,
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


def run(args):
    from stability.api.repro import repro
    from stability.cli.progress import progress_bar

    with progress_bar("repro", json=args.json) as progress:
        return repro(
            args.names,
            all=args.all,
            quick=args.quick,
            out_dir=args.out_dir,
            list_only=args.list,
            progress=progress,
        )


def report(result) -> str:
    if not result.results:
        return "\n".join(result.available)
    lines = []
    for r in result.results:
        verdict = "holds" if r.holds else "DOES NOT HOLD"
        lines.append(f"{r.name}: {verdict} ({r.seconds:.1f} s)")
        lines += [f"  wrote {r.png}", f"  wrote {r.json}"]
        for c in r.claims:
            lines.append(f"  {'holds' if c['holds'] else 'FAILS':<6} {c['claim']}")
    verdict = "every claim holds" if result.all_hold else "not every claim holds"
    lines.append(f"{len(result.results)} reproductions in {result.out_dir}: {verdict}")
    return "\n".join(lines)


__all__ = ["REPRO_DIR", "available", "register"]
