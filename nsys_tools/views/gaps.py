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
from dataclasses import dataclass

import polars as pl

from . import View
from .contract import Fold, option

VIEW = View(
    "gaps",
    "GPU idle intervals and what ran around them",
    ordered=True,
    twin="gpu_gaps recipe",
    rows="GPU idle interval above a threshold",
)


@dataclass(frozen=True)
class Options:
    """The options of ``gaps``."""

    min_gap_ns: int = option(
        100_000, "--min-gap", "The shortest idle interval reported, in µs (default 100).", at="partial", parse="us", min=0
    )


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
    before = {"before_name": "name", "before_range": "range", "before_stream": "stream_id"}
    return intervals(ops, line, before, min_gap_ns=min_gap_ns).select(
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


def intervals(ops: pl.LazyFrame, line: list[str], before: dict[str, str], *, min_gap_ns: int = 1) -> pl.LazyFrame:
    """The idle intervals of at least ``min_gap_ns`` on each timeline (``line``), one row each: the
    operation that ends it, with all its columns, ``gap_start_ns`` (where the timeline went idle),
    and the columns of the operation that held it busy until then, named as ``before`` maps them
    (output name -> column). ``gaps`` and ``idle`` both find their intervals here."""
    ordered = ops.sort([*line, "start_ns", "end_ns"], nulls_last=True).with_row_index("i")
    # The operation holding the timeline busy so far: the latest to reach the running maximum end.
    holder = pl.when(pl.col("end_ns") == pl.col("end_ns").cum_max()).then(pl.col("i")).forward_fill()
    marked = ordered.with_columns(
        gap_start_ns=pl.col("end_ns").cum_max().shift(1).over(line),
        before_i=holder.shift(1).over(line),
    )
    found = marked.filter(pl.col("start_ns") - pl.col("gap_start_ns") >= min_gap_ns)
    return found.join(ordered.select(before_i="i", **before), on="before_i", how="left")


def holding(ops: pl.DataFrame, line: list[str]) -> pl.DataFrame:
    """The operation holding each timeline busy at the end of ``ops``: the next slice's first gap
    starts at its end."""
    ordered = ops.sort([*line, "start_ns", "end_ns"], nulls_last=True)
    busy = ordered.filter(pl.col("end_ns") == pl.col("end_ns").cum_max().over(line))
    return busy.group_by(line, maintain_order=True).last().select(ops.columns)


def split(ops: pl.LazyFrame, keys: Sequence[str]) -> tuple[pl.LazyFrame, None]:
    """One piece of the operations: its rows to be ordered by ``start_ns``, and nothing else."""
    return ops, None


def start(sides: list, keys: Sequence[str]) -> Fold:
    """The fold's first state: no gaps, no operation held."""
    return Fold()


def window(ops: pl.DataFrame, keys: Sequence[str], state: Fold, *, min_gap_ns: int = MIN_GAP_NS) -> Fold:
    """The gaps of one slice of the operations, which all start after the previous slices':
    ``state`` holds the gaps so far (``found``) and the operation holding each timeline busy at
    the slice's start (``held``). The holder sorts before the slice's operations, so it closes
    the first gap."""
    ops = ops if state.held is None else pl.concat([state.held, ops], how="vertical_relaxed")
    gaps = partial(ops.lazy(), keys, min_gap_ns=min_gap_ns)
    # Names held once; and copied out of the slice (its few rows can be views of the slice's
    # columns, which would otherwise stay in memory until the end, slice after slice).
    state.found.append(gaps.with_columns(pl.col(pl.String).cast(pl.Categorical)).collect().shrink_to_fit())
    return Fold(state.found, holding(ops, timeline(keys)))


def close(state: Fold, sides: list, keys: Sequence[str]) -> pl.LazyFrame:
    """The partial table of all slices."""
    return pl.concat(state.found, how="diagonal_relaxed").lazy()


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    line = timeline(keys)
    return partials.select(*line, *COLUMNS).sort(["gap_ns", *line, "gap_start_ns"], descending=[True] + [False] * (len(line) + 1))


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.gaps``)."""
    from ..render import view_charts

    return view_charts.gaps(table)
