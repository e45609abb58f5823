r"""A network problem: a user's PyTorch model, its loss on a full batch, and its pipeline stages.

A *problem file* is a Python file with a function returning a dict::

    def problem():
        return {
            "model": model,          # a torch.nn.Module
            "loss": loss,            # callable (outputs, targets) -> scalar, the mean over samples
            "inputs": X,             # the full batch: a tensor (or a tuple or dict of them)
            "targets": Y,            # a tensor (or a tuple or dict of them), samples first
            "stages": [[...], ...],  # optional: parameter or module names per stage, in order
        }

or, instead of ``inputs``/``targets``, ``"data": loader`` — any re-iterable of ``(inputs,
targets)`` batches, e.g. the ``torch.utils.data.DataLoader`` a training script already has, with
inputs of any structure (a tensor, a tuple, a dict: `stability.nets.batches`).  The problem is
given on the command line as ``--problem path/to/file.py:problem``.  `load_problem` imports it
(the file's folder first on ``sys.path``, so it may import its neighbours) and checks every
part with a one-line `ValueError` naming what is wrong.

**The parameter vector.**  Every trainable parameter appears in exactly one stage; the flat
vector w ∈ ℝ^p lists stage 1's parameters first (in the order the stage names them), then stage
2's, … — so stage i is the contiguous block of |w_i| entries the coupled analysis
(`stability.coupled.system`) and the simulator (`stability.nets.simulator`) work on.  Without
``stages`` the parameters, in the model's order, are cut into P contiguous groups of whole
tensors, at the tensor boundaries nearest to equal shares (`split_stages`).

**Evaluation.**  The model is put in eval mode (dropout off, normalisation with its stored
statistics), so the loss is a deterministic function of w:

    f(w) = Σ_b (n_b/N)·loss(model(x_b; w), y_b),     ∇f(w) and ∇²f(w)·v by automatic differentiation

(`NetProblem.loss`, `NetProblem.gradient`, `NetProblem.hvp`: reverse mode for the gradient
(plain ``torch.autograd``, `plain_grad`), reverse-over-reverse for Hessian-vector products —
the gradient of ⟨∇f, v⟩, by plain ``torch.autograd`` (`_eager_hvp`) — summed over the batches;
one batch for ``inputs``/``targets``). Inside ``vmap`` (runs or samples side by side) the same
products go through ``torch.func`` (`NetProblem.transformable_gradient`,
`NetProblem.transformable_batch_hvp`), and the loop that replaces a ``vmap`` torch.func cannot
apply to the model takes the plain ones (`stability.nets.vectorize`). Reverse-over-reverse is
the default because it is faster here than forward-over-reverse (``torch.func.jvp`` of
``grad``) and works for every loss (torch 2.13 has no forward-mode derivative of ``mse_loss``'s
backward): CPU seconds per product, one thread, float32 (benchmarks/bench_curvature.py, table
1) — 0.24 against 0.30 on the 1.07·10⁶-parameter examples/tiny_transformer.py, 0.63 against
0.99 on the 1.4·10⁵ benchmarks/curvature_transformer.py, 0.0174 against 0.0186 on the digits
CNN (float64); the two agree to rounding. ``hvp_mode=FORWARD_OVER_REVERSE`` selects the other.
Minibatches select samples of the data (`stability.nets.batches`).
Attention runs on PyTorch's math kernel (``sdpa_kernel(SDPBackend.MATH)``): the fused
scaled-dot-product kernels have no second derivatives.  For the same reason a model (or a part
of it) wrapped by ``torch.compile`` runs eagerly (``torch.compiler.set_stance("force_eager")``,
the same function: dynamo's graphs have no double backward), and a sparse embedding
(``sparse=True``) gives its gradient dense (the same values; the flat vector has no sparse
layout).  Weight normalisation is evaluated by its definition g·v/‖v‖
(`stability.nets.weight_norm`: torch's kernel for it has a wrong second derivative).  An
operation whose derivative torch does not implement (the second of ``nn.EmbeddingBag``) is
refused where it is needed (`refusing_torch_func_limits`), and so is a second derivative torch
gives wrong without a word (a custom Function's ``@once_differentiable`` backward, a detached
value that depends on the weights: `stability.nets.second_derivative`, checked at loading).

**Precision and device.**  By default the model's own dtype and device, promoted to the data's
floating dtype where that is wider (a float32 model given float64 tensors runs in float64, as the
examples do; half precision runs in float32: Hessian-vector products in 8 mantissa bits are
noise); ``dtype``/``device`` override both (`problem_from_dict`).  float64 is the choice for
exact comparisons; docs/your_model.md reports what float32 costs (measured).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
import math
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.func import grad, jvp, vjp
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from stability.checks import unreadable_file
from stability.nets.batches import (
    SUMMED_LOSS,
    NetData,
    as_tensors,
    batch_size,
    call_model,
    convert,
    first_rows,
    floating_dtype,
)
from stability.nets.second_derivative import second_derivative_missing
from stability.nets.torch_settings import analysis_settings
from stability.nets.weight_norm import DefinedWeightNorm, has_weight_norm

REQUIRED = ("model", "loss", "inputs", "targets")
FEW_SAMPLES = 8
"""The samples of the first batch the loading's checks run alone (a summed loss, custom
autograd.Functions' second derivatives)."""
FORWARD_OVER_REVERSE = "forward-over-reverse"
REVERSE_OVER_REVERSE = "reverse-over-reverse"
MAX_PARAMS = 2_000_000
"""Largest number of trainable parameters a problem may have (memory of the simulator and of
the Lanczos vectors, both O(p) per stored copy)."""


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


