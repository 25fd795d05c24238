"""CUDA API calls by function: ``nsys stats --report cuda_api_sum``.

Calls are grouped by the name the export records (``cudaLaunchKernel_v7000``) and shown, as
nsys shows them, without a four-digit version suffix (``cudaLaunchKernel``), unless two recorded
names would then read the same. With ``--by device`` or ``stream`` a call is placed where the
GPU operation it launched ran; other calls have no device or stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from . import View
from . import stats as metrics

VIEW = View(
    "api", "CUDA API calls per function", splittable=True, twin="nsys stats --report cuda_api_sum", rows="CUDA API function"
)


@dataclass(frozen=True)
class Options:
    """``api`` takes no options."""


MEASURED = {"duration_ns": "{}_ns"}
COLUMNS = ("api", "instances", *metrics.timed())
LAUNCH = ("global_pid", "correlation_id")


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    on_gpu = [c for c in by if c in ("gpu_id", "gpu_name", "stream_id")]
    launch = LAUNCH if on_gpu else ()
    calls = trace.api(columns=[*(c for c in by if c not in on_gpu), *launch, "name", "duration_ns"])
    if on_gpu:
        placed = trace.gpu_ops(attributed=False, columns=[*LAUNCH, *on_gpu]).unique(list(LAUNCH), keep="first")
        calls = calls.join(placed.select(*LAUNCH, *on_gpu), on=list(LAUNCH), how="left")
    return calls.select(*by, "duration_ns", api="name")


def partial(calls: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    return metrics.partial(calls, [*keys, "api"], list(MEASURED))


def display(name: pl.Expr) -> pl.Expr:
    """nsys's rule: a name whose sixth- and fifth-last characters are ``_v`` loses its last six."""
    return pl.when(name.str.slice(-6, 2) == "_v").then(name.str.slice(0, name.str.len_chars() - 6)).otherwise(name)


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, "api"]
    merged = metrics.merge(partials, groups, list(MEASURED))
    shown = display(pl.col("api"))
    return (
        metrics.finalize(merged, groups, MEASURED)
        .with_columns(pl.col("api").cast(pl.String), time_pct=metrics.share("total_ns", keys))
        .sort(["total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
        .with_columns(api=pl.when(pl.col("api").n_unique().over(shown) > 1).then(pl.col("api")).otherwise(shown))
        .select(*keys, *COLUMNS)
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.api``)."""
    from ..render import view_charts

    return view_charts.api(table)
