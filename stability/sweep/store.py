"""A sweep's directory: the dataset in Zarr, written chunk by chunk, and what is done.

::

    DIR/data.zarr/          the xarray dataset (Zarr v3): one dimension per grid axis (its
                            coordinate: the axis values), one variable per scalar output field
                            of the command (numbers as float64, NaN where missing; booleans as
                            1.0 / 0.0; strings), and ``error`` (the point's one-line error, ""
                            where it succeeded); attributes: the spec, the package version,
                            the timings of every run
    DIR/chunks/K.json       one marker per finished chunk K: seconds, worker, run, failed points
    DIR/.lock               held (flock) by the sweep running in DIR: one at a time

One Zarr chunk of every variable is exactly one sweep chunk (`SweepSpec.block`), so writing a
chunk touches no other chunk's files; each file is replaced atomically (Zarr's local store
writes a temporary file and renames it), and the marker is written (atomically) only after
all of the chunk's variables.  A chunk without a marker is computed (again) by the next run;
a chunk with one is never recomputed.  The store's layout and attributes are written once, in
a temporary directory renamed into place, so a sweep killed at any moment leaves a directory
that the same command resumes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stability.files import write_json
from stability.result import Result, output
from stability.sweep.catalog import get_command
from stability.sweep.specfile import SweepSpec

DATA = "data.zarr"
MARKERS = "chunks"
LOCK = ".lock"
NOT_COMPUTED = "not computed (chunk not finished)"
"""The ``error`` that `load` shows at points of chunks no run has finished."""
TEXT = np.dtypes.StringDType()


class SweepDirError(ValueError):
    """An output directory that cannot hold this sweep (one line)."""


def variables(spec: SweepSpec) -> tuple[tuple[str, str], ...]:
    """``(name, "number" | "text")`` of the dataset's variables: the command's scalar output
    fields (without the echoed inputs), then ``error``."""
    inputs = set(spec.fixed) | set(spec.names)
    return (*get_command(spec.command).output_fields(inputs), ("error", "text"))


def package_version() -> str:
    """The package's version (`stability.version`: the distribution is named ``delay-stability``,
    whatever the environment's metadata say)."""
    from stability.version import __version__

    return __version__


@dataclass(frozen=True)
class Marker:
    """A finished chunk: its number, the run that computed it, its compute time on the worker,
    the worker, how many of its points failed, and ``status`` ``"done"`` or ``"failed"`` (the
    whole chunk: its task failed, e.g. its worker died too often; the next run retries it)."""

    chunk: int
    run: str
    seconds: float
    worker: str
    failed: int
    status: str = "done"


class SweepStore:
    """The directory of one sweep (module doc)."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.data = self.out / DATA
        self.markers = self.out / MARKERS

    # -- creating and checking -----------------------------------------------------------------

    def attrs(self) -> dict[str, Any] | None:
        """The store's attributes, or None if there is no store yet."""
        meta = self.data / "zarr.json"
        if not meta.is_file():
            return None
        return json.loads(meta.read_text(encoding="utf-8")).get("attributes", {})

    @contextlib.contextmanager
    def lock(self):
        """Hold ``DIR/.lock`` for a run (the kernel releases it when the process dies, however
        it dies); another sweep in the same directory is refused."""
        self._check_empty()
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / LOCK, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SweepDirError(f"{self.out} is in use by another running sweep") from None
            yield

    def prepare(self, spec: SweepSpec) -> None:
        """Create the store for ``spec``, or check that the existing one holds the same sweep.

        A different sweep is refused (`SweepDirError`, naming the first difference); so is a
        non-empty directory that holds no sweep.
        """
        attrs = self.attrs()
        if attrs is not None:
            if "sweep_spec" not in attrs:
                raise SweepDirError(f"{self.out} holds a Zarr store that is not a sweep")
            change = spec.difference(json.loads(attrs["sweep_spec"]))
            if change is not None:
                raise SweepDirError(
                    f"{self.out} holds a different sweep (changed: {change}); give a new --out "
                    "directory or rerun the original spec"
                )
            return
        self._check_empty()
        for p in self.out.glob(f".{DATA}.*"):  # left by a run killed while creating the store
            shutil.rmtree(p)
        self._create(spec)

    def _check_empty(self) -> None:
        """Refuse a file, or a directory with anything but a sweep (or its lock, or the
        temporary store of a run killed while creating it)."""
        if not self.out.exists():
            return
        if not self.out.is_dir():
            raise SweepDirError(f"--out must be a directory, got the file {self.out}")
        if self.attrs() is None and any(
            p.name != LOCK and not p.name.startswith(f".{DATA}.") for p in self.out.iterdir()
        ):
            raise SweepDirError(f"{self.out} is not empty and holds no sweep")

    def _create(self, spec: SweepSpec) -> None:
        import dask.array as da
        import xarray as xr

        block = spec.block
        data_vars = {}
        for name, kind in variables(spec):
            fill, dtype = ("", TEXT) if kind == "text" else (np.nan, float)
            data_vars[name] = (spec.names, da.full(spec.shape, fill, dtype=dtype, chunks=block))
        coords = {a.name: _coordinate(a.values) for a in spec.axes}
        attrs = {
            "sweep_spec": json.dumps(spec.identity()),
            "sweep_toml": spec.text,
            "command": spec.command,
            "rule": spec.rule or "",
            "stability_version": package_version(),
            "created": _now(),
            "runs": "[]",
        }
        ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / f".{DATA}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        ds.to_zarr(tmp, mode="w", compute=False, consolidated=False, zarr_format=3)
        os.replace(tmp, self.data)

    # -- chunks ------------------------------------------------------------------------------------

    def finished(self) -> dict[int, Marker]:
        """The markers of the chunks written so far (done or failed), by chunk number."""
        out = {}
        if self.markers.is_dir():
            for path in self.markers.glob("*.json"):
                marker = Marker(**json.loads(path.read_text(encoding="utf-8")))
                out[marker.chunk] = marker
        return out

    def write_chunk(self, spec: SweepSpec, values: dict[str, np.ndarray], marker: Marker) -> None:
        """Write chunk ``marker.chunk``'s variables into the store, then its marker."""
        import zarr

        group = zarr.open_group(self.data, mode="r+", zarr_format=3)
        region = spec.chunk_slices(marker.chunk)
        for name, array in values.items():
            group[name][region] = array
        write_json(self.markers / f"{marker.chunk:07d}.json", marker.__dict__)

    def record_run(self, run: dict[str, Any]) -> None:
        """Record one run in the store's ``runs`` attribute: appended when the run starts (so a
        run that is killed still counts), its entry (same ``run`` id) replaced by its timings
        when it ends."""
        import zarr

        group = zarr.open_group(self.data, mode="r+", zarr_format=3)
        runs = [r for r in json.loads(group.attrs.get("runs", "[]")) if r["run"] != run["run"]]
        group.attrs["runs"] = json.dumps([*runs, run])


