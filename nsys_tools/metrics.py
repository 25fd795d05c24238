"""Pure frame functions: duration statistics, ratios with bootstrap intervals, control bands.

Nothing here reads files or prints. Inputs and outputs are polars frames; durations are
integer nanoseconds in, float nanoseconds out for the interpolated statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def distribution(col: str) -> dict[str, pl.Expr]:
    """Order statistics of ``col`` by our names: the interpolated median (the mean of the two
    middle values for an even count, as ``nsys stats`` computes it), p10/p90/p99 interpolated
    linearly between order statistics, min, max and mean."""
    d = pl.col(col)
    return {
        "mean_ns": d.mean(),
        "median_ns": d.median(),
        "min_ns": d.min(),
        "max_ns": d.max(),
        "p10_ns": d.quantile(0.1, "linear"),
        "p90_ns": d.quantile(0.9, "linear"),
        "p99_ns": d.quantile(0.99, "linear"),
    }


def duration_stats(col: str = "duration_ns") -> list[pl.Expr]:
    """The statistics ``nsys stats`` reports, plus p10 and p90. The standard deviation is the
    sample one, 0 for a single instance as nsys prints it."""
    dist = distribution(col)
    return [
        pl.len().alias("instances"),
        pl.col(col).sum().alias("total_ns"),
        *(dist[k].alias(k) for k in ("mean_ns", "median_ns", "min_ns", "max_ns")),
        pl.col(col).std(ddof=1).fill_null(0.0).alias("stddev_ns"),
        *(dist[k].alias(k) for k in ("p10_ns", "p90_ns")),
    ]


def summarize(ops: pl.LazyFrame, by: Sequence[str], col: str = "duration_ns") -> pl.LazyFrame:
    """One row per group of ``by`` with ``duration_stats``, largest total first."""
    return (
        ops.group_by(list(by))
        .agg(duration_stats(col))
        .sort(["total_ns", *by], descending=[True] + [False] * len(by), nulls_last=True)
    )


def ratio_ci(
    num: pl.Series, den: pl.Series, *, resamples: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Ratio of medians ``median(num) / median(den)`` with a percentile bootstrap interval:
    both samples are resampled with replacement ``resamples`` times, independently."""
    import numpy as np

    rng = np.random.default_rng(seed)
    # Sorted first: the samples' order depends on joins, the interval must not.
    a, b = np.sort(num.to_numpy().astype(float)), np.sort(den.to_numpy().astype(float))
    ra = np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
    rb = np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1)
    lo, hi = np.quantile(ra / rb, [(1 - level) / 2, (1 + level) / 2])
    return float(np.median(a) / np.median(b)), float(lo), float(hi)


def ratios(calls: pl.DataFrame, control: str, value: str = "duration_ns", **kw) -> pl.DataFrame:
    """Each implementation against ``control`` at each shape: ratio of medians and its interval.
    ``distinguishable`` is False when the interval contains 1."""
    rows = []
    for (shape,), group in calls.group_by("shape", maintain_order=True):
        ref = group.filter(pl.col("impl") == control)[value]
        if ref.is_empty():
            continue
        for (impl,), g in group.group_by("impl", maintain_order=True):
            if impl == control:
                continue
            r, lo, hi = ratio_ci(g[value], ref, **kw)
            rows.append({"shape": shape, "impl": impl, "ratio": r, "ci_lo": lo, "ci_hi": hi})
    df = pl.DataFrame(
        rows, schema={"shape": pl.String, "impl": pl.String, "ratio": pl.Float64, "ci_lo": pl.Float64, "ci_hi": pl.Float64}
    )
    return df.with_columns(distinguishable=(pl.col("ci_hi") < 1) | (pl.col("ci_lo") > 1))
