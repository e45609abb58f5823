"""The stationary preconditioner of real Adam on minibatches (``net noise --precond-from
stationary``, `stability.nets.stationary_adam`).

Oracles independent of the code under test: the stationary second moment of frozen-P Adam with
per-parameter delays from hand-written state matrices on dense per-sample Hessians
(``torch.func.hessian``) and gradients, solved as one Kronecker linear system; the mean square
of the minibatch gradient it implies, formed densely in weight space; and real Adam runs of the
simulator, whose v̂ keeps adapting.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_nets_noise import LINEAR, _per_sample, _tiny  # noqa: E402

import stability as st  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.pipeline import pipeline  # noqa: E402

FAST = {"lyapunov_steps": 300, "lyapunov_runs": 4, "steps": 20}


def _per_sample_gradients(net) -> np.ndarray:
    w = net.w_star.detach()
    return np.stack(
        [
            torch.func.grad(lambda u, i=i: net.loss(u, torch.tensor([i])))(w).numpy()
            for i in range(net.samples)
        ]
    )


def _frozen_adam(H, lr, beta1, taus, wd):
    """Frozen-P Adam at P = 1 (whitened) with per-parameter delays τ_c (weight stashing):
    m_{t+1} = β1·m_t + (1 − β1)·(H·u_t + ξ), u_t[c] = x_{t−τ_c}[c],
    x_{t+1} = (1 − lr·wd)·x_t − lr·m_{t+1}; state z = (x_t, …, x_{t−τmax}, m_t).
    Returns (A, U, B): z' = A z + B ξ, u = U z."""
    p, s = H.shape[0], max(taus) + 1
    N = p * s + p
    U = np.zeros((p, N))
    for c, tau in enumerate(taus):
        U[c, tau * p + c] = 1.0
    m_row = (1 - beta1) * H @ U
    m_row[:, p * s :] += beta1 * np.eye(p)
    A = np.zeros((N, N))
    A[:p, :p] = (1 - lr * wd) * np.eye(p)
    A[:p] -= lr * m_row
    for lag in range(1, s):
        A[lag * p : (lag + 1) * p, (lag - 1) * p : lag * p] = np.eye(p)
    A[p * s :] = m_row
    B = np.zeros((N, p))
    B[:p], B[p * s :] = -lr * (1 - beta1) * np.eye(p), (1 - beta1) * np.eye(p)
    return A, U, B


def _dense_fixed_point_map(Hs, G, v, *, lr, beta1, taus, wd, batch, eps=1e-8):
    """(F(v), floor): with P = 1/(√v + ε), the stationary E[zzᵀ] of the frozen-P recursion
    under B-of-n sampling (E[A(H_B) S A(H_B)ᵀ] by the finite-population mixture; offsets
    p·PΣ_ξ; E z = 0 so no cross term), and from it diag E[g_B g_Bᵀ] at the forward weights in
    weight space, and ½ tr(H E[(w − w*)(w − w*)ᵀ])."""
    n, p = G.shape
    f = (n - batch) / (batch * (n - 1))
    s = 1.0 / np.sqrt(np.sqrt(v) + eps)
    Hw = s[None, :, None] * Hs * s[None, None, :]
    Gc = G - G.mean(axis=0)
    noise = Gc.T @ Gc / n
    systems = [_frozen_adam(H, lr, beta1, taus, wd) for H in Hw]
    A_bar, U, B = _frozen_adam(Hw.mean(axis=0), lr, beta1, taus, wd)
    mix = (1 - f) * np.kron(A_bar, A_bar) + f * sum(np.kron(a, a) for a, _, _ in systems) / n
    inject = f * B @ (s[:, None] * noise * s[None, :]) @ B.T
    N = A_bar.shape[0]
    S = np.linalg.solve(np.eye(N * N) - mix, inject.ravel()).reshape(N, N)
    X = s[:, None] * (U @ S @ U.T) * s[None, :]  # forward weights, weight space
    W = s[:, None] * S[:p, :p] * s[None, :]  # current weights
    H = Hs.mean(axis=0)
    square = (1 - f) * H @ X @ H + f * (np.einsum("iab,bc,icd->ad", Hs, X, Hs) / n + noise)
    return np.diag(square).copy(), 0.5 * float(np.sum(H * W))


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    net = problem_from_dict(_tiny(), stages=2)
    return net, _per_sample(net), _per_sample_gradients(net)


