"""Altair charts of a view's table (``nsys-tools report --chart``), one per built-in view. No I/O except
``save``.

* kernels: the kernels with the most GPU time, bars coloured by NVTX range;
* ranges: GPU time each range projects, its busy part beside it;
* api: CUDA API time per function;
* memops: bytes moved and bandwidth reached per kind of operation;
* gaps: the longest GPU idle intervals, labelled by what ran before and after;
* hist: duration histograms of the top kernels (or ranges), one small multiple each;
* pace: the interval between successive instances of the top kernels (or ranges), across the run;
* utilization: each device's span split into compute, communication, memory and idle (with
  ``--window``: the busy split window by window, one row of the chart per device);
* idle: idle time per device by cause (with ``--longest N``: the longest intervals, coloured by cause);
* sync: host time blocked per synchronization call;
* launch: per kernel, the median launch call beside the median time queued after it;
* nccl: GPU time per NCCL collective;
* overlap: per step, NCCL time hidden behind compute and exposed;
* stragglers: per step, how far the slowest rank ran behind the median;
* steps: per rank and device, each step's time split into compute, exposed NCCL, memory and idle.

Each view module draws its chart through its ``chart(table)`` (``views.contract``).

HTML is written self-contained (Vega, Vega-Lite and vega-embed inlined, from vl-convert), so it
opens offline and wherever the file is copied.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from . import chart_file
from .tables import shorten

TOP = 15
WIDTH = 520
BAR = 18


def _alt():
    import altair as alt

    return alt


def _where(table: pl.DataFrame) -> pl.Expr | None:
    """A label of the ``--by`` columns (``file``, GPU, process, stream) present, or None."""
    parts = []
    for column, prefix in (("file", ""), ("gpu_id", "GPU "), ("pid", "pid "), ("stream_id", "stream ")):
        if column in table.columns:
            value = pl.col(column).cast(pl.String).fill_null("?")
            parts.append(pl.lit(prefix) + (value.str.split("/").list.last() if column == "file" else value))
    return pl.concat_str(parts, separator=" · ") if parts else None


def _with_where(label: pl.Expr, table: pl.DataFrame) -> pl.Expr:
    where = _where(table)
    return label if where is None else pl.concat_str([label, pl.lit(" ["), where, pl.lit("]")])


def _short(column: str) -> pl.Expr:
    return pl.col(column).cast(pl.String).map_elements(lambda s: shorten(s, 50), return_dtype=pl.String)


def _bars(df: pl.DataFrame, label: str, value: str, title: str, x_title: str, color: str | None, tooltip: list):
    alt = _alt()
    order = df[label].to_list()
    enc = {
        "y": alt.Y(f"{label}:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
        "x": alt.X(f"{value}:Q", title=x_title),
        "tooltip": tooltip,
    }
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color.replace("_", " "))
    return alt.Chart(df).mark_bar().encode(**enc).properties(width=WIDTH, height=BAR * max(len(order), 1), title=title)


def _labelled(table: pl.DataFrame, name_col: str, top: int) -> pl.DataFrame:
    where = _where(table)
    df = table.head(top).with_columns(label=_short(name_col))
    if where is not None:
        df = df.with_columns(label=pl.concat_str([pl.col("label"), pl.lit(" ["), where, pl.lit("]")]))
    return _numbered(df, "label")


def _numbered(df: pl.DataFrame, column: str) -> pl.DataFrame:
    """Two rows may shorten to one label: the repeats numbered, so each keeps its bar or panel."""
    nth = pl.int_range(pl.len()).over(column)
    return df.with_columns(pl.when(nth > 0).then(pl.col(column) + " #" + (nth + 1).cast(pl.String)).otherwise(pl.col(column)))


def kernels(table: pl.DataFrame, top: int = TOP):
    df = _labelled(table, "kernel", top).with_columns(
        total_ms=pl.col("total_ns") / 1e6, median_us=pl.col("median_ns") / 1e3, range=pl.col("range").replace("", "(no range)")
    )
    tip = ["kernel", "range", "instances", "total_ms", "median_us", "time_pct"]
    return _bars(df, "label", "total_ms", f"Top {df.height} kernels by GPU time", "total GPU time, ms", "range", tip)


def _paired(df: pl.DataFrame, bars: dict[str, pl.Expr], unit: str, x_title: str, title: str):
    """Two or more bars per labelled row, side by side: ``bars`` maps each bar's legend text to its
    value in ``unit`` (the column name the chart and its tooltip show)."""
    alt = _alt()
    long = pl.concat([df.select("label", "instances", value.alias(unit), what=pl.lit(what)) for what, value in bars.items()])
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort=df["label"].to_list(), title=None, axis=alt.Axis(labelLimit=360)),
            yOffset="what:N",
            x=alt.X(f"{unit}:Q", title=x_title),
            color=alt.Color("what:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["label", "what", "instances", alt.Tooltip(f"{unit}:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=len(bars) * BAR * max(df.height, 1), title=title)
    )


def ranges(table: pl.DataFrame, top: int = TOP):
    df = _labelled(table, "range", top)
    bars = {
        "projected (first start to last end)": pl.col("proj_total_ns") / 1e6,
        "busy (union of its operations)": pl.col("busy_ns") / 1e6,
    }
    return _paired(df, bars, "ms", "GPU time, ms", f"GPU time of the top {df.height} NVTX ranges")


def api(table: pl.DataFrame, top: int = TOP):
    df = _labelled(table, "api", top).with_columns(total_ms=pl.col("total_ns") / 1e6, median_us=pl.col("median_ns") / 1e3)
    tip = ["api", "instances", "total_ms", "median_us", "time_pct"]
    return _bars(
        df, "label", "total_ms", f"CUDA API time, top {df.height} functions", "total CPU time in the call, ms", None, tip
    )


def memops(table: pl.DataFrame, top: int = TOP):
    alt = _alt()
    df = _labelled(table, "operation", top).with_columns(mb=pl.col("total_bytes") / 1e6, total_ms=pl.col("total_ns") / 1e6)
    tip = ["operation", "instances", "mb", "total_ms", "gb_per_s"]
    left = _bars(df, "label", "mb", "Bytes moved", "MB (10^6 bytes)", None, tip).properties(width=WIDTH // 2)
    right = _bars(df, "label", "gb_per_s", "Bandwidth reached", "GB/s (total bytes / total time)", None, tip)
    right = right.properties(width=WIDTH // 2).encode(y=alt.Y("label:N", sort=df["label"].to_list(), title=None, axis=None))
    return alt.hconcat(left, right).properties(title="Memory operations by kind")


def _gap_label(before: str = "before", after: str = "after") -> pl.Expr:
    """An idle interval as a bar label: its GPU, its start in ms, and what ran before and after
    (the columns ``before`` and ``after`` name)."""
    return pl.format(
        "GPU {} at {} ms: {} → {}",
        "gpu_id",
        (pl.col("gap_start_ns") / 1e6).round(3),
        _short(before).str.slice(0, 30),
        _short(after).str.slice(0, 30),
    )


def gaps(table: pl.DataFrame, top: int = TOP):
    df = table.head(top).with_columns(
        gap_ms=pl.col("gap_ns") / 1e6,
        label=_gap_label("before_name", "after_name"),
    )
    tip = ["before_name", "before_range", "after_name", "after_range", "gap_ms"]
    return _bars(df, "label", "gap_ms", f"The {df.height} longest GPU idle intervals", "idle, ms", None, tip)


def hist(table: pl.DataFrame, top: int = 12):
    """One small multiple per kernel (or range): instances per duration bin."""
    alt = _alt()
    name = "name"
    keys = [c for c in table.columns if c in ("file", "gpu_id", "gpu_name", "pid", "process_name", "stream_id")]
    groups = [*keys, name]
    totals = table.group_by(groups).agg(total=(pl.col("instances") * (pl.col("bin_min_ns") + pl.col("bin_max_ns")) / 2).sum())
    chosen = totals.sort("total", descending=True).head(top).with_columns(panel=_with_where(_short(name), table))
    chosen = _numbered(chosen, "panel")
    df = table.join(chosen, on=groups).with_columns(lo_us=pl.col("bin_min_ns") / 1e3, hi_us=pl.col("bin_max_ns") / 1e3)
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("lo_us:Q", title="duration, µs", bin="binned"),
            x2="hi_us:Q",
            y=alt.Y("instances:Q", title="instances"),
            tooltip=["panel", alt.Tooltip("lo_us:Q", format=".3f"), alt.Tooltip("hi_us:Q", format=".3f"), "instances"],
        )
        .properties(width=220, height=120)
        .facet(facet=alt.Facet("panel:N", title=None, sort=chosen["panel"].to_list()), columns=3)
        .resolve_scale(x="independent", y="independent")
        .properties(title=f"Duration histograms of the top {chosen.height} by total time")
    )


def pace(table: pl.DataFrame, top: int = 6):
    """Per kernel (or range): the interval to the previous instance, instance by instance."""
    alt = _alt()
    name = "name"
    keys = [c for c in table.columns if c in ("file", "gpu_id", "pid", "stream_id")]
    chosen = (
        table.group_by([*keys, name])
        .agg(n=pl.len())
        .sort(["n", name], descending=[True, False])
        .head(top)
        .with_columns(series=_with_where(_short(name), table))
        .pipe(_numbered, "series")
    )
    df = table.join(chosen, on=[*keys, name]).with_columns(
        since_ms=pl.col("start_ns") / 1e6, interval_us=pl.col("interval_ns") / 1e3
    )
    return (
        alt.Chart(df.drop_nulls("interval_us"))
        .mark_line(point=True)
        .encode(
            x=alt.X("instance:Q", title="instance"),
            y=alt.Y("interval_us:Q", title="time since the previous instance started, µs", scale=alt.Scale(type="log")),
            color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom", columns=2, labelLimit=400)),
            tooltip=["series", "instance", alt.Tooltip("interval_us:Q", format=".2f"), alt.Tooltip("since_ms:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=260, title=f"Pace of the {chosen.height} most frequent")
    )


BUSY = {"compute": "compute kernels", "communication": "communication (NCCL, not under compute)", "memory": "memory operations"}
CAUSES = ["host", "sync", "memory", "other"]


def _device(table: pl.DataFrame) -> pl.Expr:
    where = _where(table)
    return pl.lit("all devices") if where is None else where


def utilization(table: pl.DataFrame):
    """Per device, the split of its span; per device and window when windows repeat a device."""
    alt = _alt()
    df = table.with_columns(device=_device(table))
    parts = {**BUSY, "idle": "idle"}
    windowed = df["device"].n_unique() < df.height
    if windowed:
        parts = BUSY
    long = pl.concat(
        [
            df.select(
                "device",
                start_ms=pl.col("start_ns") / 1e6,
                end_ms=pl.col("end_ns") / 1e6,
                pct=pl.col(f"{part}_pct"),
                ms=pl.col(f"{part}_ns") / 1e6,
                what=pl.lit(label),
                order=pl.lit(i),
            )
            for i, (part, label) in enumerate(parts.items())
        ]
    )
    color = alt.Color("what:N", title=None, sort=list(parts.values()), legend=alt.Legend(orient="bottom", labelLimit=400))
    tip = ["device", "what", alt.Tooltip("pct:Q", format=".2f"), alt.Tooltip("ms:Q", format=".3f")]
    if windowed:  # stacked by hand: bars spanning [start, end] take their heights from y and y2
        long = long.sort("order").with_columns(top=pl.col("pct").cum_sum().over("device", "start_ms"))
        long = long.with_columns(bottom=pl.col("top") - pl.col("pct"))
        return (
            alt.Chart(long)
            .mark_bar()
            .encode(
                x=alt.X("start_ms:Q", title="time from the session start, ms", scale=alt.Scale(zero=False)),
                x2="end_ms:Q",
                y=alt.Y("bottom:Q", title="busy, % of the window"),
                y2="top:Q",
                color=color,
                row=alt.Row("device:N", title=None),
                tooltip=[*tip, alt.Tooltip("start_ms:Q", format=".3f"), alt.Tooltip("end_ms:Q", format=".3f")],
            )
            .properties(width=WIDTH, height=120, title="GPU busy time, window by window")
        )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("device:N", title=None, sort=df["device"].to_list(), axis=alt.Axis(labelLimit=360)),
            x=alt.X("pct:Q", title="% of the device's span (first operation to last)", stack="zero"),
            color=color,
            order="order:Q",
            tooltip=tip,
        )
        .properties(width=WIDTH, height=2 * BAR * max(df.height, 1), title="Where each GPU's time went")
    )


def idle(table: pl.DataFrame, top: int = TOP):
    """Totals per device and cause, or (``--longest``) the longest intervals."""
    alt = _alt()
    causes = [*CAUSES, *sorted(set(table["cause"]) - set(CAUSES))]
    color = alt.Color("cause:N", sort=causes, legend=alt.Legend(orient="bottom"))
    if "gap_ns" in table.columns:
        df = (
            table.head(top)
            .with_columns(
                gap_ms=pl.col("gap_ns") / 1e6,
                label=_gap_label(),
            )
            .pipe(_numbered, "label")
        )
        tip = ["cause", "before", "after", "launch", "blocking", "gap_ms"]
        return _bars(
            df, "label", "gap_ms", f"The {df.height} longest GPU idle intervals, by cause", "idle, ms", None, tip
        ).encode(color=color)
    df = table.with_columns(device=_device(table), total_ms=pl.col("total_ns") / 1e6)
    devices = df["device"].unique(maintain_order=True).to_list()
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=alt.Y("device:N", title=None, sort=devices, axis=alt.Axis(labelLimit=360)),
            x=alt.X("total_ms:Q", title="idle time, ms", stack="zero"),
            color=color,
            tooltip=[
                "device",
                "cause",
                "intervals",
                alt.Tooltip("total_ms:Q", format=".3f"),
                alt.Tooltip("idle_pct:Q", format=".2f"),
            ],
        )
        .properties(width=WIDTH, height=2 * BAR * max(len(devices), 1), title="GPU idle time by cause")
    )


def sync(table: pl.DataFrame, top: int = TOP):
    """Time blocked in each synchronization call, and its share of the calling threads' time."""
    df = _labelled(table, "api", top).with_columns(total_ms=pl.col("total_ns") / 1e6)
    tip = ["api", "instances", "total_ms", "threads", _alt().Tooltip("thread_pct:Q", format=".2f")]
    return _bars(df, "label", "total_ms", "Host time blocked in synchronization", "total time in the call, ms", None, tip)


