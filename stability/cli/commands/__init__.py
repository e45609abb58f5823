"""CLI commands, one module each: ``register(subparsers)`` adds the parser, whose
``run(args) -> dict`` computes the JSON result (imports heavy libraries only when run)."""

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
