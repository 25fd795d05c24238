"""Calls of a kernel far slower than its siblings: per rank, device, kernel and launch shape (grid
and block), with 3 calls or more, the calls that took more than ``ratio`` times (3 unless given)
the median call, so ran at a small fraction of their same-shape siblings' speed (a first call
that loads code, a call that waited on a lock or a contended GPU, data-dependent work). The time
at stake is what they took beyond the median."""

from __future__ import annotations

import polars as pl

from . import Finding, Rule, plural

RULE = Rule("slow_calls", "calls of a kernel far slower than its calls of the same shape")

OPTIONS = {"ratio": (float, 3.0, "how many times the median call makes a call slow")}
SHAPE = ["pid", "gpu_id", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
ADVICE = "Look at what ran beside the slow calls (other streams, other processes, the host) or what differs in their input."


def rows(run, *, ratio: float = 3.0, **options) -> pl.DataFrame:
    """The slow calls. Each kernel is held as its shape's number, start and time alone (its
    name and shape once per shape, as text only in the rows kept), read a piece of the export
    at a time; the medians are exact."""
    from ..run.chunked import each_piece

    local, calls = [], []  # each piece's shapes, numbered in it; its kernels by that number
    for ex in run.exports:
        for kernels in each_piece(ex, _timed):
            shape = kernels.select(SHAPE).unique().with_row_index("_local")
            calls.append(kernels.join(shape, on=SHAPE, nulls_equal=True).select("_local", "start_ns", "ns", _piece=len(local)))
            local.append(
                shape.with_columns(pl.col(pl.Categorical).cast(pl.String), pl.col("pid").cast(pl.Int64), _piece=len(local))
            )
    local = pl.concat(local, how="diagonal_relaxed")
    keys = local.select(SHAPE).unique().with_row_index("_shape")
    shapes = local.join(keys, on=SHAPE).select("_piece", "_local", "_shape")  # a shape with a null matches none: left out
    kernels = pl.concat(calls, how="vertical_relaxed").join(shapes, on=["_piece", "_local"]).select("_shape", "start_ns", "ns")
    groups = kernels.group_by("_shape").agg(calls=pl.len(), median_ns=pl.col("ns").median()).filter(pl.col("calls") >= 3)
    slow = kernels.join(groups, on="_shape").filter(pl.col("ns") > ratio * pl.col("median_ns")).join(keys, on="_shape")
    return slow.select(
        *SHAPE, "calls", "median_ns", "start_ns", "ns", extra_ns=(pl.col("ns") - pl.col("median_ns")).cast(pl.Int64)
    ).sort("extra_ns", "start_ns", descending=[True, False])


def _timed(trace) -> pl.LazyFrame:
    """Each kernel's shape, start and time."""
    kernels = trace.kernels(columns=[*SHAPE, "start_ns", "end_ns"])
    return kernels.select(*SHAPE, "start_ns", ns=pl.col("end_ns") - pl.col("start_ns"))


def findings(run, table: pl.DataFrame, **options) -> list[Finding]:
    if table.is_empty():
        return []
    out = []
    for key, calls in table.group_by(SHAPE, maintain_order=True):
        r = dict(zip(SHAPE, key, strict=True))
        worst = calls.row(0, named=True)
        shape = f"grid {r['grid_x']}x{r['grid_y']}x{r['grid_z']}, block {r['block_x']}x{r['block_y']}x{r['block_z']}"
        out.append(
            Finding(
                RULE.name,
                f"{plural(calls.height, 'call')} of {r['name']} ({shape}) on GPU {r['gpu_id']} ran at "
                f"{100 * worst['median_ns'] / worst['ns']:.1f}% or less of the speed of its {worst['calls']} calls' median: "
                f"{worst['ns'] / 1e3:,.1f} µs against {worst['median_ns'] / 1e3:,.1f} µs",
                int(calls["extra_ns"].sum()),
                device=r["gpu_id"],
                rank=r["pid"],
                kernel=r["name"],
                start_ns=int(calls["start_ns"].min()),
                end_ns=int((calls["start_ns"] + calls["ns"]).max()),
                evidence=calls.head(5).to_dicts(),
                advice=ADVICE,
            )
        )
    return out