def _coordinate(values: tuple[Any, ...]) -> np.ndarray:
    if all(isinstance(v, str) for v in values):
        return np.array(values, dtype=TEXT)
    return np.array(values)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# -- reading ---------------------------------------------------------------------------------------


def load(out: str | Path):
    """The dataset of the sweep in ``out`` (an `xarray.Dataset`, in memory).

    Points of chunks that no run has finished are NaN with ``error`` = `NOT_COMPUTED`;
    attributes: the spec (``sweep_spec`` JSON, ``sweep_toml``), ``stability_version``,
    ``created``, ``runs`` (JSON: every run's timings), ``chunks``, ``chunks_done``.
    """
    import xarray as xr

    store, spec = _open(out)
    ds = xr.open_zarr(store.data, consolidated=False, zarr_format=3).load()
    ds = ds[[name for name, _ in variables(spec)]]  # the store lists them in any order
    finished = store.finished()
    done = [k for k, m in finished.items() if m.status == "done"]
    for k in range(spec.chunks):
        if k not in finished:
            region = dict(zip(spec.names, spec.chunk_slices(k), strict=True))
            ds["error"][region] = NOT_COMPUTED
    ds.attrs.update(chunks=spec.chunks, chunks_done=len(done))
    return ds


@dataclass(frozen=True)
class SweepDirectory(Result):
    """Which sweep a directory holds: the fields `SweepStatus` and
    `stability.sweep.runner.SweepSummary` open with."""

    out: str = output("the sweep's directory")
    command: str = output("the command swept")
    points: int = output("grid points")
    chunks: int = output("chunks (tasks) the grid is cut into")
    points_failed: int = output("points of the finished chunks recorded with an error")
    complete: bool = output("every chunk is finished")

    @staticmethod
    def of(store: SweepStore, spec: SweepSpec, finished: dict[int, Marker]) -> dict[str, Any]:
        """These fields' values for the sweep ``spec`` stored in ``store``, whose chunks
        ``finished`` so far (`SweepStore.finished`)."""
        done = [m for m in finished.values() if m.status == "done"]
        return {
            "out": str(store.out),
            "command": spec.command,
            "points": spec.size,
            "chunks": spec.chunks,
            "points_failed": sum(m.failed for m in done),
            "complete": len(done) == spec.chunks,
        }


@dataclass(frozen=True)
class SweepStatus(SweepDirectory):
    """How far the sweep in a directory has got (``stability sweep --status DIR``)."""

    chunks_done: int = output("chunks finished and stored")
    chunks_failed: int = output("chunks whose task failed (retried by the next run)")
    points_done: int = output("points of the finished chunks")
    compute_seconds: float = output("worker time of the finished chunks", "s")
    runs: int = output("runs so far: the first and every resume, killed ones included")
    stability_version: str = output("package version that created the sweep")


def status(out: str | Path) -> SweepStatus:
    """Progress of the sweep in ``out`` (reads the markers, not the data)."""
    store, spec = _open(out)
    finished = store.finished()
    done = [m for m in finished.values() if m.status == "done"]
    attrs = store.attrs()
    return SweepStatus(
        **SweepDirectory.of(store, spec, finished),
        chunks_done=len(done),
        chunks_failed=len(finished) - len(done),
        points_done=sum(_chunk_size(spec, m.chunk) for m in done),
        compute_seconds=round(sum(m.seconds for m in done), 3),
        runs=len(json.loads(attrs.get("runs", "[]"))),
        stability_version=attrs.get("stability_version", ""),
    )


def _chunk_size(spec: SweepSpec, k: int) -> int:
    return int(np.prod([s.stop - s.start for s in spec.chunk_slices(k)]))


def _open(out: str | Path) -> tuple[SweepStore, SweepSpec]:
    store = SweepStore(Path(out))
    attrs = store.attrs()
    if attrs is None or "sweep_spec" not in attrs:
        raise SweepDirError(f"{store.out} holds no sweep (no {DATA} with a sweep spec)")
    spec = SweepSpec.from_identity(json.loads(attrs["sweep_spec"]), attrs.get("sweep_toml", ""))
    return store, spec
