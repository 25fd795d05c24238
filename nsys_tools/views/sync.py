"""Blocking synchronization calls and what they cost the host: ``cudaDeviceSynchronize``,
``cudaStreamSynchronize``, ``cudaEventSynchronize`` and their driver twins (every CUDA API
call whose name holds ``Synchronize``, as the ``cuda_api_sync`` recipe selects them), per
function. ``time_pct`` is the share of the synchronizing time; ``thread_pct`` the share of the
wall time the calling threads spent blocked, from their first CUDA call to their last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from . import View
from . import stats as metrics
from .api import display

VIEW = View(
    "sync",
    "blocking synchronization calls and what they cost",
    splittable=True,
    twin="cuda_api_sync recipe",
    by=("process",),
    rows="blocking synchronization call",
)


@dataclass(frozen=True)
class Options:
    """``sync`` takes no options."""


MEASURED = {"duration_ns": "{}_ns"}
COLUMNS = ("api", "instances", *metrics.timed(), "threads", "thread_pct")


def is_sync(name: pl.Expr) -> pl.Expr:
    return name.cast(pl.String).str.contains("Synchronize")


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    """Every CUDA API call (the threads' spans need them all): ``by`` columns, ``global_tid``,
    ``api``, ``sync`` (a synchronization call), its start, end and duration."""
    if any(c in ("gpu_id", "gpu_name", "stream_id") for c in by):
        raise ValueError("sync: synchronization calls run on host threads, not on a device; split them --by process")
    calls = trace.api(columns=[*by, "global_tid", "name", "start_ns", "end_ns", "duration_ns"])
    return calls.select(*by, "global_tid", "start_ns", "end_ns", "duration_ns", api="name", sync=is_sync(pl.col("name")))


def partial(calls: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """Statistics of the synchronization calls per (keys, api); the threads that made them; and
    each thread's first start and last end over all its calls (they merge by min and max)."""
    groups = [*keys, "api"]
    syncs = calls.filter(pl.col("sync"))
    stats = metrics.partial(syncs, groups, list(MEASURED))
    callers = syncs.select(*groups, "global_tid").unique().with_columns(caller=pl.lit(True))
    spans = calls.group_by([*keys, "global_tid"]).agg(first_ns=pl.col("start_ns").min(), last_ns=pl.col("end_ns").max())
    return pl.concat([stats, callers, spans], how="diagonal_relaxed")


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, "api"]
    stats = partials.filter(pl.col("instances").is_not_null())
    merged = metrics.merge(stats, groups, list(MEASURED))
    spans = (
        partials.filter(pl.col("first_ns").is_not_null())
        .group_by([*keys, "global_tid"])
        .agg(thread_span_ns=pl.col("last_ns").max() - pl.col("first_ns").min())
    )
    threads = (
        partials.filter(pl.col("caller").is_not_null())
        .select(*groups, "global_tid")
        .unique()
        .join(spans, on=[*keys, "global_tid"], how="left", nulls_equal=True)
        .group_by(groups)
        .agg(threads=pl.len().cast(pl.Int64), thread_span_ns=pl.col("thread_span_ns").sum())
    )
    shown = display(pl.col("api").cast(pl.String))
    return (
        metrics.finalize(merged, groups, MEASURED)
        .join(threads, on=groups, how="left", nulls_equal=True)
        .with_columns(time_pct=metrics.share("total_ns"), thread_pct=pl.col("total_ns") * 100.0 / pl.col("thread_span_ns"))
        .with_columns(api=shown)
        .select(*keys, *COLUMNS)
        .sort(["total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.sync``)."""
    from ..render import view_charts

    return view_charts.sync(table)
