"""stability.nets part 2: backpropagation with inconsistent weights (``--backward current``),
the network's discrepancy sensitivity H_b, and the edge-of-stability reading.

Independent references: torch autograd (consistent weights), backpropagation written out by
hand in numpy (inconsistent and recomputed weights), closed-form H_f, H_b, H_r of a linear
network driven through the coupled system's own composed step (the matrix form of PipeMare's
quadratic model, eq. 5 and App. D.1), dense Hessians, and the scalar max lr of
`stability.analysis.boundary`.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stability.analysis.boundary import max_lr  # noqa: E402
from stability.cli.main import main  # noqa: E402
from stability.coupled.system import CoupledSystem, composed_step  # noqa: E402
from stability.nets import inconsistent  # noqa: E402
from stability.nets.curvature import dense_hessian, top_eigenpair  # noqa: E402
from stability.nets.inconsistent import inconsistent_gradient, stage_units  # noqa: E402
from stability.nets.prediction import net_rules  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.nets.public import net_train  # noqa: E402
from stability.nets.sensitivity import discrepancy_jacobian  # noqa: E402
from stability.nets.sharpness import coupled_edge, edge_summary  # noqa: E402
from stability.nets.simulator import simulate  # noqa: E402
from stability.rules.registry import build_rule  # noqa: E402

nn = torch.nn


def net_pipeline(stages, schedule=None, *, tau=None, backward="stashed", tau_bkwd=None):
    """The per-stage delays (`stability.pipeline.Pipeline.from_options`, networks' defaults)."""
    from stability.pipeline import Pipeline

    return Pipeline.from_options(schedule, tau=tau, stages=stages, backward=backward,
                                 tau_bkwd=tau_bkwd, default="pipemare")  # fmt: skip


def _mse(out, y):
    return 0.5 * ((out - y) ** 2).sum(dim=1).mean()


def _staged(model, X, Y, stages):
    """The problem with explicit ``stages`` (lists of parameter names)."""
    return problem_from_dict({"model": model, "loss": _mse, "inputs": X, "targets": Y,
                              "stages": stages})  # fmt: skip


def _problem(model, X, Y, stages=None, **extra):
    return problem_from_dict({"model": model, "loss": _mse, "inputs": X, "targets": Y, **extra},
                             stages=stages)  # fmt: skip


def _cnn():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
        nn.LayerNorm(48, elementwise_affine=False), nn.Linear(48, 8), nn.Tanh(), nn.Linear(8, 3),
    )  # fmt: skip
    g = torch.Generator().manual_seed(1)
    X = torch.randn(20, 1, 8, 8, generator=g, dtype=torch.float64)
    Y = torch.randn(20, 3, generator=g, dtype=torch.float64)
    return _problem(model, X, Y, stages=3)


# -- the inconsistent gradient ----------------------------------------------------------------


class _Tied(torch.nn.Module):
    """A language-model head sharing the embedding's matrix (``tied``), or its own copy."""

    def __init__(self, tied):
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.mix, self.out = nn.Embedding(10, 6), nn.Linear(6, 6), nn.Linear(6, 10)
        if tied:
            self.out.weight = self.emb.weight
        else:
            self.out.weight = nn.Parameter(self.emb.weight.detach().clone())

    def forward(self, ids):
        return self.out(torch.tanh(self.mix(self.emb(ids).mean(1))))


@pytest.mark.parametrize("granularity", ["layer", "stage"])
def test_a_tied_weight_takes_its_backward_value_in_every_layer_that_uses_it(granularity):
    """An output layer tying the embedding's matrix knows it under another name
    (``out.weight``): it took the model's stored value for its backward weight (the gradient
    with u_bkwd = u_fwd off by 0.17 of 0.55), and stage granularity crashed (KeyError).  The
    tied model's gradient is the untied twin's, its two copies given the same values, summed
    over the copies."""
    g = torch.Generator().manual_seed(0)
    ids, y = torch.randint(0, 10, (32, 5), generator=g), torch.randint(0, 10, (32,), generator=g)
    head = ["mix.weight", "mix.bias", "out.bias"]
    tied, untied = (
        problem_from_dict({"model": _Tied(t).double(), "loss": nn.CrossEntropyLoss(),
                           "inputs": ids, "targets": y,
                           "stages": [["emb.weight"], head if t else [*head, "out.weight"]]})
        for t in (True, False)
    )  # fmt: skip
    assert tied.names == ("emb.weight", "mix.weight", "mix.bias", "out.bias")

    def as_untied(w):
        named = tied.params(w)
        return torch.cat([(named["emb.weight"] if n == "out.weight" else named[n]).reshape(-1)
                          for n in untied.names])  # fmt: skip

    w_f = tied.w_star + 0.3 * torch.randn(tied.dim, dtype=torch.float64, generator=g)
    w_b = w_f + 0.3 * torch.randn(tied.dim, dtype=torch.float64, generator=g)
    same = inconsistent_gradient(tied, w_f, w_f, granularity=granularity)
    assert torch.allclose(same, tied.gradient(w_f), rtol=0, atol=1e-13)
    got = tied.params(inconsistent_gradient(tied, w_f, w_b, granularity=granularity))
    twin = untied.params(
        inconsistent_gradient(untied, as_untied(w_f), as_untied(w_b), granularity=granularity)
    )
    assert torch.allclose(got["emb.weight"], twin["emb.weight"] + twin["out.weight"], atol=1e-13)
    for n in head:
        assert torch.allclose(got[n], twin[n], rtol=0, atol=1e-13)
    assert float((got["emb.weight"] - twin["emb.weight"]).abs().max()) > 1e-3  # the head's part


