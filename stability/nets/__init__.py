"""PyTorch networks: a user's model, its curvature per pipeline stage, predictions, a simulator.

* `stability.nets.problem` — a *problem*: a Python file whose function returns the model, the
  loss, the full batch or a DataLoader, and optionally the pipeline stages; the flat parameter
  vector; the model's dtype and device.
* `stability.nets.torch_settings` — what the analysis sets in torch while it runs a model:
  float32 as IEEE float32, checkpointed segments run as they are.
* `stability.nets.second_derivative` — whether torch's second derivative of the model is the
  derivative of its gradient (custom autograd.Functions, values taken out of the graph).
* `stability.nets.batches` — the data: batches of any input structure, weighted full-batch
  sums, minibatch rows.
* `stability.nets.inconsistent` — backpropagation with forward, backward and recompute weights
  for any module (``--backward current``).
* `stability.nets.curvature` — Hessian-vector products (reverse-over-reverse, plain autograd)
  and Lanczos: top eigenpairs overall and per stage, the negative end of the spectrum.
* `stability.nets.lowrank` — the network's curvature as a small `CoupledSystem` (top-k
  eigenpairs projected onto the stages), for the coupled per-stage analysis.
* `stability.nets.simulator` — delayed-pipeline training of the model, each stage running the
  very rule objects of the analysis on a ring buffer of parameter versions.
* `stability.nets.bracket` — the simulator's measured max stable lr and rates.
* Adam/AdamW (docs/adam.md): `stability.nets.preconditioner` (P of an optimizer state or a
  warm-up), `stability.nets.preconditioned` (P^{1/2}HP^{1/2} by Lanczos),
  `stability.nets.adam_stages` (frozen-P and real-Adam stage rules),
  `stability.nets.adaptive` (the commands' ``precond_from`` and ``update``),
  `stability.nets.adam_edge` (the preconditioned sharpness along a run).
* `stability.nets.public` — ``net_curvature``, ``net_max_lr``, ``net_train`` (the
  ``stability net`` commands; results whose attributes are the JSON keys).
* `stability.nets.minibatch_moments` — per-sample Hessians (or Gauss–Newton parts) and gradients
  projected onto the top-k eigenvectors (``torch.func.vmap``; plain autograd, one sample at a
  time, for a model torch.func cannot transform).
* `stability.nets.minibatch_runs` — seeded minibatch runs of the simulator in lockstep: measured
  expected loss, floor, almost-sure bracket, the quadratic region.
* `stability.nets.minibatch_subspace` — the projected minibatch problem at one preconditioner:
  basis, moments, the solvers' state builder.
* `stability.nets.stationary_adam` — real Adam's stationary preconditioner on minibatches, the
  fixed point of its v̂ (``precond_from="stationary"``).
* `stability.nets.noise_public` — ``net_noise`` (``stability net noise``): minibatch theory of a
  network near a minimum, through the solvers of `stability.noise`.

Everything here imports torch; this ``__init__`` does not, so ``import stability`` and every
other command keep working without it (`require_torch`).
"""

from __future__ import annotations

from stability.extras import require


def require_torch() -> None:
    """Raise a one-line `stability.extras.MissingExtra` (a `ValueError` and a
    `ModuleNotFoundError`) naming the install line if PyTorch is not installed."""
    require("torch")
