"""The PyTorch training captures in ``tests/fixtures/torch-train/``, decompressed for reading.

They are stored gzip-compressed (each export is about 2.5 MB); ``exports`` writes the plain SQLite
files into a folder once and returns their paths by run name: ``a``, ``b`` and ``slow``.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from .conftest import FIXTURES

FOLDER = FIXTURES / "torch-train"
RUNS = ("a", "b", "slow")


def exports(into: Path) -> dict[str, Path]:
    paths = {}
    for run in RUNS:
        path = into / f"run-{run}.sqlite"
        if not path.exists():
            with gzip.open(FOLDER / f"run-{run}.sqlite.gz") as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        paths[run] = path
    return paths
