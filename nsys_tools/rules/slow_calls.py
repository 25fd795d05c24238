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
    from ..read.trace import Trace

    parts = []
    for ex in run.exports:
        kernels = Trace(ex).kernels(columns=[*SHAPE, "start_ns", "end_ns"]).collect()
        parts.append(kernels.with_columns(pl.col(pl.Categorical).cast(pl.String), pl.col("pid").cast(pl.Int64)))
    kernels = pl.concat(parts, how="diagonal_relaxed").with_columns(ns=pl.col("end_ns") - pl.col("start_ns"))
    groups = kernels.group_by(SHAPE).agg(calls=pl.len(), median_ns=pl.col("ns").median()).filter(pl.col("calls") >= 3)
    slow = kernels.join(groups, on=SHAPE).filter(pl.col("ns") > ratio * pl.col("median_ns"))
    return slow.select(
        *SHAPE, "calls", "median_ns", "start_ns", "ns", extra_ns=(pl.col("ns") - pl.col("median_ns")).cast(pl.Int64)
    ).sort("extra_ns", "start_ns", descending=[True, False])


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
