"""GPU idle intervals: where a device (or, with ``--by``, a process or stream on it) ran nothing
for at least ``min_gap_ns``, between its first operation and its last.

Each gap names what ran before it (the operation that finished last) and after it (the next to
start), with their NVTX ranges and streams, so a gap can be traced to the code around it.
Kernels and memory operations both count as work. Twin: the ``gpu_gaps`` recipe (and the
``nsys analyze`` rule it runs), which finds the same intervals per process and device, longer
than a threshold in whole milliseconds (500 by default).

An export of any size is read as slices of its operations in order of start time (``chunked.py``,
``split``, ``window`` and ``close``): each slice carries over, per timeline, the operation that
held it busy last, so the gap that opens a slice is the one the whole timeline has there.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from . import View

VIEW = View("gaps", "GPU idle intervals and what ran around them", ordered=True)

MIN_GAP_NS = 100_000
DEVICE = ("gpu_id", "gpu_name")
OP = ("name", "range", "stream_id")
COLUMNS = (
    "gap_ns",
    "gap_start_ns",
    "gap_end_ns",
    "before_name",
    "before_range",
    "before_stream",
    "after_name",
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
    # Names travel as categories: a sort or join of text copies each row's (a 20 MB kernel name
    # once per kernel); a category is a number, its text kept once.
    names = [c for c in OP if ops.collect_schema()[c] == pl.String]
    ops = ops.with_columns(pl.col(names).cast(pl.Categorical))
    ordered = ops.sort([*line, "start_ns", "end_ns"], nulls_last=True).with_row_index("i")
    # The operation holding the timeline busy so far: the latest to reach the running maximum end.
    holder = pl.when(pl.col("end_ns") == pl.col("end_ns").cum_max()).then(pl.col("i")).forward_fill()
    marked = ordered.with_columns(
        gap_start_ns=pl.col("end_ns").cum_max().shift(1).over(line),
        before_i=holder.shift(1).over(line),
    )
    gaps = marked.filter(pl.col("start_ns") - pl.col("gap_start_ns") >= min_gap_ns)
    before = ordered.select(before_i="i", before_name="name", before_range="range", before_stream="stream_id")
    return gaps.join(before, on="before_i", how="left").select(
        *line,
        gap_ns=pl.col("start_ns") - pl.col("gap_start_ns"),
        gap_start_ns="gap_start_ns",
        gap_end_ns="start_ns",
        before_name="before_name",
        before_range="before_range",
        before_stream="before_stream",
        after_name="name",
        after_range="range",
        after_stream="stream_id",
    )


def split(ops: pl.LazyFrame, keys: Sequence[str]) -> tuple[pl.LazyFrame, None]:
    """One piece of the operations: its rows to be ordered by ``start_ns``, and nothing else."""
    return ops, None


def window(ops: pl.DataFrame, keys: Sequence[str], state, *, min_gap_ns: int = MIN_GAP_NS):
    """The gaps of one slice of the operations, which all start after the previous slices':
    ``state`` is (the gaps so far, the operation holding each timeline busy at the slice's
    start). The holder sorts before the slice's operations, so it closes the first gap."""
    found, held = state if state is not None else ([], None)
    ops = ops if held is None else pl.concat([held, ops], how="vertical_relaxed")
    gaps = partial(ops.lazy(), keys, min_gap_ns=min_gap_ns)
    # Names held once; and copied out of the slice (its few rows can be views of the slice's
    # columns, which would otherwise stay in memory until the end, slice after slice).
    found.append(gaps.with_columns(pl.col(pl.String).cast(pl.Categorical)).collect().shrink_to_fit())
    line = timeline(keys)
    ordered = ops.sort([*line, "start_ns", "end_ns"], nulls_last=True)
    busy = ordered.filter(pl.col("end_ns") == pl.col("end_ns").cum_max().over(line))
    return found, busy.group_by(line, maintain_order=True).last().select(ops.columns)


def close(state, sides, keys: Sequence[str]) -> pl.LazyFrame:
    """The partial table of all slices."""
    return pl.concat(state[0], how="diagonal_relaxed").lazy()


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    line = timeline(keys)
    return partials.select(*line, *COLUMNS).sort(["gap_ns", *line, "gap_start_ns"], descending=[True] + [False] * (len(line) + 1))
