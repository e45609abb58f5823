"""``stability bounds RULE``: the exact max lr next to PipeMare's closed-form bound (Lemma 1-3)."""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "bounds"
EXAMPLES = ("bounds sgd --tau 7 --lam 2.5", "bounds momentum --tau 10 --momentum 0.9 --json")


def register(sub) -> None:
    register_declared(
        sub,
        "bounds",
        usage="RULE [rule flags] [--json]",
        help="exact max lr vs PipeMare Lemma 1 / 2 / 3 (sgd, momentum, discrepancy)",
        description="The exact maximal stable step size of RULE (boundary locus, mpmath-refined) "
        "and the PipeMare lemma that bounds it: Lemma 1 for sgd (and momentum 0), Lemma 3 for "
        "momentum in (0, 1], Lemma 2 for discrepancy with delta > 0, tau_fwd > tau_bkwd and no "
        "momentum.  ratio = max_lr / bound: 1 for Lemma 1 (exact), <= 1 for Lemmas 2-3.",
        examples=EXAMPLES,
        report=report,
    )


def report(result) -> str:
    from stability.cli.report import report as keys

    return keys(result)
