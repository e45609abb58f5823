"""Optimizer checkpoints for the network tests: a problem file written to a folder, its
``fresh()`` problem trained full batch by a torch optimizer, and the optimizer's and the
model's ``state_dict`` saved beside it (``state.pt``, ``model.pt``) — what a user's training
script leaves for ``--precond-from`` and the file's ``trained()`` problem."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch


def checkpoint(
    folder: Path, name: str, source: str, steps: int, optimizer: Callable
) -> torch.nn.Module:
    """Write ``source`` as ``folder/name``, train its ``fresh()`` model ``steps`` full-batch
    steps of ``optimizer(parameters)``, save both state_dicts; the trained model."""
    (folder / name).write_text(source)
    ns: dict = {"__file__": str(folder / name)}
    exec(source, ns)
    d = ns["fresh"]()
    model = d["model"]
    opt = optimizer(model.parameters())
    for _ in range(steps):
        opt.zero_grad()
        d["loss"](model(d["inputs"]), d["targets"]).backward()
        opt.step()
    torch.save(opt.state_dict(), folder / "state.pt")
    torch.save(model.state_dict(), folder / "model.pt")
    return model
