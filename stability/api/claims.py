"""``st.claims``: the papers' stability claims, each checked, with its verdict and numbers
(``stability claims``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stability.result import Result, output


@dataclass(frozen=True)
class Claims(Result):
    """The claims checked and whether they all hold."""

    claims: tuple[dict[str, Any], ...] = output(
        "each claim: id, source, the statement as checked, grade (holds, direction_only, "
        "partial_range, fails), size, range where it holds, the numbers behind it "
        "(keys on docs/claims.md)"
    )
    all_hold: bool = output("every claim checked holds")
    quick: bool = output("checked on the coarser quick grids")
    lexicon: tuple[dict[str, str], ...] = output(
        "the size words of the claims' wording and what each was read to mean"
    )


def claims(ids: Sequence[str] | None = None, *, quick: bool = False) -> Claims:
    """Check the papers' claims ``ids`` (default: all; PipeMare Lemmas 2-3, Figs. 6/10/16;
    Kosson Sec. 3-4), each on the grids its statement names (`stability.claims`).

    >>> import stability as st
    >>> st.claims(["nesterov-equals-sc"], quick=True).all_hold
    True
    """
    from stability.api.commands import command
    from stability.claims import check_claims, lexicon_table
    from stability.options import check_given

    ids = check_given(command("claims").options, ids=ids)["ids"]
    checked = check_claims(None if ids is None else list(ids), quick=quick)
    return Claims(
        tuple(c.as_dict() for c in checked),
        all(c.holds for c in checked),
        bool(quick),
        tuple(lexicon_table()),
    )


__all__ = ["Claims", "claims"]
