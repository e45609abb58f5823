"""A small MLP on scikit-learn's breast-cancer data from PyTorch's standard initialisation
(``examples/cancer_mlp.py:problem``): the adaptive edge of stability of docs/adam.md.

30 standardized features → 16 tanh units → 1 output (513 parameters), mean squared error / 2
against the 0/1 labels, all 569 rows (full batch), float64, ``torch.manual_seed(0)`` before the
layers are built.  Not fitted: full-batch Adam from here raises the preconditioned sharpness
λ₁(P_t H_t) until it reaches the edge (``stability net train --rule adam --update real
--sharpness-every K``).  Stages: the default split into ``--stages`` groups.
"""

import torch
from sklearn.datasets import load_breast_cancer


def data():
    X, y = load_breast_cancer(return_X_y=True)
    inputs = torch.tensor((X - X.mean(0)) / X.std(0), dtype=torch.float64)
    return inputs, torch.tensor(y, dtype=torch.float64)[:, None]


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(30, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def loss(out, y):
    return 0.5 * ((out - y) ** 2).mean()


def problem():
    inputs, targets = data()
    return {"model": build(), "loss": loss, "inputs": inputs, "targets": targets}
