"""Problem construction from named options (shared by ``stability train`` and ``validate``).

``ProblemOptions`` gathers the data set, its preprocessing, and the model: ``"linreg"``
(least squares, `stability.trainer.linreg`) or ``"mlp"`` (`stability.trainer.mlp`).
``samples`` keeps a seeded random subset of that many rows (``max_samples``: at most that
many, all rows of a smaller data set) (drawn before preprocessing, so the
preprocessing statistics are those of the subset that is trained on).  Classification labels
(column 0, integers 0 … C−1) are never standardized.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stability.checks import check_choice, check_integer
from stability.trainer.data import Dataset, load_regression, preprocess
from stability.trainer.linearize import Linearization, linreg_linearization, mlp_linearization
from stability.trainer.linreg import LinearRegression
from stability.trainer.mlp import MLP


@dataclass(frozen=True)
class ProblemKind:
    """What tells the trainer's problem kinds apart, as values and functions (no code asks
    for a kind by name): the flag that sizes its parameters, the default preprocessing and row
    cap, the measurement protocol's defaults (`stability.agreement.comparison.Protocol`
    fields), how the model is built from its data and how it is linearised
    (`stability.trainer.linearize`)."""

    name: str
    size_flag: str
    standardize: str
    max_samples: int | None
    protocol: dict[str, Any] = field(default_factory=dict)
    model: Callable[[Dataset, Any], Any] = field(default=None, repr=False)
    linearizer: Callable[[Any, int], Linearization] = field(default=None, repr=False)
    labels_are_classes: Callable[[Any], bool] = field(default=lambda options: False, repr=False)

    def linearize(self, problem: Any, fit_seed: int = 0) -> Linearization:
        """The problem's `Linearization` (an MLP is fitted from ``fit_seed`` first)."""
        return self.linearizer(problem, check_integer("fit_seed", fit_seed))


def _mlp(data: Dataset, options) -> MLP:
    return MLP.from_dataset(
        data,
        hidden=options.hidden,
        activation=options.activation,
        task=options.task,
        weight_decay=options.weight_decay,
    )


KINDS: dict[str, ProblemKind] = {
    "linreg": ProblemKind(
        "linreg",
        size_flag="data",  # one parameter per feature column
        standardize="features",
        max_samples=None,
        model=lambda data, options: LinearRegression.from_dataset(data),
        linearizer=lambda problem, seed: linreg_linearization(problem),
    ),
    "mlp": ProblemKind(
        "mlp",
        size_flag="hidden",
        standardize="all",
        max_samples=128,  # validation runs many full batches
        protocol={"steps": 5_000, "rel_tol": 1e-2, "rate_steps": 5_000, "rate_doublings": 1},
        model=_mlp,
        linearizer=lambda problem, seed: mlp_linearization(problem, seed=seed),
        labels_are_classes=lambda options: options.task == "classification",
    ),
}
"""The problem kinds by name (`ProblemOptions.problem`)."""

PROBLEMS = tuple(KINDS)


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

    @property
    def kind(self) -> ProblemKind:
        """The `ProblemKind` named by ``problem``."""
        check_choice("problem", self.problem, PROBLEMS)
        return KINDS[self.problem]


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
    if options.kind.labels_are_classes(options):
        ys = y  # class labels are not standardized
    X, y = Xs, ys
    if options.bias:
        X = np.hstack([X, np.ones((X.shape[0], 1))])
    return Dataset(X, y, raw.source, options.standardize, options.bias, dropped)


def build_problem(options: ProblemOptions) -> tuple[LinearRegression | MLP, Dataset]:
    """``(problem, data)`` for ``options``."""
    kind = options.kind
    data = load_data(options)
    return kind.model(data, options), data


__all__ = ["KINDS", "PROBLEMS", "ProblemKind", "ProblemOptions", "build_problem", "load_data"]
