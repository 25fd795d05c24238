"""A window of an export as an Altair chart (``nsys-tools timeline --chart``): a row per GPU and
stream with its operations as bars, and above them a row per thread with its NVTX ranges,
nested ranges stacked by depth. For an issue comment, where one step's picture beats a table.
No I/O except ``save``."""

from __future__ import annotations

import polars as pl

from . import timeline as T
from .view_charts import save  # noqa: F401 - the one writer of charts

MAX_BARS = 20_000  # Vega draws this many bars in a browser without stalling; narrow the window for more
WIDTH = 900
ROW = 22


def _alt():
    import altair as alt

    return alt


def _depth(ranges: pl.DataFrame) -> pl.DataFrame:
    """Each range's depth on its track: how many ranges of the same track enclose it."""
    if ranges.is_empty():
        return ranges.with_columns(depth=pl.lit(0, pl.Int64))
    indexed = ranges.with_row_index("i")
    outer = indexed.select("i", "track", "start_ns", "end_ns")
    around = (
        indexed.select("i", "track", "start_ns", "end_ns")
        .join(outer, on="track", suffix="_o")
        .filter(
            (pl.col("i") != pl.col("i_o"))
            & (pl.col("start_ns_o") <= pl.col("start_ns"))
            & (pl.col("end_ns_o") >= pl.col("end_ns"))
            & (
                (pl.col("start_ns_o") < pl.col("start_ns"))
                | (pl.col("end_ns_o") > pl.col("end_ns"))
                | (pl.col("i_o") < pl.col("i"))
            )
        )
        .group_by("i")
        .agg(depth=pl.len().cast(pl.Int64))
    )
    return indexed.join(around, on="i", how="left").with_columns(pl.col("depth").fill_null(0)).drop("i")


def frames(trace, start_ns: int | None = None, end_ns: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """The window's GPU operations and NVTX ranges as bars (ms from the window's start, a track
    label each), and the time origin in ns."""
    ops = T.gpu_ops(trace, start_ns, end_ns).sort("start_ns").head(MAX_BARS)
    ranges, _ = T.nvtx_ranges(trace, start_ns, end_ns)
    origin = start_ns if start_ns is not None else min([f["start_ns"].min() for f in (ops, ranges) if f.height] or [0])
    ms = lambda c: ((pl.col(c) - origin) / 1e6).alias(c.replace("_ns", "_ms"))  # noqa: E731
    ops = ops.select(
        ms("start_ns"),
        ms("end_ns"),
        "cat",
        pl.col("short_name").alias("name"),
        (pl.col("duration_ns") / 1e3).alias("duration_us"),
        pl.col("range").fill_null(""),
        track=pl.format("GPU {} · stream {} (pid {})", "gpu_id", "stream_id", "pid"),
    )
    ranges = (
        ranges.sort("start_ns")
        .head(MAX_BARS)
        .with_columns(
            track=pl.format("pid {} · thread {}", "pid", "tid")
            + pl.when(pl.col("style") == "startend").then(pl.lit(" start/end")).otherwise(pl.lit(""))
        )
    )
    ranges = _depth(ranges).select(
        ms("start_ns"),
        ms("end_ns"),
        "track",
        "depth",
        pl.col("range").alias("name"),
        (pl.col("duration_ns") / 1e3).alias("duration_us"),
    )
    return ops, ranges, origin


def timeline_chart(trace, *, start_ns: int | None = None, end_ns: int | None = None, title: str | None = None):
    """The chart of the window ``start_ns``-``end_ns`` (the whole export by default)."""
    alt = _alt()
    ops, ranges, origin = frames(trace, start_ns, end_ns)
    lo = 0.0 if start_ns is not None else None
    hi = (end_ns - origin) / 1e6 if end_ns is not None else None
    domain = [lo, hi] if lo is not None and hi is not None else alt.Undefined
    x = alt.X("start_ms:Q", title="ms from the window's start", scale=alt.Scale(domain=domain, nice=False))
    tracks = sorted(ops["track"].unique().to_list())
    gpu = (
        alt.Chart(ops)
        .mark_bar(clip=True)
        .encode(
            x=x,
            x2="end_ms:Q",
            y=alt.Y("track:N", sort=tracks, title=None, axis=alt.Axis(labelLimit=320)),
            color=alt.Color("cat:N", title="GPU operation", scale=alt.Scale(domain=["kernel", "nccl", "memcpy", "memset"])),
            tooltip=["name", "cat", "range", alt.Tooltip("duration_us:Q", format=".2f"), alt.Tooltip("start_ms:Q", format=".4f")],
        )
        .properties(width=WIDTH, height=ROW * max(len(tracks), 1))
    )
    threads = sorted(ranges["track"].unique().to_list())
    depth = int(ranges["depth"].max() or 0) + 1 if ranges.height else 1
    nvtx = (
        alt.Chart(ranges)
        .mark_bar(stroke="white", strokeWidth=0.5, clip=True)
        .encode(
            x=x,
            x2="end_ms:Q",
            y=alt.Y("track:N", sort=threads, title=None, axis=alt.Axis(labelLimit=320)),
            yOffset=alt.YOffset("depth:O", scale=alt.Scale(domain=list(range(depth)))),
            color=alt.Color("name:N", title="NVTX range", legend=alt.Legend(columns=2, symbolLimit=20)),
            tooltip=["name", "depth", alt.Tooltip("duration_us:Q", format=".2f"), alt.Tooltip("start_ms:Q", format=".4f")],
        )
        .properties(width=WIDTH, height=ROW * depth * max(len(threads), 1))
    )
    window = "the whole export" if start_ns is None and end_ns is None else f"{start_ns or 0} to {end_ns or 'the end'} ns"
    parts = [nvtx, gpu] if ranges.height else [gpu]
    return (
        alt.vconcat(*parts)
        .resolve_scale(x="shared", color="independent")
        .properties(title=title or f"{trace.path.name}: {window} ({ops.height} GPU operations, {ranges.height} NVTX ranges)")
    )
