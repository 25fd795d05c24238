"""Kernel launches per kernel name: how long the launch call took, and how long the kernel
waited after it returned. Twin: ``nsys stats --report cuda_kern_exec_sum``, whose rows are, as here, per
launching thread (``tid``), launch function (``api``, without its version suffix) and kernel.

For each kernel: ``api_*_ns`` is the duration of the API call that launched it (its end less its
start); ``queue_*_ns`` the time from that call's end to the kernel's start, over the kernels that
started after their call returned (``queued`` of them: nsys's QCount; the others started while
the host was still in the call, so nothing was queued and the GPU waited for the host);
``exec_*_ns`` from the call's start to the later of its end and the kernel's end (nsys's "T");
``kernel_*_ns`` the
kernel's duration. Percentiles p10, p90 and the median come with each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from . import View
from . import stats as metrics
from .api import display
from .contract import option

VIEW = View(
    "launch",
    "per kernel: launch call and queue time before the kernel starts",
    splittable=True,
    twin="nsys stats --report cuda_kern_exec_sum",
    rows="kernel: launch call duration, queue time before the kernel starts",
)


@dataclass(frozen=True)
class Options:
    """The options of ``launch``."""

    names: Literal["short", "demangled", "op"] = option(
        "demangled",
        "--names",
        "Kernel names: demangled (with templates) or short (base name); op: demangled, with range names "
        "without PyTorch's per-call ids (seq, op_id, sizes).",
    )


MEASURED = {"exec_ns": "exec_{}_ns", "api_ns": "api_{}_ns", "duration_ns": "kernel_{}_ns"}
QUEUE = {"queue_ns": "queue_{}_ns"}
COLUMNS = (
    "tid",
    "api",
    "kernel",
    "instances",
    "queued",
    *(c for m in (*MEASURED.values(), *QUEUE.values()) for c in metrics.named(m)),
)


def read(trace, by: Sequence[str], *, names: str = "demangled") -> pl.LazyFrame:
    name = "short_name" if names == "short" else "name"
    ops = trace.gpu_ops(
        attributed=True,
        ranges=False,
        kinds=("kernel",),
        columns=[*by, name, "start_ns", "end_ns", "duration_ns", "tid", "api_name", "api_start_ns", "api_end_ns"],
    )
    queue = pl.col("start_ns") - pl.col("api_end_ns")
    return ops.select(
        *by,
        "tid",
        "duration_ns",
        api=display(pl.col("api_name").cast(pl.String)),
        kernel=name,
        exec_ns=pl.max_horizontal("api_end_ns", "end_ns") - pl.col("api_start_ns"),
        api_ns=pl.col("api_end_ns") - pl.col("api_start_ns"),
        queue_ns=pl.when(queue > 0).then(queue),
    )


def partial(ops: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, "tid", "api", "kernel"]
    every = metrics.partial(ops, groups, list(MEASURED))
    queued = metrics.partial(ops.filter(pl.col("queue_ns").is_not_null()), groups, list(QUEUE)).rename({"instances": "queued"})
    return pl.concat([every, queued], how="diagonal_relaxed")


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, "tid", "api", "kernel"]
    every = partials.filter(pl.col("instances").is_not_null())
    every = metrics.finalize(metrics.merge(every, groups, list(MEASURED)), groups, MEASURED)
    queued = partials.filter(pl.col("queued").is_not_null()).drop("instances").rename({"queued": "instances"})
    queued = metrics.finalize(metrics.merge(queued, groups, list(QUEUE)), groups, QUEUE).rename({"instances": "queued"})
    return (
        every.join(queued, on=groups, how="left", nulls_equal=True)
        .with_columns(pl.col("queued").fill_null(0))
        .select(*keys, *COLUMNS)
        .sort(["kernel_total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.launch``)."""
    from ..render import view_charts

    return view_charts.launch(table)
