"""The curvature of a run's oscillation (`stability.nets.oscillation`, issue 22): the streamed
Rayleigh quotient against a direct computation from the stored trajectory (numpy FFT-style
sums, dense Hessian), a single whitened eigenmode read as its eigenvalue, and ``net train``'s
``oscillation_curvature`` against an independent real-Adam loop with the gradient delayed."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from stability.nets.curvature import dense_hessian
from stability.nets.oscillation import BAND, OscillationProbe, oscillation_probe
from stability.nets.problem import problem_from_dict
from stability.nets.public import net_train
from stability.rules.adam import Adam
from stability.rules.registry import build_rule


def _problem(activation=None):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 5, generator=g, dtype=torch.float64)
    Y = torch.sin(X[:, :2])
    torch.manual_seed(0)
    layers = [torch.nn.Linear(5, 2)]  # least squares: a constant Hessian
    if activation is not None:
        layers = [torch.nn.Linear(5, 6), activation, torch.nn.Linear(6, 2)]
    model = torch.nn.Sequential(*layers).double()

    def loss(out, y):
        return 0.5 * ((out - y) ** 2).sum(dim=1).mean()

    return {"model": model, "loss": loss, "inputs": X, "targets": Y}


def _direct(W, s, angles, H) -> float:
    """R from the stored window W (n × p): least-squares line removed, Hann window, the
    transform at ``angles``, whitened by ``s``, H̃ = sHs."""
    n = W.shape[0]
    k = np.arange(n, dtype=float)
    A = np.stack([k, np.ones(n)], axis=1)
    X = (W - A @ np.linalg.lstsq(A, W, rcond=None)[0]) / s
    h = 0.5 - 0.5 * np.cos(2 * np.pi * k / (n - 1))
    Ht = s[:, None] * H * s[None, :]
    F = np.array([(h * np.exp(-1j * a * k)) @ X for a in angles])
    return float(np.real(np.einsum("fi,ij,fj->", F.conj(), Ht, F)) / np.sum(np.abs(F) ** 2))


def _feed(probe, W, s, first):
    for k, w in enumerate(W):
        probe.observe(first + k, torch.tensor(w), None if s is None else torch.tensor(s))


def test_probe_is_the_direct_rayleigh_quotient_and_reads_one_mode_as_its_eigenvalue():
    """A linear model (constant Hessian): two whitened eigenmodes plus a drift give the direct
    sum's R to 1e-10; one mode alone gives its eigenvalue (the drift and the line fitted to the
    mode lie along the same whitened direction) to 1e-9."""
    net = problem_from_dict(_problem(), stages=1)
    H = dense_hessian(net)
    p = H.shape[0]
    rng = np.random.default_rng(1)
    s = np.exp(rng.uniform(-1, 1, p))
    lam, V = np.linalg.eigh(s[:, None] * H * s[None, :])
    c = net.w_star.numpy()
    steps, window, angle = 400, 120, 0.4
    k = np.arange(window)[:, None]
    drift = rng.standard_normal(p) * 1e-3
    two = (
        c
        + drift * k
        + s * (1e-2 * V[:, -1] * np.cos(0.41 * k) + 3e-3 * V[:, -2] * np.cos(0.37 * k + 1.0))
    )
    probe = OscillationProbe(steps, window, angle)
    _feed(probe, two, s, steps - window + 1)
    assert probe.curvature(net) == pytest.approx(_direct(two, s, probe.angles, H), rel=1e-10)
    one = c + s * V[:, -3] * (1e-3 * k + 1e-2 * np.cos(0.45 * k))
    probe = OscillationProbe(steps, window, angle)
    _feed(probe, one, s, steps - window + 1)
    assert probe.curvature(net) == pytest.approx(lam[-3], rel=1e-9)
    short = OscillationProbe(steps, window, angle)
    _feed(short, one[:-1], s, steps - window + 1)
    assert short.curvature(net) is None


def test_probe_band_and_refusals():
    """The band is θ_c/BAND … min(BAND·θ_c, π) about the rule's crossing angle (adam τ = 2:
    0.2212 rad); no probe for unequal stage rules or a window shorter than the main lobe."""
    probe = oscillation_probe((Adam(tau=2, beta1=0.9),), (10,), 3000, 0.25)
    theta = 0.221246765
    assert probe.angles[0] == pytest.approx(theta / BAND, rel=1e-6)
    assert probe.angles[-1] == pytest.approx(theta * BAND, rel=1e-6)
    assert probe.n == 750 and probe.first == 2251
    sgd = build_rule("sgd", tau=0)[0]
    assert oscillation_probe((sgd,), (10,), 100, 0.25).angles[-1] == pytest.approx(math.pi)
    assert oscillation_probe((Adam(tau=2, beta1=0.9),), (10,), 200, 0.25) is None
    two = (Adam(tau=2, beta1=0.9), Adam(tau=1, beta1=0.9))
    assert oscillation_probe(two, (5, 5), 3000, 0.25) is None
    with pytest.raises(ValueError, match="angle"):
        OscillationProbe(100, 50, 4.0)


def _real_adam(f, w, tau, lr, steps, beta1=0.9, beta2=0.999, eps=1e-8):
    """Kingma & Ba Alg. 1 with the gradient at w_{t−1−τ}: [(w_t, P_t^{1/2})]."""
    grad = torch.func.grad(f)
    m, v, hist, out = torch.zeros_like(w), torch.zeros_like(w), [w] * (tau + 1), []
    for t in range(1, steps + 1):
        g = grad(hist[0])
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        P = 1 / ((v / (1 - beta2**t)).sqrt() + eps)
        w = w - lr * (m / (1 - beta1**t)) * P
        hist = [*hist[1:], w]
        out.append((w, P.sqrt()))
    return out


def test_net_train_oscillation_curvature_is_that_of_an_independent_adam_loop():
    """``net train --rule adam --update real --tau 2``: ``oscillation_curvature`` equals R of
    the same run made by a plain loop (stored weights, dense Hessian at their mean) to 1e-6,
    and ``oscillation_ratio`` is it over ``predicted_edge``."""
    spec = _problem(torch.nn.Tanh())
    net = problem_from_dict(spec, stages=1)
    steps, lr = 400, 0.01
    res = net_train(net, "adam", tau=2, lr=lr, steps=steps, sharpness_every=100, update="real")
    f = net.loss  # the full-batch loss of the flat weights
    run = _real_adam(f, net.w_star.clone(), 2, lr, steps)[-steps // 4 :]
    W = torch.stack([w for w, _ in run]).numpy()
    s = torch.stack([q for _, q in run]).mean(0).numpy()
    H = torch.func.hessian(f)(torch.tensor(W.mean(0))).numpy()
    probe = oscillation_probe((Adam(tau=2, beta1=0.9),), (net.dim,), steps, 0.25)
    expected = _direct(W, s, probe.angles, H)
    assert res.oscillation_curvature == pytest.approx(expected, rel=1e-6)
    assert res.oscillation_ratio == pytest.approx(expected / res.predicted_edge, rel=1e-12)
    assert res.reached
    slow = net_train(net, "adam", tau=2, lr=1e-4, steps=steps, sharpness_every=100, update="real")
    assert not slow.reached and slow.oscillation_curvature is None  # no edge, no edge oscillation
    pipe = net_train(net, "sgd", lr=0.01, steps=40, sharpness_every=20, tau=1, batch=8)
    assert pipe.oscillation_curvature is None and pipe.oscillation_ratio is None
    # minibatches: the edge printed is the full-batch one, and the protocol says so
    assert "batches of 8, predicted_edge the full-batch edge" in pipe.protocol["sharpness"]
    assert "minibatch" not in res.protocol["sharpness"]  # full batch: no such words
