"""What a failed point records: its error on one line."""

from __future__ import annotations


def error_line(err: BaseException) -> str:
    """The one-line record of a failed point: a `ValueError`'s message as it is (it names the
    parameter), any other error prefixed by its type; at most 500 characters."""
    lines = str(err).strip().splitlines()
    text = lines[0] if lines else ""
    if not isinstance(err, ValueError) or not text:
        text = f"{type(err).__name__}: {text}".rstrip(": ")
    return text[:500]
