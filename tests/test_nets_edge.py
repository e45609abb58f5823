"""The sharpness tracker's Lanczos and the edge of stability without weight stashing.

Independent references: numpy's dense ``eigh`` (of autograd's dense Hessian) for the
warm-started Lanczos; PipeMare's scalar quadratic model (`stability.analysis.boundary.max_lr`,
Lemma 2 for ``discrepancy``, App. B.4 for ``t2``) at (λ = 1, Δ = Δ₁/λ₁) for the inconsistent
edge on one stage; forward-mode ``torch.func.jacfwd`` of the inconsistent gradient for Δ₁.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stability.nets.curvature import top_eigenpair  # noqa: E402
from stability.nets.inconsistent import inconsistent_gradient  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.nets.public import net_train  # noqa: E402
from stability.nets.sensitivity import scalar_discrepancy_max_lr  # noqa: E402
from stability.nets.sharpness import SharpnessTracker, warm_lanczos  # noqa: E402

nn = torch.nn


def _symmetric(n=200, seed=0):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    lam = np.concatenate([[10.0, 9.5, 9.0], rng.uniform(-3.0, 8.0, n - 3)])
    return (Q * lam) @ Q.T, Q[:, 0]


def test_warm_lanczos_finds_the_top_eigenpair_and_stops_early_when_warm():
    A, v1 = _symmetric()
    count = [0]

    def matvec(v):
        count[0] += 1
        return A @ v

    start = np.random.default_rng(1).standard_normal(A.shape[0])
    lam, v, products = warm_lanczos(matvec, start, 1e-10)
    assert products == count[0] > 20  # it restarted: the gap 10/9.5 is small
    assert lam == pytest.approx(10.0, rel=1e-12)
    assert abs(abs(v @ v1) - 1) < 1e-9
    assert np.linalg.norm(A @ v - lam * v) <= 1e-10 * lam * 1.0001
    # from a slightly rotated eigenvector it needs a handful of products, not a basis
    near = v1 + 1e-3 * np.random.default_rng(2).standard_normal(A.shape[0]) / 14
    lam2, _, warm = warm_lanczos(matvec, near, 1e-4)
    assert warm <= 5 and abs(lam2 - 10.0) <= 1e-4 * 10
    assert warm_lanczos(matvec, v1, 1e-8)[2] == 1
    assert warm_lanczos(matvec, v1, 1e-8, min_products=3)[2] == 3
    with pytest.raises(ArithmeticError, match="relative residual"):
        warm_lanczos(matvec, start, 1e-14, max_products=5)


def _mlp(stages=1, seed=0, hidden=12):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, hidden), nn.Tanh(), nn.Linear(hidden, 3))
    g = torch.Generator().manual_seed(seed + 1)
    X = torch.randn(40, 4, generator=g, dtype=torch.float64)
    Y = torch.randn(40, 3, generator=g, dtype=torch.float64)

    def loss(out, y):
        return 0.5 * ((out - y) ** 2).sum(dim=1).mean()

    return problem_from_dict({"model": model, "loss": loss, "inputs": X, "targets": Y},
                             stages=stages)  # fmt: skip


def test_tracker_agrees_with_arpack_along_a_trajectory():
    net = _mlp()  # 99 parameters: above the dense cutoff, the Lanczos path
    tracker = SharpnessTracker(net, every=1)
    w = net.w_star.clone()
    g = torch.Generator().manual_seed(3)
    for step in range(4):
        w = w + 0.05 * torch.randn(net.dim, generator=g, dtype=torch.float64)
        tracker(step + 1, w[None])
        H = torch.autograd.functional.hessian(net.loss, w).numpy()
        exact = np.linalg.eigvalsh(0.5 * (H + H.T))[-1]
        assert tracker.samples[-1] == (step + 1, pytest.approx(exact, rel=1e-7))
    assert torch.equal(tracker.point, w)


@pytest.mark.parametrize("rule", ["discrepancy", "t2"])
def test_one_stage_inconsistent_edge_is_the_scalar_lemma_2_edge(rule):
    """One stage, τ_fwd = 3, τ_bkwd = 0 from the standard initialisation (large residuals):
    predicted_edge = max_lr(rule; λ = 1, Δ = Δ₁/λ₁)/lr on the scalar quadratic model, Δ₁ by
    forward-mode differentiation, and the edge without H_b is the delayed-sgd edge."""
    net = _mlp()
    lr = 0.05
    res = net_train(net, rule, lr=lr, steps=6, tau=3, backward="current", sharpness_every=6)
    ratio = res.edge_delta
    scalar = scalar_discrepancy_max_lr(rule, {"momentum": 0.0}, 1.0, ratio, 3, 0)
    assert res.predicted_edge == pytest.approx(scalar / lr, rel=1e-7)
    no_delta = scalar_discrepancy_max_lr("sgd", {}, 1.0, 0.0, 3, 0)
    assert res.edge_without_delta == pytest.approx(no_delta / lr, rel=1e-7)
    # Δ₁ = −v₁ᵀ H_b v₁ at the last sample, H_b = ∂g(w, u_bkwd)/∂u_bkwd by jacfwd
    from stability.nets.prediction import net_rules
    from stability.nets.simulator import simulate
    from stability.pipeline import Pipeline

    pipe = Pipeline.from_options("uniform", tau=3, stages=1, backward="current")
    rules = net_rules(rule, {}, pipe)
    w = torch.as_tensor(simulate(net, rules, [lr], steps=6, backward="current").final_weights[0])
    lam, v, _ = top_eigenpair(net, w, tol=1e-12)
    J = torch.func.jacfwd(
        lambda u: inconsistent_gradient(net, w, u, differentiate=torch.func.grad)
    )(w)
    v = torch.as_tensor(v)
    assert res.sharpness[-1][1] == pytest.approx(lam, rel=1e-7)
    # the tracker's v₁ has Ritz residual 1e-4·λ₁, the reference's 1e-12·λ₁
    assert ratio == pytest.approx(float(-(v @ J @ v)) / lam, rel=1e-3)
    assert abs(ratio) > 1e-4  # not negligible here: the point is far from a minimum


def test_multi_stage_inconsistent_edge_is_the_coupled_edge_when_backward_weights_do_not_matter():
    """A single linear layer backpropagates to no earlier layer: H_b = 0 exactly, so with
    per-stage delays (weight and bias as two PipeMare stages) the inconsistent edge is the
    stashed coupled edge along the same v₁, and Δ₁ = 0."""
    from stability.nets.prediction import net_rules
    from stability.nets.sharpness import coupled_edge, inconsistent_edge
    from stability.pipeline import Pipeline

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    X = torch.randn(30, 4, generator=g, dtype=torch.float64)
    Y = torch.randn(30, 3, generator=g, dtype=torch.float64)
    net = problem_from_dict({"model": nn.Linear(4, 3), "loss": lambda o, y: ((o - y) ** 2).mean(),
                             "inputs": X, "targets": Y}, stages=2)  # fmt: skip
    w = net.w_star + 0.3
    lam, v, _ = top_eigenpair(net, w, tol=1e-12)
    pipe = Pipeline.from_options("pipemare", stages=2, backward="current")
    edge, delta = inconsistent_edge(net, net_rules("t2", {}, pipe), w, lam, v, 0.1)
    stashed = Pipeline.from_options("pipemare", stages=2, backward="stashed")
    assert abs(delta) < 1e-10  # central differences of a gradient that ignores u_bkwd
    assert edge == pytest.approx(coupled_edge(net_rules("sgd", {}, stashed), v, (12, 3), 0.1),
                                 rel=1e-7)  # fmt: skip
    assert edge != pytest.approx(coupled_edge(net_rules("sgd", {}, Pipeline.from_options(
        "uniform", tau=0, stages=2, backward="stashed")), v, (12, 3), 0.1), rel=1e-3)  # fmt: skip
