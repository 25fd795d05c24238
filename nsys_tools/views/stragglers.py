"""Stragglers: for each training step, the slowest rank and by how much.

A rank is a process (one export with several processes, or a folder of per-rank exports). A
step is an instance of the NVTX range matching ``step`` (``*step*`` unless given; of nested ones the
outermost, ``read.step_ranges``: ``Optimizer.step`` inside ``step 3`` is not a step); each rank's
steps are numbered in order of start from 1, and step k of every rank is compared: ``slowest_pid``
ran it longest (its CPU range time, which waits for the collectives a straggler holds up),
``behind_ns`` is how much longer than the median rank it took. ``late_steps`` counts the steps
in which that rank was the slowest; ``consistent`` marks a rank slowest in more than half of
the steps (and in at least two).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from . import View
from .contract import option

VIEW = View(
    "stragglers",
    "per step: the slowest rank and by how much",
    rows="step: the slowest rank and by how much; ranks late most often",
)


@dataclass(frozen=True)
class Options:
    """The options of ``stragglers``."""

    step: str = option("*step*", "--step", "The NVTX range of one training step (a glob).")


RANK = ("pid", "process_name")
COLUMNS = (
    "step_index",
    "step",
    "ranks",
    "slowest_pid",
    "slowest_ns",
    "median_ns",
    "fastest_ns",
    "behind_ns",
    "behind_pct",
    "late_steps",
    "consistent",
)


def read(trace, by: Sequence[str], *, step: str = "*step*") -> pl.LazyFrame:
    from ..read.step_ranges import step_ranges

    keep = [c for c in by if c not in ("gpu_id", "gpu_name", "stream_id", *RANK)]
    ranges = trace.ranges(columns=[*keep, *RANK, "range", "start_ns", "end_ns", "duration_ns"])
    steps = step_ranges(ranges, step)
    return steps.select(
        *keep,
        *RANK,
        step=pl.col("range").cast(pl.String),
        step_index=pl.col("start_ns").rank("ordinal").over("pid").cast(pl.Int64),
        duration_ns="duration_ns",
    )


def partial(steps: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    return steps


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [k for k in keys if k not in ("gpu_id", "gpu_name", "stream_id", *RANK)]
    if "step_index" not in partials.collect_schema().names():
        return pl.LazyFrame(schema={**dict.fromkeys(groups, pl.Null), **dict.fromkeys(COLUMNS, pl.Int64)})
    per_step = partials.group_by(*groups, "step_index").agg(
        step=pl.col("step").sort().first(),
        ranks=pl.col("pid").n_unique().cast(pl.Int64),
        slowest_pid=pl.col("pid").sort_by("duration_ns", "pid", descending=[True, False]).first(),
        slowest_ns=pl.col("duration_ns").max(),
        median_ns=pl.col("duration_ns").median(),
        fastest_ns=pl.col("duration_ns").min(),
    )
    late = per_step.group_by(*groups, "slowest_pid").agg(late_steps=pl.len().cast(pl.Int64))
    total = per_step.group_by(groups).agg(steps=pl.len()) if groups else per_step.select(steps=pl.len())
    table = per_step.join(late, on=[*groups, "slowest_pid"], how="left", nulls_equal=True)
    table = table.join(total, on=groups, how="left", nulls_equal=True) if groups else table.join(total, how="cross")
    return (
        table.with_columns(
            behind_ns=pl.col("slowest_ns") - pl.col("median_ns"),
            behind_pct=(pl.col("slowest_ns") - pl.col("median_ns")) * 100.0 / pl.col("median_ns"),
            consistent=(pl.col("late_steps") * 2 > pl.col("steps")) & (pl.col("late_steps") >= 2),
        )
        .select(*groups, *COLUMNS)
        .sort([*groups, "step_index"])
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.stragglers``)."""
    from ..render import view_charts

    return view_charts.stragglers(table)
