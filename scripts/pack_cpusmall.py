"""Pack LIBSVM's cpusmall_scale CSV into the compressed copy the package ships.

    python scripts/pack_cpusmall.py ../shared/data/cpusmall_scale.csv

writes ``stability/data/cpusmall.npz`` with two float64 arrays: ``target`` (n,) and
``features`` (12, n), one row per feature (feature-major compresses ~25 % better than
row-major).  The values are those Python's ``float`` reads from the CSV text, so the copy is
lossless: ``tests/test_trainer_data.py`` checks it against the CSV bit for bit.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np

from stability.files import atomic_write
from stability.trainer.data import read_csv

TARGET = Path(__file__).resolve().parents[1] / "stability" / "data" / "cpusmall.npz"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: pack_cpusmall.py PATH/cpusmall_scale.csv", file=sys.stderr)
        return 2
    X, y = read_csv(argv[0])
    buffer = io.BytesIO()
    np.savez_compressed(buffer, target=y, features=np.ascontiguousarray(X.T))
    atomic_write(TARGET, lambda fh: fh.write(buffer.getvalue()), binary=True)
    print(f"{TARGET}: {X.shape[0]} rows x {X.shape[1]} features, {TARGET.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
