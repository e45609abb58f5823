"""Per-sample and per-run maps for models ``torch.func.vmap`` cannot batch, and for inputs of any
structure (`stability.nets.vectorize`, `stability.nets.batches`).

``nn.LSTM`` writes into its output in place inside its kernel, so vmap over samples fails
("output with shape [1, 16] doesn't match the broadcast shape [32, 1, 16]"); `net noise` on such
a model ended in an internal error, and so did inputs given as a tuple holding a dict.  The
oracle is independent of the code under test: per-sample Hessians and gradients by
``torch.autograd.functional`` one sample at a time (double backward, no vmap).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stability.nets.minibatch_moments import projected_moments  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.nets.vectorize import vectorized  # noqa: E402


class LastState(torch.nn.Module):
    """An LSTM over a sequence, a linear read-out of its last hidden state."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(1, 2, batch_first=True)
        self.out = torch.nn.Linear(2, 1)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.out(h[:, -1])


class FromDict(torch.nn.Module):
    """A small MLP that takes its inputs whole, as a dict."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)
        )

    def forward(self, batch):
        return self.net(batch["x"])


def _data(shape, n=10):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, *shape, generator=g, dtype=torch.float64)
    return x, torch.randn(n, 1, generator=g, dtype=torch.float64)


def _dense_moments(net, Q):
    """Qᵀ H_i Q and Qᵀ ∇ℓ_i per sample, by autograd one sample at a time."""
    w = net.w_star.detach().clone()
    H, g = [], []
    for i in range(net.samples):

        def loss(u, i=i):
            return net.loss(u, torch.tensor([i]))

        H.append(torch.autograd.functional.hessian(loss, w))
        g.append(torch.autograd.functional.jacobian(loss, w))
    Qt = torch.as_tensor(Q)
    return (
        np.stack([(Qt.T @ h @ Qt).numpy() for h in H]),
        np.stack([(Qt.T @ v).numpy() for v in g]),
    )


def _basis(p, m, seed=0):
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((p, m)))[0]


def test_vmap_cannot_batch_an_lstm_and_the_loop_gives_the_per_sample_numbers():
    torch.manual_seed(0)
    x, y = _data((3, 1))
    net = problem_from_dict(
        {"model": LastState().double(), "loss": torch.nn.MSELoss(), "inputs": x, "targets": y}
    )
    w = net.w_star.detach()

    def one(xi, yi):
        return torch.func.grad(net.batch_loss)(w, xi[None], yi[None])

    with pytest.raises(RuntimeError):
        torch.func.vmap(one)(x, y)
    looped = vectorized(net, one, x, y)
    assert looped.shape == (net.samples, net.dim)
    Q = _basis(net.dim, 4)
    moments = projected_moments(net, Q, batch=4)
    dense_H, dense_g = _dense_moments(net, Q)
    assert np.max(np.abs(moments.hessians - dense_H)) <= 1e-12 * max(1.0, np.max(np.abs(dense_H)))
    assert np.max(np.abs(moments.gradients - dense_g)) <= 1e-13


def test_inputs_given_whole_as_a_dict_give_the_moments_of_the_plain_tensor():
    x, y = _data((3,))
    torch.manual_seed(0)
    whole = FromDict().double()
    plain = whole.net
    loss = torch.nn.MSELoss()
    by_dict = problem_from_dict({"model": whole, "loss": loss, "inputs": ({"x": x},), "targets": y})
    by_tensor = problem_from_dict({"model": plain, "loss": loss, "inputs": x, "targets": y})
    Q = _basis(by_tensor.dim, 3)
    for curvature in ("hessian", "ggn"):
        a = projected_moments(by_dict, Q, batch=4, curvature=curvature)
        b = projected_moments(by_tensor, Q, batch=4, curvature=curvature)
        np.testing.assert_allclose(a.hessians, b.hessians, rtol=0, atol=1e-14)
        np.testing.assert_allclose(a.gradients, b.gradients, rtol=0, atol=1e-15)


class WithHidden(torch.nn.Module):
    """The MLP of `FromDict`, returning a dict: its logits and a hidden state the loss ignores."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        hidden = self.net[1](self.net[0](x))
        return {"logits": self.net[2](hidden), "hidden": hidden}


def test_a_dict_output_gives_the_gauss_newton_blocks_of_its_logits():
    """The GGN's output is every floating tensor of the model's output flattened: a hidden
    state the loss does not read adds a zero block of ∇²_o L, so the blocks equal those of the
    twin that returns the logits alone (it was "internal error: 'dict' object has no attribute
    'reshape'")."""
    x, y = _data((3,))
    torch.manual_seed(0)
    plain = FromDict().double().net
    mse = torch.nn.MSELoss()
    as_dict = problem_from_dict({"model": WithHidden(plain), "inputs": x, "targets": y,
                                 "loss": lambda out, t: mse(out["logits"], t)})  # fmt: skip
    as_tensor = problem_from_dict({"model": plain, "loss": mse, "inputs": x, "targets": y})
    Q = _basis(as_tensor.dim, 3)
    a = projected_moments(as_dict, Q, batch=4, curvature="ggn")
    b = projected_moments(as_tensor, Q, batch=4, curvature="ggn")
    np.testing.assert_allclose(a.hessians, b.hessians, rtol=0, atol=1e-14)


def test_the_runs_losses_over_a_shuffled_dataloader_stay_vectorized():
    """A shuffled DataLoader draws its order's seed on every pass, a random operation vmap
    refuses in its default mode: the measured runs' full-data losses (`net noise --measure`)
    fell back to the loop and marked the model as one vmap cannot batch, so every later
    per-run gradient was looped too (> 15 min instead of 3 on a 108-parameter attention model).
    They are vmapped with one draw for every run: equal to one run at a time."""
    from torch.utils.data import DataLoader, TensorDataset

    from stability.nets.lockstep import RunSetup
    from stability.nets.minibatch_runs import measure_loss
    from stability.nets.prediction import net_rules
    from stability.nets.vectorize import _NO_VMAP
    from stability.pipeline import Pipeline

    x, y = _data((3,), n=12)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    loader = DataLoader(TensorDataset(x, y), batch_size=5, shuffle=True)
    net = problem_from_dict(
        {"model": model.double(), "loss": torch.nn.MSELoss(), "data": loader}, stages=2
    )
    rules = net_rules("sgd", {}, Pipeline.from_options(tau=1, stages=2, backward="stashed"))
    w0 = net.w_star.detach()
    measure_loss(RunSetup(net, rules, 4), 0.01, [0, 10], w0, runs=3, window=(5, 10))
    assert id(net) not in _NO_VMAP
    W = net.w_star.detach() + 0.1 * torch.randn(6, net.dim, dtype=torch.float64)
    with torch.no_grad():
        mapped = vectorized(net, net.loss, W)
        one_at_a_time = torch.stack([net.loss(w) for w in W])
    assert torch.allclose(mapped, one_at_a_time, rtol=1e-14, atol=0)
