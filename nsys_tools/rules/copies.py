"""Memory copies that dominate: per rank, device and direction, copies taking at least
``share`` percent (10 unless given) of the device's busy time, with their bandwidth against the
link they cross: PCIe for host-device copies (16 lanes of the GPU's generation: Gen3 for compute
capability 7, Gen4 for 8, Gen5 from 9 on; 15.75, 31.5 and 63 GB/s a direction), the GPU's memory
bandwidth (from the export) for copies within a device, and how many came from pageable memory.
A copy whose export records no byte count (NULL, or no ``bytes`` column) counts in the time, not in
the bandwidth, which is that of the copies with one; where none has one, the size is unknown."""

from __future__ import annotations

import polars as pl

from . import Finding, Rule

RULE = Rule("copies", "memory copies that take much of the GPU's time, and their bandwidth")

OPTIONS = {
    "share": (float, 10.0, "the percentage of the device's busy time above which copies dominate"),
    "mb": (float, 1.0, "copies of fewer megabytes in all are left out"),
}
PCIE = ((9, "PCIe Gen5 x16", 63.0), (8, "PCIe Gen4 x16", 31.5), (0, "PCIe Gen3 x16", 15.75))  # GB/s per direction
ADVICE = {
    "Host-to-Device": (
        "Move less data to the GPU each step (keep it resident, send compact "
        "dtypes), from pinned memory, overlapped with compute on its own stream."
    ),
    "Device-to-Host": "Read back less, less often (metrics every N steps), into pinned memory, asynchronously.",
}
OTHER = "Look for copies the computation does not need (layout changes, .contiguous(), dtype casts) and fuse them away."


def link(copy_kind: str, major: int | None, memory_bps: int | None) -> tuple[str, float | None]:
    """The link a copy of ``copy_kind`` crosses on a GPU of compute capability ``major``, and its GB/s."""
    if copy_kind in ("Host-to-Device", "Device-to-Host"):
        return next((name, gbs) for low, name, gbs in PCIE if (major or 0) >= low)
    if copy_kind == "Device-to-Device" and memory_bps:
        return "device memory", memory_bps / 1e9
    return "", None


def moved(r: dict) -> str:
    """What a row's copies moved, how fast, against their link; their sizes where unknown."""
    took = f"in {r['time_ns'] / 1e6:,.2f} ms"
    if r["bytes"] is None:
        return f"{r['copies']} copies {took}, of unknown size (the export records no byte count for them)"
    name, peak = link(r["copy_kind"], r["compute_major"], r["memory_bandwidth_bps"])
    against = f", {100 * r['gb_per_s'] / peak:.0f}% of {name}'s {peak:g} GB/s" if peak else ""
    some = f" ({r['unsized']} of the {r['copies']} with no byte count, not in the bandwidth)" if r["unsized"] else ""
    return f"{r['bytes'] / 1e9:,.3f} GB {took} at {r['gb_per_s']:,.1f} GB/s{against}{some}"


def applies(run, *, mb: float = 1.0, **options) -> bool:
    """Whether copies may reach ``mb`` megabytes, or have no byte count (then maybe large): from
    one pass over each copy table (its positive bytes summed over the whole run, an upper bound
    of any group's; how many copies have no number of bytes), where the rows read every
    operation (the ``utilization`` view)."""
    table = "CUPTI_ACTIVITY_KIND_MEMCPY"
    total = 0
    for db in run.dbs:
        if not db.export.has(table):
            continue
        if "bytes" not in db.export.tables[table]:
            return True
        numbers = "typeof(bytes) IN ('integer', 'real')"
        sized, unsized = db.fetch(f"SELECT coalesce(sum(max(bytes, 0)), 0), coalesce(sum(NOT {numbers}), 0) FROM {table}")[0]
        if unsized:
            return True
        total += sized
    return total >= mb * 1e6


def rows(run, **options) -> pl.DataFrame:
    from ..read.trace import Trace

    parts, gpus = [], []
    for ex in run.exports:
        trace = Trace(ex)
        memops = trace.memops(
            columns=["pid", "gpu_id", "kind", "copy_kind", "src_kind", "dst_kind", "bytes", "start_ns", "end_ns"]
        )
        copies = memops.filter(pl.col("kind") == "memcpy").collect()
        parts.append(copies.with_columns(pl.col(pl.Categorical).cast(pl.String)))
        gpus.append(trace.gpus().collect().select("gpu_id", "compute_major", "memory_bandwidth_bps"))
    copies = pl.concat(parts, how="diagonal_relaxed")
    if copies.is_empty():
        return pl.DataFrame()
    busy = run.view("utilization", by=["device", "process"]).select("gpu_id", "pid", "busy_ns")
    pageable = (pl.col("src_kind") == 0) | (pl.col("dst_kind") == 0)
    table = copies.group_by("pid", "gpu_id", "copy_kind").agg(
        copies=pl.len(),
        pageable=pageable.sum(),
        unsized=pl.col("bytes").is_null().sum(),
        bytes=pl.col("bytes").sum(),
        time_ns=(pl.col("end_ns") - pl.col("start_ns")).sum(),
        sized_ns=(pl.col("end_ns") - pl.col("start_ns")).filter(pl.col("bytes").is_not_null()).sum(),
        first_ns=pl.col("start_ns").min(),
        last_ns=pl.col("end_ns").max(),
    )
    table = table.join(busy, on=["gpu_id", "pid"], how="left").join(pl.concat(gpus).unique("gpu_id"), on="gpu_id", how="left")
    return table.with_columns(
        bytes=pl.when(pl.col("unsized") < pl.col("copies")).then("bytes"),
        gb_per_s=pl.when(pl.col("unsized") < pl.col("copies")).then(pl.col("bytes") / pl.col("sized_ns")),
        busy_pct=pl.col("time_ns") * 100.0 / pl.col("busy_ns"),
    ).sort("pid", "gpu_id", "copy_kind")


def findings(run, table: pl.DataFrame, *, share: float = 10.0, mb: float = 1.0, **options) -> list[Finding]:
    if table.is_empty():
        return []
    out = []
    large = (pl.col("bytes") >= mb * 1e6) | (pl.col("unsized") > 0)  # of an unknown size: maybe large
    for r in table.filter((pl.col("busy_pct") >= share) & large).iter_rows(named=True):
        paged = f"; {r['pageable']} of the {r['copies']} from or to pageable memory" if r["pageable"] else ""
        out.append(
            Finding(
                RULE.name,
                f"{r['copy_kind']} copies took {r['busy_pct']:.0f}% of GPU {r['gpu_id']}'s busy time (rank {r['pid']}): "
                f"{moved(r)}{paged}",
                r["time_ns"],
                device=r["gpu_id"],
                rank=r["pid"],
                kernel=f"[CUDA memcpy {r['copy_kind']}]",
                start_ns=r["first_ns"],
                end_ns=r["last_ns"],
                evidence=[r],
                advice=ADVICE.get(r["copy_kind"], OTHER),
            )
        )
    return out
