r"""Backpropagation with inconsistent weights: forward, backward and recompute weights per layer.

Without weight stashing a pipeline stage's backward pass runs with newer weights than its
forward pass did (PipeMare Sec. 2): the gradient it computes is ∇f(u_fwd, u_bkwd), "the value
of the gradient that would be computed by the backpropagation algorithm using the weights u_fwd
in the forward pass and weights u_bkwd in the backward pass" — not the gradient of any loss.
With recompute (PipeMare App. D.1) the activations the backward pass needs are not stored but
recomputed with a third set of weights, u_recomp.  `inconsistent_gradient` computes it for
every layer of any module ``torch.func`` differentiates.  A **unit** is a module that holds
trainable parameters of its own (with everything below it: ``nn.MultiheadAttention`` with its
output projection, a ``LayerNorm``, an ``Embedding``, a ``Linear``); units never nest (`units`).
The model itself is no unit when its children hold parameters too: its own parameters (a
position embedding, a class token) are then differentiated as they are, with their forward
values — exact where they enter additively — and its children are the units (else every
layer of a GPT- or ViT-like model would be one unit, the whole model).
Each unit's forward is replaced, for the one reverse pass that computes g, by an expression
whose value is the forward one and whose derivatives are the backward pass's (⁻: no gradient
flows through):

* a **bilinear unit** y = L(a, W) + b (``Linear``, ``Conv1d/2d/3d``)::

      y = L(a, W_b) + L(a⁻, θ − W_b) + b

  value L(a, θ) + b, ∂/∂a = L(·, W_b), ∂/∂θ = L(a, ·);
* **any other unit** f(a; W) (PipeMare's backward pass with other weights: J_a f(a; W_b) and
  J_W f(a; W_b) at the forward activations a)::

      y = f(a; W_b + θ − θ⁻) − f(a; W_b)⁻ + f(a; θ)⁻

  value f(a; θ), ∂/∂a = J_a f(a; W_b), ∂/∂θ = J_W f(a; W_b) — three evaluations of the unit, on
  every floating output (a tuple's, too).  On a bilinear unit it gives the expression above
  (the two agree to rounding: tests/test_nets_models.py), which is cheaper and used there;

θ carries the weights whose activations the backward pass sees: u_fwd without recompute,
u_recomp with it.  The gradient is taken with respect to θ only; W_b (a different tensor)
stays differentiable for an outer derivative, H_b = ∂g/∂u_bkwd (`stability.nets.sensitivity`).
Parameter-free layers (activations, pooling, residual sums, attention masks) are
differentiated as they are, at the activations the backward pass sees.  A tied weight (an
output layer sharing the embedding's matrix) is one parameter under two names: every unit that
uses it takes its backward value (`parameter_aliases`), and its gradient sums theirs.

**Granularity.**  ``granularity="layer"`` (default): the units above; the stage's backward pass
is the chain of its units', each at its forward input.  ``granularity="stage"``: the unit is
as much of a stage as one function of one input is (`stage_units`) — the outermost module
whose trainable parameters all lie in one stage (a transformer block that is a stage), or a
run of consecutive children of an ``nn.Sequential`` in one stage (from its first child with
parameters to its last: the parameter-free ones in between join it) — so the backward pass
differentiates F_s(a_s; W_b) at the stage's forward input a_s: the activations inside the
unit are those of the backward weights, as when a stage recomputes its activations from its
stored input with them.  Where a stage is one such unit, this is the stage's backward pass
exactly; a stage made of several (an embedding, then a block) chains them at their forward
inputs.  A parameter held directly by a module whose parameters span stages (a position
embedding on the model itself) is in no unit: it is differentiated as it is, with its forward
value (exact where it enters additively); a layer whose parameters span stages is its own
unit.  A unit that is a single Linear or Conv layer takes
the bilinear expression, so where every stage is one layer the two granularities agree
(tests/test_nets_backward.py).

**Recompute.**  The activations are recomputed through the whole model from its input (one
checkpoint at the input: PipeMare Recompute with a single segment, App. A.3) with θ = u_recomp,
and the loss is differentiated at the forward output: the output is y_R + (y_F − y_R)⁻ (value
of the forward pass with u_fwd, gradient through the recomputed chain).

With u_bkwd = u_recomp = u_fwd every layer reduces to y = L(a, W) + b and the result is the
ordinary gradient ∇f(u_fwd) (tests: equal to autograd to 1e-12 in float64).  Linearised at a
point w, g = H_f·δu_fwd + H_b·δu_bkwd + H_r·δu_recomp with H_f + H_b + H_r = ∇²f: the matrix
form of PipeMare's quadratic model (eq. 5, App. D.1), whose Δ along a direction v is
−vᵀH_b v (`stability.nets.discrepancy`).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch.func import functional_call

from stability.nets.batches import map_leaves
from stability.nets.problem import NetProblem, plain_grad

BILINEAR = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
"""Layers with the cheaper bilinear expression (module doc)."""

GRANULARITIES = ("layer", "stage")
"""The backward pass's units: layers, or as much of each stage as one function is (module doc)."""

