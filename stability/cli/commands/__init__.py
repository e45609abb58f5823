"""CLI commands, one module each: ``register(subparsers)`` builds the command's parser from its
entry in the registry (`stability.api.commands`, by `stability.cli.declared.register_declared`:
flags, help texts and defaults from its option tables) with the module's words — usage, help,
description, ``EXAMPLES`` (two command lines shown in ``--help`` and run by the tests) — and
its ``report(result)`` (the text; ``to_json()`` is the ``--json`` object); ``run(args)`` calls
the public function named ``API`` (`stability.api`).  Heavy libraries are imported only when a
command runs."""

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
