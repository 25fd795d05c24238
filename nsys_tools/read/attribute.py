"""NVTX ranges projected onto the GPU work they launched.

A GPU operation belongs to the NVTX ranges that enclose the API call that launched it, on the
thread that launched it (nsys's projection). Everything here is joins, no loops over rows:

* push/pop ranges nest on their thread, so a running count of opens minus closes gives each
  range its depth and each API call the depth it was made at; the innermost enclosing range is
  then an as-of join on (thread, depth): the last range opened at that depth before the call.
  All enclosing ranges are one such join per depth level (a loop over levels, not rows).
* start/end ranges need not nest, so they are matched with an equi-join on the thread and a
  filter on the times. They are usually few.
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
    operation matches at most one call. Operations with no launching call keep null call columns.
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
    return pl.concat([by_process.filter(pl.col("global_pid").is_not_null()), by_time], how="diagonal_relaxed")


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


def _pushpop_candidates(ops: pl.LazyFrame, ranges: pl.LazyFrame, nesting: Nesting) -> pl.LazyFrame:
    pushpop, events = _pushpop_depths(ranges)
    calls = ops.filter(pl.col("global_tid").is_not_null()).select("op_id", "global_tid", "api_start_ns", "api_end_ns")
    at = (
        calls.sort("api_start_ns")
        .join_asof(events, left_on="api_start_ns", right_on="t", by="global_tid", strategy="backward", check_sortedness=False)
        .filter(pl.col("depth") > 0)
    )
    if nesting == "innermost":
        levels = [at]
    else:
        max_depth = at.select(pl.col("depth").max()).collect().item() or 0
        levels = [at.filter(pl.col("depth") >= k).with_columns(depth=pl.lit(k, pl.Int64)) for k in range(1, max_depth + 1)]
    found = [
        level.sort("api_start_ns")
        .join_asof(
            pushpop,
            left_on="api_start_ns",
            right_on="start_ns",
            by=["global_tid", "depth"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("end_ns") >= pl.col("api_end_ns"))
        for level in levels
    ]
    if not found:
        return _range_fields(
            pushpop.select("start_ns", "end_ns", *RANGE_COLUMNS, "range_instance", "style", op_id=pl.lit(0, pl.UInt32)).clear()
        )
    return _range_fields(pl.concat(found, how="diagonal_relaxed"))


def _startend_candidates(ops: pl.LazyFrame, ranges: pl.LazyFrame) -> pl.LazyFrame:
    """Each (operation, start/end range on its launching thread that encloses the call). The
    calls sorted by (thread, start) put each range's candidates in one run of rows: those that
    start inside it. One sort of the calls and the ranges' edges finds every run's bounds, so
    the cost is the calls, the ranges and the pairs found, not calls times ranges (a thread's
    calls against all of its ranges)."""
    startend = ranges.filter(pl.col("style") == "startend")
    calls = (
        ops.select("op_id", "global_tid", "api_start_ns", "api_end_ns")
        .filter(pl.col("global_tid").is_not_null() & pl.col("api_start_ns").is_not_null())
        .sort("global_tid", "api_start_ns")
        .with_row_index("i")
    )
    # An edge's position among the calls: calls before a range's start (ties: the call is inside),
    # and calls up to its end (ties: inside too); ``order`` breaks ties at one instant.
    edges = pl.concat(
        [
            calls.select("global_tid", t="api_start_ns", order=pl.lit(1, pl.Int8), call=pl.lit(1, pl.UInt32)),
            startend.with_row_index("k").select(
                "global_tid", "k", t="start_ns", order=pl.lit(0, pl.Int8), call=pl.lit(0, pl.UInt32)
            ),
            startend.with_row_index("k").select(
                "global_tid", "k", t="end_ns", order=pl.lit(2, pl.Int8), call=pl.lit(0, pl.UInt32)
            ),
        ],
        how="diagonal",
    )
    placed = edges.sort("global_tid", "t", "order").with_columns(seen=pl.col("call").cum_sum()).filter(pl.col("order") != 1)
    bounds = placed.group_by("k").agg(
        lo=pl.col("seen").filter(pl.col("order") == 0).first(), hi=pl.col("seen").filter(pl.col("order") == 2).first()
    )
    pairs = (
        startend.with_row_index("k")
        .join(bounds, on="k")
        .filter(pl.col("hi") > pl.col("lo"))
        .with_columns(i=pl.int_ranges("lo", "hi", dtype=pl.UInt32))
        .explode("i")
        .drop("global_tid", "lo", "hi", "k")
    )
    matched = pairs.join(calls.drop("global_tid"), on="i").filter(pl.col("end_ns") >= pl.col("api_end_ns")).drop("i")
    return _range_fields(matched)


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
    candidates = pl.concat([_pushpop_candidates(ops, ranges, nesting), _startend_candidates(ops, ranges)])
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