class _Pinn(nn.Module):
    """A physics-informed network: its output is u and du/dx (torch.func in forward)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.u = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x):
        du = torch.func.vmap(torch.func.grad(lambda s: self.u(s[None])[0, 0]))(x)
        return torch.cat([self.u(x), du], 1)


def test_a_forward_pass_that_differentiates_in_its_inputs_is_refused_backward_current(capsys):
    """The rebuilt backward pass detaches each layer's activations, and a forward pass that
    differentiates with respect to its inputs sees them: the PINN's du/dx lost its dependence
    on the weights, its rebuilt gradient with the forward weights everywhere was off by the
    size of the gradient (1.0 on a 25-parameter PINN), and --backward current answered from it
    without a word (max lr 0.429 against 0.421 stashed).
    The consistent case is checked before a run or a prediction uses the rebuild: refused in
    one line naming --backward; weight stashing answers."""
    x = torch.linspace(0, 1, 32, dtype=torch.float64)[:, None]
    loss = lambda o, y: ((o[:, 1:] - y) ** 2).mean()  # noqa: E731
    net = problem_from_dict({"model": _Pinn().double(), "inputs": x, "targets": torch.cos(x),
                             "loss": loss}, stages=2)  # fmt: skip
    w = net.w_star
    exact = net.gradient(w)
    off = float((inconsistent_gradient(net, w, w) - exact).abs().max() / exact.abs().max())
    assert off > 0.5  # what the rebuild gives
    with pytest.raises(ValueError, match=rf"^backward: .* off autograd's gradient by {off:.2g} "):
        inconsistent.check_rebuild(net)
    with pytest.raises(ValueError, match=r"^backward: "):
        simulate(net, net_rules("sgd", {}, net_pipeline(2, tau=1, backward="current")), [0.01],
                 steps=2, backward="current")  # fmt: skip
    with pytest.raises(ValueError, match=r"^backward: "):
        discrepancy_jacobian(net, w, np.eye(net.dim)[:, :1])
    assert net_train(net, "sgd", lr=0.01, steps=3, tau=1).diverged is False


def test_consistent_weights_give_the_autograd_gradient():
    net = _cnn()
    w = net.w_star + 0.1 * torch.randn(net.dim, dtype=torch.float64)
    g = net.gradient(w)
    scale = float(g.abs().max())
    assert float((inconsistent_gradient(net, w, w) - g).abs().max()) <= 1e-12 * scale
    assert float((inconsistent_gradient(net, w, w, w) - g).abs().max()) <= 1e-12 * scale
    # the simulator with --backward current and consistent delays runs the same trajectory
    pipe = net_pipeline(3, tau=2)
    stashed = simulate(net, net_rules("sgd", {}, pipe), [0.05], steps=15)
    same = net_pipeline(3, tau=2, backward="current", tau_bkwd=2)
    current = simulate(net, net_rules("discrepancy", {}, same), [0.05], steps=15,
                       backward="current")  # fmt: skip
    assert np.abs(current.final_weights - stashed.final_weights).max() <= 1e-12


def test_a_parametrized_linear_layer_takes_the_general_construction():
    """A weight-normed ``Linear`` holds ``parametrizations.weight.original0/1`` (g, v), not
    ``weight``: the bilinear shortcut ended in "internal error: KeyError: 'weight'". It takes
    the general expression, which is autograd's gradient when the weights agree and otherwise
    the backward pass of the plain twin (a ``Linear`` holding W = g·v/‖v‖) carried to (g, v)
    by the parametrization's Jacobian at the backward weights; torch's vmap speed notice is
    not a warning of the result."""
    from torch.nn.utils.parametrizations import weight_norm

    torch.manual_seed(0)
    model = nn.Sequential(weight_norm(nn.Linear(4, 5)), nn.Tanh(), nn.Linear(5, 2)).double()
    twin = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2)).double()
    gen = torch.Generator().manual_seed(2)
    X = torch.randn(12, 4, generator=gen, dtype=torch.float64)
    Y = torch.randn(12, 2, generator=gen, dtype=torch.float64)
    net, plain = _problem(model, X, Y, stages=2), _problem(twin, X, Y, stages=2)
    assert net.names[:3] == ("0.bias", "0.parametrizations.weight.original0",
                             "0.parametrizations.weight.original1")  # fmt: skip
    assert plain.names[:2] == ("0.weight", "0.bias")

    def effective(g, v):
        return g * v / v.norm(dim=1, keepdim=True)

    def as_twin(u):
        b, g, v, rest = torch.split(u, [5, 5, 20, 12])
        return torch.cat([effective(g.reshape(5, 1), v.reshape(5, 4)).reshape(-1), b, rest])

    uf, ub = (net.w_star + 0.2 * torch.randn(net.dim, dtype=torch.float64) for _ in range(2))
    expected = net.gradient(uf)
    same = inconsistent_gradient(net, uf, uf)
    assert float((same - expected).abs().max()) <= 1e-12 * float(expected.abs().max())

    got = inconsistent_gradient(net, uf, ub)
    by_twin = inconsistent_gradient(plain, as_twin(uf), as_twin(ub))
    _, g_b, v_b, _ = torch.split(ub, [5, 5, 20, 12])
    _, pullback = torch.func.vjp(effective, g_b.reshape(5, 1), v_b.reshape(5, 4))
    dg, dv = pullback(by_twin[:20].reshape(5, 4))
    want = torch.cat([by_twin[20:25], dg.reshape(-1), dv.reshape(-1), by_twin[25:]])
    assert float((got - want).abs().max()) <= 1e-12 * float(want.abs().max())
    assert float((got - expected).abs().max()) > 1e-3  # the backward weights matter
    result = net_train(net, "sgd", tau=1, lr=0.01, steps=10, backward="current")
    assert not any("performance drop" in line for line in result.warnings)


HAND_SHAPES = [(5, 4), (3, 5), (2, 3)]
"""The weight matrices of the 4 → 5 → 3 → 2 MLP `_hand_mlp` backpropagates through."""


def _hand_weights(w):
    """The flat vector ``w`` as the matrices of `HAND_SHAPES`."""
    parts = np.split(w, np.cumsum([a * b for a, b in HAND_SHAPES])[:-1])
    return [part.reshape(shape) for part, shape in zip(parts, HAND_SHAPES, strict=True)]


def _hand_mlp(X, Y, Wf, Wb, Wr):
    """Backpropagation of 0.5·mean‖W3 tanh(W2 tanh(W1 x))‖²-loss written out: output and error
    from the forward weights, input-gradients with the backward weights, activations (for
    the weight gradients and tanh') from the recompute weights."""

    def acts(W):
        z1 = X @ W[0].T
        h1 = np.tanh(z1)
        z2 = h1 @ W[1].T
        h2 = np.tanh(z2)
        return h1, h2, h2 @ W[2].T

    _, _, out = acts(Wf)
    h1, h2, _ = acts(Wr)
    E = (out - Y) / len(X)
    d2 = (E @ Wb[2]) * (1 - h2**2)
    d1 = (d2 @ Wb[1]) * (1 - h1**2)
    return [d1.T @ X, d2.T @ h1, E.T @ h2]


def test_inconsistent_gradient_equals_backpropagation_by_hand():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5, bias=False), nn.Tanh(), nn.Linear(5, 3, bias=False),
                          nn.Tanh(), nn.Linear(3, 2, bias=False))  # fmt: skip
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((12, 4)), rng.standard_normal((12, 2))
    net = _problem(model, torch.tensor(X), torch.tensor(Y), stages=3)
    uf, ub, ur = (net.w_star + 0.3 * torch.randn(net.dim, dtype=torch.float64) for _ in range(3))
    Wf, Wb, Wr = (_hand_weights(u.numpy()) for u in (uf, ub, ur))
    got = inconsistent_gradient(net, uf, ub, ur).numpy()
    want = np.concatenate([m.ravel() for m in _hand_mlp(X, Y, Wf, Wb, Wr)])
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()
    got2 = inconsistent_gradient(net, uf, ub).numpy()
    want2 = np.concatenate([m.ravel() for m in _hand_mlp(X, Y, Wf, Wb, Wf)])
    assert np.abs(got2 - want2).max() <= 1e-12 * np.abs(want2).max()
    assert np.abs(got - got2).max() > 1e-3  # the recompute weights matter


