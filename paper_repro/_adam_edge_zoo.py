"""Held-out small MLPs for the adaptive edge under delay (`adam_edge_delay.py`, issue 22).

A helper of that script, not a reproduction (the leading underscore keeps it off the list).

None of these was used to build or tune the edge prediction: each is a scikit-learn data set
(or a synthetic regression: `make_regression`, Friedman #1) with a one-hidden-layer MLP from
PyTorch's standard initialisation (``torch.manual_seed(seed)`` before the layers are built),
mean squared error / 2 (one-hot targets for the classifiers), full batch, float64.
`problem(name, seed)` returns the problem dict of `stability.nets.problem.problem_from_dict`.
"""

from __future__ import annotations

import numpy as np
import torch

HELD_OUT = (  # (data set, hidden width, activation)
    ("wine", 16, "tanh"),
    ("wine", 32, "relu"),
    ("iris", 16, "tanh"),
    ("cancer", 32, "relu"),
    ("diabetes", 24, "tanh"),
    ("synthetic", 24, "tanh"),
    ("digits500", 32, "relu"),
)
"""The seven held-out MLPs, chosen before any was run."""
SWEEP = (
    ("wine", 48, "tanh"),
    ("iris", 24, "relu"),
    ("cancer", 20, "gelu"),
    ("diabetes", 40, "tanh"),
    ("digits400", 12, "tanh"),
    ("friedman", 32, "silu"),
)
"""The step-size sweep's six, first run after the prediction, its tolerance and the seven
above were fixed (`adam_edge_delay.LR_SWEEP`)."""
SPECS = {f"{data}-{act}{width}": (data, width, act) for data, width, act in HELD_OUT + SWEEP}
"""name (``data-activationWIDTH``, e.g. ``wine-tanh16``) → (data set, hidden width, activation)."""
ACTIVATIONS = {"tanh": "Tanh", "relu": "ReLU", "gelu": "GELU", "silu": "SiLU"}
"""The activations by name: the `torch.nn` module of each."""


def _standard(X: np.ndarray) -> np.ndarray:
    return (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Standardised inputs and the targets (one-hot for the classifiers)."""
    from sklearn import datasets

    base = "digits" if name in ("digits500", "digits400") else name  # the first 500 / 400 rows
    if base in ("wine", "iris", "cancer", "digits"):
        loader = {
            "wine": datasets.load_wine,
            "iris": datasets.load_iris,
            "cancer": datasets.load_breast_cancer,
            "digits": datasets.load_digits,
        }[base]
        X, y = loader(return_X_y=True)
        if base == "digits":
            rows = int(name.removeprefix("digits"))
            X, y = X[:rows] / 16.0, y[:rows]
        else:
            X = _standard(X)
        classes = int(y.max()) + 1
        Y = np.eye(classes)[y] if classes > 2 else y[:, None].astype(float)
        return X, Y
    if name == "diabetes":
        X, y = datasets.load_diabetes(return_X_y=True)
        return _standard(X), _standard(y[:, None])
    if name == "synthetic":
        X, y = datasets.make_regression(n_samples=400, n_features=10, noise=5.0, random_state=0)
        return _standard(X), _standard(y[:, None])
    if name == "friedman":
        X, y = datasets.make_friedman1(n_samples=300, n_features=8, random_state=0)
        return _standard(X), _standard(y[:, None])
    raise ValueError(
        "data set must be one of wine, iris, cancer, digits500, digits400, diabetes, synthetic, "
        f"friedman, got {name!r}"
    )


def problem(name: str, seed: int = 0) -> dict:
    """The problem dict of ``name`` (a key of `SPECS`) initialised with ``seed``."""
    data, width, activation = SPECS[name]
    X, Y = _data(data)
    torch.manual_seed(seed)
    nn = torch.nn
    act = getattr(nn, ACTIVATIONS[activation])()
    model = nn.Sequential(nn.Linear(X.shape[1], width), act, nn.Linear(width, Y.shape[1])).double()

    def loss(out, target):
        return 0.5 * ((out - target) ** 2).sum(dim=1).mean()

    return {
        "model": model,
        "loss": loss,
        "inputs": torch.tensor(X, dtype=torch.float64),
        "targets": torch.tensor(Y, dtype=torch.float64),
    }
