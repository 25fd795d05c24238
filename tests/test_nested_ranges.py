"""The ranges view's path for deep nesting (``views/nested.py``, no (operation, range) pairs)
gives the table of the pairs: on real exports, with and without ``--by``, read whole and in
pieces; on a small nested export; and where a launch call still runs when its range closes."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nsys_tools import views
from nsys_tools.read.export import open_export
from nsys_tools.run import chunked
from nsys_tools.views import nested

from .conftest import FIXTURES

_spec = importlib.util.spec_from_file_location("deep_nesting", FIXTURES / "deep-nesting" / "make.py")
make = sys.modules["deep_nesting"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

REAL = [
    FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite",
    FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite",
    FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite",
    FIXTURES / "doubled-launch" / "doubled-launch.sqlite",
]
BY = [(), ("device", "process", "stream")]


def tables(export: Path, by, monkeypatch) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ranges table from the pairs, and from the path for deep nesting (which must be taken)."""
    keys = views.by_columns(by)
    taken = []
    sweep = nested._sweep
    monkeypatch.setattr(nested, "_sweep", lambda *a: taken.append(1) or sweep(*a))

    def table(levels: int) -> pl.DataFrame:
        monkeypatch.setattr(nested, "DEEP_LEVELS", levels)
        part = chunked.view_partial(open_export(export), "ranges", keys, {})
        return views.finalize("ranges", part.lazy(), keys).collect()

    pairs = table(1 << 62)
    assert not taken
    deep = table(0)
    assert taken
    return pairs, deep


@pytest.mark.parametrize("by", BY)
@pytest.mark.parametrize("export", REAL, ids=lambda p: p.stem)
def test_the_nested_path_gives_the_table_of_the_pairs_on_real_exports(export, by, monkeypatch):
    pairs, deep = tables(export, by, monkeypatch)
    assert pairs.height > 0
    assert_frame_equal(deep, pairs)


def test_read_in_pieces_too(monkeypatch):
    monkeypatch.setattr(chunked, "BUCKET_BYTES", 4096)
    monkeypatch.setattr(chunked, "SPILL_BYTES", 1024)
    monkeypatch.setattr(chunked, "SLICE_BYTES", 1024)
    pairs, deep = tables(REAL[2], ("device",), monkeypatch)
    assert_frame_equal(deep, pairs)


@pytest.mark.parametrize("by", BY)
def test_a_small_nested_export_and_a_range_closed_during_a_launch(tmp_path, by, monkeypatch):
    """40 nested ranges (``make.deep``), and one more inside them that opens with a launch call
    and closes while the next one still runs: that one's operations are left out of it."""
    export = make.deep(tmp_path, 40)
    ops = " UNION ALL ".join(
        f"SELECT correlationId FROM {t}"
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
    )
    with sqlite3.connect(export) as con:
        (tid,) = con.execute("SELECT globalTid FROM NVTX_EVENTS WHERE text = 'deep/0'").fetchone()
        calls = con.execute(
            f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid = ? AND correlationId IN ({ops}) "
            "ORDER BY start DESC LIMIT 2",
            (tid,),
        ).fetchall()
        (last_start, last_end), (before, _) = calls
        assert last_end - last_start >= 2
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, ?, 'cut', ?, 0)",
            (before, (last_start + last_end) // 2, make.PUSHPOP, tid),
        )
    con.close()
    pairs, deep = tables(export, by, monkeypatch)
    assert_frame_equal(deep, pairs)
    cut = pairs.filter(pl.col("range") == "cut")
    assert cut["instances"].sum() == cut.height and cut["ops"].sum() >= 1
    assert pairs.filter(pl.col("range") == "deep/39")["ops"].sum() > cut["ops"].sum()
