"""GPU time each NVTX range projects: ``nsys stats --report nvtx_gpu_proj_sum``.

A GPU operation is in a range when the API call that launched it is, on the thread that opened
the range (every enclosing range counts it, not only the innermost). Per range instance:

* the projection runs from the start of its first operation to the end of its last, as nsys
  projects it (``proj_*``; a child's time is not subtracted from its parent's);
* ``busy_ns`` is the union of its operations' intervals: the GPU time the range kept busy,
  without the idle time the projection spans;
* ``range_total_ns`` is the range's own CPU duration; ``ops`` counts its GPU operations.

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
SUMMED = {"busy_ns": "busy_ns", "range_ns": "range_total_ns", "ops": "ops"}
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
)
INSTANCE = ("range_instance", *NAME, "range_start_ns", "range_end_ns")


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    """Each (GPU operation, enclosing range instance) pair: ``by`` columns, the instance and the
    operation's times and correlation id."""
    ops = trace.gpu_ops(attributed=True, nesting="all", columns=[*by, "start_ns", "end_ns", "correlation_id"])
    return ops.filter(pl.col("range_instance").is_not_null() & (pl.col("range_end_ns") < events.NO_END)).select(
        *by, *INSTANCE, "start_ns", "end_ns", "correlation_id"
    )


def union_ns(start: str = "start_ns", end: str = "end_ns") -> pl.Expr:
    """In an aggregation: the length of the union of the group's intervals."""
    order = pl.col(start).arg_sort()
    s, e = pl.col(start).gather(order), pl.col(end).gather(order)
    covered = e.cum_max().shift(1)
    return (e - pl.max_horizontal(s, covered)).clip(lower_bound=0).sum()


def partial(pairs: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    instances = pairs.group_by([*keys, *INSTANCE]).agg(
        proj_ns=pl.col("end_ns").max() - pl.col("start_ns").min(),
        busy_ns=union_ns(),
        ops=pl.col("correlation_id").n_unique().cast(pl.Int64),
    )
    instances = instances.with_columns(range_ns=pl.col("range_end_ns") - pl.col("range_start_ns"))
    return metrics.partial(instances, [*keys, *NAME], list(MEASURED), list(SUMMED))


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, *NAME]
    merged = metrics.merge(partials, groups, list(MEASURED), list(SUMMED))
    return (
        metrics.finalize(merged, groups, MEASURED, SUMMED)
        .with_columns(ops_mean=pl.col("ops") / pl.col("instances"))
        .select(*keys, *COLUMNS)
        .sort(["proj_total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )
