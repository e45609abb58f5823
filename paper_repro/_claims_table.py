"""Write ``figures/claims.json`` (``stability claims --json``, full grids) and docs/claims.md.

docs/claims.md is `stability.claims.markdown.render` of that JSON and of the reproductions'
``figures/<name>.json`` (full mode: run the scripts first, ``stability repro --all``).
``--from-json`` reuses the existing ``figures/claims.json`` instead of checking the claims
again (about a minute).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "figures"
PAGE = ROOT / "docs" / "claims.md"


def reproductions(figures: Path = FIGURES) -> dict[str, dict]:
    """The reproductions' JSON records in ``figures`` (those with claims), by name."""
    out = {}
    for path in sorted(figures.glob("*.json")):
        record = json.loads(path.read_text())
        if path.stem != "claims" and "claims" in record:
            out[path.stem] = record
    return out


def main(argv=None) -> None:
    from stability.claims.markdown import render
    from stability.cli.main import main as cli
    from stability.files import atomic_write

    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--from-json", action="store_true", help="reuse figures/claims.json")
    args = parser.parse_args(argv)
    target = FIGURES / "claims.json"
    if not args.from_json:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            if cli(["claims", "--json"]) != 0:
                raise SystemExit("stability claims --json failed")
        atomic_write(target, lambda fh: fh.write(out.getvalue()))
    page = render(json.loads(target.read_text()), reproductions())
    atomic_write(PAGE, lambda fh: fh.write(page))
    print(f"{target}\n{PAGE}")


if __name__ == "__main__":
    main()
