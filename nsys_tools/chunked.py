"""NVTX attribution of an export of any size in bounded memory.

Attribution needs, for each GPU operation, the API call that launched it: an operation and its
call share a correlation id (within a process) but may sit anywhere in their tables, and the
runtime table holds ten times as many rows as the kernel table. Holding both whole costs about
0.4 bytes of memory per byte of export. Here the two are joined as a Grace hash join:

1. the operation tables are read one rowid window at a time (``Export.windows``), each window
   reduced to the columns the caller keeps and split by correlation id into buckets
   (``spill.Spill``: in memory up to a budget, on disk past it);
2. the launch-named API calls are read the same way into the same buckets;
3. each bucket's operations are attributed to NVTX ranges against that bucket's calls with
   ``attribute.project`` (the ranges, which are few, are held whole) and reduced at once by
   ``reduce`` (for a report: value counts of durations per range and kernel);
4. operations whose call was not among the launch-named ones are looked up exactly at the end
   (``events.launch_calls``), in one pass, as the in-memory path does.

Attribution depends only on the launching call's thread and times, so no range is cut by a
window or bucket boundary. Peak memory is set by ``WINDOW_ROWS``, ``BUCKET_BYTES`` and
``SPILL_BYTES``, not by the export.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from . import attribute, events
from . import schema as S
from .export import Export
from .spill import Spill

WINDOW_ROWS = 2_000_000  # rows of a table read at a time
BUCKET_BYTES = 64 * 2**20  # calls and operations joined at a time
SPILL_BYTES = 128 * 2**20  # held in memory before buckets go to disk
CALL_TABLES = (S.RUNTIME, S.DRIVER)
# Bytes per row as bucketed: the launch columns plus pid; the keys plus a few kept columns.
CALL_ROW_BYTES = 8 * (len(events.LAUNCH_COLUMNS) + 1)
OP_ROW_BYTES = 8 * 5


def bucket_count(ex: Export, op_tables: Sequence[str]) -> int:
    """Enough buckets that no bucket can exceed ``BUCKET_BYTES``, from the tables' row counts
    (an upper bound: most API calls are not launches); ``Spill.groups`` then joins buckets up
    to that size by what they actually received."""
    calls = sum(ex.rows(t) for t in CALL_TABLES if ex.has(t)) * CALL_ROW_BYTES
    ops = sum(ex.rows(t) for t in op_tables if ex.has(t)) * OP_ROW_BYTES
    return max(1, -(-max(calls, ops) // BUCKET_BYTES))


def attributed_reduce(
    ex: Export,
    ops_of: Callable[[Export], pl.LazyFrame],
    op_tables: Sequence[str],
    reduce: Callable[[pl.LazyFrame], pl.LazyFrame],
    nesting: attribute.Nesting = "innermost",
) -> pl.DataFrame:
    """``reduce`` applied to the attributed operations of ``ex``, a bucket at a time; the
    pieces are concatenated, and ``reduce`` must be such that the caller can combine them
    (counts, sums, minima, value counts).

    ``ops_of(window)`` gives a window's operations: ``pid`` (where the export records it) and
    ``correlation_id``, plus what ``reduce`` needs; ``op_tables`` are the tables it reads.
    """
    keys = events.launch_keys(ex)
    ranges = events.nvtx_ranges(ex).collect().lazy()
    pieces, orphans = [], []
    with Spill(bucket_count(ex, op_tables), "correlation_id", SPILL_BYTES) as spill:
        for window in ex.windows(op_tables, WINDOW_ROWS):
            spill.add("ops", ops_of(window).collect())
        for window in ex.windows(CALL_TABLES, WINDOW_ROWS):
            spill.add("calls", events.api_calls(window, launches_only=True, columns=events.LAUNCH_COLUMNS).collect())
        no_calls = pl.LazyFrame(schema=spill.schemas["calls"])
        for group in spill.groups(BUCKET_BYTES):
            ops, calls = spill.take("ops", group).lazy(), spill.take("calls", group).lazy()
            orphans.append(ops.join(calls, on=keys, how="anti").collect())
            pieces.append(reduce(attribute.project(ops.join(calls, on=keys, how="semi"), calls, ranges, nesting)).collect())
    lost = pl.concat(orphans, how="vertical").lazy()
    if lost.select(pl.len()).collect().item():
        pieces.append(reduce(attribute.project(lost, events.launch_calls(ex, lost, no_calls), ranges, nesting)).collect())
    return pl.concat(pieces, how="vertical")