# -- stages ------------------------------------------------------------------------------------


def split_stages(names: Sequence[str], sizes: Sequence[int], stages: int) -> list[list[str]]:
    """Parameter tensors, in order, cut into ``stages`` contiguous groups (whole tensors, so the
    groups' sizes can be far from equal).

    Cut i (1 … P−1) is placed at the tensor boundary closest to i·p/P that leaves at least one
    tensor for every later group.
    """
    n = len(names)
    if isinstance(stages, bool) or not isinstance(stages, (int, np.integer)) or stages < 1:
        raise ValueError(f"stages must be an integer ≥ 1, got {stages!r}")
    if stages > n:
        raise ValueError(
            f"stages must be at most the number of parameter tensors ({n}), got {stages}"
        )
    cum = np.cumsum(sizes)
    total = float(cum[-1])
    cuts, previous = [], 0
    for i in range(1, stages):
        lo, hi = previous + 1, n - (stages - i)  # cut after tensor c-1: c tensors so far
        candidates = np.arange(lo, hi + 1)
        best = int(candidates[np.argmin(np.abs(cum[candidates - 1] - i * total / stages))])
        cuts.append(best)
        previous = best
    bounds = [0, *cuts, n]
    return [list(names[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _check_stages(stages: Any, names: Sequence[str]) -> list[list[str]]:
    """The stages as lists of parameter names: each entry a parameter's name, or a module's
    (``"enc"``, ``"blocks.0"``), which stands for its trainable parameters in the model's order."""
    if not isinstance(stages, (list, tuple)) or not stages:
        raise ValueError("stages must be a non-empty list of lists of parameter or module names")
    seen: dict[str, int] = {}
    out = []
    for i, group in enumerate(stages, start=1):
        if isinstance(group, str) or not isinstance(group, (list, tuple)) or not group:
            raise ValueError(f"stage {i} must be a non-empty list of parameter or module names")
        params = []
        for entry in group:
            found = [n for n in names if n == entry or n.startswith(f"{entry}.")]
            if not isinstance(entry, str) or not found:
                some = ", ".join(list(names)[:6]) + (", …" if len(names) > 6 else "")
                raise ValueError(
                    f"stage {i} names {entry!r}, which is not a trainable parameter of the model "
                    f"nor a module holding one (its parameters: {some})"
                )
            params += found
        for name in params:
            if name in seen:
                raise ValueError(f"parameter {name!r} is in stage {seen[name]} and stage {i}")
            seen[name] = i
        out.append(params)
    missing = [n for n in names if n not in seen]
    if missing:
        raise ValueError(f"parameter {missing[0]!r} is in no stage (every parameter needs one)")
    return out


# -- the problem -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NetProblem:
    """A model, its loss over the data, and the stage layout of its flat parameter vector.

    ``data``: the batches (`stability.nets.batches.NetData`, with the problem's dtype and device);
    ``names``/``shapes``: the trainable parameters in flat order (stage by stage);
    ``stage_names``: the names per stage; ``w_star``: the model's weights as a flat tensor
    (the problem's dtype, on its device) — the point the analysis linearizes at (near a
    minimum); ``source``: where it came from (``FILE.py:FUNCTION`` or ``""``);
    ``granularity``: the units of backpropagation with other backward weights (``"layer"`` or
    ``"stage"``: `stability.nets.inconsistent`); ``hvp_mode``: how products are made (module doc);
    ``second_derivative_missing``: why torch's second derivative of the model is not its
    gradient's derivative (`stability.nets.second_derivative`), refused where one is needed.
    """

    model: torch.nn.Module
    loss_fn: Callable[[Any, Any], Any]
    data: NetData
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    stage_names: tuple[tuple[str, ...], ...]
    w_star: torch.Tensor
    source: str = ""
    hvp_mode: str = REVERSE_OVER_REVERSE
    granularity: str = "layer"
    second_derivative_missing: str | None = None

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        return tuple(math.prod(s) for s in self.shapes)

    @property
    def dim(self) -> int:
        """Number of trainable parameters p."""
        return int(self.w_star.numel())

    @property
    def samples(self) -> int:
        return self.data.samples

    @property
    def dtype(self) -> torch.dtype:
        return self.w_star.dtype

    @property
    def device(self) -> torch.device:
        return self.w_star.device

    @property
    def inputs(self) -> Any:
        """The inputs of the whole data set (batches concatenated: `NetData.concatenated`)."""
        return self.data.concatenated()[0]

    @property
    def targets(self) -> Any:
        return self.data.concatenated()[1]

    @cached_property
    def stage_sizes(self) -> tuple[int, ...]:
        """|w_i| per stage (stage 1 first)."""
        size = dict(zip(self.names, self.sizes, strict=True))
        return tuple(sum(size[n] for n in group) for group in self.stage_names)

    @cached_property
    def blocks(self) -> tuple[slice, ...]:
        """Stage i's slice of the flat vector."""
        ends = np.cumsum((0, *self.stage_sizes))
        return tuple(slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:], strict=True))

    def params(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        """The named parameter tensors of the flat vector ``w`` (views, no copies)."""
        parts = torch.split(w, self.sizes)
        return {
            name: part.view(shape)
            for name, part, shape in zip(self.names, parts, self.shapes, strict=True)
        }

    def vector(self, v: Any) -> torch.Tensor:
        """``v`` (a numpy array or tensor) as a flat tensor of the problem's dtype and device."""
        return torch.as_tensor(v).to(device=self.device, dtype=self.dtype)

    def in_float64(self) -> NetProblem:
        """The same problem evaluated in float64: a copy of the model (and of the loss, if it
        is a module: a class weight is a buffer) converted, the data converted (exactly:
        float64 holds every float32), the same weights; itself if it is float64.  A
        `ValueError` (one line) where the copy cannot be made or its loss does not run."""
        if self.dtype == torch.float64:
            return self
        wide = self.float64_copy()
        check_loss(wide)
        return wide

    def float64_copy(self) -> NetProblem:
        """`in_float64` without its check that the loss runs (itself if it is float64; a
        `ValueError` where the model cannot be copied): for an evaluation on a few rows."""
        if self.dtype == torch.float64:
            return self
        try:
            model = copy.deepcopy(self.model).to(torch.float64)
            loss_fn = _loss_like_model(self.loss_fn, torch.float64, self.device)
        except Exception as err:  # noqa: BLE001 - a user's module: report it on one line
            raise ValueError(f"the model cannot be copied to float64: {_one_line(err)}") from None
        return replace(
            self,
            model=model,
            loss_fn=loss_fn,
            data=self.data.to(torch.float64),
            w_star=self.w_star.double(),
        )

    def in_float64_or_self(self) -> tuple[NetProblem, str | None]:
        """(`in_float64`, None), or — where that copy cannot be made or its loss does not run
        in float64 — (this problem, the one-line reason): for the evaluations that prefer
        float64 and say so when they cannot have it."""
        try:
            return self.in_float64(), None
        except ValueError as err:
            return self, str(err)

    def output(self, w: torch.Tensor, x: Any) -> Any:
        """model(x; w) as the analysis evaluates it: attention on the math kernel, the parts
        ``torch.compile`` wrapped run eagerly, weight normalisation by its definition (module
        doc)."""
        eager = torch.compiler.set_stance("force_eager") if self.compiled else nullcontext()
        defined = DefinedWeightNorm() if self.weight_normed else nullcontext()
        with sdpa_kernel(SDPBackend.MATH), eager, defined:
            return call_model(self.model, self.params(w), x)

    @cached_property
    def weight_normed(self) -> bool:
        """The model has weight normalisation (`stability.nets.weight_norm`)."""
        return has_weight_norm(self.model)

    @cached_property
    def compiled(self) -> bool:
        """The model or one of its modules is wrapped by ``torch.compile``."""
        dynamo = sys.modules.get("torch._dynamo.eval_frame")  # loaded by torch.compile
        return dynamo is not None and any(
            isinstance(m, dynamo.OptimizedModule) for m in self.model.modules()
        )

    def batch_loss(self, w: torch.Tensor, x: Any, y: Any) -> torch.Tensor:
        """loss(model(x; w), y) on one batch (`output`)."""
        return self.loss_fn(self.output(w, x), y)

    def loss(self, w: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """f(w): the loss over the data (weighted over its batches), or on the samples
        ``index`` (a minibatch)."""
        if index is not None:
            return self.batch_loss(w, *self.data.rows(index))
        total = None
        for x, y, weight in self.data:
            part = self.batch_loss(w, x, y) * weight
            total = part if total is None else total + part
        return total

    def gradient(self, w: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """∇f(w) as a flat vector by plain ``torch.autograd``, one batch at a time (the graph of
        one batch held at once), for a ``w`` outside torch.func transforms: the operations of
        `transformable_gradient` without its per-call wrapping (0.3 ms instead of 1.0 ms on the
        diabetes example, the same numbers), and for a model torch.func cannot transform (a
        custom ``autograd.Function`` without ``setup_context``) too."""
        if index is not None:
            return self.batch_gradient(w, *self.data.rows(index))
        return self._sum(lambda x, y: self.batch_gradient(w, x, y))

    def batch_gradient(self, w: torch.Tensor, x: Any, y: Any) -> torch.Tensor:
        """∇f_b(w) on one batch by plain ``torch.autograd`` (`plain_grad`; the loop of a
        `stability.nets.vectorize.vectorized` call that maps ``torch.func.grad``)."""
        return plain_grad(self.batch_loss)(w, x, y)

    def transformable_gradient(
        self, w: torch.Tensor, index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """∇f(w) by ``torch.func.grad`` (reverse mode, one batch at a time), for use inside
        ``vmap`` (runs side by side)."""
        if index is not None:
            return grad(self.batch_loss)(w, *self.data.rows(index))
        return self._sum(lambda x, y: grad(self.batch_loss)(w, x, y))

    def needs_second_derivative(self) -> None:
        """A `ValueError` naming the problem where its second derivative is missing."""
        if self.second_derivative_missing:
            raise ValueError(f"problem: {self.second_derivative_missing}")

    def hvp(self, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """∇²f(w)·v, one batch at a time (`batch_hvp`)."""
        self.needs_second_derivative()
        return self._sum(lambda x, y: self.batch_hvp(w, v, x, y))

    def batch_hvp(self, w: torch.Tensor, v: torch.Tensor, x: Any, y: Any) -> torch.Tensor:
        """∇²f_b(w)·v on one batch: reverse-over-reverse (the gradient of ⟨∇f_b, v⟩) by plain
        ``torch.autograd`` (`_eager_hvp`), or forward-over-reverse (the directional derivative
        of ∇f_b along v, `transformable_batch_hvp`) where `hvp_mode` says so (module doc)."""
        self.needs_second_derivative()
        if self.hvp_mode == FORWARD_OVER_REVERSE:
            return self.transformable_batch_hvp(w, v, x, y)
        return _eager_hvp(self.batch_loss, w.detach().requires_grad_(True), v, x, y)

    def transformable_batch_hvp(
        self, w: torch.Tensor, v: torch.Tensor, x: Any, y: Any
    ) -> torch.Tensor:
        """∇²f_b(w)·v on one batch by ``torch.func`` (`batch_hvp`'s products in a form ``vmap``
        can batch, e.g. over samples)."""
        self.needs_second_derivative()

        def g(u):
            return grad(self.batch_loss)(u, x, y)

        if self.hvp_mode == FORWARD_OVER_REVERSE:
            return jvp(g, (w,), (v,))[1]
        return vjp(g, w)[1](v)[0]

    def _sum(self, fn) -> torch.Tensor:
        total = None
        for x, y, weight in self.data:
            part = fn(x, y)
            part = part if weight == 1.0 else part * weight
            total = part if total is None else total + part
        return total

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "n_params": self.dim,
            "samples": self.samples,
            "stage_sizes": list(self.stage_sizes),
            "stages": [list(g) for g in self.stage_names],
        }


def plain_grad(function: Callable) -> Callable:
    """``torch.func.grad(function)`` by plain ``torch.autograd``: ∇_w function(w, *args), for a
    ``w`` outside torch.func transforms and for a model no torch.func transform takes (a custom
    ``autograd.Function`` without ``setup_context``); zero where ``function`` does not depend
    on w."""

    def gradient(w: torch.Tensor, *args: Any) -> torch.Tensor:
        w = w.detach().requires_grad_(True)
        with torch.enable_grad():
            value = function(w, *args)
            if not value.requires_grad:
                return torch.zeros_like(w)
            out = torch.autograd.grad(value, w, allow_unused=True)[0]
        return torch.zeros_like(w) if out is None else out.detach()

    return gradient


def _eager_hvp(batch_loss, w: torch.Tensor, v: torch.Tensor, x: Any, y: Any) -> torch.Tensor:
    """∇²f_b(w)·v as the gradient of ⟨∇f_b(w), v⟩ by plain ``torch.autograd`` (``w`` requires
    grad): the same operations as `NetProblem.transformable_batch_hvp` without torch.func's
    per-call wrapping, bit-identical and faster (ms per product, one thread: 0.38 against 0.85
    on the diabetes example, 2.3 against 3.0 on the digits MLP, 183 against 196 on the tiny
    transformer).  A loss at most linear in w has a zero product."""
    with torch.enable_grad():
        g = torch.autograd.grad(batch_loss(w, x, y), w, create_graph=True)[0]
        if not g.requires_grad:
            return torch.zeros_like(w)
        out = torch.autograd.grad(g, w, v, allow_unused=True)[0]
    return torch.zeros_like(w) if out is None else out.detach()


DTYPES = {"float32": torch.float32, "float64": torch.float64}


def dtype_name(dtype: torch.dtype | str) -> str:
    """``torch.float32`` (or ``"float32"``) → ``"float32"``: the names of `DTYPES`, ``--dtype``."""
    return str(dtype).removeprefix("torch.")


def _own_copy(model: torch.nn.Module) -> torch.nn.Module:
    """The analysis's own copy of the user's model, so that its dtype, device, eval mode and
    dense embedding gradients do not change the model the user holds (at most `MAX_PARAMS`
    parameters: the copy's memory is bounded); the model itself where it cannot be copied."""
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - a module deepcopy cannot take: work on it as given
        return model


def _loss_like_model(loss_fn: Callable, dtype: torch.dtype, device: torch.device) -> Callable:
    """A loss module moved to the model's ``dtype`` and ``device`` (on a copy: its buffers,
    e.g. a class weight, follow the model); any other callable as it is."""
    if isinstance(loss_fn, torch.nn.Module):
        return copy.deepcopy(loss_fn).to(device=device, dtype=dtype)
    return loss_fn


def _dtype(dtype: Any) -> torch.dtype | None:
    if dtype is None or dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")


def _device(device: Any) -> torch.device | None:
    if device is None or isinstance(device, torch.device):
        return device
    try:
        found = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be a torch device such as cpu or cuda:0, got {device!r}"
        ) from None
    if found.type == "meta":  # shapes without values: nothing to evaluate
        raise ValueError(f"device {device!r} holds no values; give cpu or cuda:N")
    return found


def _data(found: dict, source: str) -> tuple[Any, bool]:
    """(batches, full_batch): the problem's data, one pair of tensors or ``data``."""
    has_tensors = "inputs" in found or "targets" in found
    if has_tensors and "data" in found:
        raise ValueError(f"{source} must return either inputs and targets, or data, not both")
    if "data" in found:
        if found["data"] is None or isinstance(found["data"], (torch.Tensor, str)):
            raise ValueError("data must be a re-iterable of (inputs, targets) batches")
        return found["data"], False
    if not ("inputs" in found and "targets" in found):
        raise ValueError(f"{source} must return inputs and targets together")
    inputs, targets = as_tensors(found["inputs"]), as_tensors(found["targets"])
    samples = []
    for part, what in ((inputs, "inputs"), (targets, "targets")):
        leaves = [t for t in tree_flatten(part)[0] if isinstance(t, torch.Tensor)]
        if not leaves:
            raise ValueError(
                f"{what} must be a torch.Tensor or a NumPy array of numbers (or a tuple or "
                f"dict of them), got {type(part).__name__}"
            )
        if leaves[0].ndim == 0 or leaves[0].shape[0] == 0:
            raise ValueError(f"{what} must have a batch dimension with at least one sample")
        samples.append(leaves[0].shape[0])
    if samples[0] != samples[1]:
        raise ValueError(
            f"inputs and targets must have the same number of samples, got {samples[0]} and "
            f"{samples[1]}"
        )
    return [(inputs, targets)], True


def _first_batch(batches: Any) -> Any:
    try:
        return next(iter(batches))
    except StopIteration:
        raise ValueError("data must hold at least one batch") from None
    except Exception as err:  # noqa: BLE001 - a user's loader: report it on one line
        raise ValueError(f"data failed to give a batch: {_one_line(err)}") from None


def evaluation_dtype(model: torch.nn.Module, first_batch: Any) -> torch.dtype:
    """The default dtype (module doc): the model's, promoted to the data's floating dtype where
    that is wider; half precision evaluated in float32."""
    params = [p for p in model.parameters() if p.is_floating_point()]
    dtype = params[0].dtype if params else torch.get_default_dtype()
    found = floating_dtype(first_batch)
    if found is not None:
        dtype = torch.promote_types(dtype, found)
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


@analysis_settings()
def problem_from_dict(
    found: Any,
    *,
    stages: int | None = None,
    source: str = "problem function",
    dtype: Any = None,
    device: Any = None,
) -> NetProblem:
    """Check a problem dict (module doc) and build the `NetProblem`.

    ``stages``: the number of stages P when the dict has no ``stages`` (default 1); if it has
    them, P must agree.  ``dtype`` (``"float32"``/``"float64"``) and ``device`` override the
    model's (module doc).
    """
    keys = ("model", "loss")
    if not isinstance(found, dict) or not all(k in found for k in keys):
        got = sorted(found) if isinstance(found, dict) else type(found).__name__
        raise ValueError(
            f"{source} must return a dict with keys model, loss, inputs, targets (or data "
            f"instead of inputs and targets; optionally stages), got {got}"
        )
    unknown = sorted(set(found) - {*REQUIRED, "data", "stages"})
    if unknown:
        raise ValueError(f"{source} returned unknown key {unknown[0]!r}")
    dtype, device = _dtype(dtype), _device(device)
    model = found["model"]
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(found["loss"]):
        raise ValueError("loss must be a callable (outputs, targets) -> scalar tensor")
    if any(t.is_meta for t in (*model.parameters(), *model.buffers())):
        raise ValueError(
            "the model's weights are on the meta device (not materialised): give it its "
            "weights first (model.to_empty(device='cpu'), then load_state_dict)"
        )
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("the model has no trainable parameters")
    p_total = sum(p.numel() for p in trainable)
    if p_total > MAX_PARAMS:
        raise ValueError(f"the model has {p_total} parameters; at most {MAX_PARAMS} are supported")
    batches, full_batch = _data(found, source)
    if dtype is None:
        dtype = evaluation_dtype(model, batches[0] if full_batch else _first_batch(batches))
    if device is None:
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
    try:
        model = _own_copy(model).to(device=device, dtype=dtype).eval()
        loss_fn = _loss_like_model(found["loss"], dtype, device)
    except (RuntimeError, AssertionError) as err:
        raise ValueError(f"device {str(device)!r} is not available: {_one_line(err)}") from None
    for name, module in model.named_modules():  # dense gradients of sparse embeddings
        if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
            module.sparse = False
            if module.max_norm is not None:
                raise ValueError(
                    f"{type(module).__name__} {name!r} has max_norm={module.max_norm}: it "
                    f"renormalises its weight's rows in place at every forward, so the loss is "
                    f"not a function of the weights alone; set max_norm=None for the analysis "
                    f"(the same loss where every row's norm is within it)"
                )
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    all_names = [n for n, _ in named]
    if found.get("stages") is not None:
        groups = _check_stages(found["stages"], all_names)
        if stages is not None and stages != len(groups):
            raise ValueError(
                f"stages: the problem defines {len(groups)} stages, but {stages} were asked for"
            )
    else:
        sizes = [p.numel() for _, p in named]
        groups = split_stages(all_names, sizes, 1 if stages is None else stages)
    tensors = dict(named)
    order = [n for g in groups for n in g]
    w_star = torch.cat([tensors[n].detach().reshape(-1) for n in order])
    try:
        data = NetData(batches, dtype=dtype, device=device, full_batch=full_batch)
    except ValueError:
        raise
    except Exception as err:  # noqa: BLE001 - a user's loader: report it on one line
        raise ValueError(f"data failed to give its batches: {_one_line(err)}") from None
    problem = NetProblem(
        model=model,
        loss_fn=loss_fn,
        data=data,
        names=tuple(order),
        shapes=tuple(tuple(tensors[n].shape) for n in order),
        stage_names=tuple(tuple(g) for g in groups),
        w_star=w_star,
        source=source,
    )
    check_loss(problem)
    x, y, _ = next(iter(problem.data))
    n = batch_size(x, y)
    rows = first_rows((x, y), n, min(n, FEW_SAMPLES))
    checked, (xs, ys) = _in_float64_if_it_runs(problem, rows)
    _check_gradient(checked, xs, ys)
    missing = second_derivative_missing(
        lambda w: checked.batch_loss(w, xs, ys),
        lambda w: checked.batch_gradient(w, xs, ys),
        lambda w, v: checked.batch_hvp(w, v, xs, ys),
        checked.w_star,
    )
    return replace(problem, second_derivative_missing=missing) if missing else problem


def _buffers_changed(model: torch.nn.Module, before: dict[str, torch.Tensor]) -> bool:
    """The model's buffers are not those of ``before`` (names, or values: NaN equal to NaN,
    as in a buffer left uninitialised)."""
    after = dict(model.named_buffers())
    if after.keys() != before.keys():
        return True
    return not all(
        torch.equal(torch.nan_to_num(after[k]), torch.nan_to_num(before[k]))
        and torch.equal(after[k].isnan(), before[k].isnan())
        if after[k].is_floating_point()
        else torch.equal(after[k], before[k])
        for k in after
    )


def _rng_state(device: torch.device) -> torch.Tensor:
    """The state of the random generator the model would draw from on ``device``."""
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    return torch.random.get_rng_state()


def _in_float64_if_it_runs(problem: NetProblem, rows: Any) -> tuple[NetProblem, Any]:
    """(the problem, ``rows``) in float64 where the model copies to it and its loss runs
    there on ``rows`` (the second-derivative check's differences: in float32 they err by ~1 %
    on a sharp model, `stability.nets.second_derivative`), else as they are."""
    try:
        wide = problem.float64_copy()
        wide_rows = convert(rows, wide.dtype, wide.device)
        with torch.no_grad():
            wide.batch_loss(wide.w_star, *wide_rows)
    except Exception:  # noqa: BLE001 - a model that runs in its own dtype only
        return problem, rows
    return wide, wide_rows


def check_loss(problem: NetProblem) -> float:
    """f(w*) as a float; a `ValueError` if the model or the loss fail, draw random numbers (the
    loss would not be a function of w), or two passes over the data differ (it would not be one
    either), or it computes in half precision (`_HalfPrecisionOps`: its curvature would be
    noise), or the loss is not a finite scalar, or it sums over the samples
    (`_sums_over_samples`) of data in several batches.  One batch with a summed loss is a
    function of w like any other (full-batch gradient descent on the sum); `NetData` then
    refuses to draw minibatches from it (``summed_loss``)."""
    try:
        with torch.no_grad():
            value = problem.loss(problem.w_star)
            again = _loss_and_scale(problem) if problem.data.passes_may_differ else None
            x, y, _ = next(iter(problem.data))  # a DataLoader draws its seed here, not below
            before = _rng_state(problem.device)
            buffers = {name: b.clone() for name, b in problem.model.named_buffers()}
            with _HalfPrecisionOps() as half:
                problem.batch_loss(problem.w_star, x, y)
    except Exception as err:  # noqa: BLE001 - a user's model: report it on one line
        if "does not require grad and does not have a grad_fn" in str(err):  # under no_grad
            raise ValueError(f"the model or loss uses {AUTOGRAD_IN_FORWARD}") from None
        raise ValueError(
            f"the model or loss failed on the inputs: {_one_line(err)}{_spread_hint(problem, err)}"
        ) from None
    if not torch.equal(before, _rng_state(problem.device)):
        raise ValueError(
            "the model or loss draws random numbers in eval mode (dropout or noise that does "
            "not check self.training), so the loss is not a function of the weights; draw them "
            "only when self.training (the analysis runs the model in eval mode)"
        )
    if _buffers_changed(problem.model, buffers):
        raise ValueError(f"the model uses {CHANGED_BUFFER}")
    if half.found:
        op, dtype = half.found
        raise ValueError(
            f"the model computes in {str(dtype).removeprefix('torch.')} inside its forward pass "
            f"(first in {op}; torch.autocast, or a cast to half precision), where Hessian-vector "
            f"products have 8 (bfloat16) or 11 (float16) significant bits, noise; turn autocast "
            f"off for the analysis (it evaluates the model in float32 or float64)"
        )
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise ValueError("loss must return a scalar tensor (the mean over samples)")
    f = float(value.detach())
    if not math.isfinite(f):
        raise ValueError(f"the loss at the model's weights is not finite ({f})")
    f_again, scale = again if again is not None else (f, 0.0)
    rounding = 10 * torch.finfo(problem.dtype).eps * scale * (problem.data.batches + 100)
    if abs(f_again - f) > rounding:
        raise ValueError(
            f"data: two passes over it give the loss {f:.9g} and {f_again:.9g} at the model's "
            f"weights, so its batches hold other samples on every pass (a sampler with "
            f"replacement, drop_last with shuffle, a random augmentation) and the loss is not "
            f"one function of the weights; give the analysis a loader whose every pass holds the "
            f"same samples (shuffle=True is fine)"
        )
    problem.data.summed_loss = _sums_over_samples(problem, x, y)
    if problem.data.summed_loss and problem.data.batches > 1:
        raise ValueError(
            f"loss sums over the samples ({SUMMED_LOSS}), and the data comes in "
            f"{problem.data.batches} batches: f = Σ_b (n_b/N)·loss_b would be the loss of the "
            f"loader's batch size; give the mean over samples (reduction='mean'; a sum-loss run "
            f"at batch size B is the mean-loss run at lr·B), or the data as one batch"
        )
    return f


class _HalfPrecisionOps(TorchFunctionMode):
    """Watches the torch functions and tensor methods run inside it: ``found`` is the first
    whose output is float16 or bfloat16, (its name, that dtype), or None.  A function mode, not
    a dispatch mode: entering the first ``TorchDispatchMode`` of a process imports
    ``torch._dynamo`` (2.6 s), which `net curvature` and `net max-lr` need nowhere else."""

    def __init__(self) -> None:
        super().__init__()
        self.found: tuple[str, torch.dtype] | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.found is None:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and t.dtype in (torch.float16, torch.bfloat16):
                    self.found = (getattr(func, "__name__", str(func)), t.dtype)
                    break
        return out


def _check_gradient(problem: NetProblem, x: Any, y: Any) -> None:
    """A `ValueError` naming the problem where torch cannot differentiate the loss of a batch
    (``x``, ``y``: its first rows) in the weights — a loss outside torch's graph (a forward
    pass under ``torch.no_grad`` or detached from the weights: `plain_grad` would read a zero
    gradient), or a backward that fails (a tensor its backward needs modified in place) —
    where every command would otherwise stop in torch.  Rows that do not run alone say
    nothing (the commands run the whole batch)."""
    w = problem.w_star.detach().requires_grad_(True)
    try:
        with torch.enable_grad():
            value = problem.batch_loss(w, x, y)
    except Exception:  # noqa: BLE001 - rows that do not run alone: see the docstring
        return
    if not value.requires_grad:
        raise ValueError(
            "the loss does not depend on the weights in torch's graph (a forward pass "
            "under torch.no_grad or torch.inference_mode, or an output detached from the "
            "weights), so there is no gradient to analyse; run the forward pass with gradients"
        )
    try:
        with torch.enable_grad():
            torch.autograd.grad(value, w, allow_unused=True)
    except Exception as err:  # noqa: BLE001 - a user's model: report it on one line
        hint = (
            " (write that operation out of place, e.g. x = x * 2 for x.mul_(2))"
            if "inplace operation" in str(err)
            else ""
        )
        raise ValueError(
            f"torch cannot differentiate the loss in the weights: {_one_line(err)}{hint}"
        ) from None


def _loss_and_scale(problem: NetProblem) -> tuple[float, float]:
    """f(w*) by another pass over the data, summed as `NetProblem.loss` sums it, and
    Σ_b (n_b/N)·|loss_b|, the scale of its rounding: two passes over the same samples in another
    order differ by ≲ ε·scale for each batch's mean and each addition, so `check_loss` allows
    10·ε·scale·(batches + 100) before it calls them different samples (a difference smaller
    than that would not move the analysis either)."""
    total, scale = None, 0.0
    for x, y, weight in problem.data:  # under check_loss's no_grad
        part = problem.batch_loss(problem.w_star, x, y) * weight
        total = part if total is None else total + part
        scale += abs(float(part))
    return float(total), scale


def _sums_over_samples(problem: NetProblem, x: Any, y: Any) -> bool:
    """The batch's first few samples given twice (every tensor with the batch's samples first:
    those rows concatenated with themselves) have twice their loss, to float32 rounding: a sum
    over samples, where a mean gives the same loss.  False where the rows do not run alone (a
    tensor all samples share, a model that mixes samples)."""
    n = batch_size(x, y)
    few = min(n, FEW_SAMPLES)
    try:
        with torch.no_grad():
            once = float(problem.batch_loss(problem.w_star, *first_rows((x, y), n, few)))
            twice = float(problem.batch_loss(problem.w_star, *first_rows((x, y), n, few, 2)))
    except Exception:  # noqa: BLE001 - rows that do not run alone say nothing either way
        return False
    return once != 0.0 and math.isclose(twice, 2.0 * once, rel_tol=1e-5)


def _spread_hint(problem: NetProblem, err: Exception) -> str:
    """Where a model's call failed on its arguments and the inputs were spread (a dict as
    ``model(**x)``, a tuple or list as ``model(*x)``, `stability.nets.batches.call_model`): how
    to pass them whole instead."""
    if not isinstance(err, TypeError):
        return ""
    inputs = next(iter(problem.data))[0]
    if isinstance(inputs, dict):
        spread = "a dict of inputs is passed as model(**inputs)"
    elif isinstance(inputs, (tuple, list)):
        spread = "a tuple or list of inputs is passed as model(*inputs)"
    else:
        return ""
    return f" ({spread}; give (inputs,) to pass them whole as model(inputs))"


AUTOGRAD_IN_FORWARD = (
    "torch.autograd inside its forward pass (requires_grad_ and torch.autograd.grad: a "
    "derivative in the inputs, as a physics-informed network's), which torch.func cannot "
    "transform; write that derivative with torch.func (torch.func.grad or jacrev, vmapped over "
    "the samples), which the analysis differentiates through"
)
"""A model that differentiates with torch.autograd in its forward pass, as the refusals say it."""

CHANGED_BUFFER = (
    "an in-place change of a tensor it keeps (a buffer updated in forward, such as a running "
    "statistic, even in eval mode), which torch.func cannot transform and which makes the loss "
    "depend on how often the model ran; update it only when self.training (the analysis runs "
    "the model in eval mode)"
)
"""A model that changes its buffers in its forward pass in eval mode, as the refusals say it."""

PLAIN_AUTOGRAD = (
    ", which forward-over-reverse Hessian-vector products need (NetProblem.hvp_mode); the "
    "default reverse-over-reverse ones, and every command, run such a model by plain autograd"
)
"""What answers a model torch.func cannot transform, as the refusals say it."""

TORCH_FUNC_LIMITS = {
    "You are attempting to call Tensor.requires_grad_()": AUTOGRAD_IN_FORWARD,
    "saved tensor hooks": "a saved-tensor hook (torch.autograd.graph.save_on_cpu, or one of "
    "its own; torch.utils.checkpoint the analysis runs plainly), which torch.func cannot "
    f"differentiate through{PLAIN_AUTOGRAD}; or turn it off for the analysis (it saves memory, "
    "it does not change the values)",
    "autograd.Function with functorch transforms": "a custom torch.autograd.Function that "
    f"torch.func cannot transform (it needs setup_context, and vmap support){PLAIN_AUTOGRAD}",
    "mutate a captured Tensor": CHANGED_BUFFER,
    "Cannot access data pointer of Tensor that doesn't have storage": "an operation that "
    "reads a tensor's memory directly in its forward pass (.numpy(), or an RNN over a "
    f"sequence packed by pack_padded_sequence), which torch.func cannot transform"
    f"{PLAIN_AUTOGRAD}; or compute that part with torch operations (an RNN: give it the padded "
    "batch and mask the padding in the loss)",
    "its base or another view of its base has been modified inplace": "an in-place change of "
    "its weights in its forward pass (such as F.embedding's max_norm renormalising rows), so "
    "the loss is not a function of the weights alone; drop it for the analysis",
}
"""What torch.func says when it cannot transform a model (its error's words) → what the model
uses, as the refusal says it."""

NO_DERIVATIVE = re.compile(r"derivative for '?([\w.:]+?)'? is not implemented")
"""What torch says of an operation whose derivative it lacks (EmbeddingBag: its backward's)."""


def refusing_torch_func_limits(function: Callable) -> Callable:
    """Decorate a ``net`` function: a model torch.func cannot transform (`TORCH_FUNC_LIMITS`) is
    refused with a one-line `ValueError` naming the problem, not an internal error.  Plain
    autograd runs such a model wherever vmap fails (the loop of `stability.nets.vectorize`), so
    the limit is met only where a torch.func transform is required (forward-over-reverse
    products, `NetProblem.hvp_mode`), not at loading; so is an operation whose derivative
    torch does not implement, where curvature needs it."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except RuntimeError as err:  # NotImplementedError included
            for words, what in TORCH_FUNC_LIMITS.items():
                if words in str(err):
                    raise ValueError(f"problem: the model uses {what}") from None
            missing = NO_DERIVATIVE.search(str(err))
            if missing:
                hint = (
                    " (an nn.Embedding followed by the bag's sum or mean has the same values)"
                    if "embedding_bag" in missing[1]
                    else ""
                )
                raise ValueError(
                    f"problem: the model uses an operation whose derivative torch does not "
                    f"implement ({missing[1]}; curvature needs second derivatives){hint}"
                ) from None
            raise

    return wrapper


def load_problem(
    spec: str, *, stages: int | None = None, dtype: Any = None, device: Any = None
) -> NetProblem:
    """The problem ``FILE.py:FUNCTION`` (module doc), checked, with ``stages`` as P and the
    ``dtype``/``device`` overrides of `problem_from_dict`."""
    path_text, sep, func = str(spec).rpartition(":")
    if not sep or not path_text or not func:
        raise ValueError(f"problem must be FILE.py:FUNCTION, got {spec!r}")
    path = Path(path_text).expanduser()
    if reason := unreadable_file(path):
        raise ValueError(f"problem file {path_text!r} {reason}")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"_stability_problem_{digest}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"problem file {path_text!r} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        try:
            module_spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001 - a user's file: report it on one line
            raise ValueError(f"problem file {path_text!r} raised {_one_line(err)}") from None
        fn = getattr(module, func, None)
        if not callable(fn):
            raise ValueError(f"problem file {path_text!r} has no function {func!r}")
        try:
            found = fn()
        except Exception as err:  # noqa: BLE001 - a user's function: report it on one line
            raise ValueError(f"problem function {func!r} raised {_one_line(err)}") from None
    finally:
        sys.path.remove(folder)
    try:
        return problem_from_dict(
            found, stages=stages, source=f"{path_text}:{func}", dtype=dtype, device=device
        )
    except ValueError as err:  # what is wrong with the problem names it (the --problem flag)
        if str(err).startswith(("stages", "dtype", "device")):
            raise
        if str(err).startswith(path_text):  # it names the problem already
            raise ValueError(f"problem {err}") from None
        raise ValueError(f"problem {spec}: {err}") from None


__all__ = [
    "DTYPES",
    "MAX_PARAMS",
    "NetProblem",
    "check_loss",
    "evaluation_dtype",
    "load_problem",
    "refusing_torch_func_limits",
    "problem_from_dict",
    "split_stages",
]
