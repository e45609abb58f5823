"""An MLP on scikit-learn's digits, near a minimum (``examples/digits_mlp.py:problem``).

64 pixels → 32 tanh units → 10 logits (2,410 parameters), cross-entropy with label smoothing
0.1 (which gives the loss a finite minimizer) on the first 1,024 images of the 8×8 digits
(pixels / 16).  Brought near a minimum by 2,000 iterations of full-batch L-BFGS from seed 0
(`stability.nets.fitting.near_minimum`, cached after the first call).  Stages: the default split
of the two layers' weights and biases into ``--stages`` groups.
"""

import torch
from sklearn.datasets import load_digits

from stability.nets.fitting import near_minimum

SAMPLES = 1024


def data(samples: int = SAMPLES):
    X, y = load_digits(return_X_y=True)
    inputs = torch.tensor(X[:samples] / 16.0, dtype=torch.float64)
    return inputs, torch.tensor(y[:samples])


def build():
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))


def problem():
    inputs, targets = data()
    loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    model = near_minimum(build, loss, inputs, targets, name="digits_mlp", iterations=2000)
    return {"model": model, "loss": loss, "inputs": inputs, "targets": targets}
