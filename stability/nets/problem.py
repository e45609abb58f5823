r"""A network problem: a user's PyTorch model, its loss on a full batch, and its pipeline stages.

A *problem file* is a Python file with a function returning a dict::

    def problem():
        return {
            "model": model,          # a torch.nn.Module
            "loss": loss,            # callable (outputs, targets) -> scalar, the mean over samples
            "inputs": X,             # tensor: the full batch
            "targets": Y,            # tensor
            "stages": [[...], ...],  # optional: parameter names per stage, in pipeline order
        }

given on the command line as ``--problem path/to/file.py:problem``.  `load_problem` imports it
(the file's folder first on ``sys.path``, so it may import its neighbours) and checks every
part with a one-line `ValueError` naming what is wrong.

**The parameter vector.**  Every trainable parameter appears in exactly one stage; the flat
vector w ∈ ℝ^p lists stage 1's parameters first (in the order the stage names them), then stage
2's, … — so stage i is the contiguous block of |w_i| entries the coupled analysis
(`stability.coupled.system`) and the simulator (`stability.nets.simulator`) work on.  Without
``stages`` the parameters, in the model's order, are cut into P contiguous groups of whole
tensors of about equal size (`split_stages`).

**Evaluation.**  The model is converted to float64 and put in eval mode (dropout off,
normalisation with its stored statistics), so the loss is a deterministic function of w:

    f(w) = loss(model(inputs; w), targets),     ∇f(w) and ∇²f(w)·v by ``torch.func``

(`NetProblem.loss`, `NetProblem.gradient`, `NetProblem.hvp`: reverse mode for the gradient,
forward-over-reverse for Hessian-vector products).  Minibatches select rows of the batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.func import functional_call, grad, jvp, vjp

REQUIRED = ("model", "loss", "inputs", "targets")
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
    """Parameter tensors, in order, cut into ``stages`` contiguous groups of about equal size.

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
    if not isinstance(stages, (list, tuple)) or not stages:
        raise ValueError("stages must be a non-empty list of lists of parameter names")
    known = set(names)
    seen: dict[str, int] = {}
    out = []
    for i, group in enumerate(stages, start=1):
        if isinstance(group, str) or not isinstance(group, (list, tuple)) or not group:
            raise ValueError(f"stage {i} must be a non-empty list of parameter names")
        for name in group:
            if name not in known:
                some = ", ".join(list(names)[:6]) + (", …" if len(names) > 6 else "")
                raise ValueError(
                    f"stage {i} names {name!r}, which is not a trainable parameter of the model "
                    f"(its parameters: {some})"
                )
            if name in seen:
                raise ValueError(f"parameter {name!r} is in stage {seen[name]} and stage {i}")
            seen[name] = i
        out.append([str(n) for n in group])
    missing = [n for n in names if n not in seen]
    if missing:
        raise ValueError(f"parameter {missing[0]!r} is in no stage (every parameter needs one)")
    return out


