r"""The data a network problem is evaluated on: one full batch, or batches as a user holds them.

A problem gives either ``inputs``/``targets`` (the full batch, one pair of tensors) or ``data``:
any *re-iterable* of ``(inputs, targets)`` batches — a list of pairs, a
``torch.utils.data.DataLoader`` (shuffled or not).  Inputs may be any structure the model takes:

* a tensor ``x``: the model is called as ``model(x)``;
* a tuple or list ``(a, b, …)``: ``model(a, b, …)`` (a DataLoader collates a dataset's tuples into
  lists);
* a dict ``{"ids": …, "mask": …}``: ``model(ids=…, mask=…)``.

NumPy arrays of numbers stand for tensors of their dtype wherever a tensor may (`as_tensors`).

**Full-batch sums.**  With batches of n_b samples (N = Σ n_b) and ``loss`` a mean over the
samples of a batch, the full-batch loss and its derivatives are the weighted sums

    f(w) = Σ_b (n_b/N)·loss(model(x_b; w), y_b),   ∇f = Σ_b (n_b/N)·∇f_b,
    ∇²f·v = Σ_b (n_b/N)·∇²f_b·v

— the full batch's values up to the rounding of the sum (tests/test_nets_models.py: a
DataLoader of batches of 64 against the tensors, eigenvalues to 1e-9 relative in float64).
n_b is the first dimension of the targets (or, for targets that are not a tensor, of the first
tensor in the inputs).

**Precision and device.**  Every tensor of a batch is moved to the problem's device as it is
drawn; floating tensors are cast to the problem's dtype, integer ones (token ids, class labels)
are left as they are.  A full batch of tensors is converted once; a DataLoader's batches on
every pass (the loader may shuffle and transform).

**Minibatches** (`NetData.rows`) select samples of the whole data set: the batches are
concatenated once, on first use, structure by structure (`torch.cat` on every tensor leaf).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch.utils.data import DataLoader, IterableDataset


def map_leaves(fn: Callable, *trees: Any) -> Any:
    """``torch.utils._pytree.tree_map`` that also opens dataclass instances (a model's output
    ``Output(logits=…, hidden=…)``, which torch's pytree takes for one leaf): ``fn`` on the
    leaves of ``trees`` (of one structure), the same structure back."""

    def one(*leaves: Any) -> Any:
        first = leaves[0]
        if dataclasses.is_dataclass(first) and not isinstance(first, type):
            fields = [f.name for f in dataclasses.fields(first) if f.init]
            return dataclasses.replace(
                first, **{n: map_leaves(fn, *(getattr(x, n) for x in leaves)) for n in fields}
            )
        return fn(*leaves)

    return tree_map(one, *trees)


def call_model(model: torch.nn.Module, params: dict[str, torch.Tensor], x: Any):
    """``model(x)`` with the parameters ``params`` (``torch.func.functional_call``), the inputs
    spread as the module doc says."""
    from torch.func import functional_call

    if isinstance(x, dict):
        return functional_call(model, params, (), dict(x))
    if isinstance(x, (tuple, list)):
        return functional_call(model, params, tuple(x))
    return functional_call(model, params, (x,))


def rows(tree: Any, index: Any) -> Any:
    """``t[index]`` for every tensor leaf of ``tree`` with a batch dimension (an index tensor
    or a slice)."""
    return tree_map(lambda t: t[index] if isinstance(t, torch.Tensor) and t.ndim >= 1 else t, tree)


def first_rows(tree: Any, n: int, few: int, copies: int = 1) -> Any:
    """The first ``few`` samples of a batch of ``n`` (every tensor leaf whose first dimension
    is the batch's; a tensor all samples share stays whole), given ``copies`` times in a row."""
    return tree_map(
        lambda t: (
            torch.cat([t[:few]] * copies)
            if isinstance(t, torch.Tensor) and t.ndim >= 1 and t.shape[0] == n
            else t
        ),
        tree,
    )


def sample(tree: Any) -> Any:
    """One sample of per-sample tensors as a batch of one: every tensor leaf of ``tree``
    unsqueezed at dimension 0 (inside ``torch.func.vmap`` over the samples)."""
    return tree_map(lambda t: t.unsqueeze(0) if isinstance(t, torch.Tensor) else t, tree)


def _leading(part: Any) -> int | None:
    """The first dimension of the first tensor of ``part`` (None: no tensor with one)."""
    leaves = [t for t in tree_flatten(part)[0] if isinstance(t, torch.Tensor)]
    return int(leaves[0].shape[0]) if leaves and leaves[0].ndim >= 1 else None


def batch_size(x: Any, y: Any) -> int:
    """n_b: the first dimension of the targets, or of the first tensor of the inputs."""
    for part in (y, x):
        n = _leading(part)
        if n is not None:
            return n
    raise ValueError("a batch must hold tensors with a batch dimension (inputs or targets)")


def as_tensors(tree: Any) -> Any:
    """``tree`` with every NumPy array of numbers a tensor (``torch.as_tensor``: its dtype, the
    memory shared): arrays serve as inputs and targets as a DataLoader's default collate would
    make them serve."""
    return tree_map(
        lambda t: torch.as_tensor(t) if isinstance(t, np.ndarray) and t.dtype.kind in "biuf" else t,
        tree,
    )


def floating_dtype(obj: Any) -> torch.dtype | None:
    """The widest floating dtype among the tensors (or NumPy arrays) of ``obj`` (None: no
    floating tensor)."""
    found = None
    for t in tree_flatten(as_tensors(obj))[0]:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            found = t.dtype if found is None else torch.promote_types(found, t.dtype)
    return found


def convert(obj: Any, dtype: torch.dtype, device: torch.device) -> Any:
    """``obj`` with every tensor on ``device``, floating ones cast to ``dtype``, detached."""

    def one(t):
        if not isinstance(t, torch.Tensor):
            return t
        if t.is_floating_point():
            return t.detach().to(device=device, dtype=dtype)
        return t.detach().to(device=device)

    return tree_map(one, obj)


def _pair(batch: Any, where: str) -> tuple[Any, Any]:
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        kind = type(batch).__name__
        if isinstance(batch, dict):  # a tokenizer's / datasets' batch: the labels are inside
            kind += " (split it: a collate_fn returning (inputs, labels), e.g. ({k: b[k] for "
            kind += "k in b if k != 'labels'}, b['labels']))"
        raise ValueError(f"{where} must be an (inputs, targets) pair, got {kind}")
    return as_tensors(batch[0]), as_tensors(batch[1])


def _joined(column: Sequence[torch.Tensor]) -> torch.Tensor:
    """One tensor of every batch's rows; batches that differ beyond the first dimension
    (dynamic padding) cannot be drawn from sample by sample: a `ValueError` naming batch."""
    shapes = list(dict.fromkeys(tuple(t.shape[1:]) for t in column))
    if len(shapes) > 1:
        raise ValueError(
            "batch: minibatches (and per-sample moments) are drawn across the data's batches, "
            f"whose tensors must then agree beyond the first dimension; they have {shapes[0]} "
            f"and {shapes[1]} (pad them to one shape, e.g. in the DataLoader's collate_fn)"
        )
    return torch.cat(list(column))


def _check_rows(tree: Any, samples: int) -> None:
    """Every tensor of the concatenated data has its ``samples`` rows first (what `rows` and a
    ``vmap`` over samples index): otherwise a `ValueError` naming batch."""
    for t in tree_flatten(tree)[0]:
        if isinstance(t, torch.Tensor) and t.ndim >= 1 and t.shape[0] != samples:
            raise ValueError(
                f"batch: minibatches (and per-sample moments) draw the data's samples, so every "
                f"tensor of a batch needs the batch dimension first; the data has {samples} "
                f"samples but a tensor of shape {tuple(t.shape)} (a tensor every sample shares, "
                f"e.g. a mask, belongs in the model)"
            )


def _in_process(source: Iterable) -> Iterable:
    """A DataLoader whose workers would start afresh on every pass (``num_workers`` > 0, not
    ``persistent_workers``) as a copy that reads in the main process: the analysis passes over
    the data once a Hessian-vector product or a simulated step, and a restart of the workers
    costs a fraction of a second each time.  The same batches; left as it is where the workers
    could matter (a ``worker_init_fn``, an iterable dataset that may shard by worker)."""
    if (
        isinstance(source, DataLoader)
        and source.num_workers > 0
        and not source.persistent_workers
        and source.worker_init_fn is None
        and not isinstance(source.dataset, IterableDataset)
    ):
        source = copy.copy(source)
        source.num_workers = 0
    return source


SUMMED_LOSS = "samples given twice have twice their loss: reduction='sum'?"
"""How a loss that sums over the samples is told (`stability.nets.problem.check_loss`), as the
refusals say it."""


class NetData:
    """The problem's data (module doc): ``source`` batches, ``dtype``/``device`` of evaluation.

    ``full_batch``: the source is one ``(inputs, targets)`` pair given as tensors (converted
    once).  ``samples``: N; ``batches``: the number of batches of one pass.
    """

    def __init__(
        self, source: Iterable, *, dtype: torch.dtype, device: torch.device, full_batch: bool
    ):
        self.dtype, self.device, self.full_batch = dtype, device, full_batch
        if full_batch:
            self._source: Iterable = [convert(_pair(b, "the batch"), dtype, device) for b in source]
        else:
            source = _in_process(source)
            if iter(source) is source:
                raise ValueError(
                    "data must be re-iterable (a list of batches or a DataLoader), got a "
                    "one-shot iterator"
                )
            self._source = source
        sizes = []
        for i, batch in enumerate(self._source):
            x, y = _pair(batch, f"data batch {i + 1}")
            n_x, n_y = _leading(x), _leading(y)
            if None not in (n_x, n_y) and n_x != n_y:
                raise ValueError(
                    f"data batch {i + 1}: inputs and targets must have the same number of "
                    f"samples (first dimension), got {n_x} and {n_y} (a "
                    f"DataLoader with batch_size=None gives samples without a batch dimension: "
                    f"give it a batch_size; targets flattened over the samples: flatten them "
                    f"in the loss)"
                )
            if any(isinstance(t, torch.Tensor) and t.ndim == 0 for t in tree_flatten(y)[0]):
                raise ValueError(
                    f"data batch {i + 1}: its targets hold a 0-dimensional tensor, one sample "
                    f"without a batch dimension (a DataLoader with batch_size=None yields the "
                    f"samples one at a time: give it a batch_size; a target all samples share "
                    f"belongs in the loss)"
                )
            sizes.append(batch_size(x, y))
            if sizes[-1] < 1:
                raise ValueError(f"data batch {i + 1} has no samples")
        if not sizes:
            raise ValueError("data must hold at least one batch")
        self.samples, self.batches = int(sum(sizes)), len(sizes)
        self._rows: tuple[Any, Any] | None = None
        self.summed_loss = False
        """The problem's loss sums over the samples (`stability.nets.problem.check_loss`): a
        minibatch's loss does not estimate the full batch's, so `concatenated` refuses."""

    @property
    def passes_may_differ(self) -> bool:
        """The source is not a list or tuple of batches (a DataLoader: a sampler or transform may
        draw other samples on every pass; `stability.nets.problem.check_loss` compares two)."""
        return not isinstance(self._source, (list, tuple))

    def to(self, dtype: torch.dtype) -> NetData:
        """The same batches evaluated in ``dtype``."""
        return NetData(self._source, dtype=dtype, device=self.device, full_batch=self.full_batch)

    def __iter__(self) -> Iterator[tuple[Any, Any, float]]:
        """(inputs, targets, n_b/N) per batch, converted."""
        for batch in self._source:
            if not self.full_batch:
                batch = convert(_pair(batch, "a batch"), self.dtype, self.device)
            x, y = batch
            yield x, y, batch_size(x, y) / self.samples

    def concatenated(self) -> tuple[Any, Any]:
        """(inputs, targets) of the whole data set, each tensor leaf concatenated (cached), for
        minibatches and per-sample moments: a `ValueError` naming batch where the loss sums over
        the samples (``summed_loss``)."""
        if self.summed_loss:
            raise ValueError(
                "batch: minibatches (and per-sample moments) need a loss that is the mean over "
                f"the samples, so that a minibatch's loss estimates the full batch's; the loss "
                f"sums over them ({SUMMED_LOSS}): use reduction='mean' (a sum-loss run at batch "
                f"size B is the mean-loss run at lr·B)"
            )
        if self._rows is None:
            parts = [(x, y) for x, y, _ in self]
            if len(parts) == 1:
                self._rows = parts[0]
            else:
                flat = [tree_flatten(p) for p in parts]
                leaves = [
                    _joined(column) if isinstance(column[0], torch.Tensor) else column[0]
                    for column in zip(*(f[0] for f in flat), strict=True)
                ]
                self._rows = tree_unflatten(leaves, flat[0][1])
            _check_rows(self._rows, self.samples)
        return self._rows

    def rows(self, index: torch.Tensor) -> tuple[Any, Any]:
        """The samples ``index`` of the whole data set (a minibatch; an (R, B) index: R of
        them).  The simulators keep their indices on the data's device (one copy a chunk of
        steps, not one a step)."""
        on_device = index.device == self.device
        return rows(self.concatenated(), index if on_device else index.to(self.device))


__all__ = [
    "SUMMED_LOSS",
    "NetData",
    "as_tensors",
    "batch_size",
    "call_model",
    "convert",
    "floating_dtype",
    "rows",
    "sample",
]
