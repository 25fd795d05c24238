"""NCCL kernels by collective: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv
(the word after ``ncclKernel_`` or ``ncclDevKernel_`` in the kernel's name), with count and time
statistics; split ``--by device,process`` for each device and rank. Twin: the ``nccl_sum``
recipe.

``bytes`` sums the message sizes NCCL's NVTX ranges carry (``ncclAllReduce`` and the like, with
an integer payload) for that collective in the process, where the trace has them; null when
split by device or stream (a range is on a host thread). The kernels are read in pieces
(``pieces``) and the ranges once per export (``once``), so each payload counts once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from ..read import names
from . import View
from . import stats as metrics

VIEW = View(
    "nccl",
    "NCCL collectives per device and rank: kernels, time, bytes",
    splittable=True,
    twin="nccl_sum recipe",
    parts=True,  # its read: the payload ranges once per export, the kernels per piece
    rows="NCCL collective: kernels, time, bytes from NVTX payloads",
)


@dataclass(frozen=True)
class Options:
    """``nccl`` takes no options."""


MEASURED = {"duration_ns": "{}_ns"}
COLUMNS = ("collective", "instances", *metrics.timed(), "bytes")
NAME = r"^nccl(?:Dev)?Kernel_([A-Za-z]+)"
RANGE = r"^nccl([A-Z][A-Za-z]+)$"


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    """The NCCL kernels (``by``, ``collective``, ``duration_ns``) and, as rows with no duration,
    NCCL's ranges with their payload (``collective``, ``bytes``)."""
    sizes = once(trace, by)
    kernels = pieces(trace, by)
    return kernels if sizes is None else pl.concat([kernels, sizes], how="diagonal_relaxed")


def pieces(trace, by: Sequence[str]) -> pl.LazyFrame:
    """The NCCL kernels: ``by``, ``collective``, ``duration_ns``. Their names are matched once
    per distinct name, then only theirs are read as text."""
    kernels = trace.kernels(columns=[*by, "short_name_id", "duration_ns"])
    ids = kernels.select(pl.col("short_name_id").unique()).collect().to_series()
    named = names.matching(trace.export, ids, NAME).select(short_name_id="id", collective=pl.col("name").str.extract(NAME))
    return kernels.join(named.lazy(), on="short_name_id").select(*by, "duration_ns", "collective")


def once(trace, by: Sequence[str]) -> pl.LazyFrame | None:
    """NCCL's ranges with their payload (``by``, ``collective``, ``bytes``); None where ``by``
    is not on the host (a range is on a host thread)."""
    on_host = [c for c in by if c in ("pid", "process_name")]
    if len(on_host) < len(by):
        return None
    ranges = trace.ranges(columns=[*on_host, "range", "uint64_value", "int64_value"], like=["nccl%"])
    have = ranges.collect_schema().names()
    payload = pl.coalesce([pl.col(c) for c in ("uint64_value", "int64_value") if c in have] or [pl.lit(None, pl.Int64)])
    sizes = ranges.with_columns(text=pl.col("range").cast(pl.String)).filter(pl.col("text").str.contains(RANGE))
    return sizes.select(*on_host, collective=pl.col("text").str.extract(RANGE), bytes=payload.cast(pl.Int64))


def partial(rows: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """Statistics of the kernels, and the bytes of the ranges: either part may be absent (the
    kernels of a piece; the ranges read once)."""
    groups = [*keys, "collective"]
    have = rows.collect_schema().names()
    parts = []
    if "duration_ns" in have:
        parts.append(metrics.partial(rows.filter(pl.col("duration_ns").is_not_null()), groups, list(MEASURED)))
    if "bytes" in have:
        sized = rows.filter(pl.col("duration_ns").is_null()) if "duration_ns" in have else rows
        parts.append(sized.group_by(groups).agg(bytes=pl.col("bytes").sum()))
    return pl.concat(parts, how="diagonal_relaxed")


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, "collective"]
    have = partials.collect_schema().names()
    stats = metrics.finalize(
        metrics.merge(partials.filter(pl.col("instances").is_not_null()), groups, list(MEASURED)), groups, MEASURED
    )
    if "bytes" in have:
        sizes = partials.filter(pl.col("instances").is_null()).group_by(groups).agg(pl.col("bytes").sum())
        stats = stats.join(sizes, on=groups, how="left", nulls_equal=True)
    else:
        stats = stats.with_columns(bytes=pl.lit(None, pl.Int64))
    return (
        stats.with_columns(time_pct=metrics.share("total_ns"))
        .select(*keys, *COLUMNS)
        .sort(["total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.nccl``)."""
    from ..render import view_charts

    return view_charts.nccl(table)
