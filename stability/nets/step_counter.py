"""The progress of a network simulation, counted in simulator steps.

`net train`, the brackets of `net max-lr --measure` and the runs of `net noise --measure` are
loops of simulator steps (every run of a grid of step sizes advances one step at a time, in
lockstep), so their progress is the steps taken against the steps expected: `StepCounter` is
the ``observe`` hook of those loops and reports ``progress(done, total)`` — the callback of the
public functions, drawn as a bar on stderr by the CLI (`stability.cli.progress`).  A bisection
may take more rounds than expected (`stability.trainer.measure.verdict_rounds`); the total then
grows with the steps done, so the fraction never passes 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

REPORT_EVERY = 25
"""Steps between two reports (a report draws a line on a terminal)."""


class StepCounter:
    """``observe(step, w)`` hook that counts steps and reports ``progress(done, total)``
    every `REPORT_EVERY` steps, ``total`` the ``expected`` steps (raised to the steps done)."""

    def __init__(self, progress: Callable[[int, int], None], expected: int):
        self.progress, self.total, self.done = progress, max(int(expected), 1), 0

    def __call__(self, step: int | None = None, w: Any = None) -> None:
        self.done += 1
        self.total = max(self.total, self.done)
        if self.done % REPORT_EVERY == 0:
            self.progress(self.done, self.total)

    def finish(self) -> None:
        """The last report: all the work done."""
        self.progress(self.done, self.done)


def counter(progress: Callable[[int, int], None] | None, expected: int) -> StepCounter | None:
    """A `StepCounter` of ``expected`` steps, or None without a ``progress`` callback."""
    return None if progress is None else StepCounter(progress, expected)


def chained(*hooks: Callable | None) -> Callable | None:
    """One ``observe(step, w)`` hook calling each of ``hooks`` that is given (None if none)."""
    given = [h for h in hooks if h is not None]
    if len(given) <= 1:
        return given[0] if given else None

    def observe(step: int, w: Any) -> None:
        for hook in given:
            hook(step, w)

    return observe


__all__ = ["REPORT_EVERY", "StepCounter", "chained", "counter"]
