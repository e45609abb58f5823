"""Numerical warnings never reach stderr on success: a result that lost accuracy (overflow,
underflow) says so in its ``warnings`` field (defect 12 of issue 11)."""

from __future__ import annotations

import json

import pytest

from stability.cli.main import main

T1 = ["t1-audit", "t2", "--decay", "1", "--lr-schedule", "constant:0.1", "--taus", "1,4"]


@pytest.mark.parametrize(
    "argv, lost",
    [
        ([*T1, "--anneal-steps", "5", "--steps", "10"], False),  # max lr 0: ratio inf, exact
        (["bounds", "sgd", "--lam", "5e-324"], True),
        (["bounds", "momentum", "--lam", "1e308"], True),
        (["halflife", "sgd", "--kappa", "10", "--lam", "1e-320"], True),
    ],
)
def test_successful_commands_print_no_warning(argv, lost, capsys):
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    out = json.loads(captured.out)
    assert bool(out.get("warnings")) == lost
    if lost:
        assert all("lost accuracy" in w and "\n" not in w for w in out["warnings"])


def test_warnings_are_listed_in_the_text_report_too(capsys):
    assert main(["bounds", "sgd", "--lam", "5e-324"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "overflow" in captured.out
