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
        "each claim: id, source, the statement as checked, holds, the numbers behind it"
    )
    all_hold: bool = output("every claim checked holds")
    quick: bool = output("checked on the coarser quick grids")


def claims(ids: Sequence[str] | None = None, *, quick: bool = False) -> Claims:
    """Check the papers' claims ``ids`` (default: all; PipeMare Lemmas 2-3, Figs. 6/10/16;
    Kosson Sec. 3-4), each on the grids its statement names (`stability.claims`).

    >>> import stability as st
    >>> st.claims(["nesterov-equals-sc"], quick=True).all_hold
    True
    """
    from stability.claims import check_claims

    checked = check_claims(None if ids is None else list(ids), quick=quick)
    return Claims(tuple(c.as_dict() for c in checked), all(c.holds for c in checked), bool(quick))


__all__ = ["Claims", "claims"]
