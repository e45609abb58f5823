"""``stability claims``: the papers' stability claims, each with its verdict and the numbers."""

from __future__ import annotations

from stability.cli.args import add_output_arguments


def register(sub) -> None:
    p = sub.add_parser(
        "claims",
        help="check the papers' stability claims (PipeMare Lemmas 2-3, Figs. 6/10/16; Kosson)",
        description="Checks each claim numerically and grades it (holds, direction_only, "
        "partial_range with the computed range where it holds, fails), with the statement "
        "exactly as checked (grids, parameters), the measured size its wording refers to "
        "(read through the lexicon of size words, listed in the JSON) and the numbers behind "
        "the verdict.  The full grids take about a minute; --quick uses coarser ones.",
    )
    p.add_argument(
        "--claim",
        action="append",
        metavar="ID",
        help="check only this claim (repeatable); default: all",
    )
    p.add_argument("--quick", action="store_true", help="coarser grids (same statements)")
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args) -> dict:
    from stability.claims import check_claims, lexicon_table

    claims = check_claims(args.claim, quick=args.quick)
    return {
        "claims": [c.as_dict() for c in claims],
        "all_hold": all(c.holds for c in claims),
        "quick": bool(args.quick),
        "lexicon": lexicon_table(),
    }


def report(result: dict) -> str:
    lines = []
    for c in result["claims"]:
        lines.append(f"{c['grade']:<14} {c['id']}  [{c['source']}]")
        lines.append(f"       {c['statement']}")
        lines.append(f"       verdict: {c['summary']}")
        for key, value in c["numbers"].items():
            lines.append(f"       {key}: {value}")
    return "\n".join(lines)
