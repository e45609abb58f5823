"""Linear least squares on scikit-learn's diabetes data (``examples/diabetes_linear.py:problem``).

10 standardized features → 1 output (11 parameters), mean squared error / 2, all 442 rows,
brought to its minimum by full-batch L-BFGS (`stability.nets.fitting.near_minimum`, cached).
The loss is quadratic, so its Hessian is the same everywhere: a small, fast model for trying
``stability net`` (each command takes about a second).  Stages: the default split of the weight
and the bias into ``--stages`` groups.
"""

import torch
from sklearn.datasets import load_diabetes

from stability.nets.fitting import near_minimum


def data():
    X, y = load_diabetes(return_X_y=True, scaled=False)
    inputs = torch.tensor((X - X.mean(0)) / X.std(0), dtype=torch.float64)
    targets = torch.tensor((y - y.mean()) / y.std(), dtype=torch.float64)[:, None]
    return inputs, targets


def build():
    return torch.nn.Sequential(torch.nn.Linear(10, 1))


def loss(out, y):
    return 0.5 * ((out - y) ** 2).mean()


def problem():
    inputs, targets = data()
    model = near_minimum(build, loss, inputs, targets, name="diabetes_linear", iterations=200)
    return {"model": model, "loss": loss, "inputs": inputs, "targets": targets}
