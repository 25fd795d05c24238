"""A straggling rank: with two ranks or more, the rank whose step n took longest, for each n
among the steady steps, and how much longer than the median rank's; a rank slowest in more than
half of the steps (and in two at least) straggles. The time at stake is what it took beyond the
median rank in those steps."""

from __future__ import annotations

import polars as pl

from . import Finding, Rule
from .setup import steady

RULE = Rule("straggler", "a rank slower than the others step after step")

OPTIONS: dict = {}
ADVICE = (
    "Look at what the slow rank does differently (its data shard, its GPU's clocks and "
    "neighbours, its host): the others wait for it."
)


def rows(run, **options) -> pl.DataFrame:
    steps = steady(run)
    d = pl.col("duration_ns")
    per_step = steps.group_by("step").agg(
        ranks=pl.len(),
        slowest_pid=pl.col("pid").sort_by(d, pl.col("pid"), descending=[True, False]).first(),
        slowest_ns=d.max(),
        median_ns=d.median(),
        start_ns=pl.col("start_ns").min(),
        end_ns=(pl.col("start_ns") + d).max(),
    )
    per_step = per_step.filter(pl.col("ranks") >= 2).with_columns(
        behind_ns=(pl.col("slowest_ns") - pl.col("median_ns")).cast(pl.Int64)
    )
    return per_step.sort("step")


def findings(run, table: pl.DataFrame, **options) -> list[Finding]:
    if table.is_empty():
        return []
    out = []
    for (pid,), late in table.group_by("slowest_pid"):
        if late.height < 2 or late.height * 2 <= table.height:
            continue
        out.append(
            Finding(
                RULE.name,
                f"Rank {pid} was the slowest in {late.height} of {table.height} steady steps, "
                f"{late['behind_ns'].mean() / 1e6:,.3f} ms behind the median rank each",
                int(late["behind_ns"].sum()),
                rank=pid,
                steps=late["step"].sort().to_list(),
                start_ns=int(late["start_ns"].min()),
                end_ns=int(late["end_ns"].max()),
                evidence=late.sort("step").to_dicts(),
                advice=ADVICE,
            )
        )
    return out
