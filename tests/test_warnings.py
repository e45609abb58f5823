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
        # lr·λ up to 1e450 on the grid: the coefficients overflow (λ outside [1e-150, 1e150] is
        # refused; at lr·λ ≤ 1e300 only the root-error estimate overflowed, and its points are
        # refined in mpmath: no accuracy lost, no warning)
        (["heatmap", "sgd", "--x", "lr:1e-3:1e300:5", "--y", "tau:0:3:4", "--lam", "1e150"], True),
        (
            [
                "heatmap",
                "momentum",
                "--x",
                "lr:1e-3:1e300:5",
                "--y",
                "momentum:0:0.9:4",
                "--lam",
                "1e150",
            ],
            True,
        ),
        (["heatmap", "sgd", "--x", "lr:1e-3:1e300:5", "--y", "tau:0:3:4"], False),
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
    argv = ["heatmap", "sgd", "--x", "lr:1e-3:1e300:5", "--y", "tau:0:3:4", "--lam", "1e150"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "overflow" in captured.out