@pytest.mark.parametrize(
    "stages, wd, lr",
    [(dict(tau=0), 0.0, 0.1), (dict(tau=1), 2.0, 0.1), (dict(pipeline=("pipemare", 2)), 0.0, 0.05)],
)
def test_the_stationary_v_hat_is_the_mean_square_gradient_of_its_own_stationary_run(
    tiny, stages, wd, lr, monkeypatch
):
    """k = p: v̂ = F(v̂) for the dense map (to 1e-5, the iteration stops at 1e-6), and net
    noise's floor and P are the dense ones at that v̂.  The v̂ checked is the one net noise
    solved and used (its call of `stationary_preconditioner` recorded, not repeated)."""
    import stability.nets.stationary_adam as stationary_adam

    net, Hs, G = tiny
    if "pipeline" in stages:
        stages = dict(pipeline=pipeline(*stages["pipeline"]))
    params = dict(beta1=0.9, weight_decay=wd)
    solved, solve = [], stationary_adam.stationary_preconditioner

    def recorded(*args, **kwargs):  # net noise's own solve, kept for the dense check
        solved.append(solve(*args, **kwargs))
        return solved[-1]

    monkeypatch.setattr(stationary_adam, "stationary_preconditioner", recorded)
    r = st.net_noise(net, "adam", batch=8, k=net.dim, lr=lr, precond_from="stationary",
                     **params, **stages, **FAST)  # fmt: skip
    [pre] = solved
    v = pre.exp_avg_sq.numpy()
    taus = np.repeat(r.stage_taus, r.stage_sizes)
    F, floor = _dense_fixed_point_map(Hs, G, v, lr=lr, beta1=0.9, taus=taus, wd=wd, batch=8)
    assert v == pytest.approx(F, rel=1e-5)
    assert r.floor == pytest.approx(floor, rel=1e-5)
    P = 1 / (np.sqrt(v) + 1e-8)
    assert [r.preconditioner[key] for key in ("min", "median", "max")] == pytest.approx(
        [P.min(), np.median(P), P.max()], rel=1e-9
    )
    noise = (60 - 8) / (8 * 59) * G.var(axis=0)  # p·Var_i ∇ℓ_i(w*): the weights standing still
    assert np.all(v > noise)  # the run's own fluctuation adds to the minibatch noise at w*
    assert r.preconditioner["stationary"]["noise_share_median"] == pytest.approx(
        np.median(noise / v), rel=1e-4
    )


def test_real_adam_settles_at_the_predicted_stationary_floor_and_v_hat_on_a_linear_model():
    """At this lr the minibatch noise alone gives a P without a stationary state (the solver
    starts from 4ⁿ × it); the fixed point predicts the floor that real Adam, continuing v̂ from
    it, keeps, and v̂ stays.  The almost-sure bracket the measurement also takes is not what
    this test reads: its pairs are the fewest and shortest allowed (2 of 100 steps)."""
    r = st.net_noise(LINEAR, "adam", beta1=0.5, batch=16, k=11, tau=1, lr=0.05, steps=1000,
                     at=[0, 10, 100, 1000], measure=True, runs=64, pairs=2, pair_steps=100,
                     lyapunov_steps=500, lyapunov_runs=8, precond_from="stationary")  # fmt: skip
    for measured in (r.measured, r.measured_real):
        mean, se = measured["floor"]
        assert abs(mean - r.floor) <= max(0.05 * r.floor, 3 * se), (measured, r.floor)
    assert r.measured_real["v_hat_ratio"] == pytest.approx(1.0, abs=0.05)
    assert r.measured_real["blowup_fraction"] == 0
    assert any("stationary" in note for note in r.notes)


def test_stationary_needs_net_noise_an_lr_sampling_noise_and_the_hessian(capsys):
    from stability.cli.main import main

    noise = ["net", "noise", "--problem", LINEAR, "--rule", "adam", "--precond-from", "stationary"]
    for argv, word in (
        ([*noise, "--batch", "16"], "--lr"),
        ([*noise, "--batch", "442", "--lr", "0.01"], "--batch"),
        ([*noise, "--batch", "16", "--lr", "0.01", "--curvature", "ggn"], "--curvature"),
        (["net", "max-lr", "--problem", LINEAR, "--rule", "adam", "--tau", "1",
          "--precond-from", "stationary"], "net noise"),
    ):  # fmt: skip
        assert main(argv) == 2
        text = capsys.readouterr().err.strip()
        assert len(text.splitlines()) == 1 and word in text, text


def test_the_fixed_point_iteration_solves_a_known_map_and_refuses_one_without_a_fixed_point():
    """`fixed_point` on two maps of known answer. F(v) = n + c/√v decreases in v, as the
    fluctuation does, with the fixed point v = n + c/√v (solved here by bisection): found to
    the tolerance in few steps. A map that jumps over its only candidate (F = 4n below 2n, n
    above) has none: refused naming k once 30 steps have not come within 10 %, with F called
    once a step (not the 60 of the full budget: 6 min on an 800-parameter model)."""
    from scipy.optimize import brentq

    from stability.nets.stationary_adam import STALLED_AFTER, TOLERANCE, fixed_point

    noise, c = np.array([1.0, 0.5, 2.0, 0.0]), np.array([3.0, 0.1, 10.0, 1.0])
    v, steps = fixed_point(lambda v: noise + c / np.sqrt(v), noise + 1e-3, lr=0.1, k=4)
    exact = [
        brentq(lambda x, n=n, a=a: x - n - a / np.sqrt(x), 1e-6, 1e3)
        for n, a in zip(noise, c, strict=True)
    ]
    assert steps < STALLED_AFTER and np.allclose(v, exact, rtol=10 * TOLERANCE)

    calls = []

    def jumping(v):
        calls.append(1)
        return noise[:3] * np.where(v < 2 * noise[:3], 4.0, 1.0)

    with pytest.raises(ValueError, match=r"^k: the stationary v̂ did not converge in 30 "):
        fixed_point(jumping, noise[:3], lr=0.1, k=4)
    assert len(calls) == STALLED_AFTER + 1
