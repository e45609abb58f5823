"""``stability sweep SPEC.toml --out DIR``: a grid of one command on Dask, resumable.

Runs (or resumes) the spec's grid (docs/sweep.md, ``st.run_sweep``) and reports what this run
did (`stability.sweep.runner.SweepSummary`); ``stability sweep --status DIR`` reports how far
the sweep in DIR has got (`stability.sweep.store.SweepStatus`).  A progress bar goes to stderr
on a terminal.
"""

from __future__ import annotations

from pathlib import Path

from stability.cli.args import (
    UsageError,
    add_command,
    add_output_arguments,
    int_arg,
    output_dir_arg,
)

API = "run_sweep"
EXAMPLES = (
    "sweep examples/sweeps/momentum_small.toml --out small.sweep --workers 1",
    "sweep --status small.sweep --json",
)
MAX_WORKERS = 256
"""Largest local cluster (`stability.sweep.runner` enforces the same bound)."""


def _existing_dir(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_dir():
        raise UsageError(f"--status must be the directory of a sweep, got {text!r}")
    return path


def register(sub) -> None:
    p = add_command(
        sub,
        "sweep",
        usage="SPEC.toml --out DIR [--workers N | --scheduler ADDRESS] [--json] | --status DIR",
        help="a grid of one command on Dask (resumable), results as an xarray dataset",
        description="Evaluate one command over the grid of a TOML spec, chunk by chunk on a "
        "Dask cluster, each chunk stored in DIR as it finishes; rerunning resumes.  Needs the "
        "[sweep] extra.",
        examples=EXAMPLES,
    )
    p.add_argument("spec", metavar="SPEC.toml", nargs="?", help="the sweep spec (TOML)")
    p.add_argument(
        "--out", type=output_dir_arg("--out"), metavar="DIR", help="directory of the results"
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a running dask scheduler, e.g. tcp://host:8786 (default: a local cluster)",
    )
    p.add_argument(
        "--workers",
        type=int_arg("--workers", 1, MAX_WORKERS),
        metavar="N",
        help="local cluster worker processes, one thread each (default: the CPUs)",
    )
    p.add_argument(
        "--status", type=_existing_dir, metavar="DIR", help="the progress of the sweep in DIR"
    )
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args):
    from stability.sweep import read_spec, run_sweep, status

    if args.status is not None:
        if args.spec is not None or args.out is not None:
            raise UsageError("--status DIR takes no SPEC.toml and no --out")
        return status(args.status)
    if args.spec is None or args.out is None:
        raise UsageError("give SPEC.toml and --out DIR (or --status DIR)")
    from stability.cli.progress import progress_bar
    from stability.extras import require

    require("sweep")  # before the spec is read or DIR (and its .lock) is created
    spec = read_spec(args.spec)
    with progress_bar(f"sweep {spec.command}", json=args.json) as progress:
        return run_sweep(
            spec, args.out, scheduler=args.scheduler, workers=args.workers, progress=progress
        )


def report(result) -> str:
    if not hasattr(result, "chunks_computed"):  # --status
        state = "complete" if result.complete else "incomplete"
        return (
            f"{result.out}: {result.command} sweep, {state}: {result.chunks_done} of "
            f"{result.chunks} chunks done ({result.points_done} of {result.points} "
            f"points, {result.points_failed} failed; {result.chunks_failed} chunks failed), "
            f"{result.runs} run{'' if result.runs == 1 else 's'} (killed ones included), "
            f"{result.compute_seconds:.1f} s of worker time"
        )
    lines = [
        f"{result.out}: {result.command} over {result.points} points in {result.chunks} chunks",
        f"computed {result.chunks_computed} chunks, skipped {result.chunks_skipped} already "
        "done" + (f", {result.chunks_failed} failed" if result.chunks_failed else ""),
        f"{result.points_failed} points recorded with an error",
        f"{result.workers} workers ({result.scheduler or 'none started'}), {result.seconds:.1f} s",
    ]
    if not result.complete:
        lines.append("incomplete: rerun the same command to compute the missing chunks")
    return "\n".join(lines)
