"""Pure frame functions: duration statistics, ratios with bootstrap intervals, control bands.

Nothing here reads files or prints. Inputs and outputs are polars frames; durations are
integer nanoseconds in, float nanoseconds out for the interpolated statistics.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import NamedTuple

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


def median(values: pl.Series) -> float:
    """The interpolated median of one sample (``distribution``'s median_ns, for a Series)."""
    return float(values.median())


# Per-export statistics that merge exactly across exports (local, or one task per export on a
# cluster) and across pieces of one export (``chunked.py``): ``partial`` keeps per group the
# count, totals, extremes and, where medians and percentiles are wanted, the values as value
# counts (a kernel's durations repeat: millions of kernels give thousands of distinct values);
# ``merge`` combines partials of the same groups; ``finalize`` turns merged partials into the
# statistics ``nsys stats`` reports.


def partial(rows: pl.LazyFrame, by: Sequence[str], measured: Sequence[str], summed: Sequence[str] = ()) -> pl.LazyFrame:
    """One row per group of ``by``: ``instances``; for each ``measured`` column its total, min,
    max and value counts (a list of ``{len, value}``, by value); for each ``summed`` column its
    total."""
    aggs = [pl.len().cast(pl.Int64).alias("instances")]
    for c in measured:
        total = pl.col(c).cast(pl.Int128).sum()  # exact past int64; finalize refuses what int64 cannot hold
        aggs += [total.alias(f"{c}:total"), pl.col(c).min().alias(f"{c}:min"), pl.col(c).max().alias(f"{c}:max")]
        aggs.append(pl.col(c).drop_nulls().sort().rle().alias(f"{c}:values"))
    aggs += [pl.col(c).cast(pl.Int128).sum().alias(f"{c}:total") for c in summed]
    return grouped(rows, by, aggs)


def grouped(rows: pl.LazyFrame, by: Sequence[str], aggs: Sequence[pl.Expr]) -> pl.LazyFrame:
    """``rows.group_by(by).agg(aggs)``, its text keys grouped as categories: a group-by on
    several keys copies each row's text keys into one row key, so a 20 MB kernel name shared by
    a million kernels would be copied a million times; categories hash each row's text and keep
    one copy of each distinct text."""
    schema = rows.collect_schema()
    text = [c for c in by if schema[c] == pl.String]
    if len(by) < 2 or not text:
        return rows.group_by(list(by)).agg(aggs)
    return (
        rows.with_columns(pl.col(text).cast(pl.Categorical))
        .group_by(list(by))
        .agg(aggs)
        .with_columns(pl.col(text).cast(pl.String))
    )


CODE = "name_code"


def coded(frame: pl.LazyFrame, column: str = "name") -> tuple[pl.LazyFrame, pl.DataFrame]:
    """``frame`` with ``column`` replaced by ``CODE``, its place among the column's distinct
    values in sorted order (nulls last), and the table of (``CODE``, ``column``) that puts the
    texts back (``decoded``). A sort, a join or a window on several keys carries each row's text
    (a 20 MB kernel name copied once per row); a code costs 4 bytes, and a sort by it orders the
    rows as one by the text would."""
    names = frame.select(pl.col(column).unique()).collect().sort(column, nulls_last=True).with_row_index(CODE)
    return frame.join(names.lazy(), on=column, how="left", nulls_equal=True).drop(column), names


def decoded(frame: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (collected: a lazy join copies the texts) with ``CODE`` back as text, strings
    that all point at ``names``' one copy of each."""
    return frame.join(names, on=CODE, how="left", maintain_order="left").drop(CODE)


def merge(partials: pl.LazyFrame, by: Sequence[str], measured: Sequence[str], summed: Sequence[str] = ()) -> pl.LazyFrame:
    """Partials (concatenated) of the same groups combined into one row per group, exactly."""
    aggs = [pl.col("instances").sum()]
    for c in measured:
        aggs += [
            pl.col(f"{c}:total").cast(pl.Int128).sum(),
            pl.col(f"{c}:min").min(),
            pl.col(f"{c}:max").max(),
            pl.col(f"{c}:values").explode(),
        ]
    aggs += [pl.col(f"{c}:total").cast(pl.Int128).sum() for c in summed]
    return grouped(partials, by, aggs)


STATS = ("total", "mean", "median", "min", "max", "stddev", "p10", "p90")


def named(template: str, stats: Sequence[str] = STATS) -> tuple[str, ...]:
    """The columns ``finalize`` names from ``template``: ``named("{}_ns")`` -> ``total_ns, mean_ns, ...``."""
    return tuple(template.format(s) for s in stats)


def timed(template: str = "{}_ns") -> tuple[str, ...]:
    """The time columns of a table, as nsys orders them: total, its share (``time_pct``), then
    mean, median, min, max, stddev, p10, p90."""
    total, *rest = named(template)
    return (total, "time_pct", *rest)


def finalize(
    merged: pl.LazyFrame, by: Sequence[str], measured: dict[str, str], summed: dict[str, str] | None = None
) -> pl.LazyFrame:
    """The statistics of merged partials, one row per group: ``instances``, then for each
    ``measured`` column (named by its template: ``{"duration_ns": "{}_ns"}`` gives ``total_ns,
    mean_ns, median_ns, min_ns, max_ns, stddev_ns, p10_ns, p90_ns``) its total, mean, median
    (interpolated, as nsys computes it), extremes, sample standard deviation (0 for one
    instance, as nsys prints it) and 10th and 90th percentiles (linear); each ``summed``
    column's total under its given name."""
    stats = [pl.col("instances")]
    for c, name in measured.items():
        counts = pl.col(f"{c}:values").list.eval(pl.element().sort_by(pl.element().struct.field("value")))
        of_counts = {k: counts.list.eval(e).list.first() for k, e in value_count_stats().items()}
        exprs = (
            int64_total(f"{c}:total"),
            pl.col(f"{c}:total") / pl.col("instances"),
            of_counts["median"],
            pl.col(f"{c}:min"),
            pl.col(f"{c}:max"),
            of_counts["stddev"].fill_null(0.0),
            of_counts["p10"],
            of_counts["p90"],
        )
        stats += [e.alias(n) for e, n in zip(exprs, named(name), strict=True)]
    stats += [int64_total(f"{c}:total").alias(name) for c, name in (summed or {}).items()]
    return merged.select(*by, *stats)


TOO_LARGE = "a total beyond 64-bit integers"  # what the strict cast's error is turned into (report.py)


def int64_total(column: str) -> pl.Expr:
    """A total summed in Int128, back in Int64: strictly, so that one too large to hold (about
    292 years of nanoseconds, or 9.2 EB) fails at collect instead of wrapping to a negative number."""
    return pl.col(column).cast(pl.Int64, strict=True)


def value_count_stats() -> dict[str, pl.Expr]:
    """Inside ``list.eval`` over value counts sorted by value (``{len, value}`` elements): the
    interpolated median (the mean of the two middle values for an even count, as ``nsys stats``
    computes it), p10 and p90 (linear between order statistics) and the sample standard
    deviation (null for one value). Exact: the numbers the values themselves give."""
    v, w = pl.element().struct.field("value"), pl.element().struct.field("len").cast(pl.Int64)
    n = w.sum()

    def nth(k: pl.Expr) -> pl.Expr:  # the k-th smallest value, from 0
        return v.filter(w.cum_sum() > k).first()

    def quantile(q: float) -> pl.Expr:
        h = (n - 1) * q
        lo = h.floor()
        return nth(lo) + (nth(h.ceil()) - nth(lo)) * (h - lo)

    mean = (v * w).sum() / n
    variance = (w * (v - mean) ** 2).sum() / (n - 1)
    return {
        "median": quantile(0.5),
        "p10": quantile(0.1),
        "p90": quantile(0.9),
        "stddev": pl.when(n > 1).then(variance.sqrt()),
    }


def share(total: str, keys: Sequence[str] = ()) -> pl.Expr:
    """Each row's share of the column's sum, in percent (nsys's "Time (%)"); where ``keys`` hold
    ``file`` (a table kept apart per export), of its own file's sum. The sum is exact (Int128)
    and broadcast as a column (``over``): a scalar divisor is rounded differently on one thread
    than on several, and the same input must give the same bytes at any count."""
    group = "file" if "file" in keys else pl.lit(1)
    return (pl.col(total) * 100.0) / pl.col(total).cast(pl.Int128).sum().over(group).cast(pl.Float64)


# Bootstrap replicates are drawn in chunks of at most this many resampled values, to bound memory
# on groups of many calls.
CHUNK_VALUES = 1_000_000


class _Clusters(NamedTuple):
    """One side of a ratio: its cluster ``labels`` (sorted), its ``values`` sorted within each
    cluster and laid end to end in the labels' order, and each cluster's ``sizes``."""

    labels: list
    values: pl.Series
    sizes: list[int]


def _clusters(values: pl.Series, clusters: pl.Series | None) -> _Clusters:
    """The side's clusters; a single cluster when ``clusters`` is None. Sorted first: the
    samples' order depends on joins, the interval must not."""
    frame = pl.DataFrame({"value": values.cast(pl.Float64)})
    frame = frame.with_columns(label=pl.lit(0) if clusters is None else clusters).sort("label", "value")
    counts = frame.group_by("label", maintain_order=True).len()
    return _Clusters(counts["label"].to_list(), frame["value"], counts["len"].to_list())


def _uniform(rng: random.Random, count: int) -> pl.Series:
    """``count`` independent integers uniform in [0, 2**32), drawn from ``rng``."""
    raw = pl.Series([rng.randbytes(4 * count)], dtype=pl.Binary)
    return raw.bin.reinterpret(dtype=pl.Array(pl.UInt32, count), endianness="little").explode()


def _below(draws: pl.Series | pl.Expr, n: pl.Series | pl.Expr | int) -> pl.Series | pl.Expr:
    """``_uniform``'s draws as integers uniform in [0, n): ``floor(draw * n / 2**32)``, below n
    for any n under 2**32 (the rounded product stays below ``n * 2**32``)."""
    return (draws.cast(pl.Float64) * n * 2.0**-32).cast(pl.Int64)


def _picks(rng: random.Random, side: _Clusters, resamples: int) -> pl.Series:
    """The clusters each replicate draws, with replacement: ``resamples`` runs of as many
    cluster indices as the side holds."""
    return _below(_uniform(rng, resamples * len(side.sizes)), len(side.sizes))


def _medians(side: _Clusters, picks: pl.Series, rng: random.Random) -> pl.Series:
    """Medians of hierarchical bootstrap samples: replicate b takes the clusters of its run of
    ``picks`` and, within each, as many values as it holds, with replacement."""
    k, width = len(side.sizes), max(side.sizes)
    even = min(side.sizes) == width  # every replicate draws k * width values: a row of an array each
    sizes = pl.Series(side.sizes, dtype=pl.Int64)
    starts = sizes.cum_sum() - sizes  # each cluster's first value in side.values
    step = max(1, CHUNK_VALUES // (k * width))
    out = []
    for lo in range(0, len(picks) // k, step):
        p = picks.slice(lo * k, step * k)
        if even:
            at = _below(_uniform(rng, len(p) * width), width)
            slot = pl.int_range(len(at), eager=True) // width if k > 1 else None  # the slot each value is drawn for
        else:
            size = sizes.gather(p)
            slot = pl.int_range(len(p), eager=True).repeat_by(size).explode()
            at = _below(_uniform(rng, len(slot)), size.gather(slot))
        if slot is not None:
            at = starts.gather(p).gather(slot) + at
        values = side.values.gather(at)
        if even:
            out.append(values.reshape((len(p) // k, k * width)).arr.median())
        else:
            sample = pl.DataFrame({"replicate": slot // k, "value": values})
            out.append(sample.group_by("replicate", maintain_order=True).agg(pl.col("value").median())["value"])
    return pl.concat(out)


def ratio_ci(
    num: pl.Series,
    den: pl.Series,
    num_clusters: pl.Series | None = None,
    den_clusters: pl.Series | None = None,
    *,
    session_sd: float = 0.0,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Ratio of medians ``median(num) / median(den)`` with a percentile interval from a
    hierarchical bootstrap: clusters (rounds, files) are resampled with replacement, then calls
    within each chosen cluster, so the interval carries the variance between rounds and not
    only between calls (after Davison and Hinkley's two-stage bootstrap). When both sides hold
    the same cluster labels (rounds of one session, where both ran side by side) the same
    clusters are drawn for both: the pairing cancels what the rounds share. ``session_sd`` (a
    standard deviation of the log ratio) adds the variance between sessions that one capture
    per side cannot show: pass it when the two sides come from different sessions. The interval
    is the replicates' percentiles, interpolated linearly; one ``seed`` gives one interval."""
    rng = random.Random(seed)
    a, b = _clusters(num, num_clusters), _clusters(den, den_clusters)
    point = float(a.values.median() / b.values.median())
    if a.labels == b.labels and len(a.labels) > 1:
        pa = pb = _picks(rng, a, resamples)
    else:
        pa, pb = _picks(rng, a, resamples), _picks(rng, b, resamples)
    ratios = _medians(a, pa, rng).log() - _medians(b, pb, rng).log()
    if session_sd > 0:
        ratios = ratios + pl.Series([rng.gauss(0.0, session_sd) for _ in range(resamples)])
    lo, hi = (ratios.quantile(q, "linear") for q in ((1 - level) / 2, (1 + level) / 2))
    return point, math.exp(lo), math.exp(hi)


def verdict(lo: float, hi: float) -> str:
    """``faster`` when the whole interval of a time ratio lies below 1, ``slower`` above it,
    else ``not distinguishable``."""
    return "faster" if hi < 1 else "slower" if lo > 1 else "not distinguishable"


def ratios(calls: pl.DataFrame, control: str, value: str = "duration_ns", **kw) -> pl.DataFrame:
    """Each implementation against ``control`` at each shape, same session: ratio of medians
    and its interval, rounds resampled together for both (``ratio_ci``). ``distinguishable``
    is False when the interval contains 1."""
    rows = []
    for (shape,), group in calls.group_by("shape", maintain_order=True):
        ref = group.filter(pl.col("impl") == control)
        if ref.is_empty():
            continue
        for (impl,), g in group.group_by("impl", maintain_order=True):
            if impl == control:
                continue
            r, lo, hi = ratio_ci(g[value], ref[value], g["round"], ref["round"], **kw)
            rows.append({"shape": shape, "impl": impl, "ratio": r, "ci_lo": lo, "ci_hi": hi})
    df = pl.DataFrame(
        rows, schema={"shape": pl.String, "impl": pl.String, "ratio": pl.Float64, "ci_lo": pl.Float64, "ci_hi": pl.Float64}
    )
    return df.with_columns(distinguishable=(pl.col("ci_hi") < 1) | (pl.col("ci_lo") > 1))
