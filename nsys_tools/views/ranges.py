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

Where the ranges nest deeply (more than ``nested.DEEP_LEVELS`` on a thread), the same table is
computed from the operations and the ranges, without the pairs (``nested.py``).

Instances are summed per range name, domain and style. Ranges that launch no GPU work, end on
another thread, or are still open at the end of the capture are not listed (nsys lists none of
them either). With ``--by device`` an instance is projected on each device separately.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from ..read import attribute
from ..read import frames as events
from . import View, nested
from . import stats as metrics
from .contract import Fold

VIEW = View(
    "ranges",
    "GPU time projected per NVTX range, and its CPU time",
    ordered=True,
    twin="nsys stats --report nvtx_gpu_proj_sum",
    rows="NVTX range name and style: GPU time projected, CPU time",
)


@dataclass(frozen=True)
class Options:
    """``ranges`` takes no options."""


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
_SPAN = (*INSTANCE, "global_tid")
LAUNCH = ("global_pid", "correlation_id")


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    """Each (GPU operation, enclosing range instance) pair: ``by`` columns, the instance and the
    operation's times and correlation id. Where the ranges nest deeply (``nested.eligible``), one
    row per operation instead (with its launching call) and one per range (``range_instance`` set,
    no operation): the pairs would number the operations times the depth."""
    spans = _spans(trace)
    if nested.eligible(spans):
        ops = trace.gpu_ops(attributed=True, ranges=False, columns=[*by, *LAUNCH, *nested.CALL, "start_ns", "end_ns"])
        return pl.concat([ops.select(*by, *LAUNCH, *nested.CALL, "start_ns", "end_ns"), spans], how="diagonal_relaxed")
    ops = trace.gpu_ops(attributed=True, nesting="all", columns=[*by, *LAUNCH, "start_ns", "end_ns"])
    return ops.filter(pl.col("range_instance").is_not_null() & (pl.col("range_end_ns") < events.NO_END)).select(
        *by, *INSTANCE, *LAUNCH, "start_ns", "end_ns"
    )


def _spans(trace) -> pl.LazyFrame:
    """The ranges that can hold GPU work of this view: those that end, and last unless start/end."""
    ranges = trace.ranges(attribute.RANGE_INPUT)
    return ranges.filter(
        (pl.col("end_ns") < events.NO_END) & ((pl.col("style") == "startend") | (pl.col("end_ns") > pl.col("start_ns")))
    ).select(*INSTANCE[:-2], "global_tid", range_start_ns="start_ns", range_end_ns="end_ns")


def _deep(rows: pl.DataFrame) -> bool:
    """Whether ``rows`` (``read``'s, or a slice of them) are operations and ranges, not pairs."""
    return "api_start_ns" in rows.collect_schema().names()


