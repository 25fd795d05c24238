"""A kernel with a name megabytes long (``fixtures/long-name/make.py``): the ordered views and pace
carry its name as a number, so memory does not grow with the name times its launches, and csv
keeps every byte of it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nsys_tools import views
from nsys_tools.read.export import open_export
from nsys_tools.read.trace import Trace
from nsys_tools.run import chunked, spill

from .conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[1]
LAUNCHES = 120  # of the kernel whose names make.py lengthens


def long_name_export(folder: Path, megabytes: int) -> Path:
    spec = importlib.util.spec_from_file_location("make_long_name", FIXTURES / "long-name" / "make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    return make.long_name(folder, megabytes)


@pytest.mark.parametrize("view, options", [("gaps", {"min_gap_ns": 0}), ("idle", {"longest": 1000})])
def test_the_ordered_views_spill_numbers_not_names(view, options, tmp_path, monkeypatch):
    """Every row spilled to disk holds its texts as codes, and the table is still that of the
    whole export, long name and all."""
    monkeypatch.setattr(chunked, "SPILL_BYTES", 1024)
    monkeypatch.setattr(chunked, "SLICE_BYTES", 1024)
    flush = spill.Spill.flush
    spilled = {}

    def record(store):  # each file on disk, as written, before a take reads and deletes it
        flush(store)
        for path in (p for paths in store.files.values() for p in paths):
            spilled.setdefault(path.name, pl.read_ipc_schema(path))

    monkeypatch.setattr(spill.Spill, "flush", record)
    ex = open_export(long_name_export(tmp_path, 1))
    got = views.finalize(view, chunked.view_partial(ex, view, [], options).lazy(), []).collect()
    rows = [schema for name, schema in spilled.items() if name.startswith("rows-")]
    assert len(rows) >= 4
    assert not [s for s in rows if any(t == pl.String or isinstance(t, pl.Categorical) for t in s.values())]
    assert_frame_equal(got, views.table(Trace(ex), view, **options))
    long = got.filter(pl.col("before_name" if view == "gaps" else "before").str.len_bytes() == 2**20)
    assert long.height > 0


@pytest.mark.slow
@pytest.mark.parametrize("view", ["gaps", "pace"])
def test_a_long_name_is_written_whole_in_bounded_memory(view, tmp_path):
    """csv with an 8 MB name in each of its 120 instances' rows (pace: about 1 GB of csv): the
    report stays far below one copy of the name per row, and writes every byte of each."""
    megabytes = 8
    export = long_name_export(tmp_path, megabytes)
    out = tmp_path / "out.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NSYS_TOOLS_CACHE": "0"}
    # Measured by a small process of its own: a child forked from this one would count this one's pages.
    command = [sys.executable, str(ROOT / "tests" / "peak_rss.py"), "4000", str(out), "--"]
    command += [sys.executable, "-m", "nsys_tools", "report", str(export), "--view", view, "-f", "csv"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout.strip()
    peak_mb = int(result.split(", ")[1].split()[0]) // 1024
    assert result.endswith("exit 0") and peak_mb < 700, result
    name = megabytes * 2**20
    with open(out, "rb") as f:
        lines = [len(line) for line in f]
    rows = sum(n > name for n in lines)
    assert rows >= (LAUNCHES if view == "pace" else 2) and len(lines) > rows