def launch(table: pl.DataFrame, top: int = TOP):
    """Per kernel: the median launch call beside the median wait in the queue after it."""
    df = _labelled(table, "kernel", top)
    bars = {
        "launch call (median)": pl.col("api_median_ns") / 1e3,
        "queued before it ran (median)": pl.col("queue_median_ns") / 1e3,
    }
    return _paired(df, bars, "us", "µs", f"Launch and queue time, top {df.height} kernels")


def nccl(table: pl.DataFrame, top: int = TOP):
    """GPU time per NCCL collective (per device and rank with ``--by``)."""
    df = _labelled(table, "collective", top).with_columns(total_ms=pl.col("total_ns") / 1e6)
    tip = ["collective", "instances", "total_ms", "bytes"]
    return _bars(df, "label", "total_ms", "NCCL kernel time per collective", "total GPU time, ms", None, tip)


def overlap(table: pl.DataFrame):
    """Per device and step: NCCL time hidden behind compute, and exposed."""
    alt = _alt()
    step = pl.format("{} at {} ms", pl.col("step").fill_null("(no step)"), (pl.col("start_ns") / 1e6).round(3))
    df = _numbered(table.with_columns(label=_with_where(step, table)), "label")
    parts = {"overlapped_ns": "hidden behind compute", "exposed_ns": "exposed (the step waited)"}
    long = pl.concat(
        [df.select("label", ms=pl.col(c) / 1e6, what=pl.lit(text), order=pl.lit(i)) for i, (c, text) in enumerate(parts.items())]
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort=df["label"].to_list(), title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X("ms:Q", title="NCCL time, ms", stack="zero"),
            color=alt.Color("what:N", title=None, sort=list(parts.values()), legend=alt.Legend(orient="bottom")),
            order="order:Q",
            tooltip=["label", "what", alt.Tooltip("ms:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=BAR * max(df.height, 1), title="NCCL time per step: hidden and exposed")
    )


def stragglers(table: pl.DataFrame):
    """Per step: how far the slowest rank ran behind the median, coloured by that rank."""
    alt = _alt()
    df = table.with_columns(behind_ms=pl.col("behind_ns") / 1e6, rank=pl.format("pid {}", "slowest_pid"))
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("step_index:O", title="step"),
            y=alt.Y("behind_ms:Q", title="slowest rank behind the median, ms"),
            color=alt.Color("rank:N", title="slowest rank", legend=alt.Legend(orient="bottom")),
            tooltip=["step", "step_index", "rank", "ranks", alt.Tooltip("behind_ms:Q", format=".3f"), "late_steps"],
        )
        .properties(width=WIDTH, height=240, title="Stragglers: the slowest rank of each step")
    )


def steps(table: pl.DataFrame):
    """Per rank and device, each step's time split into compute, exposed NCCL, memory and idle."""
    alt = _alt()
    parts = {"compute_ns": "compute", "nccl_exposed_ns": "NCCL, exposed", "memory_ns": "memory", "idle_ns": "idle"}
    df = table.with_columns(device=pl.format("pid {} · GPU {}", "pid", "gpu_id"))
    long = pl.concat(
        [
            df.select("device", "step", "phase", ms=pl.col(c) / 1e6, what=pl.lit(text), order=pl.lit(i))
            for i, (c, text) in enumerate(parts.items())
        ]
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("step:O", title="step (0: setup)"),
            y=alt.Y("ms:Q", title="ms", stack="zero"),
            color=alt.Color("what:N", title=None, sort=list(parts.values()), legend=alt.Legend(orient="bottom")),
            order="order:Q",
            row=alt.Row("device:N", title=None),
            tooltip=["device", "step", "phase", "what", alt.Tooltip("ms:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=120, title="Where each step's time went")
    )


def save(chart, path: Path) -> Path:
    """Write ``chart`` to ``path``, the file the user named: a self-contained .html, or a .png
    (``chart_file.save``)."""
    return chart_file.save(chart, path, through_link=True)
