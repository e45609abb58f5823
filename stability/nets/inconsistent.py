r"""Backpropagation with inconsistent weights: forward, backward and recompute weights per layer.

Without weight stashing a pipeline stage's backward pass runs with newer weights than its
forward pass did (PipeMare Sec. 2): the gradient it computes is ∇f(u_fwd, u_bkwd), "the value
of the gradient that would be computed by the backpropagation algorithm using the weights u_fwd
in the forward pass and weights u_bkwd in the backward pass" — not the gradient of any loss.
With recompute (PipeMare App. D.1) the activations the backward pass needs are not stored but
recomputed with a third set of weights, u_recomp.  `inconsistent_gradient` computes it for
the layers where the three roles are well defined:

* a **bilinear layer** y = L(a, W) + b (``Linear``, ``Conv1d/2d/3d``): the output carries the
  forward value, the input-gradient is propagated with the backward weights, the weight
  gradient pairs the output-gradient with the layer's input activation a.  One expression gives
  all three under reverse-mode differentiation (⁻: no gradient flows through)::

      y = L(a, W_b) + L(a⁻, θ − W_b) + b

  value L(a, θ) + b, ∂/∂a = L(·, W_b), ∂/∂θ = L(a, ·) — θ carries the weights whose activations
  the backward pass sees: u_fwd without recompute, u_recomp with it.  The gradient is taken
  with respect to θ only; W_b (a different tensor) stays differentiable for an outer
  derivative, H_b = ∂g/∂u_bkwd (`stability.nets.sensitivity`), whose value path
  L(a, dW) − L(a⁻, dW) vanishes as it must;
* **parameter-free layers** (activations, pooling, flatten, normalisation without learnable
  parameters): differentiated as they are, at the activations the backward pass sees;
* any other layer with parameters (normalisation with an affine part, embeddings, attention,
  recurrent cells, custom parameters) is refused, naming it (`check_layers`).

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

from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad

from stability.nets.problem import NetProblem

BILINEAR = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
"""Layers whose forward/backward weights are separated (the module doc's bilinear form)."""


def check_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The model's bilinear layers (name, module); a one-line `ValueError` naming the first
    other module that holds parameters of its own."""
    layers = []
    for name, module in model.named_modules():
        own = [n for n, p in module.named_parameters(recurse=False) if p.requires_grad]
        if isinstance(module, BILINEAR):
            layers.append((name, module))
        elif own:
            where = name or "the model itself"
            raise ValueError(
                f"--backward current supports Linear, Conv1d/2d/3d and parameter-free layers; "
                f"{where} ({type(module).__name__}) has parameters ({', '.join(own)})"
            )
    return layers


def _bilinear(module: torch.nn.Module, a, theta, w_b, bias):
    """L(a, W_b) + L(a⁻, θ − W_b) + b for a Linear or Conv layer (module doc)."""
    if isinstance(module, torch.nn.Linear):
        return F.linear(a, w_b) + F.linear(a.detach(), theta - w_b, bias)
    return module._conv_forward(a, w_b, None) + module._conv_forward(a.detach(), theta - w_b, bias)


@contextmanager
def _backward_weights(layers, weights: dict[str, torch.Tensor]):
    """Patch every bilinear layer's forward to use ``weights[name]`` as its W_b."""
    for name, module in layers:
        w_b = weights[name]

        def forward(a, module=module, w_b=w_b):
            return _bilinear(module, a, module.weight, w_b, module.bias)

        module.forward = forward
    try:
        yield
    finally:
        for _, module in layers:
            del module.forward


def inconsistent_gradient(
    problem: NetProblem,
    u_fwd: torch.Tensor,
    u_bkwd: torch.Tensor,
    u_recomp: torch.Tensor | None = None,
    index: torch.Tensor | None = None,
) -> torch.Tensor:
    """∇f(u_fwd, u_bkwd[, u_recomp]): backpropagation with forward weights ``u_fwd``,
    backward weights ``u_bkwd`` and (``u_recomp`` given) activations recomputed with
    ``u_recomp`` (module doc); flat (p,) vectors, on the full batch or the rows ``index``."""
    layers = check_layers(problem.model)
    x, y = problem._batch(index)
    params_b = problem.params(u_bkwd)
    weights = {}
    for name, module in layers:
        key = f"{name}.weight" if name else "weight"
        weights[name] = params_b.get(key, module.weight)
    out_f = None
    if u_recomp is not None:
        out_f = functional_call(problem.model, problem.params(u_fwd), (x,)).detach()

    def loss(theta):
        with _backward_weights(layers, weights):
            out = functional_call(problem.model, problem.params(theta), (x,))
        if out_f is not None:
            out = out + (out_f - out).detach()
        return problem.loss_fn(out, y)

    return grad(loss)(u_fwd if u_recomp is None else u_recomp)


__all__ = ["BILINEAR", "check_layers", "inconsistent_gradient"]
