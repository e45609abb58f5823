"""The measured almost-sure threshold of a network (`stability.nets.minibatch_lyapunov`).

Oracle: the textbook Benettin estimate of the top Lyapunov exponent of the linear recursion
e_{t+1} = e_t − lr·H_B·e_{t−τ}, with H_B the batch mean of dense per-sample Hessians
(``torch.func.hessian``), stepped by hand on the same batches, start and renormalisation
schedule as the simulator's offset-free runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stability.nets.lockstep import RunSetup  # noqa: E402
from stability.nets.minibatch_lyapunov import (  # noqa: E402
    EVERY,
    check_rest,
    exponents,
    measure_almost_sure,
)
from stability.nets.prediction import net_rules  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.pipeline import Pipeline  # noqa: E402
from stability.trainer.engine import BatchStreams  # noqa: E402
from tests.test_nets_noise import _per_sample, _tiny  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return problem_from_dict(_tiny(), stages=2)


def _benettin(Hs, lr, tau, batch, runs, steps, seed):
    """γ̂ per run of e_{t+1} = e_t − lr·H_B e_{t−τ}: the state (e_t, …, e_{t−τ}) renormalised
    every EVERY steps, the log growth summed after the first fifth of the steps."""
    n, p = Hs.shape[0], Hs.shape[1]
    H = Hs.mean(axis=0)
    z = np.random.default_rng([seed, 2]).standard_normal((runs, p))
    d0 = z @ H
    d0 /= np.linalg.norm(d0, axis=1, keepdims=True)
    chunks = BatchStreams(n, batch, seed, "iid", runs)
    idx = np.concatenate([chunks.take(128) for _ in range(-(-steps // 128))])
    burn, out = steps // 5, np.zeros(runs)
    for r in range(runs):
        hist = [d0[r].copy() for _ in range(tau + 1)]  # newest first
        total = 0.0
        for t in range(steps):
            new = hist[0] - lr * Hs[idx[t, r]].mean(axis=0) @ hist[tau]
            hist = [new, *hist[:-1]]
            if t % EVERY == EVERY - 1 or t == steps - 1:
                norm = np.sqrt(sum(h @ h for h in hist))
                hist = [h / norm for h in hist]
                total += np.log(norm) if t >= burn else 0.0
            if t == burn - 1:
                total = 0.0
        out[r] = total / (steps - burn)
    return out


def test_offset_free_runs_measure_the_lyapunov_exponent_of_the_linearisation(tiny):
    """The network's nonlinear runs, 1e-7 from w*, give the oracle's per-run exponents; the
    runs rest at w* (the offsets are removed) and stay within a few separations of it."""
    Hs = _per_sample(tiny)
    rules = net_rules("sgd", {}, Pipeline.from_options(tau=1, stages=2, backward="stashed"))
    lrs, runs, steps = np.array([0.3, 0.6]), 3, 200
    got = exponents(RunSetup(tiny, rules, 8, seed=5), lrs, runs=runs, steps=steps, separation=1e-7)
    for i, lr in enumerate(lrs):
        want = _benettin(Hs, lr, 1, 8, runs, steps, seed=5)
        assert got.gamma[i] == pytest.approx(want.mean(), abs=1e-7)
        assert got.se[i] == pytest.approx(want.std(ddof=1) / np.sqrt(runs), abs=1e-7)
    assert got.gamma[0] < 0 < got.gamma[1]  # the threshold lies between (as_max_lr ≈ 0.5)
    # between renormalisations a run moves at most δ₀·e^{EVERY·growth} from w*
    assert got.wander[0] < 2e-7 and got.wander[1] < 1e-7 * np.exp(EVERY * 2 * got.gamma[1])


@pytest.mark.slow
def test_bracket_of_a_network_contains_the_prediction(tiny):
    """Offset-free runs on the 9-parameter network bracket its predicted almost-sure lr.

    The prediction's exponents run 1,000 steps (not the default 4,000: 1.5 s, not 7 s; it
    lands within 1 % of the 4,000-step one, 0.3190 against 0.3160).  The measurement's first
    grid spans guess/1.1 to 1.1·guess (not 1.5): a prediction within 10 % is bracketed by the
    first round and the second resolves it to `rel_tol` (2 rounds, not 3, of the same runs and
    steps per step size); one further off moves the grid out and fails the first assert."""
    import stability as st

    r = st.net_noise(tiny, "sgd", batch=8, k=tiny.dim, tau=1, steps=10, lyapunov_steps=1000)
    rules = net_rules("sgd", {}, Pipeline.from_options(tau=1, stages=2, backward="stashed"))
    found = measure_almost_sure(RunSetup(tiny, rules, 8), r.as_max_lr, runs=16, steps=1500,
                                separation=1e-6, rel_tol=0.02, span=1.1)  # fmt: skip
    assert 0.95 * found.stable <= r.as_max_lr <= 1.05 * found.unstable
    assert found.unstable / found.stable < 1.15
    assert found.wander < 1e-5
    verdicts = [row[3] for row in found.rows]
    assert verdicts[0] == -1 and verdicts[-1] == 1


@dataclass(frozen=True)
class _Drifting:
    """Gradient descent with a second variable that copies the weights (rests at w*, not 0)."""

    variables = ("w", "c")

    def passes(self, x, lr):
        from stability.rules.base import Passes

        return Passes(x("w"), x("w"), x("w"))

    def update(self, x, g, lr):
        return {"w": x("w") - lr * g, "c": x("w")}


def test_a_rule_without_the_rest_state_is_refused(tiny):
    with pytest.raises(ValueError, match="rest"):
        check_rest(tiny, (_Drifting(), _Drifting()))
    pipe = Pipeline.from_options(tau=2, stages=2, backward="stashed")
    check_rest(tiny, net_rules("momentum", {"momentum": 0.9}, pipe))  # rests: no error
