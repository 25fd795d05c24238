"""Pure frame functions: duration statistics, ratios with bootstrap intervals, control bands.

Nothing here reads files or prints. Inputs and outputs are polars frames; durations are
integer nanoseconds in, float nanoseconds out for the interpolated statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def duration_stats(col: str = "duration_ns", prefix: str = "") -> list[pl.Expr]:
    """The statistics ``nsys stats`` reports, plus p10 and p90.

    The median is interpolated (the mean of the two middle values for an even count), the
    standard deviation is the sample one (0 for a single instance, as nsys prints it), and
    p10/p90 interpolate linearly between order statistics.
    """
    d = pl.col(col)
    return [
        pl.len().alias(f"{prefix}instances"),
        d.sum().alias(f"{prefix}total_ns"),
        d.mean().alias(f"{prefix}mean_ns"),
        d.median().alias(f"{prefix}median_ns"),
        d.min().alias(f"{prefix}min_ns"),
        d.max().alias(f"{prefix}max_ns"),
        d.std(ddof=1).fill_null(0.0).alias(f"{prefix}stddev_ns"),
        d.quantile(0.1, "linear").alias(f"{prefix}p10_ns"),
        d.quantile(0.9, "linear").alias(f"{prefix}p90_ns"),
    ]


def summarize(ops: pl.LazyFrame, by: Sequence[str], col: str = "duration_ns") -> pl.LazyFrame:
    """One row per group of ``by`` with ``duration_stats``, largest total first."""
    return (
        ops.group_by(list(by))
        .agg(duration_stats(col))
        .sort(["total_ns", *by], descending=[True] + [False] * len(by), nulls_last=True)
    )
