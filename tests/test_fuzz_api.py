"""The public functions under values of every type: a result or a one-line `ValueError`.

The CLI's fuzz (`tests/test_fuzz_cli.py`) only ever passes strings; a user of ``st.*`` passes
numpy scalars, arrays, lists for numbers, numbers for lists and paths.  An API fuzz of this
kind found TypeErrors, an AttributeError, a KeyError and an OSError from deep inside (issue
25's item 3 for the API): each keyword of each function here is given each odd value in turn
(the others at a small valid point).  Where a call answers, its numbers are checked elsewhere;
here it must not end in anything but a result or one line naming what is wrong.
"""

from __future__ import annotations

import numpy as np
import pytest

import stability as st

ODD = [None, "x", "", -1, 0, 2, -0.5, 0.0, float("nan"), float("inf"), 1e300, True,
       [1, 2], (3,), [], {}, np.int64(3), np.float32(0.1), np.array([0.1, 0.2]), 3.5, "3",
       object()]  # fmt: skip
"""Odd values of every type."""

NOT_A_NUMBER = ["x", "", [1, 2], [], {}, np.array([0.1, 0.2]), object()]
"""The odd values a check refuses before any work: the calls whose valid points take seconds
get only these."""

CALLS = {
    "max_lr": (st.max_lr, {"rule": "sgd", "tau": 2}, ODD),
    "max_lr pipeline": (st.max_lr, {"rule": "sgd", "pipeline": "pipemare", "stages": 3}, ODD),
    "bounds": (st.bounds, {"rule": "momentum", "tau": 2, "momentum": 0.5}, ODD),
    "poly": (st.poly, {"rule": "sgd", "tau": 2, "lr": 0.1}, ODD),
    "radius": (st.radius, {"rule": "sgd", "tau": 2, "lr": 0.1}, ODD),
    "halflife": (st.halflife, {"rule": "sgd", "tau": 2, "kappa": 10.0}, ODD),
    "describe": (st.describe, {"rule": "sgd"}, ODD),
    "t1_audit": (
        st.t1_audit,
        {
            "rule": "sgd",
            "lr_schedule": "constant:0.01",
            "anneal_steps": 10,
            "steps": 50,
            "taus": [1, 2],
        },  # fmt: skip
        ODD,
    ),
    "heatmap": (st.heatmap, {"rule": "sgd", "x": "lr:0.01:1:3", "y": "tau:0:4:3"}, ODD),
    "claims": (st.claims, {"ids": ["nesterov-equals-sc"], "quick": True}, NOT_A_NUMBER),
    "read_spec": (st.read_spec, {"path": "missing.toml"}, ODD),
    "train": (st.train, {"rule": "sgd", "lr": 0.01, "steps": 10, "tau": 1, "samples": 20}, ODD),
    "train_runs": (
        st.train_runs,
        {"rule": "sgd", "lr": [0.01, 0.02], "steps": 20, "samples": 20},
        ODD,
    ),
    "coupled": (
        st.coupled,
        {"rule": "sgd", "stages": 2, "schedule": "pipemare", "samples": 20},
        NOT_A_NUMBER,
    ),  # fmt: skip
    "tradeoff": (
        st.tradeoff,
        {"batch": 8, "tau": 1, "rules": ("sgd",), "fractions": (0.5,), "momenta": (0.0,)},
        NOT_A_NUMBER,
    ),  # fmt: skip
    "noise": (
        st.noise,
        {
            "rule": "sgd",
            "batch": 4,
            "lr": 0.01,
            "tau": 1,
            "steps": 50,
            "lyapunov_steps": 100,
            "lyapunov_runs": 2,
        },  # fmt: skip
        NOT_A_NUMBER,
    ),
    "validate": (
        st.validate,
        {"rules": ["sgd"], "taus": [1], "samples": 20, "steps": 100, "rate_steps": 100},
        NOT_A_NUMBER,
    ),
}