CONSTRUCTIONS = ("auto", "general")
"""``auto``: the bilinear expression on Linear/Conv units, the general one elsewhere;
``general``: the general expression on every unit."""


def units(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The units (module doc): modules that hold trainable parameters of their own, the
    outermost where one holds another (the model itself only if its children hold none), in
    the model's order."""
    found: list[tuple[str, torch.nn.Module]] = []
    inner = any(p.requires_grad for c in model.children() for p in c.parameters())
    for name, module in model.named_modules():
        if not any(p.requires_grad for p in module.parameters(recurse=False)):
            continue
        if not name and inner:
            continue
        if any(name.startswith(f"{outer}.") or not outer for outer, _ in found):
            continue
        found.append((name, module))
    return found


def parameter_aliases(model: torch.nn.Module) -> dict[str, str]:
    """Every qualified name of each parameter → the name the problem knows it by (the first,
    as ``named_parameters()`` lists it): a tied weight (an output layer sharing the embedding's
    matrix) is one parameter under two names."""
    first: dict[int, str] = {}
    return {
        name: first.setdefault(id(p), name)
        for name, p in model.named_parameters(remove_duplicate=False)
    }


class _Run(torch.nn.Sequential):
    """Consecutive children of an ``nn.Sequential`` in one stage, keyed by their indices there
    (so ``name.index.param`` is still the parameter's name); the first carries the run."""


def stage_units(
    model: torch.nn.Module, stages: Sequence[Sequence[str]]
) -> list[tuple[str, torch.nn.Module]]:
    """The units of ``granularity="stage"`` (module doc), in the model's order: outermost
    modules whose trainable parameters all lie in one of ``stages`` (parameter names), and
    runs (`_Run`) of an ``nn.Sequential``'s children in one stage."""
    stage_of = {n: i for i, group in enumerate(stages) for n in group}
    aliases = parameter_aliases(model)
    found: list[tuple[str, torch.nn.Module]] = []

    def owners(prefix: str, module: torch.nn.Module) -> set[int]:
        named = module.named_parameters(prefix=prefix.rstrip("."))
        return {stage_of[aliases[n]] for n, p in named if p.requires_grad}

    def visit(name: str, module: torch.nn.Module) -> None:
        prefix = f"{name}." if name else ""
        where = owners(prefix, module)
        if not where:
            return
        inner = any(p.requires_grad for c in module.children() for p in c.parameters())
        if len(where) == 1 or not inner:  # one stage, or a layer split across stages
            found.append((name, module))
            return
        if not isinstance(module, torch.nn.Sequential):
            for child, sub in module.named_children():
                visit(prefix + child, sub)
            return
        run: list[tuple[str, torch.nn.Module]] = []
        stage = None

        def close() -> None:
            while run and not any(p.requires_grad for p in run[-1][1].parameters()):
                run.pop()  # trailing parameter-free children are in no run (module doc)
            if len(run) == 1:
                found.append((prefix + run[0][0], run[0][1]))
            elif run:
                found.append((name, _Run(OrderedDict(run))))
            run.clear()

        for child, sub in module.named_children():
            here = owners(prefix + child + ".", sub)
            if len(here) > 1:
                close()
                visit(prefix + child, sub)
                stage = None
            elif here and here != {stage}:
                close()
                run.append((child, sub))
                stage = next(iter(here))
            elif run:
                run.append((child, sub))
        close()

    visit("", model)
    return found


REBUILD_TOL = 1e5
"""`check_rebuild` refuses a rebuilt gradient off by more than this many units of rounding
(ε of the problem's dtype) relative to max |∇f|: measured on 40 models, float64 ≤ 3·10⁻¹⁶,
float32 ≤ 3·10⁻⁷; a physics-informed network written with torch.func is off by 1."""

REBUILD_STEP = 0.01
"""`check_rebuild`'s point: w* + this × rms(w*) × a seeded standard normal direction."""

_REBUILDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""The problems `check_rebuild` has passed (a problem is checked once)."""


def check_rebuild(problem: NetProblem) -> None:
    """A one-line `ValueError` naming ``backward`` where the rebuilt backward pass with the
    forward weights everywhere (u_bkwd = u_recomp = u_fwd = w*) is not autograd's gradient,
    as the module doc says it is for every model whose forward pass is an ordinary function of
    its activations: one whose forward pass differentiates with respect to its inputs (a
    physics-informed network's du/dx) sees the units' detached activations there and loses
    that derivative's dependence on the weights (off by the size of the gradient).  Checked
    once per problem, on the whole data, at the problem's granularity, at a point
    `REBUILD_STEP` (of the weights' root mean square) off w* along a seeded direction: at a
    minimum the gradient is a cancellation far below the rounding of its terms."""
    check_layers(problem.model)
    if problem in _REBUILDS:
        return
    w = problem.w_star.detach()
    z = torch.randn(problem.dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    w = w + problem.vector(REBUILD_STEP * (float(w.double().square().mean().sqrt()) or 1.0) * z)
    exact = problem.gradient(w)
    scale = float(exact.abs().max())
    if scale > 0:
        worst = max(
            float((inconsistent_gradient(problem, w, w, recompute) - exact).abs().max())
            for recompute in (None, w)
        )
        if worst > REBUILD_TOL * torch.finfo(problem.dtype).eps * scale:
            raise ValueError(
                "backward: backpropagation with other weights (--backward current, or a rule "
                "whose backward pass reads other weights) rebuilds each layer's backward pass, "
                f"and on this model the rebuild with the forward weights is off autograd's "
                f"gradient by {worst / scale:.2g} of its size (a forward pass that "
                "differentiates with respect to its inputs, as a physics-informed network's, "
                "cannot be rebuilt so); analyse it with weight stashing (--backward stashed)"
            )
    _REBUILDS[problem] = True


def check_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The model's units (`units`); a one-line `ValueError` if it has none."""
    found = units(model)
    if not found:
        raise ValueError("--backward current needs a model with trainable parameters")
    return found


def _bilinear(module: torch.nn.Module, a, theta, w_b, bias):
    """L(a, W_b) + L(a⁻, θ − W_b) + b for a Linear or Conv layer (module doc)."""
    if isinstance(module, torch.nn.Linear):
        return F.linear(a, w_b) + F.linear(a.detach(), theta - w_b, bias)
    return module._conv_forward(a, w_b, None) + module._conv_forward(a.detach(), theta - w_b, bias)


_STATE = threading.local()


def _general(module, w_b: dict[str, torch.Tensor], args, kwargs):
    """f(a; W_b + θ − θ⁻) − f(a; W_b)⁻ + f(a; θ)⁻ on every floating output (module doc)."""
    theta = dict(module.named_parameters())
    mixed = {n: w_b[n] + t - t.detach() for n, t in theta.items()}
    _STATE.inside = True
    try:
        y = functional_call(module, mixed, args, kwargs)
        y_b = functional_call(module, w_b, args, kwargs)
        y_f = functional_call(module, theta, args, kwargs)
    finally:
        _STATE.inside = False

    def combine(out, back, fwd):
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            return out - back.detach() + fwd.detach()
        return out

    return map_leaves(combine, y, y_b, y_f)


def _patch_run(run: _Run, w_b: dict[str, torch.Tensor]) -> list[torch.nn.Module]:
    """The run's first child computes the whole run (module doc), the others pass their input
    on (inside the unit's own evaluations each is itself); returns the patched children."""
    children = list(run)
    for i, child in enumerate(children):
        original = type(child).forward.__get__(child)
        if i == 0:

            def forward(*args, original=original, **kwargs):
                if getattr(_STATE, "inside", False):
                    return original(*args, **kwargs)
                return _general(run, w_b, args, kwargs)

        else:

            def forward(a, original=original):
                return original(a) if getattr(_STATE, "inside", False) else a

        child.forward = forward
    return children


@contextmanager
def _backward_weights(found, weights: list[dict[str, torch.Tensor]], construction: str):
    """Patch every unit's forward with its backward weights (``weights``: one dict per unit of
    ``found``; module doc)."""
    patched = []
    for (_, module), w_b in zip(found, weights, strict=True):
        if isinstance(module, _Run):
            patched += _patch_run(module, w_b)
            continue
        patched.append(module)
        if construction == "auto" and isinstance(module, BILINEAR) and "weight" in w_b:

            def forward(a, module=module, w_b=w_b):
                return _bilinear(module, a, module.weight, w_b["weight"], module.bias)

        else:
            original = type(module).forward.__get__(module)

            def forward(*args, module=module, w_b=w_b, original=original, **kwargs):
                if getattr(_STATE, "inside", False):
                    return original(*args, **kwargs)
                return _general(module, w_b, args, kwargs)

        module.forward = forward
    try:
        yield
    finally:
        for module in patched:
            del module.forward


def inconsistent_gradient(
    problem: NetProblem,
    u_fwd: torch.Tensor,
    u_bkwd: torch.Tensor,
    u_recomp: torch.Tensor | None = None,
    index: torch.Tensor | None = None,
    construction: str = "auto",
    granularity: str | None = None,
    differentiate: Callable = plain_grad,
) -> torch.Tensor:
    """∇f(u_fwd, u_bkwd[, u_recomp]): backpropagation with forward weights ``u_fwd``,
    backward weights ``u_bkwd`` and (``u_recomp`` given) activations recomputed with
    ``u_recomp`` (module doc); flat (p,) vectors, over the data (batch by batch, weighted as
    `stability.nets.problem.NetProblem.loss`) or on the samples ``index``.
    ``construction``: `CONSTRUCTIONS`; ``granularity``: `GRANULARITIES` (module doc; default
    the problem's, `stability.nets.problem.NetProblem.granularity`).  ``differentiate``: plain
    autograd (`stability.nets.problem.plain_grad`), or ``torch.func.grad`` inside ``vmap``."""
    granularity = problem.granularity if granularity is None else granularity
    if construction not in CONSTRUCTIONS:
        raise ValueError(f"construction must be auto or general, got {construction!r}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be layer or stage, got {granularity!r}")
    found = check_layers(problem.model)
    if granularity == "stage":
        found = stage_units(problem.model, problem.stage_names)
    params_b = problem.params(u_bkwd)
    aliases = parameter_aliases(problem.model)
    weights = []
    for name, module in found:
        prefix = f"{name}." if name else ""
        named = module.named_parameters()
        weights.append({n: params_b.get(aliases.get(prefix + n, ""), t.detach()) for n, t in named})
    batches = [(*problem.data.rows(index), 1.0)] if index is not None else problem.data

    def batch_gradient(x, y):
        out_f = None
        if u_recomp is not None:
            with torch.no_grad():
                out_f = problem.output(u_fwd, x)

        def loss(theta):
            with _backward_weights(found, weights, construction):
                out = problem.output(theta, x)
            if out_f is not None:
                out = map_leaves(lambda o, f: o + (f - o).detach(), out, out_f)
            return problem.loss_fn(out, y)

        return differentiate(loss)(u_fwd if u_recomp is None else u_recomp)

    total = None
    for x, y, weight in batches:
        part = batch_gradient(x, y)
        part = part if weight == 1.0 else part * weight
        total = part if total is None else total + part
    return total


__all__ = [
    "BILINEAR",
    "CONSTRUCTIONS",
    "GRANULARITIES",
    "REBUILD_STEP",
    "REBUILD_TOL",
    "check_layers",
    "check_rebuild",
    "inconsistent_gradient",
    "stage_units",
    "units",
]
