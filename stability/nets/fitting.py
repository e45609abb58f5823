"""Bring a model near a minimum of its full-batch loss, deterministically, and cache the result.

`near_minimum` builds the model under a fixed seed, converts it to float64 and runs full-batch
L-BFGS (strong-Wolfe line search) for a fixed number of iterations — no randomness after the
initialization, so the same seed gives the same weights.  The fit runs on **one thread**: the
reduction order of a multi-threaded BLAS can change the last bits of a gradient, and over
thousands of L-BFGS iterations such bits can end at another minimum.  The fitted weights are
cached in the user cache
(``$XDG_CACHE_HOME/stability/nets`` or ``~/.cache/stability/nets``; ``STABILITY_CACHE`` overrides
the folder), keyed by a hash of everything that determines them (name, seed, iterations, the
model's structure, the data, the torch version), so the second call loads them in milliseconds.
The example problems (examples/digits_mlp.py, examples/digits_cnn.py) use it; so may users.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable
from pathlib import Path

import torch

from stability.files import atomic_write


def cache_folder() -> Path:
    """Where fitted weights are cached (module doc)."""
    if os.environ.get("STABILITY_CACHE"):
        return Path(os.environ["STABILITY_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stability" / "nets"


def _key(name: str, seed: int, iterations: int, model: torch.nn.Module, inputs, targets) -> str:
    h = hashlib.sha256()
    for part in (name, seed, iterations, repr(model), torch.__version__, "one thread"):
        h.update(str(part).encode())
    for t in (inputs, targets):
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def near_minimum(
    build: Callable[[], torch.nn.Module],
    loss: Callable,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    name: str,
    seed: int = 0,
    iterations: int = 2000,
) -> torch.nn.Module:
    """The model ``build()`` (seeded with ``seed``) after ``iterations`` of full-batch L-BFGS
    on ``loss(model(inputs), targets)``, in float64, cached (module doc)."""
    torch.manual_seed(seed)
    model = build().double()
    inputs = inputs.double() if inputs.is_floating_point() else inputs
    targets = targets.double() if targets.is_floating_point() else targets
    path = cache_folder() / f"{name}-{_key(name, seed, iterations, model, inputs, targets)}.pt"
    if path.is_file():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval()
    model.eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same minimum on every machine (module doc)
    try:
        _fit(model, loss, inputs, targets, iterations)
    finally:
        torch.set_num_threads(threads)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    atomic_write(path, lambda fh: fh.write(buffer.getvalue()), binary=True)
    return model


def _fit(model: torch.nn.Module, loss: Callable, inputs, targets, iterations: int) -> None:
    """``iterations`` of full-batch L-BFGS with a strong-Wolfe line search, in place."""
    opt = torch.optim.LBFGS(
        model.parameters(),
        lr=1.0,
        max_iter=iterations,
        max_eval=2 * iterations,
        tolerance_grad=1e-14,
        tolerance_change=0.0,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        value = loss(model(inputs), targets)
        value.backward()
        return value

    opt.step(closure)


__all__ = ["cache_folder", "near_minimum"]
