"""The papers' stability claims, each checked numerically and graded: which way, how much, where.

A claim is a function returning a `Claim` (`stability.claims.claim`): the statement exactly as
checked (the papers' wording is often looser: the statement says which grid and which
parameters), split into its ``direction``, its ``size`` (read through the normative lexicon,
`stability.claims.lexicon`) and its ``scope``; the graded verdict ``grade`` (``holds``,
``direction_only``, ``partial_range`` with the computed ``range_where_it_holds``, ``fails``),
the optima the paper names against the computed ones, and ``numbers`` (JSON-ready) that show
why.  Claims never force a verdict.

`CLAIMS` lists them in the order of the papers; `check_claims` evaluates some or all
(`stability.claims.collection`; the names here are imported on first use, `stability.lazy`).  Every
claim has keyword parameters for its grids (defaults: the papers' ranges); `QUICK` holds
smaller grids for ``stability claims --quick`` and the tests, which re-check every verdict
against an independent computation (tests/test_claims.py).
"""

from stability.lazy import lazy_names as _lazy_names

_HOMES = {
    "LEXICON": "stability.claims.lexicon",
    "Claim": "stability.claims.claim",
    "Grade": "stability.claims.claim",
    "Optimum": "stability.claims.claim",
    "Qualifier": "stability.claims.lexicon",
    "Range": "stability.claims.claim",
    "Size": "stability.claims.claim",
    "check_claims": "stability.claims.collection",
    "claim_ids": "stability.claims.collection",
    "lexicon_table": "stability.claims.lexicon",
    "quick_parameters": "stability.claims.collection",
}

__getattr__, __dir__ = _lazy_names(__name__, _HOMES)

__all__ = sorted(_HOMES)
