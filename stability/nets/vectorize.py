"""A function mapped over runs or samples: ``torch.func.vmap`` where the model allows it, else
one at a time.

vmap cannot batch every module a user brings: ``nn.LSTM``/``nn.GRU`` write into their output
in place inside an ATen kernel ("output with shape [1, 16] doesn't match the broadcast shape
[32, 1, 16]"), and so does custom code with in-place updates; and ``torch.func`` cannot
transform some at all (a custom ``autograd.Function`` without ``setup_context``, a saved-tensor
hook, a tensor's memory read in forward).  `vectorized` then falls back to a Python loop over
the mapped axis, calling the same function by plain ``torch.autograd`` where the caller gives
one (same numbers, slower by the batch size), and remembers the problem, so that the loop is
taken at once the next time.  The mapped arguments may be any
structure the model takes (`stability.nets.batches`): every tensor of the pytree is indexed.

vmap runs with ``randomness="same"``: the model is in eval mode (`stability.nets.problem`), so
the only random draw is a DataLoader's seed of its order, drawn on every pass of the data — in
vmap's default mode that refused, and the fallback then looped every later call on the model
(a shuffled DataLoader's `net noise --measure`: > 15 min instead of 3).  One draw for every
run gives the losses the loop gives (a sum over the batches, in whatever order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.func import vmap
from torch.utils._pytree import tree_flatten, tree_map

_NO_VMAP: set[int] = set()
"""``id`` of the problems whose model vmap could not batch (the loop is taken at once)."""


def _length(args: tuple, dims: tuple) -> int:
    for arg, dim in zip(args, dims, strict=True):
        if dim is not None:
            leaves = [t for t in tree_flatten(arg)[0] if isinstance(t, torch.Tensor)]
            if leaves:
                return int(leaves[0].shape[dim])
    raise ValueError("vectorized: no argument is mapped")


def vectorized(
    owner: object,
    fn: Callable,
    *args: Any,
    in_dims: int | tuple = 0,
    looped: Callable | None = None,
) -> torch.Tensor:
    """``fn`` over the axis ``in_dims`` of ``args`` (as `torch.func.vmap`), outputs stacked on
    a new first axis; a loop where vmap fails for ``owner`` (module doc), calling ``looped``
    where given: the same function by plain autograd, for a model no torch.func transform
    takes (a custom ``autograd.Function`` without ``setup_context``)."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    if id(owner) not in _NO_VMAP:
        try:
            return vmap(fn, in_dims=dims, randomness="same")(*args)
        except RuntimeError:  # NotImplementedError included
            _NO_VMAP.add(id(owner))

    def take(arg: Any, dim: int | None, i: int) -> Any:
        if dim is None:
            return arg
        return tree_map(lambda t: t.select(dim, i) if isinstance(t, torch.Tensor) else t, arg)

    one = fn if looped is None else looped
    count = _length(args, dims)
    return torch.stack(
        [one(*(take(a, d, i) for a, d in zip(args, dims, strict=True))) for i in range(count)]
    )


__all__ = ["vectorized"]
