"""Whether torch's second derivative of a model is the derivative of its gradient: custom
``torch.autograd.Function`` backwards and values taken out of the graph.

The curvature the analysis reads is the derivative of the gradient, ∇²f·v = d/dh ∇f(w + hv).
Torch computes it by differentiating each operation's backward as written, and a custom
Function's backward is differentiated only as far as it is made of differentiable torch
operations: one marked ``@once_differentiable`` runs under ``no_grad``, and one that calls a
kernel of its own (a C++/CUDA extension) returns tensors without history.  Either way torch
2.13 returns Hessian-vector products that lack every term through the Function, without a
word — in ``torch.func`` and plain autograd alike, and ``torch.autograd.functional.hessian``
agrees with them (measured: tanh written as such a Function has a zero second derivative).

The same happens, without a custom Function, where the forward pass takes a value out of the
graph that depends on the weights (``.detach()``, ``.item()``, ``.numpy()``, a stop-gradient):
the gradient treats it as a constant, but a step moves it, and the derivative of the gradient
— the Jacobian of a step, what the analysis linearises — has the term the product lacks.

`second_derivative_missing` looks at the graph of one batch's loss (its first few samples)
for custom Functions and refuses a ``once_differentiable`` one by name.  Then the product
along a random unit direction v is compared with central differences of the gradient,

    D(h) = (∇f(w + hv) − ∇f(w − hv)) / 2h,      h_j = ε^{1/3}·max(1, ‖w‖)/4^j, j < `STEPS`,

on the coordinates whose gradient is not exactly zero (v leaves the others: torch never moves
an embedding's padding row, whose column of the Jacobian of ∇f the product, v·J, and the
differences, J·v, would otherwise read differently), in float64 where the model can be copied
to it (`stability.nets.problem`).  The product is accepted as soon as one D(h_j) lies within
`MISMATCH` of it; the model is refused where none does and the two smallest steps agree with
each other (to a tenth of their distance from the product: the differences have settled
there, no kink of a ReLU in between) — a derivative the product lacks.  Central differences
err by O(h²·‖∇³f‖) + O(ε/h): a single step, ε^{1/3}‖w‖, was 0.9 off on a sharp float32
attention model (λ₁ ≈ 10⁶, ‖w‖ = 18: the curvature changes within 0.09) and 0.009 in float64,
against 1e-8 at its 64th in float64; a weight-dependent value taken out of the graph stays off
by the term it drops at every step.
The refusal is made where a second derivative is first needed
(`stability.nets.problem.NetProblem.hvp`), so that ``net train`` with a stashed rule, which
needs first derivatives only, still runs the model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.function import once_differentiable

MISMATCH = 0.01
"""The relative distance between the product and the differences that refuses a model."""

STEPS = 5
"""Central differences at ε^{1/3}·max(1, ‖w‖)/4^j for j < STEPS (module doc)."""

FIRST_ORDER = (
    " (net train with a stashed rule runs the model as it is: it needs first derivatives only)"
)
"""What still runs a model refused here, as the refusals say it."""

_ONCE_DIFFERENTIABLE = once_differentiable(lambda ctx: None).__code__
"""The code of every backward ``@once_differentiable`` wraps (one wrapper function)."""


def custom_functions(loss: torch.Tensor) -> list[type]:
    """The custom ``autograd.Function`` classes on the graph of ``loss``, in the order met."""
    found: list[type] = []
    seen: set = set()
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        cls = getattr(node, "_forward_cls", None)
        if cls is not None and cls not in found:
            found.append(cls)
        stack.extend(fn for fn, _ in node.next_functions)
    return found


def _product_and_differences(
    gradient: Callable[[torch.Tensor], torch.Tensor],
    hvp: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    w: torch.Tensor,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(∇²f·v, [D(h_j) for j < `STEPS`]) along a seeded random unit v that leaves the
    coordinates whose gradient is exactly zero (an embedding's padding row, which torch never
    moves; a dead unit's weights) where they are, on the other coordinates (module doc); empty
    where the gradient is zero everywhere."""
    moving = gradient(w) != 0
    if not torch.any(moving):
        return torch.zeros(0, dtype=w.dtype, device=w.device), []
    g = torch.Generator().manual_seed(0)
    v = torch.randn(w.shape, generator=g, dtype=torch.float64).to(w) * moving
    v = v / torch.linalg.vector_norm(v)
    h = float(torch.finfo(w.dtype).eps) ** (1 / 3) * max(1.0, float(w.norm()))
    steps = [h / 4**j for j in range(STEPS)]
    differences = [(gradient(w + s * v) - gradient(w - s * v)) / (2 * s) for s in steps]
    return hvp(w, v)[moving], [d[moving] for d in differences]


