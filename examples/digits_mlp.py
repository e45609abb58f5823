"""An MLP on scikit-learn's digits, near a minimum (``examples/digits_mlp.py:problem``).

64 pixels → 32 tanh units → 10 outputs (2,410 parameters), squared error ½‖ŷ − y‖² against
one-hot labels (the loss Cohen et al. use for the edge of stability), the first 1,024 images of the
8×8 digits (pixels / 16).  Brought near a minimum by 3,000 iterations of full-batch L-BFGS from
seed 0 (`stability.nets.fitting.near_minimum`, cached after the first call).  Stages: the two
layers' weights and biases — the default split into ``--stages`` groups.
"""

import torch
from sklearn.datasets import load_digits

from stability.nets.fitting import near_minimum

SAMPLES = 1024


def data(samples: int = SAMPLES):
    X, y = load_digits(return_X_y=True)
    inputs = torch.tensor(X[:samples] / 16.0, dtype=torch.float64)
    labels = torch.tensor(y[:samples])
    return inputs, torch.nn.functional.one_hot(labels, 10).to(torch.float64)


def build():
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))


def squared_error(outputs, targets):
    """½‖ŷ − y‖² per sample, averaged over the samples."""
    return 0.5 * ((outputs - targets) ** 2).sum(dim=1).mean()


def problem():
    inputs, targets = data()
    loss = squared_error
    model = near_minimum(build, loss, inputs, targets, name="digits_mlp", iterations=3000)
    return {"model": model, "loss": loss, "inputs": inputs, "targets": targets}
