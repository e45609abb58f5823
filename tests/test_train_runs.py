"""``st.train_runs``: R runs of ``st.train`` in lockstep (the sweep's ``train`` chunks run
through it).  Each run is checked against ``st.train`` alone, which builds its own problem and
rule: the same divergence step, the same losses (to the last bits the lockstep products may
round differently), for per-run delays and step sizes, minibatches, T1 and warm-up."""

from __future__ import annotations

import numpy as np
import pytest

import stability as st


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 4))
    y = X @ [1.0, -0.5, 0.3, 0.2] + 0.1 * rng.normal(size=40)
    path = tmp_path_factory.mktemp("runs") / "tiny.csv"
    np.savetxt(path, np.column_stack([y, X]), delimiter=",")
    return str(path)


@pytest.mark.parametrize(
    "shared",
    [
        {"steps": 400},
        {"steps": 400, "batch": 8, "seed": 3},
        {"steps": 300, "t1": 100},
        {"steps": 300, "batch": 10, "warmup_epochs": 2},
    ],
)
def test_each_run_is_st_train_alone(tiny_csv, shared):
    taus, lrs = [0, 2, 5, 5], [0.05, 0.2, 0.02, 0.9]
    runs = st.train_runs("momentum", tau=taus, lr=lrs, momentum=0.5, data=tiny_csv, **shared)
    outcomes = set()
    for tau, lr, run in zip(taus, lrs, runs, strict=True):
        alone = st.train("momentum", tau=tau, lr=lr, momentum=0.5, data=tiny_csv, **shared)
        assert run.diverged == alone.diverged and run.diverged_step == alone.diverged_step
        assert run.initial_loss == alone.initial_loss
        if alone.final_loss is None:
            assert run.final_loss is None
        else:
            assert run.final_loss == pytest.approx(alone.final_loss, rel=1e-12)
        outcomes.add(run.diverged)
    assert outcomes == {True, False}  # both kinds: the comparison can fail


def test_per_run_values_must_match_the_runs(tiny_csv):
    with pytest.raises(ValueError, match="tau must give one value per run"):
        st.train_runs("sgd", tau=[1, 2, 3], lr=[0.1, 0.2], data=tiny_csv, steps=10)
    with pytest.raises(ValueError, match="lr must be"):
        st.train_runs("sgd", tau=1, lr=[0.1, -1.0], data=tiny_csv, steps=10)
