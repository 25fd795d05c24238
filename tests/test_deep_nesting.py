"""10,000 nested NVTX ranges (tests/fixtures/deep-nesting/make.py): the ranges view equals a
computation straight from the export's SQL, one range at a time, with a stack for the nesting."""

from __future__ import annotations

import bisect
import importlib.util
import sqlite3
import statistics
import sys
from pathlib import Path

import polars as pl
import pytest

import nsys_tools

from .conftest import FIXTURES

_spec = importlib.util.spec_from_file_location("deep_nesting", FIXTURES / "deep-nesting" / "make.py")
make = sys.modules["deep_nesting"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

LEVELS = 10_000
PID_MASK = ~0xFFFFFF  # a serialized global thread id less its thread: the process's
OPS = " UNION ALL ".join(
    f"SELECT start, end, correlationId, globalPid FROM {table}"
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
)


def _union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def expected(export: Path) -> dict[str, dict]:
    """Per push/pop range that launched GPU work: the view's columns, from SQL and plain Python."""
    con = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    launched = con.execute(
        f"SELECT r.globalTid, r.start, r.end, o.start, o.end, o.correlationId FROM ({OPS}) AS o "
        f"JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = o.correlationId "
        f"AND (r.globalTid & {PID_MASK}) = (o.globalPid & {PID_MASK}) ORDER BY r.globalTid, r.start"
    ).fetchall()
    ranges = con.execute(
        "SELECT rowid, start, end, text, globalTid FROM NVTX_EVENTS WHERE eventType = ? AND end > start",
        (make.PUSHPOP,),
    ).fetchall()
    con.close()
    keys = [(tid, call_start) for tid, call_start, *_ in launched]
    found, slices = {}, {}
    for rowid, start, end, text, tid in ranges:
        lo, hi = bisect.bisect_left(keys, (tid, start)), bisect.bisect_right(keys, (tid, end))
        inside = tuple(i for i in range(lo, hi) if launched[i][2] <= end)
        if not inside:
            continue
        if inside not in slices:  # many ranges enclose the same operations
            ops = [launched[i][3:] for i in inside]
            slices[inside] = (
                max(e for _, e, _ in ops) - min(s for s, _, _ in ops),
                _union([(s, e) for s, e, _ in ops]),
                len({c for _, _, c in ops}),
            )
        proj, busy, count = slices[inside]
        found[rowid] = dict(range=text, tid=tid, start=start, end=end, proj=proj, busy=busy, ops=count)
    # Nesting among the ranges that launched work, per thread: outer first, a stack of the open ones.
    for row in found.values():
        row["level"], row["children"] = 0, 0
    stack: list[dict] = []
    for rowid in sorted(found, key=lambda i: (found[i]["tid"], found[i]["start"], -found[i]["end"], i)):
        row = found[rowid]
        while stack and (stack[-1]["tid"] != row["tid"] or stack[-1]["end"] < row["end"]):
            stack.pop()
        row["level"] = len(stack)
        if stack:
            stack[-1]["children"] += 1
        stack.append(row)
    by_name: dict[str, list[dict]] = {}
    for row in found.values():
        by_name.setdefault(row["range"], []).append(row)
    table = {}
    for name, rows in by_name.items():
        proj = [r["proj"] for r in rows]
        table[name] = dict(
            instances=len(rows),
            proj_total_ns=sum(proj),
            proj_median_ns=statistics.median(proj),
            proj_min_ns=min(proj),
            proj_max_ns=max(proj),
            busy_ns=sum(r["busy"] for r in rows),
            range_total_ns=sum(r["end"] - r["start"] for r in rows),
            ops=sum(r["ops"] for r in rows),
            level_mean=statistics.fmean(r["level"] for r in rows),
            children_mean=statistics.fmean(r["children"] for r in rows),
        )
    return table


@pytest.fixture(scope="module")
def deep(tmp_path_factory) -> Path:
    return make.deep(tmp_path_factory.mktemp("deep"), LEVELS)


@pytest.mark.slow
def test_ten_thousand_levels_give_the_table_computed_from_sql(deep):
    want = expected(deep)
    assert len(want) == LEVELS + 3  # deep/0 .. deep/9999 and the export's own three ranges
    assert want["deep/0"]["level_mean"] == 0 and want["torch/4096x768"]["level_mean"] == LEVELS
    with nsys_tools.open(deep) as trace:
        got = trace.view("ranges").collect()
    assert got.height == len(want)
    columns = list(next(iter(want.values())))
    rows = {r["range"]: {c: r[c] for c in columns} for r in got.select("range", *columns).iter_rows(named=True)}
    assert rows == want
    assert got.filter(pl.col("style") != "pushpop").is_empty()
