"""``stability bounds RULE``: the exact max lr next to PipeMare's closed-form bound (Lemma 1-3)."""

from __future__ import annotations

from stability.cli.args import add_output_arguments, add_rule_arguments, rule_values


def register(sub) -> None:
    p = sub.add_parser(
        "bounds",
        help="exact max lr vs PipeMare Lemma 1 / 2 / 3 (sgd, momentum, discrepancy)",
        description="The exact maximal stable step size of RULE (boundary locus, mpmath-refined) "
        "and the PipeMare lemma that bounds it: Lemma 1 for sgd (and momentum 0), Lemma 3 for "
        "momentum in (0, 1], Lemma 2 for discrepancy with delta > 0, tau_fwd > tau_bkwd and no "
        "momentum.  ratio = max_lr / bound: 1 for Lemma 1 (exact), <= 1 for Lemmas 2-3.",
    )
    add_rule_arguments(p)
    add_output_arguments(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from stability.analysis.bounds import bound_report

    r = bound_report(args.rule, **rule_values(args))
    return {
        "rule": r.rule,
        "max_lr": r.max_lr,
        "bound": r.bound,
        "lemma": r.lemma,
        "ratio": r.ratio,
        "source": r.source,
        "crossing_angle": r.crossing_angle,
    }
