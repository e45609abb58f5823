"""Sweeps: a grid of one command on dask.distributed, resumable, results as an xarray dataset.

``stability sweep SPEC.toml --out DIR`` (or `run_sweep`) evaluates every point of the spec's
grid (`stability.sweep.specfile`) through the command's public function
(`stability.sweep.catalog`), chunk by chunk on a dask cluster (`stability.sweep.runner`),
storing each chunk in ``DIR`` as it finishes (`stability.sweep.store`); `load` returns the
dataset, `status` how far it has got.  See docs/sweep.md.

Needs the ``[sweep]`` extra (dask[distributed], xarray, zarr).
"""

from stability.sweep.catalog import COMMANDS, Option, SweepCommand, get_command
from stability.sweep.runner import SweepSummary, run_sweep
from stability.sweep.specfile import SpecError, SweepSpec, parse_spec, read_spec
from stability.sweep.store import SweepDirError, SweepStatus, load, status

__all__ = [
    "COMMANDS",
    "Option",
    "SpecError",
    "SweepCommand",
    "SweepDirError",
    "SweepSpec",
    "SweepStatus",
    "SweepSummary",
    "get_command",
    "load",
    "parse_spec",
    "read_spec",
    "run_sweep",
    "status",
]