# -- the problem -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NetProblem:
    """A model, its loss on a full batch, and the stage layout of its flat parameter vector.

    ``names``/``shapes``: the trainable parameters in flat order (stage by stage);
    ``stage_names``: the names per stage; ``w_star``: the model's weights as a flat float64
    tensor — the point the analysis linearizes at (near a minimum); ``source``: where it came
    from (``FILE.py:FUNCTION`` or ``""``).
    """

    model: torch.nn.Module
    loss_fn: Callable[[Any, Any], Any]
    inputs: torch.Tensor
    targets: torch.Tensor
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    stage_names: tuple[tuple[str, ...], ...]
    w_star: torch.Tensor
    source: str = ""
    hvp_mode: str = FORWARD_OVER_REVERSE

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        return tuple(math.prod(s) for s in self.shapes)

    @property
    def dim(self) -> int:
        """Number of trainable parameters p."""
        return int(self.w_star.numel())

    @property
    def samples(self) -> int:
        return int(self.inputs.shape[0])

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

    def _batch(self, index: torch.Tensor | None):
        if index is None:
            return self.inputs, self.targets
        return self.inputs[index], self.targets[index]

    def loss(self, w: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """f(w): the loss on the full batch, or on the rows ``index`` (a minibatch)."""
        x, y = self._batch(index)
        return self.loss_fn(functional_call(self.model, self.params(w), (x,)), y)

    def gradient(self, w: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """∇f(w) as a flat vector (reverse mode)."""
        return grad(self.loss)(w, index)

    def hvp(self, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """∇²f(w)·v: forward-over-reverse (the directional derivative of ∇f along v), or
        reverse-over-reverse where `hvp_mode` says so (module doc)."""
        if self.hvp_mode == FORWARD_OVER_REVERSE:
            return jvp(grad(self.loss), (w,), (v,))[1]
        return vjp(grad(self.loss), w)[1](v)[0]

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "n_params": self.dim,
            "samples": self.samples,
            "stage_sizes": list(self.stage_sizes),
            "stages": [list(g) for g in self.stage_names],
        }


def _as_float64(t: Any, what: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.ndim == 0 or t.shape[0] == 0:
        raise ValueError(f"{what} must have a batch dimension with at least one sample")
    return t.detach().to(torch.float64) if t.is_floating_point() else t.detach()


def problem_from_dict(
    found: Any, *, stages: int | None = None, source: str = "problem function"
) -> NetProblem:
    """Check a problem dict (module doc) and build the `NetProblem`.

    ``stages``: the number of stages P when the dict has no ``stages`` (default 1); if it has
    them, P must agree.
    """
    if not isinstance(found, dict) or not all(k in found for k in REQUIRED):
        got = sorted(found) if isinstance(found, dict) else type(found).__name__
        raise ValueError(
            f"{source} must return a dict with keys model, loss, inputs, targets "
            f"(and optionally stages), got {got}"
        )
    unknown = sorted(set(found) - {*REQUIRED, "stages"})
    if unknown:
        raise ValueError(f"{source} returned unknown key {unknown[0]!r}")
    model = found["model"]
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(found["loss"]):
        raise ValueError("loss must be a callable (outputs, targets) -> scalar tensor")
    model = model.double().eval()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("the model has no trainable parameters")
    all_names = [n for n, _ in named]
    p_total = sum(p.numel() for _, p in named)
    if p_total > MAX_PARAMS:
        raise ValueError(f"the model has {p_total} parameters; at most {MAX_PARAMS} are supported")
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
    w_star = torch.cat([tensors[n].detach().reshape(-1) for n in order]).to(torch.float64)
    inputs = _as_float64(found["inputs"], "inputs")
    targets = _as_float64(found["targets"], "targets")
    if inputs.shape[0] != targets.shape[0]:
        raise ValueError(
            f"inputs and targets must have the same number of samples, got "
            f"{inputs.shape[0]} and {targets.shape[0]}"
        )
    problem = NetProblem(
        model=model,
        loss_fn=found["loss"],
        inputs=inputs,
        targets=targets,
        names=tuple(order),
        shapes=tuple(tuple(tensors[n].shape) for n in order),
        stage_names=tuple(tuple(g) for g in groups),
        w_star=w_star,
        source=source,
    )
    check_loss(problem)
    return _with_hvp_mode(problem)


def _with_hvp_mode(problem: NetProblem) -> NetProblem:
    """Forward-over-reverse HVPs where torch supports them for this model and loss.

    Some losses have no forward-mode derivative of their backward in torch (2.13:
    ``mse_loss`` raises "ZeroTensors are immutable"); those problems use reverse-over-reverse
    (the gradient of ⟨∇f, v⟩), which gives the same product at about the same cost.
    """
    w = problem.w_star
    try:
        jvp(grad(problem.loss), (w,), (torch.ones_like(w),))
    except RuntimeError:
        return dataclasses.replace(problem, hvp_mode=REVERSE_OVER_REVERSE)
    return problem


def check_loss(problem: NetProblem) -> float:
    """f(w*) as a float; a `ValueError` if the model or the loss fail or the loss is not a
    finite scalar."""
    try:
        with torch.no_grad():
            value = problem.loss(problem.w_star)
    except Exception as err:  # noqa: BLE001 - a user's model: report it on one line
        raise ValueError(f"the model or loss failed on the inputs: {_one_line(err)}") from None
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise ValueError("loss must return a scalar tensor (the mean over samples)")
    f = float(value)
    if not math.isfinite(f):
        raise ValueError(f"the loss at the model's weights is not finite ({f})")
    return f


def load_problem(spec: str, *, stages: int | None = None) -> NetProblem:
    """The problem ``FILE.py:FUNCTION`` (module doc), checked, with ``stages`` as P."""
    path_text, sep, func = str(spec).rpartition(":")
    if not sep or not path_text or not func:
        raise ValueError(f"problem must be FILE.py:FUNCTION, got {spec!r}")
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ValueError(f"problem file {path_text!r} does not exist")
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
    return problem_from_dict(found, stages=stages, source=f"{path_text}:{func}")


__all__ = [
    "MAX_PARAMS",
    "NetProblem",
    "check_loss",
    "load_problem",
    "problem_from_dict",
    "split_stages",
]
