"""CLI commands, one module each: ``register(subparsers)`` adds the parser, whose
``run(args) -> dict`` computes the JSON result (imports heavy libraries only when run)."""

from stability.commands import (
    bounds,
    claims,
    max_lr,
    poly,
    radius,
    rules,
)

COMMANDS = (
    rules,
    poly,
    radius,
    max_lr,
    bounds,
    claims,
)
