"""GPU idle intervals: where a device (or, with ``--by``, a process or stream on it) ran nothing
for at least ``min_gap_ns``, between its first operation and its last.

Each gap names what ran before it (the operation that finished last) and after it (the next to
start), with their NVTX ranges and streams, so a gap can be traced to the code around it.
Kernels and memory operations both count as work. nsys has no such report; its expert rule
``gpu_gaps`` finds the same intervals on each device with a default threshold of 500 ms.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

MIN_GAP_NS = 100_000
DEVICE = ("gpu_id", "gpu_name")
OP = ("name", "range", "stream_id")
COLUMNS = (
    "gap_ns",
    "gap_start_ns",
    "gap_end_ns",
    "before",
    "before_range",
    "before_stream",
    "after",
    "after_range",
    "after_stream",
)


def timeline(keys: Sequence[str]) -> list[str]:
    """The columns one timeline is split by: the device, always, and ``keys`` (a file first)."""
    return list(dict.fromkeys([*(k for k in keys if k == "file"), *DEVICE, *keys]))


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    columns = list(dict.fromkeys([*timeline(by), "start_ns", "end_ns", *OP]))
    return trace.gpu_ops(attributed=True, columns=columns).select(columns)


def partial(ops: pl.LazyFrame, keys: Sequence[str], *, min_gap_ns: int = MIN_GAP_NS) -> pl.LazyFrame:
    """The gaps of at least ``min_gap_ns`` on each timeline, with the operations around them."""
    line = timeline(keys)
    ordered = ops.sort([*line, "start_ns", "end_ns"], nulls_last=True).with_row_index("i")
    # The operation holding the timeline busy so far: the latest to reach the running maximum end.
    holder = pl.when(pl.col("end_ns") == pl.col("end_ns").cum_max()).then(pl.col("i")).forward_fill()
    marked = ordered.with_columns(
        gap_start_ns=pl.col("end_ns").cum_max().shift(1).over(line),
        before_i=holder.shift(1).over(line),
    )
    gaps = marked.filter(pl.col("start_ns") - pl.col("gap_start_ns") >= min_gap_ns)
    before = ordered.select(before_i="i", before="name", before_range="range", before_stream="stream_id")
    return gaps.join(before, on="before_i", how="left").select(
        *line,
        gap_ns=pl.col("start_ns") - pl.col("gap_start_ns"),
        gap_start_ns="gap_start_ns",
        gap_end_ns="start_ns",
        before="before",
        before_range="before_range",
        before_stream="before_stream",
        after="name",
        after_range="range",
        after_stream="stream_id",
    )


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    line = timeline(keys)
    return partials.select(*line, *COLUMNS).sort(["gap_ns", *line, "gap_start_ns"], descending=[True] + [False] * (len(line) + 1))
