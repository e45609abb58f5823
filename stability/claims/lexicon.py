"""The normative lexicon: what the papers' size words are taken to mean, in numbers.

A claim's wording often carries a size ("slightly", "significantly", "≈ 2D", "consistently").
Each such word is read through this one table, so that every claim uses the same numbers; the
reader may disagree with a number, but sees it (``stability claims --json`` repeats the
meaning beside every measured size, and docs/claims.md prints the table).

The measured value a word is compared with is the claim's size (`stability.claims.claim.Size`):
for a pointwise comparison over a range it is taken at the point of the range least favourable
to the word — the largest change for an upper-bound word ("slightly": the worst point must still
be slight), the smallest for a lower-bound word ("significantly", "consistently").

========================  =====================================================================
word                      taken to mean (value = the measured size)
========================  =====================================================================
slightly, marginally      a relative change of at most 10 %:  |value| ≤ 10 (value in %)
significantly             a relative change of at least 25 %:  |value| ≥ 25 (value in %)
≈ x (about, close to x)   within 10 % of x:  |value − x| ≤ 0.10·|x|
precisely x               within 5 % of x:  |value − x| ≤ 0.05·|x|
consistently              at every point of the range, without exception: the least favourable
                          change is still in the asserted direction, value > 0 (in %)
occasionally              at some points of the range but not all: 0 < value < 100, value =
                          the share of the range (in %) where it happens
========================  =====================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Word:
    """One entry of the lexicon: the ``meaning`` in words and the ``admits`` test.

    ``admits(value, reference)`` says whether a measured ``value`` satisfies the word;
    ``reference`` is the paper's number for words that carry one (``≈ x``, ``precisely x``).
    """

    meaning: str
    admits: Callable[[float, float | None], bool]
    needs_reference: bool = False


def _within(fraction: float) -> Callable[[float, float | None], bool]:
    # the edge itself counts (1e-12: the rounding of value − x at the edge)
    return lambda value, x: abs(value - x) <= fraction * abs(x) * (1 + 1e-12)


LEXICON: dict[str, Word] = {
    "slightly": Word("a relative change of at most 10 %", lambda v, _: abs(v) <= 10.0),
    "marginally": Word("a relative change of at most 10 %", lambda v, _: abs(v) <= 10.0),
    "significantly": Word("a relative change of at least 25 %", lambda v, _: abs(v) >= 25.0),
    "≈": Word("within 10 % of the paper's value", _within(0.10), needs_reference=True),
    "precisely": Word("within 5 % of the paper's value", _within(0.05), needs_reference=True),
    "consistently": Word(
        "at every point of the range without exception: the least favourable change is "
        "still in the asserted direction (> 0 %)",
        lambda v, _: v > 0.0,
    ),
    "occasionally": Word(
        "at some points of the range but not all: the share of the range where it happens "
        "is above 0 % and below 100 %",
        lambda v, _: 0.0 < v < 100.0,
    ),
}
"""The size words and the numbers they are taken to mean (module docstring)."""


@dataclass(frozen=True)
class Qualifier:
    """A size word of a claim's wording, with the paper's number where the word carries one
    (``Qualifier("≈", 2.0)`` is "≈ 2")."""

    word: str
    reference: float | None = None

    def __post_init__(self) -> None:
        if self.word not in LEXICON:
            raise ValueError(f"qualifier {self.word!r} is not in the lexicon: {', '.join(LEXICON)}")
        if LEXICON[self.word].needs_reference != (self.reference is not None):
            raise ValueError(
                f"qualifier {self.word!r}: give a reference number exactly when the word "
                "carries one (≈ x, precisely x)"
            )

    @property
    def meaning(self) -> str:
        """What the word is taken to mean (from `LEXICON`), with the paper's number."""
        text = LEXICON[self.word].meaning
        return text if self.reference is None else f"{text} ({self.reference:g})"

    def admits(self, value: float) -> bool:
        """Whether the measured ``value`` satisfies the word."""
        return bool(LEXICON[self.word].admits(float(value), self.reference))

    def __str__(self) -> str:
        return self.word if self.reference is None else f"{self.word} {self.reference:g}"


def lexicon_table() -> list[dict[str, str]]:
    """The lexicon as rows ``{"word", "meaning"}`` (for the docs and ``--json``)."""
    return [{"word": w, "meaning": entry.meaning} for w, entry in LEXICON.items()]
