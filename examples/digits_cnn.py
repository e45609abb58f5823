"""A small CNN on scikit-learn's digits, near a minimum (``examples/digits_cnn.py:problem``).

8×8 image → conv 3×3 (3 channels, tanh) → 2×2 average pool → conv 3×3 (6 channels, tanh) →
dense 96 → 96 (tanh) → 10 logits: 10,480 parameters.  Cross-entropy with label smoothing 0.1
(which gives the loss a finite minimizer) on the first 384 images (pixels / 16).  The channel
counts are small and the dense layer wide because float64 convolutions are slow on a CPU; the
simulator trains this model thousands of steps per measured learning rate.  Brought near
a minimum by 2,000 iterations of full-batch L-BFGS from seed 0 (cached after the first call).
Four pipeline stages, one per layer with weights, given explicitly.
"""

import torch
from sklearn.datasets import load_digits

from stability.nets.fitting import near_minimum

SAMPLES = 384


def data(samples: int = SAMPLES):
    X, y = load_digits(return_X_y=True)
    inputs = torch.tensor(X[:samples] / 16.0, dtype=torch.float64).reshape(-1, 1, 8, 8)
    return inputs, torch.tensor(y[:samples])


def build():
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Conv2d(3, 6, 3, padding=1),
        nn.Tanh(),
        nn.Flatten(),
        nn.Linear(96, 96),
        nn.Tanh(),
        nn.Linear(96, 10),
    )


def problem():
    inputs, targets = data()
    loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    model = near_minimum(build, loss, inputs, targets, name="digits_cnn", iterations=2000)
    stages = [
        ["0.weight", "0.bias"],
        ["3.weight", "3.bias"],
        ["6.weight", "6.bias"],
        ["8.weight", "8.bias"],
    ]
    return {"model": model, "loss": loss, "inputs": inputs, "targets": targets, "stages": stages}
