"""Step-time spread: a rank whose steady steps vary by more than ``cv`` percent (coefficient of
variation, 10 unless given). The time at stake is what the steps above the median took beyond it,
less the slow steps' (``slow_steps`` names their cause): a loop whose spread is its slow steps
alone has little left at stake here."""

from __future__ import annotations

import polars as pl

from . import Finding, Rule
from .setup import spanned, steady

RULE = Rule("step_variance", "steady step times that vary widely")

OPTIONS = {"cv": (float, 10.0, "the coefficient of variation, in percent, above which steps vary widely")}
ADVICE = (
    "Find what the long steps do that the short ones do not (slow_steps names the figure that "
    "grew); a steady loop has steady steps."
)


def rows(run, **options) -> pl.DataFrame:
    steps = steady(run)
    d = pl.col("duration_ns")
    return (
        steps.group_by("pid")
        .agg(
            steps=pl.len(),
            median_ns=d.median(),
            p10_ns=d.quantile(0.1, "nearest"),
            p90_ns=d.quantile(0.9, "nearest"),
            cv_pct=d.std() * 100.0 / d.mean(),
            above_ns=((d - d.median()).clip(lower_bound=0) * (~pl.col("slow")).cast(pl.Int64)).sum().cast(pl.Int64),
            **spanned(),
        )
        .sort("pid")
    )


def findings(run, table: pl.DataFrame, *, cv: float = 10.0, **options) -> list[Finding]:
    out = []
    for r in table.filter((pl.col("steps") >= 3) & (pl.col("cv_pct") > cv)).iter_rows(named=True):
        out.append(
            Finding(
                RULE.name,
                f"Rank {r['pid']}'s {r['steps']} steady steps vary by {r['cv_pct']:.0f}%: median {r['median_ns'] / 1e6:,.2f} ms, "
                f"p10-p90 {r['p10_ns'] / 1e6:,.2f}-{r['p90_ns'] / 1e6:,.2f} ms",
                r["above_ns"],
                rank=r["pid"],
                start_ns=r["first_ns"],
                end_ns=r["last_ns"],
                evidence=[r],
                advice=ADVICE,
            )
        )
    return out