KEYWORDS = {
    "max_lr": ["rule", "tau", "method", "lam", "delta", "pipeline"],
    "max_lr pipeline": ["pipeline", "stages", "microbatches", "tau"],
    "bounds": ["rule", "tau", "momentum", "lam"],
    "poly": ["tau", "lr", "symbolic", "lam"],
    "radius": ["tau", "lr", "certify"],
    "halflife": ["tau", "kappa", "optimize", "pipeline"],
    "describe": ["rule"],
    "t1_audit": ["lr_schedule", "anneal_steps", "steps", "taus"],
    "heatmap": ["x", "y", "metric", "lr", "bounds", "max_lr_curve", "out", "csv"],
    "claims": ["ids", "quick"],
    "read_spec": ["path"],
    "train": ["lr", "steps", "batch", "seed", "divergence", "start", "update", "samples"],
    "train_runs": ["lr", "steps", "tau", "batch"],
    "coupled": ["stages", "schedule", "taus", "t1_power", "method", "hidden", "l2", "data"],
    "tradeoff": ["batch", "tau", "rules", "fractions", "momenta", "target", "data"],
    "noise": ["batch", "lr", "steps", "at", "sampling", "seed", "runs", "window", "data"],
    "validate": ["rules", "taus", "batch", "steps", "seeds", "samples"],
}


@pytest.mark.parametrize("name", list(CALLS))
def test_every_keyword_takes_every_odd_value_with_a_result_or_a_value_error(
    name, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # files a valid odd call writes (heatmap --out 3) land here
    function, base, values = CALLS[name]
    defects = _defects(function, base, KEYWORDS[name], values)
    assert not defects, f"{name}: " + "; ".join(defects)


def _defects(function, base: dict, keys: list, values: list) -> list[str]:
    """``function(**base)`` with each of ``keys`` set to each of ``values`` in turn: what
    ended in anything but a result or a one-line `ValueError`."""
    defects = []
    for key in keys:
        for value in values:
            try:
                function(**{**base, key: value})
            except ValueError as err:
                if "\n" in str(err):
                    defects.append(f"{key}={value!r}: a refusal of several lines: {err}")
            except Exception as err:  # noqa: BLE001 - what this test looks for
                defects.append(f"{key}={value!r}: {type(err).__name__}: {err}")
    return defects


def _net():
    """A 13-parameter MLP on 24 rows, float64 (built once per test)."""
    import torch

    from stability.nets.problem import problem_from_dict

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(24, 3, generator=g, dtype=torch.float64)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh(), torch.nn.Linear(2, 1))
    return problem_from_dict(
        {
            "model": model.double(),
            "loss": torch.nn.MSELoss(),
            "inputs": x,
            "targets": x[:, :1].sin(),
        }  # fmt: skip
    )


NET_CALLS = {
    "net_curvature": ({"k": 2}, ["k", "stages", "negative", "stage_blocks", "dtype", "device"]),
    "net_max_lr": (
        {"rule": "sgd", "tau": 2, "k": 2},
        ["rule", "tau", "k", "backward", "tau_bkwd", "schedule", "measure_steps", "dtype"],
    ),
    "net_train": (
        {"rule": "sgd", "tau": 1, "lr": 0.01, "steps": 10},
        ["lr", "steps", "batch", "seed", "divergence", "sampling", "sharpness_every", "update"],
    ),
    "net_noise": (
        {
            "rule": "sgd",
            "tau": 1,
            "lr": 0.01,
            "batch": 4,
            "k": 2,
            "steps": 50,
            "lyapunov_steps": 100,
            "lyapunov_runs": 2,
        },  # fmt: skip
        ["batch", "lr", "tau", "k", "curvature", "steps", "at", "stages"],
    ),
}


@pytest.mark.parametrize("name", list(NET_CALLS))
def test_the_net_functions_take_odd_values_with_a_result_or_a_value_error(name):
    pytest.importorskip("torch")
    net = _net()
    base, keys = NET_CALLS[name]
    defects = _defects(getattr(st, name), {"problem": net, **base}, keys, NOT_A_NUMBER)
    assert not defects, f"{name}: " + "; ".join(defects)
