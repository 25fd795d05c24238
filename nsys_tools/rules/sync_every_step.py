"""A synchronization every step: a rank whose host blocks (a ``...Synchronize`` call, or a
synchronous copy or set) in nearly every steady step (``share``, 90 percent unless given). The
time at stake is the time blocked in those steps."""

from __future__ import annotations

import polars as pl

from . import Finding, Rule
from .setup import spanned, steady

RULE = Rule("sync_every_step", "the host blocks in a synchronization every step")

OPTIONS = {"share": (float, 90.0, "the percentage of steady steps with a blocking call that makes it every step")}
ADVICE = (
    "Drop the per-step synchronization (loss.item(), .cpu(), cudaStreamSynchronize): "
    "accumulate on the GPU and read back every N steps."
)


def rows(run, **options) -> pl.DataFrame:
    steps = steady(run)
    blocked = pl.col("host_blocked_ns")
    return (
        steps.group_by("pid")
        .agg(
            steps=pl.len(),
            blocking_steps=(blocked > 0).sum(),
            blocked_ns=blocked.sum(),
            median_blocked_ns=blocked.median(),
            **spanned(),
        )
        .with_columns(blocking_pct=pl.col("blocking_steps") * 100.0 / pl.col("steps"))
        .sort("pid")
    )


def findings(run, table: pl.DataFrame, *, share: float = 90.0, **options) -> list[Finding]:
    out = []
    for r in table.filter((pl.col("steps") >= 2) & (pl.col("blocking_pct") >= share)).iter_rows(named=True):
        out.append(
            Finding(
                RULE.name,
                f"Rank {r['pid']} blocked in a synchronization in {r['blocking_steps']} of its {r['steps']} steady steps, "
                f"{r['median_blocked_ns'] / 1e3:,.1f} µs a step ({r['blocked_ns'] / 1e6:,.3f} ms in all)",
                r["blocked_ns"],
                rank=r["pid"],
                start_ns=r["first_ns"],
                end_ns=r["last_ns"],
                evidence=[r],
                advice=ADVICE,
            )
        )
    return out
