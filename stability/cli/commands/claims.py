"""``stability claims``: the papers' stability claims, each with its verdict and the numbers."""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "claims"
EXAMPLES = (
    "claims --claim nesterov-equals-sc --quick",
    "claims --claim lemma3-slope --quick --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "claims",
        usage="[--claim ID ...] [--quick] [--json]",
        help="check the papers' stability claims (PipeMare Lemmas 2-3, Figs. 6/10/16; Kosson)",
        description="Checks each claim numerically and grades it (holds, direction_only, "
        "partial_range with the computed range where it holds, fails), with the statement "
        "exactly as checked (grids, parameters), the measured size its wording refers to "
        "(read through the lexicon of size words, listed in the JSON) and the numbers behind "
        "the verdict.  The full grids take about a minute; --quick uses coarser ones.",
        examples=EXAMPLES,
        report=report,
    )


def report(result) -> str:
    from stability.cli.report import value

    lines = []
    for c in result.claims:
        lines.append(f"{c['grade']:<14} {c['id']}  [{c['source']}]")
        lines.append(f"       {c['statement']}")
        lines.append(f"       verdict: {c['summary']}")
        for key, number in c["numbers"].items():
            lines.append(f"       {key}: {value(number, 6)}")
    verdict = "every paper claim holds" if result.all_hold else "not every paper claim holds"
    lines.append(f"{len(result.claims)} claims checked{' (quick grids)' * result.quick}: {verdict}")
    return "\n".join(lines)
