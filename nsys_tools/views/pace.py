"""Pacing: each instance of a kernel (or, with ``of="ranges"``, of an NVTX range, by the GPU time
it projects) in order of start, with the time since the previous instance started
(``interval_ns``), the idle time since it ended (``gap_ns``) and the drift: how far the instance
starts from where a steady pace would put it (``drift_ns``: its start less the first
instance's start plus as many median intervals as instances before it). A drift that grows means
the work slows across the run; steps in it show stalls.

Instances are ordered within each export (their clock); give several exports ``--per-file``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from . import View
from . import stats as metrics
from .contract import option
from .hist import projected

VIEW = View(
    "pace",
    "instances in order: interval, gap, drift",
    twin="cuda_gpu_kern_pace, nvtx_gpu_proj_pace recipes",
    top="name",
    rows="kernel (or range) instance, in order: interval, gap, drift",
)


@dataclass(frozen=True)
class Options:
    """The options of ``pace``."""

    of: Literal["kernels", "ranges"] = option(
        "kernels", "--of", "Of each kernel, or of each NVTX range's instances by the GPU time they project."
    )
    names: Literal["short", "demangled", "op"] = option(
        "demangled",
        "--names",
        "Kernel names: demangled (with templates) or short (base name); op: demangled, with range names "
        "without PyTorch's per-call ids (seq, op_id, sizes).",
    )


COLUMNS = ("name", "instance", "start_ns", "duration_ns", "interval_ns", "gap_ns", "drift_ns")


def read(trace, by: Sequence[str], *, of: str = "kernels", names: str = "demangled") -> pl.LazyFrame:
    if of == "ranges":
        return projected(trace, by).select(*by, "start_ns", "end_ns", "duration_ns", name="range")
    name = "short_name" if names == "short" else "name"
    frame = trace.kernels(columns=[*by, name, "start_ns", "end_ns", "duration_ns"])
    return frame.select(*by, "start_ns", "end_ns", "duration_ns", pl.col(name).cast(pl.String).alias("name"))


def partial(rows: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    return rows.select(*keys, pl.col("name").cast(pl.String), "start_ns", "end_ns", "duration_ns")


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    coded, names = metrics.coded(partials)  # names as codes through the sort and the windows
    groups = [*keys, metrics.CODE]
    ordered = coded.sort([*groups, "start_ns", "end_ns"], nulls_last=True)
    interval = pl.col("start_ns") - pl.col("start_ns").shift(1)
    paced = ordered.with_columns(
        instance=pl.int_range(1, pl.len() + 1).over(groups),
        interval_ns=interval.over(groups),
        gap_ns=(pl.col("start_ns") - pl.col("end_ns").shift(1)).over(groups),
    )
    steady = pl.col("start_ns").first() + (pl.col("instance") - 1) * pl.col("interval_ns").median()
    paced = paced.with_columns(drift_ns=(pl.col("start_ns") - steady).over(groups)).collect()
    return metrics.decoded(paced, names).select(*keys, *COLUMNS).lazy()


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.pace``)."""
    from ..render import view_charts

    return view_charts.pace(table)
