"""``stability sweep SPEC.toml --out DIR``: a grid of one command on Dask, resumable.

Runs (or resumes) the spec's grid (docs/sweep.md, ``st.run_sweep``) and reports what this run
did (`stability.sweep.runner.SweepSummary`); ``stability sweep --status DIR`` reports how far
the sweep in DIR has got (`stability.sweep.store.SweepStatus`).  A progress bar goes to stderr
on a terminal.
"""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "run_sweep"
EXAMPLES = (
    "sweep examples/sweeps/momentum_small.toml --out small.sweep --workers 1",
    "sweep --status small.sweep --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "sweep",
        usage="SPEC.toml --out DIR [--workers N | --scheduler ADDRESS] [--json] | --status DIR",
        help="a grid of one command on Dask (resumable), results as an xarray dataset",
        description="Evaluate one command over the grid of a TOML spec, chunk by chunk on a "
        "Dask cluster, each chunk stored in DIR as it finishes; rerunning resumes.  Needs the "
        "[sweep] extra.",
        examples=EXAMPLES,
        report=report,
        progress="sweep",
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
