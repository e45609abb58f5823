"""Atomic file output: write to a temporary file in the target directory, then rename.

A command that fails half-way never leaves a partial PNG, CSV or JSON behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def atomic_write(path: str | Path, write: Callable[[Any], None], *, binary: bool = False) -> Path:
    """Call ``write(fileobj)`` on a temporary file next to ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as fh:
            write(fh)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | Path, data: Any) -> Path:
    """JSON with NaN/inf written as null (strict JSON), atomically."""
    return atomic_write(path, lambda fh: json.dump(strict_json(data), fh, indent=1))


def strict_json(x: Any) -> Any:
    """NaN and infinities as None (JSON null), arrays as lists, recursively."""
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict_json(v) for v in x]
    if hasattr(x, "tolist"):
        return strict_json(x.tolist())
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return None
    return x
