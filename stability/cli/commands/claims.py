"""``stability claims``: the papers' stability claims, each with its verdict and the numbers."""

from __future__ import annotations

from stability.cli.args import add_output_arguments


def register(sub) -> None:
    p = sub.add_parser(
        "claims",
        help="check the papers' stability claims (PipeMare Lemmas 2-3, Figs. 6/10/16; Kosson)",
        description="Checks each claim numerically and prints whether it holds, the statement "
        "exactly as checked (grids, parameters) and the numbers behind the verdict.  The full "
        "grids take about a minute; --quick uses coarser ones.",
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
    from stability.claims import check_claims

    claims = check_claims(args.claim, quick=args.quick)
    return {
        "claims": [c.as_dict() for c in claims],
        "all_hold": all(c.holds for c in claims),
        "quick": bool(args.quick),
    }


def report(result: dict) -> str:
    lines = []
    for c in result["claims"]:
        lines.append(f"{'holds ' if c['holds'] else 'FAILS '} {c['id']}  [{c['source']}]")
        lines.append(f"       {c['statement']}")
        for key, value in c["numbers"].items():
            lines.append(f"       {key}: {value}")
    return "\n".join(lines)
