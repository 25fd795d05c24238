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


def count_stats(value: str = "duration_ns", weight: str = "count") -> list[pl.Expr]:
    """The statistics ``nsys stats`` reports, plus p10 and p90, of a group given as value counts
    (``weight`` rows took ``value``), for rows sorted by ``value`` within the group. Exact: the
    same numbers as from the values themselves, so value counts from many exports (or many
    pieces of one) merge into the statistics of all of them. The median is interpolated (the
    mean of the two middle values for an even count, as ``nsys stats`` computes it), p10 and p90
    linearly between order statistics; the standard deviation is the sample one, 0 for a single
    instance as nsys prints it."""
    v, w = pl.col(value), pl.col(weight)
    n = w.sum()
    total = (v * w).sum()
    mean = total / n

    def nth(k: pl.Expr) -> pl.Expr:  # the k-th smallest value, from 0
        return v.filter(w.cum_sum() > k).first()

    def quantile(q: float) -> pl.Expr:
        h = (n - 1) * q
        lo, frac = h.floor(), h - h.floor()
        return nth(lo) + (nth(h.ceil()) - nth(lo)) * frac

    variance = (w * (v - mean) ** 2).sum() / (n - 1)
    return [
        n.alias("instances"),
        total.alias("total_ns"),
        mean.alias("mean_ns"),
        quantile(0.5).alias("median_ns"),
        v.min().alias("min_ns"),
        v.max().alias("max_ns"),
        pl.when(n > 1).then(variance.sqrt()).otherwise(0.0).alias("stddev_ns"),
        quantile(0.1).alias("p10_ns"),
        quantile(0.9).alias("p90_ns"),
    ]


def summarize_counts(counts: pl.LazyFrame, by: Sequence[str], value: str = "duration_ns", weight: str = "count") -> pl.LazyFrame:
    """One row per group of ``by`` with ``count_stats``, largest total first. ``counts`` may
    repeat a (group, value) pair, as value counts concatenated from several sources do."""
    return (
        counts.sort([*by, value], nulls_last=True)
        .group_by(list(by), maintain_order=True)
        .agg(count_stats(value, weight))
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