def _nested(ops: pl.DataFrame, spans: pl.DataFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """The partial table of deeply nested ranges, from the operations and the ranges."""
    found = nested.instances(ops, spans, keys, union_ns)
    named = found.join(spans.lazy().select(INSTANCE), on="range_instance")
    launched = spans.lazy().join(found.select("range_instance").unique(), on="range_instance", how="semi")
    return _summed(named, nested.ancestry(launched), keys)


def union_ns(start: str = "start_ns", end: str = "end_ns", covered: str | None = None) -> pl.Expr:
    """In an aggregation: the length of the union of the group's intervals, less what column
    ``covered`` (the end of the union of earlier intervals, all starting before these) covers.
    Sorted with sort/sort_by rather than a gather, which Polars types as null for an empty group."""
    s, e = pl.col(start).sort(), pl.col(end).sort_by(start)
    before = e.cum_max().shift(1)
    if covered is not None:
        before = pl.max_horizontal(before, pl.col(covered).first())
    return (e - pl.max_horizontal(s, before)).clip(lower_bound=0).sum()


def ancestry(pairs: pl.LazyFrame) -> pl.LazyFrame:
    """Per range instance: ``level``, the number of instances that enclose it, and ``parent``,
    the innermost of them (null at the top). An instance's ancestors all enclose each launch
    call it encloses, so one call per instance finds them (any one: pieces of the operations
    split by launch give the same answer): the instances around that call that also span it.

    The instances around one call, ordered outer first (by start, then the later end, then the
    one opened first), are usually a chain, each inside the one before: then an instance's level
    is its place in the chain and its parent the one before it, found for every instance in one
    sort, whatever the depth. Where start/end ranges cross, the chain is not nested, and its
    instances are matched pairwise."""
    one_call = pairs.group_by("range_instance").agg(pl.col(*LAUNCH).sort_by("correlation_id").first())
    outer_first = ["range_start_ns", "range_end_ns", "range_instance"]
    # Collected once: both ``placed`` and ``_pairwise`` read it, and as a plan its sort and
    # windows ran for each (a piece of 1.4M pairs: 10 s and 0.57 GB above its input, against 2.8 s and 0.22 GB).
    chains = (
        pairs.select("range_instance", "range_start_ns", "range_end_ns", *LAUNCH)
        .join(one_call.select(*LAUNCH).unique(), on=list(LAUNCH), how="semi")
        .unique()
        .sort([*LAUNCH, *outer_first], descending=[False, False, False, True, False])
        .with_columns(
            level=pl.int_range(pl.len(), dtype=pl.Int64).over(LAUNCH),
            parent=pl.col("range_instance").shift(1).over(LAUNCH),
            nested=(pl.col("range_end_ns") <= pl.col("range_end_ns").shift(1)).fill_null(True).all().over(LAUNCH),
        )
        .collect()
        .lazy()
    )
    placed = one_call.join(chains, on=["range_instance", *LAUNCH])
    return pl.concat(
        [
            placed.filter(pl.col("nested")).select("range_instance", "level", "parent"),
            _pairwise(placed.filter(~pl.col("nested")), chains),
        ],
        how="vertical_relaxed",
    )


def _pairwise(placed: pl.LazyFrame, chains: pl.LazyFrame) -> pl.LazyFrame:
    """``ancestry`` of the instances in ``placed`` (each with its call and span), from every
    instance around the call (``chains``) that also spans it."""
    around = (
        placed.select("range_instance", "range_start_ns", "range_end_ns", *LAUNCH)
        .join(chains.select("range_instance", "range_start_ns", "range_end_ns", *LAUNCH), on=list(LAUNCH), suffix="_outer")
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
    innermost = ["range_start_ns_outer", "range_end_ns_outer", "range_instance_outer"]
    parent = (
        around.sort(innermost, descending=[True, False, True])
        .unique("range_instance", keep="first", maintain_order=True)
        .select("range_instance", parent="range_instance_outer")
    )
    return (
        placed.select("range_instance")
        .join(level, on="range_instance", how="left")
        .join(parent, on="range_instance", how="left")
        .with_columns(pl.col("level").fill_null(0))
    )


def nesting(ancestors: pl.LazyFrame) -> pl.LazyFrame:
    """Per range instance (``ancestry``): ``level`` and ``children``, the instances it directly
    encloses."""
    children = ancestors.group_by(range_instance="parent").agg(children=pl.len().cast(pl.Int64))
    return (
        ancestors.select("range_instance", "level")
        .join(children, on="range_instance", how="left")
        .with_columns(pl.col("children").fill_null(0))
    )


def partial(pairs: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    if _deep(pairs):
        rows = pairs.collect()
        ranged = pl.col("range_instance").is_not_null()
        return _nested(rows.filter(~ranged), rows.filter(ranged).select(_SPAN), keys)
    instances = pairs.group_by([*keys, *INSTANCE]).agg(
        start_ns=pl.col("start_ns").min(),
        end_ns=pl.col("end_ns").max(),
        busy_ns=union_ns(),
        ops=pl.col("correlation_id").n_unique().cast(pl.Int64),
    )
    return _summed(instances, ancestry(pairs), keys)


def _summed(instances: pl.LazyFrame, ancestors: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """The partial table from each instance's first start, last end, busy time and operations."""
    instances = instances.with_columns(
        proj_ns=pl.col("end_ns") - pl.col("start_ns"), range_ns=pl.col("range_end_ns") - pl.col("range_start_ns")
    ).join(nesting(ancestors), on="range_instance", how="left")
    return metrics.partial(instances, [*keys, *NAME], list(MEASURED), list(SUMMED))


# An export of any size is read as pieces split by launch, then as slices in order of start time
# (``chunked.py``). Each instance's first start, last end and operations merge directly (an
# operation is counted where its launch is first seen, in its piece); its busy time is summed
# slice by slice, each slice's union less what the instance's earlier slices covered (their last
# end), which is exact because every slice's operations start after the earlier slices'.


def split(pairs: pl.LazyFrame, keys: Sequence[str]) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """One piece's (operation, instance) pairs to be ordered by ``start_ns``, each launch's first
    marked, and its instances: their names, spans and ancestry. Deeply nested: the operations, and
    the ranges."""
    if _deep(pairs):
        ranged = pl.col("range_instance").is_not_null()
        return pairs.filter(~ranged).select(pl.exclude(_SPAN[:-1])), pairs.filter(ranged).select(_SPAN)
    first = pl.col("correlation_id").is_first_distinct().over([*keys, "range_instance"]).cast(pl.Int64)
    rows = pairs.select(*keys, "range_instance", "start_ns", "end_ns", launches=first)
    return rows, ancestry(pairs).join(pairs.select(INSTANCE).unique(), on="range_instance")


def start(sides: list, keys: Sequence[str]) -> Fold:
    """The fold's first state: no instance seen."""
    return Fold()


def window(pairs: pl.DataFrame, keys: Sequence[str], state: Fold) -> Fold:
    """Per instance, the aggregates so far (``state.held``) merged with one slice's."""
    if state.held is not None and pairs.is_empty():
        return state
    if _deep(pairs):  # the operations are kept, and measured once all are in
        return Fold(held=pairs if state.held is None else pl.concat([state.held, pairs], how="vertical_relaxed", rechunk=False))
    state = state.held
    group = [*keys, "range_instance"]
    lazy = pairs.lazy()
    if state is not None:
        lazy = lazy.join(state.lazy().select(*group, covered="end_ns"), on=group, how="left", nulls_equal=True)
    part = lazy.group_by(group).agg(
        start_ns=pl.col("start_ns").min(),
        end_ns=pl.col("end_ns").max(),
        busy_ns=union_ns(covered=None if state is None else "covered"),
        ops=pl.col("launches").sum().cast(pl.Int64),
    )
    if state is not None:
        part = (
            pl.concat([state.lazy(), part], how="vertical_relaxed")
            .group_by(group)
            .agg(pl.col("start_ns").min(), pl.col("end_ns").max(), pl.col("busy_ns", "ops").sum())
        )
    return Fold(held=part.collect())


def close(state: Fold, sides: list[pl.DataFrame], keys: Sequence[str]) -> pl.LazyFrame:
    """The partial table from every slice's aggregates and every piece's ancestry (deeply nested:
    from the operations and the ranges)."""
    if sides and "global_tid" in sides[0].columns:
        spans = pl.concat(sides, how="vertical_relaxed").unique("range_instance")
        return _nested(state.held, spans, keys)
    ancestors = pl.concat(sides, how="vertical_relaxed").lazy().unique("range_instance")
    instances = state.held.lazy().join(ancestors.select(INSTANCE), on="range_instance")
    return _summed(instances, ancestors, keys)


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, *NAME]
    merged = metrics.merge(partials, groups, list(MEASURED), list(SUMMED))
    return (
        metrics.finalize(merged, groups, MEASURED, SUMMED)
        .with_columns((pl.col("ops", "level", "children") / pl.col("instances")).name.suffix("_mean"))
        .select(*keys, *COLUMNS)
        .sort(["proj_total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.ranges``)."""
    from ..render import view_charts

    return view_charts.ranges(table)
