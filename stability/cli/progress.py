"""A minimal progress bar on stderr for long CLI runs.

Silent unless stderr is a terminal, or ``force=True`` (CLI ``--progress``), or the environment
sets ``STABILITY_PROGRESS=1``.  Never writes to stdout, so ``--json`` output stays one object.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO


class Progress:
    """``Progress(total, label)``: ``update(done)`` with the work done, ``close()`` at the end."""

    WIDTH = 30

    def __init__(self, total: int, label: str = "", *, force: bool = False, stream=None):
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.total = max(int(total), 1)
        self.label = label
        self.enabled = force or os.environ.get("STABILITY_PROGRESS") == "1" or _isatty(self.stream)
        self.start = time.monotonic()
        self.done = 0

    def update(self, done: int, label: str | None = None) -> None:
        self.done = min(int(done), self.total)
        if label is not None:
            self.label = label
        if not self.enabled:
            return
        filled = round(self.WIDTH * self.done / self.total)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        elapsed = time.monotonic() - self.start
        self.stream.write(
            f"\r[{bar}] {100 * self.done / self.total:5.1f}% {elapsed:6.1f}s {self.label}\033[K"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
