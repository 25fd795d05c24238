"""GPU time each NVTX range projects: ``nsys stats --report nvtx_gpu_proj_sum``.

A GPU operation is in a range when the API call that launched it is, on the thread that opened
the range (every enclosing range counts it, not only the innermost). Per range instance:

* the projection runs from the start of its first operation to the end of its last, as nsys
  projects it (``proj_*``; a child's time is not subtracted from its parent's);
* ``busy_ns`` is the union of its operations' intervals: the GPU time the range kept busy,
  without the idle time the projection spans;
* ``range_total_ns`` is the range's own CPU duration; ``ops`` counts its GPU operations;
* ``level_mean`` and ``children_mean``: how deep the range sits among the ranges that launched
  GPU work on its thread (0 at the top) and how many of them it directly encloses.

Instances are summed per range name, domain and style. Ranges that launch no GPU work, end on
another thread, or are still open at the end of the capture are not listed (nsys lists none of
them either). With ``--by device`` an instance is projected on each device separately.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from .. import events, metrics

NAME = ("domain", "range", "style")
MEASURED = {"proj_ns": "proj_{}_ns"}
SUMMED = {"busy_ns": "busy_ns", "range_ns": "range_total_ns", "ops": "ops", "level": "level", "children": "children"}
COLUMNS = (
    *NAME,
    "instances",
    "proj_total_ns",
    "proj_mean_ns",
    "proj_median_ns",
    "proj_min_ns",
    "proj_max_ns",
    "proj_stddev_ns",
    "busy_ns",
    "range_total_ns",
    "ops",
    "ops_mean",
    "level_mean",
    "children_mean",
)
INSTANCE = ("range_instance", *NAME, "range_start_ns", "range_end_ns")
LAUNCH = ("global_pid", "correlation_id")


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    """Each (GPU operation, enclosing range instance) pair: ``by`` columns, the instance and the
    operation's times and correlation id."""
    ops = trace.gpu_ops(attributed=True, nesting="all", columns=[*by, *LAUNCH, "start_ns", "end_ns"])
    return ops.filter(pl.col("range_instance").is_not_null() & (pl.col("range_end_ns") < events.NO_END)).select(
        *by, *INSTANCE, *LAUNCH, "start_ns", "end_ns"
    )


def union_ns(start: str = "start_ns", end: str = "end_ns") -> pl.Expr:
    """In an aggregation: the length of the union of the group's intervals."""
    s, e = pl.col(start).sort(), pl.col(end).sort_by(start)
    covered = e.cum_max().shift(1)
    return (e - pl.max_horizontal(s, covered)).clip(lower_bound=0).sum()


def nesting(pairs: pl.LazyFrame) -> pl.LazyFrame:
    """Per range instance: ``level``, the instances that enclose it, and ``children``, those it
    directly encloses. An instance's ancestors all enclose each launch call it encloses, so
    one call per instance finds them: the instances around that call that also span it."""
    spans = pairs.select("range_instance", "range_start_ns", "range_end_ns", *LAUNCH).unique()
    one_call = spans.group_by("range_instance").agg(pl.all().sort_by("correlation_id").first())
    around = (
        one_call.join(spans, on=list(LAUNCH), suffix="_outer")
        .filter(
            (pl.col("range_instance_outer") != pl.col("range_instance"))
            & (pl.col("range_start_ns_outer") <= pl.col("range_start_ns"))
            & (pl.col("range_end_ns_outer") >= pl.col("range_end_ns"))
            # Two ranges over the same interval: the one opened first is the outer.
            & (
                (pl.col("range_start_ns_outer") < pl.col("range_start_ns"))
                | (pl.col("range_end_ns_outer") > pl.col("range_end_ns"))
                | (pl.col("range_instance_outer") < pl.col("range_instance"))
            )
        )
        .select("range_instance", "range_instance_outer", "range_start_ns_outer", "range_end_ns_outer")
    )
    level = around.group_by("range_instance").agg(level=pl.len().cast(pl.Int64))
    parent = around.sort(["range_start_ns_outer", "range_end_ns_outer"], descending=[True, False]).unique(
        "range_instance", keep="first"
    )
    children = parent.group_by(range_instance="range_instance_outer").agg(children=pl.len().cast(pl.Int64))
    return (
        spans.select("range_instance")
        .unique()
        .join(level, on="range_instance", how="left")
        .join(children, on="range_instance", how="left")
        .with_columns(pl.col("level", "children").fill_null(0))
    )


def partial(pairs: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    instances = pairs.group_by([*keys, *INSTANCE]).agg(
        proj_ns=pl.col("end_ns").max() - pl.col("start_ns").min(),
        busy_ns=union_ns(),
        ops=pl.col("correlation_id").n_unique().cast(pl.Int64),
    )
    instances = instances.with_columns(range_ns=pl.col("range_end_ns") - pl.col("range_start_ns")).join(
        nesting(pairs), on="range_instance", how="left"
    )
    return metrics.partial(instances, [*keys, *NAME], list(MEASURED), list(SUMMED))


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, *NAME]
    merged = metrics.merge(partials, groups, list(MEASURED), list(SUMMED))
    return (
        metrics.finalize(merged, groups, MEASURED, SUMMED)
        .with_columns((pl.col("ops", "level", "children") / pl.col("instances")).name.suffix("_mean"))
        .select(*keys, *COLUMNS)
        .sort(["proj_total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )
