"""Memory operations by kind: ``nsys stats --report cuda_gpu_mem_size_sum`` (bytes) and
``cuda_gpu_mem_time_sum`` (time) in one table, with the bandwidth they reached.

``operation`` is nsys's label: ``[CUDA memcpy Host-to-Device]``, ``[CUDA memset]``, ...;
``gb_per_s`` is total bytes over total time (GB/s, 10^9 bytes per second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from . import View
from . import stats as metrics

VIEW = View(
    "memops",
    "memory operations by kind: bytes, time, bandwidth",
    splittable=True,
    twin="nsys stats --report cuda_gpu_mem_size_sum, cuda_gpu_mem_time_sum",
    rows="memory operation kind: bytes, time, bandwidth",
)


@dataclass(frozen=True)
class Options:
    """``memops`` takes no options."""


MEASURED = {"bytes": "{}_bytes", "duration_ns": "{}_ns"}
COLUMNS = ("operation", "instances", *metrics.named("{}_bytes", metrics.STATS[:6]), *metrics.timed()[:7], "gb_per_s")


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    ops = trace.memops(columns=[*by, "name", "bytes", "duration_ns"])
    return ops.select(*by, "bytes", "duration_ns", operation="name")


def partial(ops: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    return metrics.partial(ops, [*keys, "operation"], list(MEASURED))


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, "operation"]
    merged = metrics.merge(partials, groups, list(MEASURED))
    return (
        metrics.finalize(merged, groups, MEASURED)
        .with_columns(time_pct=metrics.share("total_ns", keys), gb_per_s=pl.col("total_bytes") / pl.col("total_ns"))
        .select(*keys, *COLUMNS)
        .sort(["total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.memops``)."""
    from ..render import view_charts

    return view_charts.memops(table)
