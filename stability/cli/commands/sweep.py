"""``stability sweep SPEC.toml --out DIR``: a grid of one command on Dask, resumable.

``stability sweep SPEC.toml [--scheduler ADDRESS] [--workers N] --out DIR [--json]`` runs
(or resumes) the spec's grid (docs/sweep.md) and prints a summary (``--json``: one object,
`stability.sweep.runner.SweepSummary`); ``stability sweep --status DIR`` prints how far the
sweep in DIR has got (`stability.sweep.store.SweepStatus`).  A progress bar goes to stderr
when it is a terminal.
"""

from __future__ import annotations

from stability.cli.args import UsageError, add_output_arguments, output_dir_arg


def _workers_arg(text: str) -> int:
    from stability.sweep.runner import MAX_WORKERS

    try:
        value = int(text)
    except ValueError:
        raise UsageError(
            f"--workers must be an integer in [1, {MAX_WORKERS}], got {text!r}"
        ) from None
    if not 1 <= value <= MAX_WORKERS:
        raise UsageError(f"--workers must be an integer in [1, {MAX_WORKERS}], got {value}")
    return value


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="a grid of one command on Dask (resumable), results as an xarray dataset",
        description=__doc__.split("\n\n")[0],
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
        type=_workers_arg,
        metavar="N",
        help="local cluster worker processes, one thread each (default: the CPUs)",
    )
    p.add_argument("--status", metavar="DIR", help="print the progress of the sweep in DIR")
    p.add_argument("--progress", action="store_true", help="progress bar even when not a tty")
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args) -> dict:
    try:
        import stability.sweep as sweep
    except ImportError as err:
        raise UsageError(
            f"stability sweep needs the [sweep] extra (pip install 'stability[sweep]'): {err}"
        ) from None
    if args.status is not None:
        if args.spec is not None or args.out is not None:
            raise UsageError("--status DIR takes no SPEC.toml and no --out")
        return sweep.status(args.status).to_json()
    if args.spec is None or args.out is None:
        raise UsageError("give SPEC.toml and --out DIR (or --status DIR)")
    from stability.cli.progress import Progress

    spec = sweep.read_spec(args.spec)
    bar = Progress(spec.chunks, f"sweep {spec.command}", force=args.progress)

    def progress(done: int, total: int) -> None:
        bar.update(done, f"{done}/{total} chunks")

    try:
        summary = sweep.run_sweep(
            spec, args.out, scheduler=args.scheduler, workers=args.workers, progress=progress
        )
    finally:
        bar.close()
    return summary.to_json()


def report(result: dict) -> str:
    if "chunks_computed" not in result:  # --status
        state = "complete" if result["complete"] else "incomplete"
        return (
            f"{result['out']}: {result['command']} sweep, {state}: {result['chunks_done']} of "
            f"{result['chunks']} chunks done ({result['points_done']} of {result['points']} "
            f"points, {result['points_failed']} failed; {result['chunks_failed']} chunks failed), "
            f"{result['runs']} runs, {result['compute_seconds']:.1f} s of worker time"
        )
    lines = [
        f"{result['out']}: {result['command']} over {result['points']} points in "
        f"{result['chunks']} chunks",
        f"computed {result['chunks_computed']} chunks, skipped {result['chunks_skipped']} "
        "already done" + (f", {result['chunks_failed']} failed" if result["chunks_failed"] else ""),
        f"{result['points_failed']} points recorded with an error",
        f"{result['workers']} workers ({result['scheduler']}), {result['seconds']:.1f} s",
    ]
    if not result["complete"]:
        lines.append("incomplete: rerun the same command to compute the missing chunks")
    return "\n".join(lines)
