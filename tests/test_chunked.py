"""Attribution in bounded memory: cut into windows and buckets, spilled to disk, the same result."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nsys_tools import chunked, events
from nsys_tools import schema as S
from nsys_tools.export import open_export
from nsys_tools.report import attributed, gpu_ops
from nsys_tools.spill import Spill

from .conftest import FIXTURES

DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"
SRC = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
BY = ["range", "name_id", "label", "duration_ns"]


@pytest.fixture
def tiny(monkeypatch):
    """Windows of 100 rows, buckets of 4 kB, everything past 1 kB on disk: a fixture
    export then crosses every boundary the bounded path has, many times over."""
    monkeypatch.setattr(chunked, "WINDOW_ROWS", 100)
    monkeypatch.setattr(chunked, "BUCKET_BYTES", 4096)
    monkeypatch.setattr(chunked, "SPILL_BYTES", 1024)


def counts(ops: pl.LazyFrame) -> pl.LazyFrame:
    return ops.group_by(BY).agg(count=pl.len())


def bounded(ex, nesting):
    keys = events.launch_keys(ex)

    def ops_of(window):
        return gpu_ops(window, include_memops=True).select(*keys, "name_id", "label", "duration_ns")

    pieces = chunked.attributed_reduce(ex, ops_of, [S.KERNEL, S.MEMCPY, S.MEMSET], counts, nesting)
    return pieces.group_by(BY).agg(pl.col("count").sum()).sort(BY, nulls_last=True)


@pytest.mark.parametrize("nesting", ["innermost", "all"])
@pytest.mark.parametrize("path", [SRC, DEMO / "4096x768.sqlite"], ids=["fixture-2025.3", "sweep-4096x768"])
def test_windows_and_buckets_change_nothing(tiny, path, nesting):
    ex = open_export(path)
    assert len(ex.windows([S.KERNEL], chunked.WINDOW_ROWS)) > 3 and chunked.bucket_count(ex, [S.KERNEL]) > 10
    whole = counts(attributed(ex, include_memops=True, nesting=nesting)).collect().sort(BY, nulls_last=True)
    assert_frame_equal(bounded(ex, nesting), whole)
    assert whole.filter(pl.col("range") != "")["count"].sum() >= 300


def test_launches_outside_the_name_filter_are_found_at_the_end(tiny, fixture_copy):
    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    before = bounded(open_export(path), "innermost")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE StringIds SET value = 'cuEnqueueWork' WHERE value = 'cuLaunchKernel'")
    con.close()
    assert_frame_equal(bounded(open_export(path), "innermost"), before)


def test_windows_read_each_row_once():
    ex = open_export(SRC)
    whole = events.kernels(ex, ["correlation_id"]).collect()
    windows = ex.windows([S.KERNEL, S.RUNTIME], 100)
    assert len(windows) == -(-ex.rows(S.RUNTIME) // 100)
    parts = pl.concat([events.kernels(w, ["correlation_id"]).collect() for w in windows])
    assert parts.height == whole.height
    assert_frame_equal(parts.sort("correlation_id"), whole.sort("correlation_id"))


def test_spill_keeps_every_row_in_its_bucket():
    frames = [pl.DataFrame({"correlation_id": list(range(k, 1000, 7)), "v": [k] * len(range(k, 1000, 7))}) for k in range(7)]
    with Spill(buckets=10, key="correlation_id", budget=2000) as spill:
        for f in frames:
            spill.add("s", f)
        assert spill.flushes > 0  # past the budget, pieces went to disk
        folder = Path(spill._folder.name)
        assert any(folder.iterdir())
        groups = spill.groups(3000)
        assert sorted(b for g in groups for b in g) == list(range(10)) and len(groups) > 1
        back = [spill.take("s", g) for g in groups]
    assert not folder.exists()  # the temporary folder goes with the store
    for g, part in zip(groups, back, strict=True):
        assert set((part["correlation_id"] % 10).unique()) <= set(g)
    assert_frame_equal(pl.concat(back).sort("correlation_id", "v"), pl.concat(frames).sort("correlation_id", "v"))
