"""NVTX ranges projected onto the GPU work they launched.

A GPU operation belongs to the NVTX ranges that enclose the API call that launched it, on the
thread that launched it (nsys's projection). Everything here is joins, no loops over rows:

* the innermost push/pop range, where no start/end range is wanted: push/pop ranges nest on
  their thread, so a running count of opens minus closes gives each range its depth and each
  API call the depth it was made at; the innermost enclosing range is then an as-of join on
  (thread, depth): the last range opened at that depth before the call.
* every enclosing range (of either style, at any depth): on each thread the launching calls,
  sorted by start, are numbered; a range encloses a run of consecutive numbers, from its first
  call starting at or after its own start to its last call starting at or before its end (two
  as-of joins), expanded into one row per call and kept where the call also ends inside it.
  The work is the number of (operation, range) pairs, whatever the depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import polars as pl

Nesting = Literal["innermost", "all"]

# What an attributed operation carries of its range; with every enclosing range, also which
# instance it is, so that projections group by range instance.
RANGE_COLUMNS = ("range", "domain")
INSTANCE_COLUMNS = ("range_instance", "style", "range_start_ns", "range_end_ns")
# What it needs of the ranges (``events.nvtx_ranges``).
RANGE_INPUT = ("range_instance", "start_ns", "end_ns", "global_tid", "style", *RANGE_COLUMNS)


def launches(ops: pl.LazyFrame, calls: pl.LazyFrame) -> pl.LazyFrame:
    """Add to each operation its launching call's ``global_tid, api_start_ns, api_end_ns``
    (and ``api_name_id``, where ``calls`` has it; ``calls`` from ``events.launch_calls``: one
    per process and correlation id). Operations with no ``global_pid`` need ``start_ns``.

    A correlation id names one launch within a process, so an operation that records its
    process (``global_pid``) matches on (process, correlation id). Exports whose activity tables
    record no process (nsys before 2021) may hold several processes that reuse correlation ids:
    there each operation takes the call with its correlation id that started last before it
    did (a launch precedes its execution), and the process of that call's thread. Either way an
    operation matches at most one call. Operations with no launching call keep null call columns;
    one that records no process either takes, where ``ops`` has ``device_id``, the process of the
    other operations on its device when they are all of one process (else it stays unattributed).
    """
    cols = [c for c in ("global_tid", "api_start_ns", "api_end_ns", "api_name_id") if c in calls.collect_schema().names()]
    unknown = ops.select(pl.col("global_pid").is_null().sum()).collect().item()
    by_process = ops.join(calls.select("global_pid", "correlation_id", *cols), on=["global_pid", "correlation_id"], how="left")
    if unknown == 0:
        return by_process
    by_time = (
        ops.filter(pl.col("global_pid").is_null())
        .drop("global_pid")
        .sort("start_ns")
        .join_asof(
            calls.select("correlation_id", "global_pid", *cols).sort("api_start_ns"),
            left_on="start_ns",
            right_on="api_start_ns",
            by="correlation_id",
            strategy="backward",
            check_sortedness=False,
        )
    )
    out = pl.concat([by_process.filter(pl.col("global_pid").is_not_null()), by_time], how="diagonal_relaxed")
    if "device_id" not in out.collect_schema().names():
        return out
    alone = (
        out.drop_nulls("global_pid")
        .group_by("device_id")
        .agg(pl.col("global_pid").unique())
        .filter(pl.col("global_pid").list.len() == 1)
        .select("device_id", _device=pl.col("global_pid").list.first())
    )
    out = out.join(alone, on="device_id", how="left", maintain_order="left")
    return out.with_columns(global_pid=pl.coalesce("global_pid", "_device")).drop("_device")


def _pushpop_depths(ranges: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """(ranges with their nesting ``depth``, the thread's depth after each open/close event)."""
    pushpop = ranges.filter((pl.col("style") == "pushpop") & (pl.col("end_ns") > pl.col("start_ns")))
    opens = pushpop.select(
        "global_tid",
        "start_ns",
        "end_ns",
        *RANGE_COLUMNS,
        "range_instance",
        "style",
        t="start_ns",
        delta=pl.lit(1, pl.Int64),
        tie=-(pl.col("end_ns") - pl.col("start_ns")),
    )
    closes = pushpop.select("global_tid", t="end_ns", delta=pl.lit(-1, pl.Int64), tie=pl.lit(0, pl.Int64))
    # At one instant closes come before opens, and an outer range opens before an inner one.
    events = (
        pl.concat([opens, closes], how="diagonal")
        .sort("t", "delta", "tie")
        .with_columns(depth=pl.col("delta").cum_sum().over("global_tid"))
    )
    with_depth = events.filter(pl.col("delta") == 1).select(
        "global_tid", "depth", "start_ns", "end_ns", *RANGE_COLUMNS, "range_instance", "style"
    )
    return with_depth.sort("start_ns"), events.select("global_tid", "t", "depth")


def _range_fields(matched: pl.LazyFrame) -> pl.LazyFrame:
    return matched.select(
        "op_id",
        *RANGE_COLUMNS,
        "range_instance",
        "style",
        range_start_ns="start_ns",
        range_end_ns="end_ns",
    )


def _enclosing(ops: pl.LazyFrame, ranges: pl.LazyFrame) -> pl.LazyFrame:
    """Each (operation, range) pair where the range encloses the call that launched the
    operation, on the call's thread: ``op_id`` and the range's fields. A push/pop range must
    last (a zero-length one encloses nothing); a start/end range may not."""
    calls = (
        ops.filter(pl.col("global_tid").is_not_null())
        .select("op_id", "global_tid", "api_start_ns", "api_end_ns")
        .sort("global_tid", "api_start_ns", "op_id")
        .with_row_index("call")
    )
    starts = calls.group_by("global_tid", "api_start_ns").agg(first=pl.col("call").min(), last=pl.col("call").max())

    def edge(frame: pl.LazyFrame, at: str, call: str, strategy: str) -> pl.LazyFrame:
        """``frame`` with ``call``: the first call starting at or after ``at`` (forward), or the
        last call starting at or before it (backward), on the same thread."""
        return frame.sort(at).join_asof(
            starts.select("global_tid", "api_start_ns", call).sort("api_start_ns"),
            left_on=at,
            right_on="api_start_ns",
            by="global_tid",
            strategy=strategy,
            check_sortedness=False,
        )

    spans = ranges.filter((pl.col("style") == "startend") | (pl.col("end_ns") > pl.col("start_ns")))
    runs = (
        edge(spans.select("range_instance", "global_tid", "start_ns", "end_ns"), "start_ns", "first", "forward")
        .drop("api_start_ns")
        .pipe(edge, "end_ns", "last", "backward")
        .filter(pl.col("first") <= pl.col("last"))
        .select("range_instance", "end_ns", call=pl.int_ranges("first", pl.col("last") + 1, dtype=pl.UInt32))
        .explode("call")
    )
    pairs = (
        runs.join(calls.select("call", "op_id", "api_end_ns"), on="call")
        .filter(pl.col("api_end_ns") <= pl.col("end_ns"))
        .select("op_id", "range_instance")
    )
    return _range_fields(pairs.join(spans, on="range_instance"))


def _innermost_pushpop(ops: pl.LazyFrame, ranges: pl.LazyFrame) -> pl.LazyFrame:
    """The common case in one pass: push/pop ranges only, innermost wanted. Two as-of joins on
    the operations sorted by launch time: the depth the call was made at, then the range."""
    pushpop, events = _pushpop_depths(ranges)
    right = pushpop.select("global_tid", "depth", *RANGE_COLUMNS, range_start_ns="start_ns", range_end_ns="end_ns")
    inside = (pl.col("range_end_ns") >= pl.col("api_end_ns")).fill_null(False)
    return (
        ops.sort("api_start_ns", nulls_last=True)
        .join_asof(events, left_on="api_start_ns", right_on="t", by="global_tid", strategy="backward", check_sortedness=False)
        .join_asof(
            right,
            left_on="api_start_ns",
            right_on="range_start_ns",
            by=["global_tid", "depth"],
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns(
            range=pl.when(inside).then(pl.col("range")).otherwise(pl.lit("")), domain=pl.when(inside).then(pl.col("domain"))
        )
        .drop("t", "depth", "range_start_ns", "range_end_ns")
    )


def project(
    ops: pl.LazyFrame, calls: pl.LazyFrame, ranges: pl.LazyFrame, nesting: Nesting = "innermost", *, drop: Sequence[str] = ()
) -> pl.LazyFrame:
    """Attribute each operation in ``ops`` to its enclosing NVTX range(s).

    ``ops`` needs ``global_pid, correlation_id, start_ns``; ``calls`` comes from
    ``events.launch_calls``; ``ranges`` from ``events.nvtx_ranges``. ``innermost`` gives one row
    per operation with its ``range`` and ``domain``; ``all`` gives one row per (operation,
    enclosing range), with the range instance too (``range_instance, style, range_start_ns,
    range_end_ns``). Operations outside every range keep ``range = ""``. ``drop`` names
    columns not wanted once the launch is found (the join keys, say): fewer columns through the
    sorts and joins of millions of rows.
    """
    if nesting == "innermost" and ranges.filter(pl.col("style") == "startend").select(pl.len()).collect().item() == 0:
        return _innermost_pushpop(launches(ops, calls).drop(drop), ranges)
    # The id is assigned before any join: joins need not keep row order, and ``ops`` is read twice.
    ops = launches(ops.with_row_index("op_id"), calls).drop(drop)
    candidates = _enclosing(ops, ranges)
    carried = RANGE_COLUMNS
    if nesting == "innermost":
        candidates = candidates.sort("op_id", "range_start_ns").unique("op_id", keep="last")
    else:
        carried = RANGE_COLUMNS + INSTANCE_COLUMNS
    return (
        ops.join(candidates.select("op_id", *carried), on="op_id", how="left")
        .with_columns(pl.col("range").fill_null(""))
        .drop("op_id")
    )
