"""Setup and first-step cost: per rank, the time from its first CUDA call, GPU operation or
range to its first step (``steps``' step 0), and what its warm-up steps took beyond a steady
step (their time less the steady median, each)."""

from __future__ import annotations

import polars as pl

from . import Finding, Rule

RULE = Rule("setup", "time before the first step, and warm-up steps beyond a steady one")

OPTIONS: dict = {}
ADVICE = (
    "Leave setup and warm-up out of measurements (profile from a later step: "
    "cudaProfilerStart, nsys -c), or cut it: load once, compile ahead, warm the allocator."
)


def per_rank(steps: pl.DataFrame) -> pl.DataFrame:
    """One row per rank and step (a rank's devices share its steps' times)."""
    return steps.unique(["pid", "step"], keep="first").sort("pid", "step")


def steady(run) -> pl.DataFrame:
    """The run's steady steps, one row per rank and step."""
    return per_rank(run.steps).filter(pl.col("phase") == "steady")


def spanned() -> dict[str, pl.Expr]:
    """The aggregations of a group of steps' first start and last end (``first_ns``, ``last_ns``)."""
    return {"first_ns": pl.col("start_ns").min(), "last_ns": (pl.col("start_ns") + pl.col("duration_ns")).max()}


def rows(run, **options) -> pl.DataFrame:
    steps = per_rank(run.steps)
    steady = steps.filter(pl.col("phase") == "steady").group_by("pid").agg(steady_median_ns=pl.col("duration_ns").median())
    setup = steps.filter(pl.col("phase") == "setup").select("pid", setup_ns="duration_ns", setup_start_ns="start_ns")
    warm = steps.filter(pl.col("phase") == "warmup").join(steady, on="pid", how="left")
    warm = warm.group_by("pid").agg(
        warmup_steps=pl.col("step").sort(),
        warmup_ns=pl.col("duration_ns").sum(),
        warmup_excess_ns=(pl.col("duration_ns") - pl.col("steady_median_ns").fill_null(0)).sum().cast(pl.Int64),
        first_step_start_ns=pl.col("start_ns").min(),
    )
    table = steady.join(setup, on="pid", how="full", coalesce=True).join(warm, on="pid", how="full", coalesce=True)
    return table.with_columns(pl.col("setup_ns", "warmup_ns", "warmup_excess_ns").fill_null(0)).sort("pid")


def findings(run, table: pl.DataFrame, **options) -> list[Finding]:
    out = []
    for r in table.iter_rows(named=True):
        cost = int(r["setup_ns"] + r["warmup_excess_ns"])
        if cost <= 0:
            continue
        warm = ""
        if r["warmup_steps"]:
            n = len(r["warmup_steps"])
            median = r["steady_median_ns"] or 0
            warm = (
                f", and {n} warm-up step{'s' if n > 1 else ''} took {r['warmup_ns'] / 1e6:,.1f} ms "
                f"against a steady median of {median / 1e6:,.2f} ms a step"
            )
        start = r["setup_start_ns"] if r["setup_start_ns"] is not None else r["first_step_start_ns"]
        out.append(
            Finding(
                RULE.name,
                f"Rank {r['pid']} spent {r['setup_ns'] / 1e6:,.1f} ms before its first step{warm}",
                cost,
                rank=r["pid"],
                steps=[0, *(r["warmup_steps"] or [])],
                start_ns=start,
                end_ns=None if start is None else start + r["setup_ns"] + r["warmup_ns"],
                evidence=[{k: v for k, v in r.items()}],
                advice=ADVICE,
            )
        )
    return out
