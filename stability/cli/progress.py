"""A progress bar on stderr for long CLI runs (train and validate runs, coupled measurements,
reproductions, heatmaps, `net train` and the `--measure` of `net max-lr` and `net noise`).

Shown only on a terminal (or with ``STABILITY_PROGRESS=1``), never under ``--json``; it writes
to stderr only, so stdout keeps its one report or JSON object.  A bar needs nothing but a
count, which is all the public functions report (``progress(done, total)``), so the project
keeps this small class rather than depend on tqdm.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO


class Progress:
    """``Progress(total, label)``: ``update(done)`` with the work done, ``close()`` at the end."""

    WIDTH = 30

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None):
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.total = max(int(total), 1)
        self.label = label
        self.start = time.monotonic()
        self.done = 0

    def update(self, done: int) -> None:
        self.done = min(int(done), self.total)
        filled = round(self.WIDTH * self.done / self.total)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        elapsed = time.monotonic() - self.start
        self.stream.write(
            f"\r[{bar}] {100 * self.done / self.total:5.1f}% {elapsed:6.1f}s {self.label}\033[K"
        )
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def wanted(json: bool, stream: TextIO | None = None) -> bool:
    """A bar is drawn on a terminal (or with STABILITY_PROGRESS=1), never under --json."""
    if json:
        return False
    stream = stream if stream is not None else sys.stderr
    return os.environ.get("STABILITY_PROGRESS") == "1" or _isatty(stream)


@contextlib.contextmanager
def progress_bar(label: str, *, json: bool) -> Iterator[Callable[[int, int], None] | None]:
    """The ``progress(done, total)`` callback of a public function (None when no bar is
    wanted); the bar appears at the first report and is closed on leaving the block."""
    if not wanted(json):
        yield None
        return
    bars: list[Progress] = []

    def report(done: int, total: int) -> None:
        if not bars:
            bars.append(Progress(total, label))
        bars[0].total = max(int(total), 1)
        bars[0].update(done)

    try:
        yield report
    finally:
        for bar in bars:
            bar.close()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
