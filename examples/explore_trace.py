# %% [markdown]
# # Exploring an export with Polars and Altair
#
# Notebook cells (`# %%`, as Jupyter, VS Code and jupytext read them). Run it whole with
#
#     python examples/explore_trace.py [EXPORT] [OUT_DIR]
#
# It opens an export, filters its kernels by name, joins them with the API calls that launched
# them and the NVTX ranges they ran in, and plots launch-to-start delay per kernel to
# `OUT_DIR/launch_delay.html`. Every frame is a LazyFrame: nothing is read until `.collect()`.

# %%
from __future__ import annotations

import sys
from pathlib import Path

import altair as alt
import polars as pl

import nsys_tools

ROOT = Path(__file__).resolve().parents[1]
EXPORT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests/fixtures/multi-gpu/multi-gpu-nsys2025.3.sqlite"
OUT = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("explore-out")

trace = nsys_tools.open(EXPORT)
trace.kernels().collect_schema()  # the columns, before anything is read

# %% Filter: the GEMM and elementwise kernels, by their names (plain strings: `.str` works).
kernels = trace.kernels(columns=["name", "short_name", "start_ns", "duration_ns", "global_pid", "correlation_id", "gpu_id"])
wanted = kernels.filter(pl.col("short_name").str.contains("(?i)gemm|elementwise|Kernel2"))

# %% Join: each kernel with the API call that launched it (same process, same correlation id).
calls = trace.api(columns=["global_pid", "correlation_id", "name", "start_ns"])
launched = wanted.join(calls, on=["global_pid", "correlation_id"], how="inner", suffix="_call").with_columns(
    delay_us=(pl.col("start_ns") - pl.col("start_ns_call")) / 1000
)

# %% And with the NVTX range it ran in: `gpu_ops` has each operation's innermost range.
ranges = trace.gpu_ops(columns=["global_pid", "correlation_id", "range"])
table = (
    launched.join(ranges, on=["global_pid", "correlation_id"], how="left")
    .group_by("range", "short_name", "gpu_id")
    .agg(kernels=pl.len(), median_delay_us=pl.col("delay_us").median(), kernel_us=pl.col("duration_ns").sum() / 1000)
    .sort("kernel_us", descending=True)
    .collect()
)
print(table)

# %% Plot: launch-to-start delay of each kernel, by range, to a file.
points = launched.join(ranges, on=["global_pid", "correlation_id"], how="left").collect()
chart = (
    alt.Chart(points.select("range", "short_name", "gpu_id", "delay_us", "duration_ns"))
    .mark_circle()
    .encode(
        x=alt.X("delay_us:Q", title="launch call to kernel start (µs)", scale=alt.Scale(type="symlog")),
        y=alt.Y("range:N", title="NVTX range"),
        color="short_name:N",
        tooltip=["short_name", "gpu_id", "delay_us", "duration_ns"],
    )
    .properties(title=f"{EXPORT.name}: {points.height} kernels")
)
OUT.mkdir(parents=True, exist_ok=True)
chart.save(OUT / "launch_delay.html")
print(f"wrote {OUT / 'launch_delay.html'}")
