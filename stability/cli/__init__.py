"""The ``stability`` command line: `stability.cli.main` (entry point), `stability.cli.args`
(shared argument helpers), one module per command in `stability.cli.commands`."""
