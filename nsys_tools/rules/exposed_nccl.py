"""Exposed NCCL: communication the GPU did not hide behind compute, in the steady steps, per rank
and device (``steps``' ``nccl_exposed_ns``): the time a faster overlap would give back."""

from __future__ import annotations

import polars as pl

from . import Finding, Rule
from .setup import spanned

RULE = Rule("exposed_nccl", "NCCL time not hidden behind compute")

OPTIONS = {"share": (float, 1.0, "the percentage of the steady steps' time below which exposed NCCL is left out")}
ADVICE = (
    "Overlap communication with compute: bucket gradients (DDP bucket_cap_mb), start collectives early, or shard (FSDP prefetch)."
)


def rows(run, **options) -> pl.DataFrame:
    steps = run.steps.filter(pl.col("phase") == "steady")
    return (
        steps.group_by("pid", "gpu_id")
        .agg(
            steps=pl.len(),
            exposed_ns=pl.col("nccl_exposed_ns").sum(),
            step_ns=pl.col("duration_ns").sum(),
            worst_step=pl.col("step").sort_by("nccl_exposed_ns", descending=True).first(),
            **spanned(),
        )
        .with_columns(exposed_pct=pl.col("exposed_ns") * 100.0 / pl.col("step_ns"))
        .sort("pid", "gpu_id")
    )


def findings(run, table: pl.DataFrame, *, share: float = 1.0, **options) -> list[Finding]:
    out = []
    for r in table.filter((pl.col("exposed_ns") > 0) & (pl.col("exposed_pct") >= share)).iter_rows(named=True):
        out.append(
            Finding(
                RULE.name,
                f"GPU {r['gpu_id']} (rank {r['pid']}) waited {r['exposed_ns'] / 1e6:,.3f} ms on NCCL not hidden by compute, "
                f"{r['exposed_pct']:.1f}% of its {r['steps']} steady steps",
                r["exposed_ns"],
                device=r["gpu_id"],
                rank=r["pid"],
                steps=[r["worst_step"]],
                start_ns=r["first_ns"],
                end_ns=r["last_ns"],
                evidence=[r],
                advice=ADVICE,
            )
        )
    return out
