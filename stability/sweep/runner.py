"""Running a sweep on dask.distributed: one task per chunk, results stored as they finish.

`run_sweep` opens (or creates) the sweep's directory (`stability.sweep.store`), submits one
task per chunk that is not finished yet — ``compute_chunk``: the chunk's points through the
command's public function, or its batched evaluation (`stability.sweep.catalog`) — and
writes each chunk's results the moment its task returns.  The cluster is a `LocalCluster` of
``workers`` processes with one thread each (and one BLAS thread: dask sets
``OMP_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1`` in the workers), or the scheduler at
``scheduler`` (``tcp://host:port``), whose workers need this package installed.

Failures: a point's error is part of its chunk's results.  A worker that dies takes its
running task with it; the scheduler gives the task to another worker (up to dask's
``distributed.scheduler.allowed-failures`` deaths of the same task, then the chunk is recorded
as failed and the next run retries it).  A sweep process that dies loses nothing that was
stored: the next run computes only the chunks without a marker.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stability.api.commands import command
from stability.api.tables import SWEEP_MAX_WORKERS
from stability.checks import Interrupted
from stability.extras import require
from stability.options import check_given
from stability.result import output
from stability.sweep.catalog import get_command
from stability.sweep.outcome import error_line
from stability.sweep.specfile import SweepSpec
from stability.sweep.store import TEXT, Marker, SweepDirectory, SweepStore, variables

MAX_WORKERS = SWEEP_MAX_WORKERS
"""Most local worker processes."""


@dataclass(frozen=True)
class ChunkResult:
    """A computed chunk: its variables over its block, failed points, worker time, worker."""

    chunk: int
    values: dict[str, np.ndarray]
    failed: int
    seconds: float
    worker: str


def compute_chunk(spec: SweepSpec, k: int) -> ChunkResult:
    """Evaluate chunk ``k`` of ``spec`` (runs on a worker)."""
    started = time.perf_counter()
    points = spec.points(k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a point's warnings are not the sweep's output
        results = get_command(spec.command).evaluate(points)
    fields = variables(spec)
    values = _missing(fields, len(points))
    failed = 0
    for i, result in enumerate(results):
        if isinstance(result, str):
            values["error"][i] = result
            failed += 1
            continue
        for name, kind in fields[:-1]:
            value = getattr(result, name)
            if value is not None:
                values[name][i] = value if kind == "text" else float(value)
    shape = _block(spec, k)
    return ChunkResult(
        chunk=k,
        values={name: v.reshape(shape) for name, v in values.items()},
        failed=failed,
        seconds=time.perf_counter() - started,
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )


@dataclass(frozen=True)
class SweepSummary(SweepDirectory):
    """What one run of a sweep did (``stability sweep ... --json``)."""

    chunks_computed: int = output("chunks this run computed")
    chunks_skipped: int = output("chunks already finished by an earlier run (not recomputed)")
    chunks_failed: int = output("chunks whose task failed in this run (the next run retries)")
    workers: int = output("worker processes (0: nothing to compute, no cluster started)")
    scheduler: str = output("the scheduler's address (a local cluster's own; \"\": none)")
    seconds: float = output("wall time of this run, cluster start included", "s")
    compute_seconds: float = output("wall time from the first task to the last result", "s")
    points_per_second: float | None = output("points computed per compute second", "1/s")
    variables: tuple[str, ...] = output("the dataset's variables")


def run_sweep(
    spec: SweepSpec,
    out: str | Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepSummary:
    """Run (or resume) ``spec`` into the directory ``out``: every chunk of the grid on a Dask
    cluster, each stored as it finishes (docs/sweep.md); the summary of this run.

    ``workers``: local worker processes (default: the CPUs this process may use); not with
    ``scheduler``.  ``progress(done, total)`` is called with the chunks finished so far.
    """
    require("sweep")  # before ``out`` and its lock are created
    if scheduler is not None and workers is not None:
        raise ValueError("--workers applies to the local cluster; not with --scheduler")
    checked = check_given(command("sweep").options, scheduler=scheduler, workers=workers)
    scheduler, workers = checked["scheduler"], checked["workers"]
    store = SweepStore(Path(out))
    with store.lock():
        store.prepare(spec)
        return _run(spec, store, scheduler, workers, progress or (lambda done, total: None))


def sweep(
    spec: str | Path | SweepSpec | None = None,
    *,
    out: str | Path | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    status: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """``stability sweep``: run (or resume) the sweep of ``spec`` (a `SweepSpec` or its TOML
    file) into ``out`` (`run_sweep`, a `SweepSummary`), or with ``status`` report how far the
    sweep in that directory has got (`stability.sweep.store.status`, a `SweepStatus`)."""
    from stability.sweep.specfile import read_spec
    from stability.sweep.store import status as sweep_status

    if status is not None:
        if spec is not None or out is not None:
            raise ValueError("--status DIR takes no SPEC.toml and no --out")
        return sweep_status(status)
    if spec is None or out is None:
        raise ValueError("give SPEC.toml and --out DIR (or --status DIR)")
    require("sweep")  # before the spec is read or ``out`` (and its .lock) is created
    if not isinstance(spec, SweepSpec):
        spec = read_spec(spec)
    return run_sweep(spec, out, scheduler=scheduler, workers=workers, progress=progress)


def _run(spec, store, scheduler, workers, report) -> SweepSummary:
    started = time.perf_counter()
    finished = store.finished()
    skipped = sum(m.status == "done" for m in finished.values())
    todo = [k for k in range(spec.chunks) if k not in finished or finished[k].status != "done"]
    run = uuid.uuid4().hex[:12]
    begun = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    store.record_run({"run": run, "started": begun, "finished": False})  # counts if killed
    report(skipped, spec.chunks)
    computed = failed_chunks = n_workers = 0
    address, compute_seconds = "", 0.0
    if todo:
        with _client(scheduler, workers) as client:
            address = client.scheduler.address
            n_workers = len(client.nthreads())
            compute_started = time.perf_counter()
            try:
                computed, failed_chunks = _compute(client, spec, todo, store, run, report, skipped)
            except KeyboardInterrupt:
                stored = sum(m.status == "done" for m in store.finished().values())
                raise Interrupted(
                    f"{stored} of {spec.chunks} chunks are stored in {store.out}; "
                    f"rerun the same command to compute the other {spec.chunks - stored}"
                ) from None
            compute_seconds = time.perf_counter() - compute_started
    finished = store.finished()
    done = [m for m in finished.values() if m.status == "done"]
    seconds = time.perf_counter() - started
    computed_points = sum(math.prod(_block(spec, m.chunk)) for m in done if m.run == run)
    store.record_run(
        {
            "run": run,
            "started": begun,
            "finished": True,
            "seconds": round(seconds, 3),
            "compute_seconds": round(compute_seconds, 3),
            "chunks_computed": computed,
            "chunks_skipped": skipped,
            "chunks_failed": failed_chunks,
            "workers": n_workers,
            "scheduler": address,
        }
    )
    return SweepSummary(
        **SweepDirectory.of(store, spec, finished),
        chunks_computed=computed,
        chunks_skipped=skipped,
        chunks_failed=failed_chunks,
        workers=n_workers,
        scheduler=address,
        seconds=round(seconds, 3),
        compute_seconds=round(compute_seconds, 3),
        points_per_second=round(computed_points / compute_seconds, 3) if computed_points else None,
        variables=tuple(name for name, _ in variables(spec)),
    )


def _compute(client, spec, todo, store, run, report, skipped) -> tuple[int, int]:
    """Submit the chunks ``todo``, store each result as it arrives; (computed, failed)."""
    from distributed import as_completed

    futures = {
        client.submit(compute_chunk, spec, k, key=f"sweep-{run}-{k}", pure=False): k for k in todo
    }
    computed = failed = 0
    for future in as_completed(futures):
        k = futures[future]
        try:
            result = future.result()
        except Exception as err:  # noqa: BLE001 - the task itself failed (e.g. KilledWorker)
            _store_failed(store, spec, k, run, f"chunk failed: {error_line(err)}")
            failed += 1
            continue
        finally:
            future.release()
        marker = Marker(k, run, round(result.seconds, 4), result.worker, result.failed)
        store.write_chunk(spec, result.values, marker)
        computed += 1
        report(skipped + computed, spec.chunks)
    return computed, failed


def _store_failed(store: SweepStore, spec: SweepSpec, k: int, run: str, line: str) -> None:
    shape = _block(spec, k)
    values = _missing(variables(spec), math.prod(shape))
    values["error"][:] = line
    values = {name: v.reshape(shape) for name, v in values.items()}
    store.write_chunk(spec, values, Marker(k, run, 0.0, "", math.prod(shape), "failed"))


def _missing(fields: tuple[tuple[str, str], ...], n: int) -> dict[str, np.ndarray]:
    """Every variable for ``n`` points, all missing (NaN, "")."""
    return {
        name: np.full(n, "", dtype=TEXT) if kind == "text" else np.full(n, np.nan)
        for name, kind in fields
    }


def _block(spec: SweepSpec, k: int) -> tuple[int, ...]:
    """Shape of chunk ``k`` (the last along an axis may be shorter)."""
    return tuple(s.stop - s.start for s in spec.chunk_slices(k))


@contextlib.contextmanager
def _client(scheduler: str | None, workers: int | None):
    """A dask client: of the scheduler at ``scheduler``, or of a new local cluster."""
    from distributed import Client, LocalCluster

    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # worker restarts etc. are not the command's output
    try:
        if scheduler is not None:
            try:
                client = Client(scheduler, timeout="20s")
            except OSError as err:
                raise ValueError(f"--scheduler: cannot reach {scheduler} ({err})") from None
            with client:
                yield client
            return
        n = workers if workers is not None else len(os.sched_getaffinity(0))
        with (
            LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",  # a free port: 8787 may be taken
                silence_logs=logging.CRITICAL,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
    finally:
        quiet.setLevel(level)
