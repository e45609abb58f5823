"""The measured runs' saddle flip (`stability.nets.saddle_flip`) against a dense Hessian: the
quadratic it adds turns each negative eigenvalue of s·∇²f·s into its magnitude (at most half
the top one) and leaves every other eigenpair, the top one included, where it was."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import stability.nets.saddle_flip as saddle_flip_module  # noqa: E402
from stability.nets.curvature import dense_hessian  # noqa: E402
from stability.nets.minimum import NEGATIVE_TOL  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.nets.saddle_flip import FLIP_CAP, saddle_flip  # noqa: E402


def _at_initialisation():
    """A 3-class tanh MLP (67 parameters: above the dense block, so ARPACK runs) at its
    initialisation, a saddle (λ_min ≈ −0.5·λ₁)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    X = torch.randn(60, 4, generator=g, dtype=torch.float64)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).long() + (X[:, 2] > 0.5).long()
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    return problem_from_dict(
        {"model": model.double(), "loss": torch.nn.CrossEntropyLoss(), "inputs": X, "targets": y}
    )


@pytest.mark.parametrize("preconditioned", [False, True])
@pytest.mark.parametrize("search", ["dense", "lanczos"])
def test_the_flip_turns_each_negative_eigenvalue_into_its_magnitude(
    search, preconditioned, monkeypatch
):
    """Both searches: the dense one of small models, and the Lanczos rounds of larger ones (here
    on the same small model, by lowering the dense limit)."""
    if search == "lanczos":
        monkeypatch.setattr(saddle_flip_module, "FLIP_DENSE", 0)
    net = _at_initialisation()
    p = net.dim
    s = np.exp(np.random.default_rng(3).uniform(-2, 2, p)) if preconditioned else np.ones(p)
    H = dense_hessian(net)
    whitened = s[:, None] * H * s[None, :]
    lam = np.linalg.eigvalsh(whitened)
    flip = saddle_flip(net, lam[-1], scale=torch.tensor(s) if preconditioned else None)
    negatives = lam[lam < -NEGATIVE_TOL * lam[-1]]
    assert flip.complete and flip.eigenvalues == pytest.approx(negatives, rel=1e-8, abs=0)
    # the added Hessian, read from the quadratic's own gradient: C = ∇q(w* + I) (linear in u)
    w_star = net.w_star.detach()
    C = flip.gradient(w_star + torch.eye(p, dtype=torch.float64), w_star).numpy()
    assert np.allclose(C, C.T, atol=1e-12 * np.abs(C).max())
    flipped = np.linalg.eigvalsh(s[:, None] * (H + C) * s[None, :])
    mu = np.minimum(-lam, FLIP_CAP * lam[-1])  # |λ|, capped below the top curvature
    assert preconditioned or np.any(-lam > FLIP_CAP * lam[-1])  # the cap binds on H itself
    expected = np.sort(np.where(lam < -NEGATIVE_TOL * lam[-1], mu, lam))
    assert np.abs(flipped - expected).max() <= 1e-8 * lam[-1]
    # completeness: the smallest unflipped eigenvalue (dense) or the last search's smallest
    # Ritz value bounds the flipped spectrum's smallest eigenvalue from above, and says
    # whether any is left below the cut
    assert flip.left >= flipped[0] - 1e-10 * lam[-1]
    assert flip.complete == (flipped[0] >= flip.cut)


def test_no_flip_at_a_minimum_of_positive_curvature():
    g = torch.Generator().manual_seed(2)
    X = torch.randn(40, 3, generator=g, dtype=torch.float64)
    y = X @ torch.tensor([[1.0], [-2.0], [0.5]], dtype=torch.float64)
    model = torch.nn.Linear(3, 1).double()
    net = problem_from_dict({"model": model, "loss": torch.nn.MSELoss(), "inputs": X, "targets": y})
    lam = np.linalg.eigvalsh(dense_hessian(net))
    assert lam[0] > 0  # a linear least-squares loss: positive definite everywhere
    assert saddle_flip(net, lam[-1]) is None
