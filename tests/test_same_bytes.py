"""Same bytes every run: ``export`` Parquet and ``timeline`` JSON of a 50,292-kernel export (the
real 2025.3 export replicated, ``run/bigexport.replicate``), read in small pieces so that many
are merged (rowid partitions of 5,000 rows, windows of 8,000), on 1 thread and twice on 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsys_tools.run.bigexport import replicate

from .conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[1]
SMALL_PIECES = """
import sys
from nsys_tools.read import export
from nsys_tools.run import chunked
export.PARTITION_ROWS = 5000
chunked.WINDOW_ROWS = 8000
chunked.BUCKET_BYTES = 2**20
from nsys_tools.cli import app
app(sys.argv[1:])
"""


@pytest.mark.slow
def test_export_and_timeline_give_the_same_bytes_every_run(tmp_path):
    source = tmp_path / "k50.sqlite"
    counts = replicate(FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite", source, 131)
    assert counts["CUPTI_ACTIVITY_KIND_KERNEL"] == 50_292
    runs = []
    for k, threads in enumerate(("1", "2", "2")):
        out = tmp_path / f"run{k}"
        env = {**os.environ, "POLARS_MAX_THREADS": threads, "NSYS_TOOLS_CACHE": "0", "PYTHONPATH": str(ROOT)}
        for argv in (["export", str(source), "--to", str(out / "frames")], ["timeline", str(source), "-o", str(out / "t.json")]):
            done = subprocess.run([sys.executable, "-c", SMALL_PIECES, *argv], env=env, capture_output=True, timeout=600)
            assert done.returncode == 0, done.stderr.decode()
        runs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert len(runs[0]) == 12 and runs[0] == runs[1] == runs[2]
