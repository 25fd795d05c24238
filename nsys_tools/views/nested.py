"""The ``ranges`` view's per-instance aggregates without its (operation, range) pairs, for deep
nesting: every operation lies in every range around its launch, so the pairs number the
operations times the depth (81M at 4,000 levels over 20k kernels).

On one thread, with the launching calls numbered in order of start (per ``--by`` group), a range
encloses a run of consecutive calls (``runs``): from the first starting at or after its start to
the last starting at or before its end, less those that end after it. Where no call of the run
ends after the range (``crosses`` is false), the instance's operations are the run:

* its operations counted are a difference of prefix sums (of each call's first operation);
* its first start, last end and busy time (the union of its operations' intervals) come from one
  pass over the operations in call order that answers each run as it closes (``_sweep``): two
  monotonic stacks for the range minimum and maximum, and for the union the latest operation
  covering each stretch of time (a map of disjoint segments) with a Fenwick tree of the length
  each operation still covers, so that the union of the operations a..b is the sum over a..b.

Runs that lose a call at their end are rare (a call still running when its range closed) and are
expanded into their pairs. The nesting (``level``, ``parent``) comes from the ranges alone, which
must be laminar on each thread (``eligible``): a running count of opens less closes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

import polars as pl

# Deeper than this on some thread, and laminar: the ranges view takes this path.
DEEP_LEVELS = 32
CALL = ("global_tid", "api_start_ns", "api_end_ns")


def _opens(ranges: pl.LazyFrame) -> pl.LazyFrame:
    """Per range (``range_instance, global_tid, range_start_ns, range_end_ns``): ``depth``, the
    ranges open on its thread once it opens (itself included), and ``parent``, the last range
    opened before it at one level less (null at the top). At one instant closes come first, then
    the longer range opens. Exact where the ranges are laminar and last (``eligible``)."""
    opens = ranges.select(
        "global_tid", "range_instance", "range_end_ns", t="range_start_ns", kind=pl.lit(1, pl.Int8), tie=-pl.col("range_end_ns")
    )
    closes = ranges.select("global_tid", t="range_end_ns", kind=pl.lit(0, pl.Int8), delta=pl.lit(-1, pl.Int64))
    events = (
        pl.concat([opens.with_columns(delta=pl.lit(1, pl.Int64)), closes], how="diagonal")
        .sort("global_tid", "t", "kind", "tie", "range_instance", nulls_last=True)
        .with_row_index("at")
        .with_columns(depth=pl.col("delta").cum_sum().over("global_tid"))
        .filter(pl.col("kind") == 1)
        .select("global_tid", "range_instance", "range_end_ns", "at", "depth")
    )
    above = events.select("global_tid", "at", "range_end_ns", parent="range_instance", depth=pl.col("depth") + 1)
    return events.sort("at").join_asof(
        above.sort("at"), on="at", by=["global_tid", "depth"], strategy="backward", suffix="_parent", check_sortedness=False
    )


def eligible(ranges: pl.LazyFrame) -> bool:
    """Whether ``ranges`` (the view's: each lasts or is a start/end range, and ends) take this
    path: some thread nests deeper than ``DEEP_LEVELS``, none has a range of no length, and on each
    thread every range lies inside the last one open when it opens (no two ranges cross)."""
    spans = ranges.select("range_instance", "global_tid", "range_start_ns", "range_end_ns")
    found = (
        _opens(spans)
        .select(
            deep=(pl.col("depth").max() > DEEP_LEVELS).fill_null(False),
            crossed=(pl.col("range_end_ns") > pl.col("range_end_ns_parent")).any(),
        )
        .collect()
        .row(0, named=True)
    )
    empty = spans.select((pl.col("range_end_ns") <= pl.col("range_start_ns")).any()).collect().item()
    return bool(found["deep"]) and not found["crossed"] and not empty


def ancestry(instances: pl.LazyFrame) -> pl.LazyFrame:
    """``range_instance, level, parent`` of the instances that launched GPU work (laminar)."""
    return _opens(instances).select("range_instance", "parent", level=pl.col("depth") - 1)


def instances(ops: pl.DataFrame, ranges: pl.DataFrame, keys: Sequence[str], union) -> pl.LazyFrame:
    """Per (``keys``, range instance) with GPU work: ``start_ns, end_ns, busy_ns, ops``. ``ops``:
    one row per operation (``keys``, ``correlation_id``, the launching call, ``start_ns, end_ns``);
    ``ranges``: ``range_instance, global_tid, range_start_ns, range_end_ns``; ``union``: the
    aggregation of an instance's busy time from its pairs (``ranges.union_ns``)."""
    group = [*keys, "global_tid"]
    ops = (
        ops.filter(pl.col("global_tid").is_not_null())
        .sort([*group, "api_start_ns", "correlation_id"], nulls_last=True)
        .with_row_index("call", offset=0)
        .with_columns(g=pl.struct(group).rle_id())
        .with_columns(
            first=(pl.col("correlation_id") != pl.col("correlation_id").shift(1)).fill_null(True)
            | (pl.col("g") != pl.col("g").shift(1)).fill_null(True),
            reach=pl.col("api_end_ns").cum_max().over("g"),
        )
    )
    runs = _runs(ops, ranges, keys)
    # A call of the run (or before it) still running when the range closed: expanded into pairs.
    crosses = (ops["reach"].gather(runs["last"]) > runs["range_end_ns"]).fill_null(False)
    fast, slow = runs.filter(~crosses), runs.filter(crosses)
    counted = pl.concat([pl.Series([0], dtype=pl.Int64), ops["first"].cast(pl.Int64).cum_sum()])  # before each call
    first, last = fast["first"], fast["last"]
    lo, hi, busy = _sweep(*(ops[c].to_list() for c in ("start_ns", "end_ns", "g")), first.to_list(), last.to_list())
    fast = fast.select(*keys, "range_instance").with_columns(
        start_ns=pl.Series(lo, dtype=pl.Int64),
        end_ns=pl.Series(hi, dtype=pl.Int64),
        busy_ns=pl.Series(busy, dtype=pl.Int64),
        ops=counted.gather(last + 1) - counted.gather(first),
    )
    pairs = (
        slow.lazy()
        .select(*keys, "range_instance", "range_end_ns", call=pl.int_ranges("first", pl.col("last") + 1, dtype=pl.UInt32))
        .explode("call")
        .join(ops.lazy().select("call", "correlation_id", "api_end_ns", "start_ns", "end_ns"), on="call")
        .filter(pl.col("api_end_ns") <= pl.col("range_end_ns"))
        .group_by([*keys, "range_instance"])
        .agg(
            start_ns=pl.col("start_ns").min(),
            end_ns=pl.col("end_ns").max(),
            busy_ns=union(),
            ops=pl.col("correlation_id").n_unique().cast(pl.Int64),
        )
    )
    return pl.concat([fast.lazy(), pairs], how="vertical_relaxed")


def _runs(ops: pl.DataFrame, ranges: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Per range and group of ``ops`` on its thread: ``first`` and ``last``, the calls (row
    numbers of ``ops``) of its run, where it has one; with the group's ``keys``."""
    starts = ops.group_by("g", "api_start_ns").agg(first=pl.col("call").min(), last=pl.col("call").max()).sort("api_start_ns")
    groups = ops.select(*keys, "global_tid", "g").unique("g")
    spans = ranges.select("range_instance", "global_tid", "range_start_ns", "range_end_ns").join(groups, on="global_tid")

    def edge(frame: pl.DataFrame, at: str, call: str, strategy: str) -> pl.DataFrame:
        return (
            frame.sort(at)
            .join_asof(
                starts.select("g", "api_start_ns", call),
                left_on=at,
                right_on="api_start_ns",
                by="g",
                strategy=strategy,
                check_sortedness=False,
            )
            .drop("api_start_ns")
        )

    return (
        edge(edge(spans, "range_start_ns", "first", "forward"), "range_end_ns", "last", "backward")
        .filter(pl.col("first") <= pl.col("last"))
        .sort("last", "first")
    )


def _sweep(start: list, end: list, group: list, first: list, last: list) -> tuple[list, list, list]:
    """For each run ``first[k]..last[k]`` of operations (in one group; sorted by ``last``): the
    least start, the greatest end and the length of the union of ``[start, end)``, in one pass."""
    n, m = len(start), len(first)
    lo, hi, busy = [0] * m, [0] * m, [0] * m
    tree = [0] * (n + 1)  # Fenwick: the length each operation covers last

    def add(i: int, v: int) -> None:
        i += 1
        while i <= n:
            tree[i] += v
            i += i & -i

    def upto(i: int) -> int:  # sum over 0..i-1
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    k, current = 0, None
    for i in range(n):
        if group[i] != current:  # a new group: its operations start a timeline of their own
            current = group[i]
            seg_s, seg_e, seg_o = [], [], []
            mins, maxs = [], []  # indices, increasing starts / decreasing ends
        s, e = start[i], end[i]
        while mins and start[mins[-1]] >= s:
            mins.pop()
        mins.append(i)
        while maxs and end[maxs[-1]] <= e:
            maxs.pop()
        maxs.append(i)
        if e > s:
            j = bisect_right(seg_s, s) - 1
            if j < 0 or seg_e[j] <= s:
                j += 1
            stop = bisect_left(seg_s, e)
            pieces_s, pieces_e, pieces_o = [], [], []
            if j < stop and seg_s[j] < s:
                pieces_s.append(seg_s[j]), pieces_e.append(s), pieces_o.append(seg_o[j])
            pieces_s.append(s), pieces_e.append(e), pieces_o.append(i)
            if j < stop and seg_e[stop - 1] > e:
                pieces_s.append(e), pieces_e.append(seg_e[stop - 1]), pieces_o.append(seg_o[stop - 1])
            for t in range(j, stop):
                add(seg_o[t], -(min(seg_e[t], e) - max(seg_s[t], s)))
            seg_s[j:stop], seg_e[j:stop], seg_o[j:stop] = pieces_s, pieces_e, pieces_o
            add(i, e - s)
        while k < m and last[k] == i:
            a = first[k]
            lo[k] = start[mins[bisect_left(mins, a)]]
            hi[k] = end[maxs[bisect_left(maxs, a)]]
            busy[k] = upto(i + 1) - upto(a)
            k += 1
    return lo, hi, busy
