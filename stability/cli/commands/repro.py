"""``stability repro NAME|--all [--quick]``: run the paper reproductions in ``paper_repro/``.

Each script runs in its own process with this interpreter and writes ``<out-dir>/<name>.png``
and ``<name>.json`` (`stability.api.repro`); the report lists the files written and every
claim's graded verdict.  The scripts are those of the source checkout in the working
directory (``--repro-dir`` elsewhere); outputs go to ``out/repro/`` unless ``--out-dir``
says otherwise (``--out-dir figures`` rewrites the committed figures).
"""

from __future__ import annotations

from pathlib import Path

from stability.cli.declared import register_declared

API = "repro"
EXAMPLES = ("repro --list", "repro pipemare_table1 --quick --out-dir quick-figures")


def register(sub) -> None:
    register_declared(
        sub,
        "repro",
        usage="NAME ... | --all | --list [--quick] [--out-dir DIR] [--json]",
        help="run the paper reproductions (<out-dir>/<name>.png and .json)",
        description="Run reproduction scripts of paper_repro/ by NAME (or --all); each writes "
        "<out-dir>/<name>.png and <name>.json with the numbers, the paper's claims and "
        "whether they hold.  --list shows the names.  The scripts are those of the source "
        "checkout in the working directory.",
        examples=EXAMPLES,
        report=report,
        progress="repro",
    )


def report(result) -> str:
    if not result.results:
        return "\n".join(result.available)
    lines, failing, claims = [], 0, 0
    for r in result.results:
        short = sum(not c["holds"] for c in r.claims)
        failing, claims = failing + short, claims + len(r.claims)
        verdict = (
            "the paper's claims hold"
            if r.holds
            else f"{short} of the paper's {len(r.claims)} claims do not hold as stated"
        )
        lines.append(f"{r.name}: {verdict} ({r.seconds:.1f} s)")
        lines += [f"  {c['grade']:<15}{c['id']}" for c in r.claims]
        lines.append(f"  wrote {r.png}, {Path(r.json).name}")
    lines += [f"skipped {name}" for name in result.skipped]
    verdict = (
        "every paper claim holds"
        if result.all_hold
        else f"{failing} of the papers' {claims} claims do not hold as stated (graded in each "
        "JSON: findings about the papers; the reproductions themselves ran)"
    )
    lines.append(f"{len(result.results)} reproductions in {result.out_dir}: {verdict}")
    return "\n".join(lines)
