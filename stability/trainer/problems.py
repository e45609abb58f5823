"""Problem construction from named options (shared by ``stability train`` and ``validate``).

``ProblemOptions`` gathers the data set, its preprocessing, and the model: ``"linreg"``
(least squares, `stability.trainer.linreg`) or ``"mlp"`` (`stability.trainer.mlp`).
``samples`` keeps a seeded random subset of that many rows (``max_samples``: at most that
many, all rows of a smaller data set) (drawn before preprocessing, so the
preprocessing statistics are those of the subset that is trained on).  Classification labels
(column 0, integers 0 … C−1) are never standardized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stability.checks import check_choice
from stability.trainer.data import Dataset, load_regression, preprocess
from stability.trainer.linreg import LinearRegression
from stability.trainer.mlp import MLP

PROBLEMS = ("linreg", "mlp")


@dataclass(frozen=True)
class ProblemOptions:
    """What to train on (module doc).  ``data``: a path, or ``None`` / ``"cpusmall"``."""

    problem: str = "linreg"
    data: str | None = None
    standardize: str = "features"
    bias: bool = False
    samples: int | None = None
    max_samples: int | None = None
    sample_seed: int = 0
    hidden: tuple[int, ...] = (4, 4)
    activation: str = "tanh"
    task: str = "regression"
    weight_decay: float = 0.1


def load_data(options: ProblemOptions) -> Dataset:
    """The data set of ``options``, subsampled and preprocessed."""
    raw = load_regression(options.data, standardize="none")
    X, y = raw.X, raw.y
    keep = options.samples
    if keep is not None and not 1 <= keep <= X.shape[0]:
        raise ValueError(f"samples must be an integer in [1, {X.shape[0]}]")
    if keep is None and options.max_samples is not None and X.shape[0] > options.max_samples:
        keep = options.max_samples
    if keep is not None:
        rows = np.random.default_rng(options.sample_seed).choice(X.shape[0], keep, replace=False)
        X, y = X[np.sort(rows)], y[np.sort(rows)]
    try:
        Xs, ys, dropped = preprocess(X, y, options.standardize, raw.source)
    except ValueError as err:
        if keep is None or keep == raw.X.shape[0] or not str(err).startswith("data:"):
            raise
        raise ValueError(f"samples: {keep} samples kept: {str(err)[6:]}") from None
    if options.problem == "mlp" and options.task == "classification":
        ys = y  # class labels are not standardized
    X, y = Xs, ys
    if options.bias:
        X = np.hstack([X, np.ones((X.shape[0], 1))])
    return Dataset(X, y, raw.source, options.standardize, options.bias, dropped)


def build_problem(options: ProblemOptions) -> tuple[LinearRegression | MLP, Dataset]:
    """``(problem, data)`` for ``options``."""
    check_choice("problem", options.problem, PROBLEMS)
    data = load_data(options)
    if options.problem == "linreg":
        return LinearRegression.from_dataset(data), data
    mlp = MLP.from_dataset(
        data,
        hidden=options.hidden,
        activation=options.activation,
        task=options.task,
        weight_decay=options.weight_decay,
    )
    return mlp, data


__all__ = ["PROBLEMS", "ProblemOptions", "build_problem", "load_data"]
