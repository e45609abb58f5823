"""The README's examples: every ``$ stability ...`` line of a ```` ```console ```` block is run and
its output compared with the lines shown under it, and every ```` ```pycon ```` block is run as a
doctest (``tests/test_docs.py``).

    python scripts/readme_examples.py            # check, print the differences
    python scripts/readme_examples.py --update   # rewrite the shown outputs from real runs

Comparison: text must match exactly, except that ``...`` in a shown line matches anything
(timings, paths) and numbers match to a relative 1e-6 (their last digits aside).  Commands run
in-process through `stability.cli.main.main` (what the console script calls) in a scratch
working directory, one BLAS thread, ``MPLBACKEND=Agg``, without ``$STABILITY_DATA``.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import math
import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
RTOL = 1e-6


@dataclass(frozen=True)
class Example:
    line: int  # 1-based line of the ``$`` command in the README
    command: str  # without the leading "$ "
    shown: tuple[str, ...]


def examples(text: str) -> list[Example]:
    """The ``$ stability ...`` commands of the console blocks and the output shown under each."""
    out: list[Example] = []
    lines = text.splitlines()
    inside = False
    current: tuple[int, str] | None = None
    shown: list[str] = []
    for number, line in enumerate(lines, start=1):
        if line.startswith("```"):
            if inside and current:
                out.append(Example(current[0], current[1], tuple(shown)))
            inside, current, shown = line.strip() == "```console", None, []
            continue
        if not inside:
            continue
        if line.startswith("$ "):
            if current:
                out.append(Example(current[0], current[1], tuple(shown)))
            current, shown = (number, line[2:].strip()), []
        elif current:
            shown.append(line)
    return out


def python_failures(text: str) -> list[str]:
    """Run every ```` ```pycon ```` block of ``text`` as one doctest; the failure reports."""
    blocks = re.findall(r"^```pycon\n(.*?)^```$", text, flags=re.S | re.M)
    failures = []
    for number, block in enumerate(blocks, start=1):
        test = doctest.DocTestParser().get_doctest(block, {}, f"pycon block {number}", None, 0)
        report = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test, out=report.write)
        if runner.failures:
            failures.append(report.getvalue())
    if not blocks:
        failures.append("no ```pycon block")
    return failures


def run(command: str, cwd: Path) -> str:
    """stdout of ``command`` (``stability ...``) run in-process in ``cwd``; raises on exit ≠ 0."""
    from stability.cli.main import main

    argv = shlex.split(command)
    if argv[0] != "stability":
        raise ValueError(f"not a stability command: {command}")
    os.environ.pop("STABILITY_DATA", None)
    os.environ.setdefault("MPLBACKEND", "Agg")
    out, err = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv[1:])
    finally:
        os.chdir(previous)
    if code != 0:
        raise RuntimeError(f"{command}: exit {code}: {err.getvalue().strip()}")
    return out.getvalue()


def _pattern(part: str) -> str:
    """``part`` as a regular expression whose numbers are capturing groups."""
    pieces, position = [], 0
    for m in NUMBER.finditer(part):
        pieces += [re.escape(part[position : m.start()]), f"({NUMBER.pattern})"]
        position = m.end()
    return "".join([*pieces, re.escape(part[position:])])


def _line_matches(shown: str, actual: str) -> bool:
    parts = shown.split("...")
    found = re.fullmatch(".*?".join(_pattern(p) for p in parts), actual)
    if not found:
        return False
    expected = [(float(m.group()), _is_seconds(p, m)) for p in parts for m in NUMBER.finditer(p)]
    got = [float(g) for g in found.groups()]
    return all(
        seconds or math.isclose(e, g, rel_tol=RTOL, abs_tol=1e-12)
        for (e, seconds), g in zip(expected, got, strict=True)
    )


def _is_seconds(part: str, number: re.Match) -> bool:
    """A wall-clock time ("0.02 s", "3.4 s;"): any value matches."""
    return re.match(r" ?s\b", part[number.end() :]) is not None


def differences(example: Example, actual: str) -> list[str]:
    """Lines where ``actual`` differs from what the README shows (empty: it matches)."""
    got = actual.rstrip("\n").splitlines()
    shown = list(example.shown)
    if len(got) != len(shown):
        return [f"{len(shown)} lines shown, {len(got)} printed:", *got]
    return [
        f"shown:   {s}\nprinted: {g}"
        for s, g in zip(shown, got, strict=True)
        if not _line_matches(s, g)
    ]


def update(text: str, cwd: Path) -> str:
    """The README with every example's shown output replaced by a fresh run's."""
    lines = text.splitlines()
    for example in reversed(examples(text)):
        got = run(example.command, cwd).rstrip("\n").splitlines()
        start = example.line  # index of the first shown line (0-based) = the $ line's number
        lines[start : start + len(example.shown)] = got
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = README.read_text()
    with tempfile.TemporaryDirectory() as scratch:
        if "--update" in argv:
            README.write_text(update(text, Path(scratch)))
            return 0
        failures = python_failures(text)
        status = int(bool(failures))
        print(*failures, sep="\n")
        for example in examples(text):
            diff = differences(example, run(example.command, Path(scratch)))
            if diff:
                status = 1
                print(f"README.md:{example.line}: $ {example.command}", *diff, sep="\n")
        return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