def second_derivative_missing(
    loss_of: Callable[[torch.Tensor], torch.Tensor],
    gradient: Callable[[torch.Tensor], torch.Tensor],
    hvp: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    w: torch.Tensor,
) -> str | None:
    """Why torch's second derivative of ``loss_of`` (one batch's first samples; ``gradient``
    and ``hvp``: its gradient and Hessian-vector product as the problem makes them,
    `stability.nets.problem.NetProblem.batch_gradient` and ``batch_hvp``) at ``w`` is
    not the derivative of its gradient (module doc: a custom Function's backward, a value taken
    out of the graph), as the refusal says it; None where it is, or where the check cannot tell
    (rows that do not run alone, no second derivative at all, a kink between the steps)."""
    try:
        with torch.enable_grad():
            functions = custom_functions(loss_of(w.detach().requires_grad_(True)))
    except Exception:  # noqa: BLE001 - rows that do not run alone: the commands will say
        return None
    remedy = "; write the backward with differentiable torch operations"
    for cls in functions:
        if getattr(cls.backward, "__code__", None) is _ONCE_DIFFERENTIABLE:
            return (
                f"the model uses a custom torch.autograd.Function, {cls.__name__}, whose "
                "backward is @once_differentiable: torch's second derivative through it is "
                f"silently zero, so curvature would miss every term through it{remedy}"
                f"{FIRST_ORDER}"
            )
    try:
        product, differences = _product_and_differences(gradient, hvp, w)
    except Exception:  # noqa: BLE001 - no second derivative at all: the commands will say
        return None
    if not product.numel():  # a loss that does not depend on w
        return None

    def norm(t: torch.Tensor) -> float:
        return float(torch.linalg.vector_norm(t))

    def apart(d: torch.Tensor) -> float:  # relative distance of a difference from the product
        return norm(product - d) / max(norm(product), norm(d), torch.finfo(d.dtype).tiny)

    if min(map(apart, differences)) <= MISMATCH:
        return None
    wide, narrow = differences[-2:]
    distance = norm(product - narrow)
    if not norm(wide - narrow) < 0.1 * distance:  # not settled: a kink, or rounding
        return None
    scale = max(norm(product), norm(narrow))
    differs = (
        "a Hessian-vector product differs from central differences of the gradient by "
        f"{distance / scale:.2g} of its size"
    )
    if functions:
        names = ", ".join(cls.__name__ for cls in functions)
        return (
            f"the model uses custom torch.autograd.Functions ({names}) whose second derivative "
            f"is not the derivative of their gradient ({differs}): a backward that calls a "
            f"kernel of its own, or other operations torch cannot differentiate, drops every "
            f"term through it{remedy}{FIRST_ORDER}"
        )
    return (
        f"the model's second derivative is not the derivative of its gradient ({differs}): "
        f"a value its forward pass takes out of torch's graph (.detach(), .item(), .numpy(), a "
        f"stop-gradient) depends on the weights, and the derivative of the gradient drops that "
        f"dependence, which a step follows; keep that value in the graph{FIRST_ORDER}"
    )


__all__ = ["FIRST_ORDER", "MISMATCH", "STEPS", "custom_functions", "second_derivative_missing"]