def test_a_float32_models_backward_jacobian_is_evaluated_in_float64():
    """H_b·v by central differences of the rebuilt gradient: in float32 their rounding
    (ε₃₂·|g|/1e-5 ~ 1 %) swamped Δ (an outsider's four float32 models: Δ₁ 0.07–0.36 for
    10⁻⁷–10⁻³).  They run on the float64 copy: equal to the same differences of the
    hand-written backpropagation in float64 numpy (the float32 weights and data converted
    exactly) to 1e-7."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5, bias=False), nn.Tanh(), nn.Linear(5, 3, bias=False),
                          nn.Tanh(), nn.Linear(3, 2, bias=False)).float()  # fmt: skip
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((12, 4)).astype(np.float32), rng.standard_normal((12, 2))
    net = _problem(model, torch.tensor(X), torch.tensor(Y, dtype=torch.float32), stages=3)
    assert net.dtype == torch.float32

    def hand_gradient(w_fwd, w_bkwd):
        Wf, Wb = _hand_weights(w_fwd), _hand_weights(w_bkwd)
        y = Y.astype(np.float32).astype(np.float64)
        return np.concatenate([m.ravel() for m in _hand_mlp(X.astype(np.float64), y, Wf, Wb, Wf)])

    w = net.w_star.double().numpy()
    V = rng.standard_normal((net.dim, 3))
    V /= np.linalg.norm(V, axis=0)
    h = 1e-6
    want = np.stack(
        [(hand_gradient(w, w + h * v) - hand_gradient(w, w - h * v)) / (2 * h) for v in V.T], 1
    )
    got = discrepancy_jacobian(net, net.w_star, V)
    assert np.abs(got - want).max() <= 1e-7 * np.abs(want).max()


def test_stage_granularity_is_the_bilinear_construction_where_each_stage_is_one_layer():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3), nn.Tanh(), nn.Linear(3, 2))
    X, Y = torch.randn(12, 4, dtype=torch.float64), torch.randn(12, 2, dtype=torch.float64)
    stages = [[f"{i}.weight", f"{i}.bias"] for i in (0, 2, 4)]
    net = _staged(model.double(), X, Y, stages)
    assert [n for n, _ in stage_units(net.model, net.stage_names)] == ["0", "2", "4"]
    us = [net.w_star + 0.3 * torch.randn(net.dim, dtype=torch.float64) for _ in range(3)]
    for args in (us[:2], us):
        layer = inconsistent_gradient(net, *args)  # the bilinear expression on every Linear
        stage = inconsistent_gradient(net, *args, granularity="stage")
        assert float((stage - layer).abs().max()) <= 1e-14 * float(layer.abs().max())


def _stage_chain_by_hand(units, names, params_f, params_b, X, Y, loss):
    """Backpropagation through ``units`` = [(parameter prefixes, function(a, params))] in
    order, each unit's vector-Jacobian product at its forward input with the backward weights
    (``torch.func.vjp``); residual units (``"residual"`` in the name) add their input."""
    acts = [X]
    with torch.no_grad():
        for prefixes, fn in units:
            own = {n: t for n, t in params_f.items() if n.startswith(prefixes)}
            acts.append(fn(acts[-1], own))
    out = acts[-1].clone().requires_grad_()
    cot = torch.autograd.grad(loss(out, Y), out)[0]
    grads = {}
    for (prefixes, fn), a in reversed(list(zip(units, acts[:-1], strict=True))):
        own = {n: t for n, t in params_b.items() if n.startswith(prefixes)}
        _, pullback = torch.func.vjp(fn, a, own)
        cot, g = pullback(cot)
        grads.update(g)
    return torch.cat([grads[n].reshape(-1) for n in names])


def test_stage_granularity_differentiates_each_stage_function_at_its_input():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 5), nn.GELU(), nn.LayerNorm(5),
                          nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2)).double()  # fmt: skip
    X, Y = torch.randn(20, 3, dtype=torch.float64), torch.randn(20, 2, dtype=torch.float64)
    stages = [["0.weight", "0.bias", "2.weight", "2.bias"], ["4.weight", "4.bias", "5.weight",
              "5.bias"], ["7.weight", "7.bias"]]  # fmt: skip
    net = _staged(model, X, Y, stages)
    found = stage_units(net.model, net.stage_names)
    assert [sorted(dict(m.named_parameters())) for _, m in found] == [
        ["0.bias", "0.weight", "2.bias", "2.weight"], ["4.bias", "4.weight", "5.bias",
        "5.weight"], ["bias", "weight"]]  # fmt: skip

    def segment(indices):
        def fn(a, params):
            for i in indices:
                own = {n.split(".", 1)[1]: t for n, t in params.items() if n.startswith(f"{i}.")}
                a = torch.func.functional_call(model[i], own, (a,))
            return a

        return tuple(f"{i}." for i in indices), fn

    units = [segment(range(0, 3)), segment(range(3, 6)), segment(range(6, 8))]
    uf, ub = (net.w_star + 0.3 * torch.randn(net.dim, dtype=torch.float64) for _ in range(2))
    want = _stage_chain_by_hand(units, net.names, net.params(uf), net.params(ub), X, Y, _mse)
    got = inconsistent_gradient(net, uf, ub, granularity="stage")
    assert float((got - want).abs().max()) <= 1e-12 * float(want.abs().max())
    layer = inconsistent_gradient(net, uf, ub)
    assert float((got - layer).abs().max()) > 1e-3 * float(want.abs().max())  # not the layers'
    same = inconsistent_gradient(net, uf, uf, granularity="stage")
    assert float((same - net.gradient(uf)).abs().max()) <= 1e-12 * float(want.abs().max())


class _Blocks(nn.Module):
    """A position parameter on the model, residual blocks in a ModuleList (stage units)."""

    def __init__(self):
        super().__init__()
        self.inp, self.pos = nn.Linear(3, 6), nn.Parameter(0.1 * torch.randn(6))
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(6), nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 6))
            for _ in range(2)
        )
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        x = self.inp(x) + self.pos
        for block in self.blocks:
            x = x + block(x)
        return self.out(x)


def test_stage_granularity_on_blocks_with_a_parameter_of_the_model():
    torch.manual_seed(0)
    model = _Blocks().double()
    X, Y = torch.randn(16, 3, dtype=torch.float64), torch.randn(16, 2, dtype=torch.float64)
    names = [n for n, _ in model.named_parameters()]
    stages = [[n for n in names if n.startswith(("inp", "pos"))],
              [n for n in names if n.startswith("blocks.0")],
              [n for n in names if n.startswith(("blocks.1", "out"))]]  # fmt: skip
    net = _staged(model, X, Y, stages)
    found = stage_units(net.model, net.stage_names)
    assert [n for n, _ in found] == ["inp", "blocks.0", "blocks.1", "out"]  # pos: in none

    def call(name, residual=False):
        module = net.model.get_submodule(name)

        def fn(a, params):
            own = {n[len(name) + 1 :]: t for n, t in params.items()}
            y = torch.func.functional_call(module, own, (a,))
            return a + y if residual else y

        return (f"{name}.",), fn

    def inp(a, params):  # the position parameter enters additively: its forward value is exact
        own = {n[4:]: t for n, t in params.items() if n.startswith("inp.")}
        return torch.func.functional_call(net.model.inp, own, (a,)) + params["pos"]

    units = [(("inp.", "pos"), inp), call("blocks.0", True), call("blocks.1", True), call("out")]
    uf, ub = (net.w_star + 0.3 * torch.randn(net.dim, dtype=torch.float64) for _ in range(2))
    want = _stage_chain_by_hand(units, net.names, net.params(uf), net.params(ub), X, Y, _mse)
    got = inconsistent_gradient(net, uf, ub, granularity="stage")
    assert float((got - want).abs().max()) <= 1e-12 * float(want.abs().max())
    same = inconsistent_gradient(net, uf, uf, granularity="stage")
    assert float((same - net.gradient(uf)).abs().max()) <= 1e-12 * float(want.abs().max())
    # layer granularity: the model's own parameter (pos) is in no unit, its layers are units
    layers = [n for n, _ in inconsistent.units(net.model)]
    assert layers == ["inp", *(f"blocks.{i}.{j}" for i in (0, 1) for j in (0, 1, 3)), "out"]
    same = inconsistent_gradient(net, uf, uf)
    assert float((same - net.gradient(uf)).abs().max()) <= 1e-12 * float(want.abs().max())


# -- a linear network: the matrix form of the quadratic model's Δ (and Φ) ---------------------


def _linear_net():
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((15, 3)), rng.standard_normal((15, 2))
    model = nn.Sequential(nn.Linear(3, 4, bias=False), nn.Linear(4, 2, bias=False))
    with torch.no_grad():
        model[0].weight[:] = torch.tensor(rng.standard_normal((4, 3)) * 0.7)
        model[1].weight[:] = torch.tensor(rng.standard_normal((2, 4)) * 0.7)
    return _problem(model, torch.tensor(X), torch.tensor(Y), stages=2), X, Y


def _closed_form_jacobians(net, X, Y):
    """H_f, H_b, H_r of g = (∂/∂W1, ∂/∂W2) for out = X W1ᵀ W2ᵀ, written out (row-major)."""
    W1 = net.w_star[:12].numpy().reshape(4, 3)
    W2 = net.w_star[12:].numpy().reshape(2, 4)
    n = len(X)
    A = X @ W1.T
    E = (A @ W2.T - Y) / n
    p = 20
    Hf, Hb, Hr = np.zeros((p, p)), np.zeros((p, p)), np.zeros((p, p))
    for j in range(p):
        e = np.zeros(p)
        e[j] = 1.0
        d1, d2 = e[:12].reshape(4, 3), e[12:].reshape(2, 4)
        dA = X @ d1.T
        dE = (dA @ W2.T + A @ d2.T) / n
        # forward weights: the output, hence the error E
        Hf[:, j] = np.concatenate([((dE @ W2).T @ X).ravel(), (dE.T @ A).ravel()])
        # backward weights: W2_b in the input-gradient E·W2 of layer 1
        Hb[:, j] = np.concatenate([((E @ d2).T @ X).ravel(), np.zeros(8)])
        # recompute weights: the activations A of layer 2's weight gradient
        Hr[:, j] = np.concatenate([np.zeros(12), (E.T @ dA).ravel()])
    return Hf, Hb, Hr


@pytest.mark.parametrize(
    "rule, values, recomp",
    [("discrepancy", {}, None), ("t2", {"decay": 0.2}, None),
     ("recompute", {"decay": 0.2}, 1)],
)  # fmt: skip
def test_linear_network_runs_the_quadratic_models_delta_dynamics(rule, values, recomp):
    """Around a non-stationary point (tilted gradient) the simulator with --backward current
    follows x ↦ composed step of the coupled system with the closed-form H_f, H_b, H_r — the
    matrix form of PipeMare eq. 5 / App. D.1 — to O(ε) (it is exact up to the network's
    second-order terms)."""
    net, X, Y = _linear_net()
    Hf, Hb, Hr = _closed_form_jacobians(net, X, Y)
    assert np.linalg.norm(Hb) > 0.1 * np.linalg.norm(Hf)
    # the sensitivity module's H_b·v, H_r·v equal the closed forms
    V = np.random.default_rng(0).standard_normal((20, 3))
    for role, H in (("backward", Hb), ("recompute", Hr)):
        got = discrepancy_jacobian(net, net.w_star, V, role)
        assert np.abs(got - H @ V).max() <= 1e-9 * np.abs(H @ V).max()
    assert np.allclose(Hf + Hb + Hr, dense_hessian(net), atol=1e-12)
    pipe = net_pipeline(2, tau=3, backward="current", tau_bkwd=0)
    rules = net_rules(rule, values, pipe, tau_recomp=recomp)
    eps = 1e-7
    e0 = eps * torch.linspace(-1, 1, 20, dtype=torch.float64)
    lr, steps = 0.04, 30
    res = simulate(net, rules, [lr], steps=steps, w0=net.w_star + e0, tilt=True,
                   criterion="distance", backward="current")  # fmt: skip
    hessians = {"forward": Hf, "backward": Hb} if recomp is None else {
        "forward": Hf, "backward": Hb, "recompute": Hr}  # fmt: skip
    if recomp is None:
        hessians["forward"] = Hf + Hr  # activations stored from the forward pass
    system = CoupledSystem(rules, (12, 8), hessians)
    hist = []
    for entry, block in zip(system.state_layout, system.blocks, strict=True):
        hist.append({v: np.zeros((d, 1, block.stop - block.start)) for v, (_, d) in entry.items()})
        hist[-1]["w"][:] = e0.numpy()[block]
    for _ in range(steps):
        hist = composed_step(system, hist, lr)
    expected = np.concatenate([h["w"][0, 0] for h in hist])
    got = res.final_weights[0] - net.w_star.numpy()
    assert np.abs(expected).max() > 0.5 * eps
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()
    # and the Δ term matters: without H_b the dynamics differ
    no_delta = CoupledSystem(rules, (12, 8), {"forward": Hf + Hb + Hr})
    hist0 = [{v: np.zeros((d, 1, b.stop - b.start)) for v, (_, d) in entry.items()}
             for entry, b in zip(no_delta.state_layout, no_delta.blocks, strict=True)]  # fmt: skip
    for h, b in zip(hist0, no_delta.blocks, strict=True):
        h["w"][:] = e0.numpy()[b]
    for _ in range(steps):
        hist0 = composed_step(no_delta, hist0, lr)
    other = np.concatenate([h["w"][0, 0] for h in hist0])
    assert np.abs(other - expected).max() > 1e-3 * np.abs(expected).max()


# -- sharpness and the edge -----------------------------------------------------------------


def test_top_eigenpair_equals_the_dense_hessian_and_warm_starts():
    net = _cnn()
    w = net.w_star + 0.05 * torch.randn(net.dim, dtype=torch.float64)
    shifted = problem_from_dict({"model": _with_weights(net, w), "loss": _mse,
                                 "inputs": net.inputs, "targets": net.targets})  # fmt: skip
    exact = np.linalg.eigvalsh(dense_hessian(shifted))[-1]
    lam, v, hvps = top_eigenpair(net, w, tol=1e-10)
    assert abs(lam - exact) <= 1e-8 * exact
    lam2, _, warm = top_eigenpair(net, w, v, tol=1e-10)
    assert abs(lam2 - exact) <= 1e-8 * exact and warm < hvps


def _with_weights(net, w):
    import copy

    model = copy.deepcopy(net.model)
    params = dict(model.named_parameters())
    for name, value in net.params(w).items():
        with torch.no_grad():
            params[name][:] = value
    return model


@pytest.mark.parametrize("rule, params", [("sgd", {}), ("momentum", {"momentum": 0.9}),
                                          ("lwp+sc", {"momentum": 0.9})])  # fmt: skip
def test_coupled_edge_is_the_scalar_edge_with_equal_delays(rule, params):
    v1 = np.random.default_rng(0).standard_normal(30)
    v1 /= np.linalg.norm(v1)
    lr = 0.01
    for tau in (0, 2):
        rules = net_rules(rule, params, net_pipeline(3, tau=tau))
        scalar = max_lr(*build_rule(rule, tau=tau, lam=1.0, **params)).max_lr / lr
        assert coupled_edge(rules, v1, (10, 10, 10), lr) == pytest.approx(scalar, rel=1e-7)
    assert coupled_edge(net_rules("sgd", {}, net_pipeline(3, tau=0)), v1, (10, 10, 10), lr) == (
        pytest.approx(2 / lr, rel=1e-9)
    )
    # per-stage delays: v1 on one stage only gives that stage's scalar edge
    pipe = net_pipeline(3, schedule="pipemare")
    rules = net_rules(rule, params, pipe)
    for i, tau in enumerate(pipe.tau_fwd):
        v = np.zeros(30)
        v[10 * i : 10 * i + 10] = 1 / np.sqrt(10)
        scalar = max_lr(*build_rule(rule, tau=int(tau), lam=1.0, **params)).max_lr / lr
        assert coupled_edge(rules, v, (10, 10, 10), lr) == pytest.approx(scalar, rel=1e-6)


def test_edge_summary_reads_plateau_reached_and_ratio():
    samples = [(0, 5.0), (25, 9.5), (50, 12.0), (75, 10.4), (100, 9.8)]
    s = edge_summary(samples, 10.0, 100, diverged=False)
    assert s.reached and s.first_reached == 25
    assert s.plateau == pytest.approx(np.median([10.4, 9.8])) and s.edge_ratio == s.plateau / 10
    low = edge_summary([(0, 5.0), (50, 8.0), (100, 8.9)], 10.0, 100, diverged=False)
    assert not low.reached and low.plateau is None and low.edge_ratio is None
    gone = edge_summary(samples, 10.0, 100, diverged=True)
    assert gone.reached and gone.plateau is None
    # reached inside the last quarter: the approach before the first reach is not the plateau
    late = [(0, 2.0), (50, 6.0), (80, 8.0), (90, 9.4), (100, 9.6)]
    s = edge_summary(late, 10.0, 100, diverged=False)
    assert s.first_reached == 90 and s.plateau == pytest.approx(9.5)


def test_edge_summary_warns_a_run_shorter_than_the_settling_rule():
    """A run that stops before SETTLE × the step of its first reach may read the overshoot of
    the approach: the reading says so, with the steps that would read the settled level; a run
    at exactly that length, one that never reached the edge and one that diverged do not."""
    ramp = [(s, 4.0 + 0.1 * s) for s in range(0, 101, 10)]  # 0.9 × 10 first at step 50
    short = edge_summary(ramp, 10.0, 100, diverged=False)
    assert short.first_reached == 50 and short.plateau == pytest.approx(13.0)
    assert short.warning is not None and "first reached at step 50" in short.warning
    assert "steps ≥ 75)" in short.warning and "steps ≥ 125 read" in short.warning
    long = edge_summary([*ramp, (125, 10.0)], 10.0, 125, diverged=False)
    assert long.plateau is not None and long.warning is None
    assert edge_summary(ramp, 100.0, 100, diverged=False).warning is None  # not reached
    assert edge_summary(ramp, 10.0, 100, diverged=True).warning is None  # no plateau


def _mlp_problem_file(tmp_path, *, cast: str, extra: str = ""):
    """A problem file: a 3 → 6 → 6 → 2 tanh MLP on 30 seeded rows, weights and inputs ``cast``
    (e.g. ``.double()``), ``extra`` appended to the problem dict."""
    path = tmp_path / "p.py"
    path.write_text(
        "import torch\n"
        "def problem():\n"
        "    torch.manual_seed(0)\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh(), "
        f"torch.nn.Linear(6, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2)){cast}\n"
        f"    X = torch.randn(30, 3, generator=torch.Generator().manual_seed(0)){cast}\n"
        "    return {'model': m, 'loss': lambda o, y: ((o - y) ** 2).mean(), 'inputs': X,"
        f" 'targets': torch.sin(X[:, :2]){extra}}}\n"
    )
    return path


def test_net_train_sharpness_and_current_backward_json(tmp_path, capsys):
    net = _cnn()
    res = net_train(net, "sgd", lr=0.02, steps=40, tau=1, sharpness_every=20)
    assert [s for s, _ in res.sharpness] == [0, 20, 40]
    exact = np.linalg.eigvalsh(dense_hessian(net))[-1]
    assert res.sharpness[0][1] == pytest.approx(exact, rel=1e-3)
    assert res.predicted_edge == pytest.approx(1.0 / 0.02, rel=1e-9)  # 2 sin(π/6)/η at τ = 1
    assert res.reached is (max(v for _, v in res.sharpness) >= 0.9 * res.predicted_edge)
    assert res.to_json()["backward"] == "stashed"
    path = _mlp_problem_file(tmp_path, cast="")
    for extra in (["--rule", "t2", "--decay", "0.2"],
                  ["--rule", "recompute", "--decay", "0.2", "--tau-recomp", "1"]):  # fmt: skip
        code = main(["net", "train", "--problem", f"{path}:problem", "--stages", "3", "--schedule",
                     "pipemare", "--backward", "current", "--lr", "0.01", "--steps", "20",
                     "--json", *extra])  # fmt: skip
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["backward"] == "current" and not out["diverged"]
        assert out["stage_taus"] == [5, 3, 1] and out["stage_taus_bkwd"] == [0, 0, 0]
    code = main(["net", "max-lr", "--problem", f"{path}:problem", "--rule", "discrepancy",
                 "--tau", "2", "--backward", "current", "--k", "3", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["stage_taus_bkwd"] == [0] and isinstance(out["delta"], float)
    assert out["max_lr"] > 0 and 0 < out["predicted_rate"] < 1  # issue 25: predicted here too
    code = main(["net", "train", "--problem", f"{path}:problem", "--rule", "t2", "--tau", "2",
                 "--lr", "0.01", "--steps", "5"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--backward current" in err and len(err.strip().splitlines()) == 1


def test_net_max_lr_granularity_flag(tmp_path, capsys):
    stages = "[['0.weight', '0.bias', '2.weight', '2.bias'], ['4.weight', '4.bias']]"
    path = _mlp_problem_file(tmp_path, cast=".double()", extra=f", 'stages': {stages}")
    deltas = {}
    for granularity in ("layer", "stage"):
        code = main(["net", "max-lr", "--problem", f"{path}:problem", "--rule", "discrepancy",
                     "--tau", "2", "--backward", "current", "--granularity", granularity,
                     "--k", "3", "--json"])  # fmt: skip
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["max_lr"] > 0
        deltas[granularity] = out["delta"]
    assert abs(deltas["stage"] - deltas["layer"]) > 1e-6 * abs(deltas["layer"])
    code = main(["net", "max-lr", "--problem", f"{path}:problem", "--rule", "sgd", "--tau", "2",
                 "--granularity", "stage", "--k", "3"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "granularity" in err and len(err.strip().splitlines()) == 1


def test_fitting_cache_folder_defaults_to_the_user_cache(monkeypatch, tmp_path):
    from stability.nets.fitting import cache_folder

    monkeypatch.delenv("STABILITY_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_folder() == tmp_path / "stability" / "nets"
