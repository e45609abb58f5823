"""Theory vs the reference trainer: run ``stability validate`` on cpusmall and write each table
as Markdown for the docs (``make validation-tables``).

    python scripts/validation_tables.py [--write docs/generated] [--only NAME ...]

Each table is one ``stability validate ... --json`` run, or for the MLP one run per rule (one run
of all four is over the command's work limit, docs/limits.md), their rows in order (the commands
are printed above the table, so a reader can rerun them); the numbers are formatted from that JSON
and nothing else.
Two more are the printed tables of ``benchmarks/bench_coupled.py --only-cpusmall`` (coupled
vs scalar vs measured) and ``benchmarks/bench_seed.py --validate`` (the seed systems' rules).
The files ``validation_<name>.md`` are included by docs/validation.md; they are the only place
these numbers are written down.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from stability.files import atomic_write

STABILITY = Path(sys.executable).with_name("stability")
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RULES6 = "sgd,momentum,sc,lwp,lwp+sc,nesterov"


def _g(x, digits: int = 6) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def _ratios(row) -> list[str]:
    ratios = row.get("log_rate_ratio") or [None, None]
    return [_g(r, 5) for r in ratios]


def full_batch(result: dict) -> list[str]:
    lines = [
        "| rule | τ | predicted max lr | measured | ratio | ln ρ ratio @0.5 | @0.95 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['rule']} | {r['tau']} | {_g(r['predicted_max_lr'])} | "
            f"{_g(r['measured_max_lr'])} | {_g(r['ratio'], 5)} | " + " | ".join(_ratios(r)) + " |"
        )
    return lines


def pivot(result: dict) -> list[str]:
    """measured / predicted max lr, one row per rule, one column per τ."""
    taus = sorted({r["tau"] for r in result["rows"]})
    rules = list(dict.fromkeys(r["rule"] for r in result["rows"]))
    ratio = {(r["rule"], r["tau"]): r["ratio"] for r in result["rows"]}
    lines = [
        "| rule | " + " | ".join(f"τ = {t}" for t in taus) + " |",
        "|---|" + "---|" * len(taus),
    ]
    for rule in rules:
        cells = [_g(ratio.get((rule, t)), 3) for t in taus]
        lines.append(f"| {rule} | " + " | ".join(cells) + " |")
    return lines


def mlp(result: dict) -> list[str]:
    first = {}
    for r in result["rows"]:
        first.setdefault(r["tau"], r["predicted_max_lr"])
    lines = [
        "| rule | τ | predicted | measured | ratio | predicted / first rule's |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['rule']} | {r['tau']} | {_g(r['predicted_max_lr'])} | "
            f"{_g(r['measured_max_lr'])} | {_g(r['ratio'], 5)} | "
            f"{_g(r['predicted_max_lr'] / first[r['tau']], 5)} |"
        )
    return lines


def stages(result: dict) -> list[str]:
    lines = [
        "| rule | coupled (exact) | measured / coupled | / worst stage | / min per stage |",
        "|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['rule']} | {_g(r['predicted_max_lr_coupled'])} | "
            f"{_g(r['ratio_to_coupled'], 5)} | {_g(r['ratio_to_worst_stage'], 4)} | "
            f"{_g(r['ratio_to_min_stage'], 3)} |"
        )
    return lines


@dataclass(frozen=True)
class Table:
    name: str
    runs: tuple[str, ...]
    """The ``stability validate`` arguments of each run; the table shows their rows in order."""
    format: object


TABLES = (
    Table("full_batch", (f"--rules {RULES6} --taus 0,1,4,16 --momentum 0.9",), full_batch),
    Table("minibatch", (f"--rules {RULES6} --taus 0,1,4,16 --momentum 0.9 --batch 32",), pivot),
    Table(
        "mlp",
        tuple(
            f"--problem mlp --rules {rule} --taus 1,4,16 --momentum 0.9 --rel-tol 1e-3"
            for rule in ("momentum", "discrepancy", "t2", "recompute")
        ),
        mlp,
    ),
    Table(
        "stages_pipemare_3_1",
        (
            "--rules sgd,momentum,lwp+sc --momentum 0.9 "
            "--schedule pipemare --stages 3 --microbatches 1",
        ),
        stages,
    ),
    Table(
        "stages_pipemare_4_2",
        (
            "--rules sgd,momentum,lwp+sc --momentum 0.9 "
            "--schedule pipemare --stages 4 --microbatches 2",
        ),
        stages,
    ),
    Table(
        "stages_pb_4_1",
        ("--rules sgd,momentum,lwp+sc --momentum 0.9 --schedule pb --stages 4 --microbatches 1",),
        stages,
    ),
)


RAW = (
    ("coupled_cpusmall", "bench_coupled.py --only-cpusmall"),
    ("seed_rules", "bench_seed.py --validate"),
)
"""Benchmark scripts whose printed table is the result (name, script and flags)."""


def run_raw(name: str, command: str, write: Path | None) -> bool:
    print(f"== {name}: python benchmarks/{command}", flush=True)
    start = time.perf_counter()
    script, *flags = command.split()
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *flags], capture_output=True, text=True
    )
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return False
    text = (
        f"<!-- generated by `make validation-tables` (scripts/validation_tables.py) on "
        f"{time.strftime('%Y-%m-%d')}; do not edit -->\n\n"
        f"`python benchmarks/{command}` ({time.perf_counter() - start:.0f} s on the 2-core "
        f"development machine):\n\n```\n{done.stdout.rstrip()}\n```\n"
    )
    print(text)
    if write:
        atomic_write(write / f"validation_{name}.md", lambda fh: fh.write(text))
    return True


def render(table: Table, result: dict, seconds: float) -> str:
    data = result["data"]
    eig = result["hessian_eigenvalues"]
    problem = result["problem"]["problem"]
    head = [
        f"<!-- generated by `make validation-tables` (scripts/validation_tables.py) on "
        f"{time.strftime('%Y-%m-%d')}; do not edit -->",
        "",
        "; ".join(f"`stability validate {argv}`" for argv in table.runs)
        + f" — {problem}, {data['samples']} × "
        f"{data['features']} (standardize {data['standardize']}), Hessian eigenvalues "
        f"{min(eig):.4g} … {max(eig):.4g}; {seconds:.0f} s on the shared 2-core development "
        f"machine (load average {os.getloadavg()[0]:.0f}).",
        "",
    ]
    return "\n".join([*head, *table.format(result)]) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=Path, default=None, help="folder for validation_<name>.md")
    ap.add_argument("--only", nargs="*", default=None, help="table names (default: all)")
    args = ap.parse_args(argv)
    for table in TABLES:
        if args.only and table.name not in args.only:
            continue
        start = time.perf_counter()
        results = []
        for argv in table.runs:
            print(f"== {table.name}: stability validate {argv}", flush=True)
            done = subprocess.run(
                [str(STABILITY), "validate", *argv.split(), "--json"],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            results.append(json.loads(done.stdout))
        result = {**results[0], "rows": [row for r in results for row in r["rows"]]}
        text = render(table, result, time.perf_counter() - start)
        print(text)
        if args.write:
            target = args.write / f"validation_{table.name}.md"
            atomic_write(target, lambda fh, text=text: fh.write(text))
    for name, command in RAW:
        if (not args.only or name in args.only) and not run_raw(name, command, args.write):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
