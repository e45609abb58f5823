r"""Weight normalisation evaluated by its definition, so that its second derivative is right.

Weight normalisation (Salimans & Kingma 2016, "Weight Normalization", eq. 2) writes a weight as

    w = g · v / ‖v‖,

the norm taken over every dimension of v but ``dim`` (over all of them for ``dim = −1``, which
is what torch passes for ``dim=None``).  Both of torch's forms of it,
``torch.nn.utils.parametrizations.weight_norm`` and the older hook
``torch.nn.utils.weight_norm``, compute w with ``torch._weight_norm``, whose *second* derivative
is wrong in torch 2.13 for ``dim ≥ 0`` (``torch.autograd.gradgradcheck`` fails, and the Hessian
of a loss through it is not symmetric; its values and first derivative are right).  So while
the analysis evaluates a model that has weight normalisation
(`stability.nets.problem.NetProblem.output`), `DefinedWeightNorm` answers that call with the
formula above in elementary operations (`weight_norm`): the same values to rounding, with the
derivatives of ``torch.linalg.vector_norm``.
"""

from __future__ import annotations

import torch
from torch.nn.utils.parametrizations import _WeightNorm
from torch.nn.utils.weight_norm import WeightNorm
from torch.overrides import TorchFunctionMode


def weight_norm(v: torch.Tensor, g: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """w = g · v/‖v‖ (Salimans & Kingma 2016, eq. 2): the norm over every dimension of ``v``
    but ``dim``, over all of them for ``dim = −1`` (``torch._weight_norm``'s convention; any
    other negative ``dim`` counts from the end)."""
    if dim == -1:
        return v * (g / torch.linalg.vector_norm(v))
    others = tuple(d for d in range(v.dim()) if d != dim % v.dim())
    return v * (g / torch.linalg.vector_norm(v, dim=others, keepdim=True))


def has_weight_norm(model: torch.nn.Module) -> bool:
    """The model normalises a weight with either of torch's weight-norm forms (module doc)."""
    return any(
        isinstance(module, _WeightNorm)
        or any(isinstance(hook, WeightNorm) for hook in module._forward_pre_hooks.values())
        for module in model.modules()
    )


class DefinedWeightNorm(TorchFunctionMode):
    """Within it, ``torch._weight_norm(v, g, dim)`` is `weight_norm` (module doc)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch._weight_norm:
            return weight_norm(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))
