"""CLI commands, one module each: ``register(subparsers)`` adds the parser, whose
``run(args)`` calls the public function named ``API`` (`stability.api`) and returns its result
(its ``to_json()`` is the ``--json`` object) and ``report(result)`` writes the text; ``EXAMPLES``
are two command lines shown in ``--help`` (and run by the tests).  Heavy libraries are
imported only when a command runs."""

from stability.cli.commands import (
    bounds,
    claims,
    coupled,
    halflife,
    heatmap,
    max_lr,
    net,
    noise,
    poly,
    radius,
    repro,
    rules,
    sweep,
    t1_audit,
    tradeoff,
    train,
    validate,
)

COMMANDS = (
    rules,
    poly,
    radius,
    max_lr,
    halflife,
    heatmap,
    repro,
    bounds,
    claims,
    t1_audit,
    train,
    validate,
    coupled,
    noise,
    tradeoff,
    sweep,
    net,
)
