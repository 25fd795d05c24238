"""The page of a run (``summary --html``): its findings, its step table, a stacked bar per step
and device (compute, NCCL exposed, memory, idle by cause), utilization over time, its devices and
top kernels, as sections of the one page writer (``html.py``). No I/O: ``study.page`` reads the
run and writes the page."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from . import html
from .chart_file import drawable_spec
from .tables import shorten

# A step's time, part by part, in the order they stack (idle split by its cause).
PARTS = {
    "compute_ns": "compute",
    "nccl_exposed_ns": "NCCL exposed",
    "memory_ns": "memory",
    "idle_host_ns": "idle: host",
    "idle_sync_ns": "idle: sync",
    "idle_memory_ns": "idle: memory",
    "idle_other_ns": "idle: other",
}
STEP_ROWS = 200  # steps listed in the table; the chart draws them all
TOP_KERNELS = 15
WIDTH = 620


def _ms(ns) -> str:
    return "" if ns is None else f"{ns / 1e6:,.3f}"


def findings(found: Sequence) -> html.Table | str:
    """The findings of ``rules.diagnose``, largest first."""
    if not found:
        return "No finding: no rule found anything worth a look."
    rows = [
        (i, f.title, _ms(f.time_ns), "" if f.share is None else f"{100 * f.share:.1f}%", f.rule, f.advice)
        for i, f in enumerate(found, 1)
    ]
    return html.Table(["#", "finding", "time (ms)", "of the span", "rule", "what to try"], rows)


def step_table(steps: pl.DataFrame) -> html.Table:
    """One row per rank, device and step: phase, times in ms, skew."""
    columns = ["rank", "GPU", "step", "phase", "start (ms)", "duration (ms)", *(f"{t} (ms)" for t in PARTS.values()), "skew (ms)"]
    rows = [
        (
            r["pid"],
            r["gpu_id"],
            r["step"],
            r["phase"] + (" (slow)" if r.get("slow") else ""),
            _ms(r["start_ns"]),
            _ms(r["duration_ns"]),
            *(_ms(r[c]) for c in PARTS),
            _ms(r["skew_ns"]),
        )
        for r in steps.head(STEP_ROWS).iter_rows(named=True)
    ]
    return html.Table(columns, rows)


def _alt():
    import altair as alt

    alt.data_transformers.disable_max_rows()
    return alt


def step_chart(steps: pl.DataFrame) -> html.Chart:
    """A stacked bar per step, one row of bars per rank and device."""
    alt = _alt()
    device = pl.format("rank {} · GPU {}", "pid", "gpu_id")
    long = pl.concat(
        [
            steps.select(device=device, step="step", phase="phase", ms=pl.col(c) / 1e6, what=pl.lit(t), order=pl.lit(i))
            for i, (c, t) in enumerate(PARTS.items())
        ]
    )
    chart = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("step:O", title="step (0: setup)"),
            y=alt.Y("ms:Q", title="ms", stack="zero"),
            color=alt.Color("what:N", title=None, sort=list(PARTS.values()), legend=alt.Legend(orient="bottom")),
            order="order:Q",
            row=alt.Row("device:N", title=None),
            tooltip=["device", "step", "phase", "what", alt.Tooltip("ms:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=140, title="Where each step's time went")
    )
    return html.Chart(drawable_spec(chart.to_dict()))


def _gpu(table: pl.DataFrame) -> pl.Expr:
    """``GPU <id>``, led by its export's file name where the run keeps one GPU id apart per export."""
    gpu = pl.format("GPU {}", "gpu_id")
    if "file" not in table.columns:
        return gpu
    return pl.col("file").str.split("/").list.last() + pl.lit(" ") + gpu


def utilization_chart(binned: pl.DataFrame) -> html.Chart:
    """Busy share over time per device: compute, NCCL exposed and memory, window by window."""
    alt = _alt()
    parts = {"compute_pct": "compute", "communication_pct": "NCCL exposed", "memory_pct": "memory"}
    long = pl.concat(
        [
            binned.select(
                device=_gpu(binned),
                ms=pl.col("start_ns") / 1e6,
                pct=pl.col(c),
                what=pl.lit(t),
                order=pl.lit(i),
            )
            for i, (c, t) in enumerate(parts.items())
        ]
    )
    chart = (
        alt.Chart(long)
        .mark_area()
        .encode(
            x=alt.X("ms:Q", title="time from the session start, ms", scale=alt.Scale(zero=False)),
            y=alt.Y("pct:Q", title="busy, % of the window", stack="zero"),
            color=alt.Color("what:N", title=None, sort=list(parts.values()), legend=alt.Legend(orient="bottom")),
            order="order:Q",
            row=alt.Row("device:N", title=None),
            tooltip=["device", alt.Tooltip("ms:Q", format=".3f"), "what", alt.Tooltip("pct:Q", format=".1f")],
        )
        .properties(width=WIDTH, height=120, title="Utilization over time")
    )
    return html.Chart(drawable_spec(chart.to_dict()))


def devices(util: pl.DataFrame) -> html.Table:
    labels = util.select(_gpu(util)).to_series().to_list()
    rows = [
        (
            label,
            r["gpu_name"] or "",
            _ms(r["span_ns"]),
            *(f"{r[c]:.1f}%" for c in ("busy_pct", "compute_pct", "communication_pct", "memory_pct", "idle_pct")),
        )
        for label, r in zip(labels, util.iter_rows(named=True), strict=True)
    ]
    return html.Table(["GPU", "name", "span (ms)", "busy", "compute", "NCCL exposed", "memory", "idle"], rows)


def kernels(table: pl.DataFrame) -> html.Table:
    by_kernel = table.group_by("kernel").agg(pl.col("instances", "total_ns").sum())
    total = by_kernel["total_ns"].sum() or 1
    top = by_kernel.sort("total_ns", "kernel", descending=[True, False]).head(TOP_KERNELS)
    rows = [
        (shorten(r["kernel"]), r["instances"], _ms(r["total_ns"]), f"{100 * r['total_ns'] / total:.1f}%")
        for r in top.iter_rows(named=True)
    ]
    return html.Table(["kernel", "calls", "total (ms)", "share"], rows)


def sections(run: str, found, steps: pl.DataFrame, source: str, binned: pl.DataFrame, util, kernel_table) -> list[html.Section]:
    """The page's sections for one run (``run``: its name, as a heading where a page holds several)."""
    step_parts: list = [f"Steps from {source}." if source else "No steps found."]
    if not steps.is_empty():
        step_parts += [step_chart(steps), step_table(steps)]
        if steps.height > STEP_ROWS:
            step_parts.append(f"The table lists the first {STEP_ROWS} of {steps.height} rows; the chart draws them all.")
    over_time = [utilization_chart(binned)] if not binned.is_empty() else ["No GPU work to draw."]
    return [
        html.Section(run, [findings(found)]),
        html.Section("Steps", step_parts),
        html.Section("Utilization", [devices(util), *over_time]),
        html.Section("Top kernels", [kernels(kernel_table)] if kernel_table.height else ["No kernel ran."]),
    ]
