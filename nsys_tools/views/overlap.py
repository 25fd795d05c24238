"""How much of each device's communication was hidden behind compute, per training step.
Twin: the ``nccl_gpu_overlap_trace`` recipe.

For each device and step (an instance of the NVTX range matching ``step``, ``*step*`` unless
given; of nested ones the outermost, as ``steps`` finds them (``read.step_ranges``, so
``Optimizer.step`` inside ``step 3`` is not a step); an operation belongs to the step its launch call was made in,
on any thread of its process: PyTorch launches the backward pass from its autograd threads;
operations launched outside every step form a row with no step): ``nccl_ns`` is the union of
its NCCL kernels, ``overlapped_ns`` the part of it during which a compute kernel also ran on the
device, ``exposed_ns`` the rest (communication the step waited for), ``overlap_pct`` the share
hidden. Unions are those of ``utilization`` (exact across slices, pieces and exports), taken
within each step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from . import View
from . import utilization as U
from .contract import Fold, option
from .gaps import timeline

VIEW = View(
    "overlap",
    "NCCL time hidden behind compute, and exposed, per step",
    ordered=True,
    twin="nccl_gpu_overlap_trace recipe",
    rows="device and step: NCCL time hidden behind compute, exposed",
)


@dataclass(frozen=True)
class Options:
    """The options of ``overlap``."""

    step: str = option("*step*", "--step", "The NVTX range of one training step (a glob).")


STEP = ("step", "step_start_ns")
COLUMNS = ("step", "step_start_ns", "start_ns", "end_ns", "compute_ns", "nccl_ns", "overlapped_ns", "exposed_ns", "overlap_pct")


def read(trace, by: Sequence[str], *, step: str = "*step*") -> pl.LazyFrame:
    from ..read.names import glob_like
    from ..read.step_ranges import step_ranges

    line = timeline(by)
    ops = trace.gpu_ops(
        attributed=True, ranges=False, columns=[*line, "kind", "name", "start_ns", "end_ns", "pid", "api_start_ns"]
    )
    ops = ops.select(
        *line,
        "start_ns",
        "end_ns",
        "api_start_ns",
        rank=pl.col("pid").cast(pl.Int64),
        cls=U.op_class(pl.col("kind"), pl.col("name")),
    )
    ranges = trace.ranges(columns=["range", "start_ns", "end_ns", "pid"], like=[glob_like(step)])
    steps = step_ranges(ranges.with_columns(pl.col("pid").cast(pl.Int64)), step).select(
        rank="pid", step=pl.col("range").cast(pl.String), step_start_ns="start_ns", step_end_ns="end_ns"
    )
    steps = steps.sort("step_start_ns")
    found = ops.sort("api_start_ns").join_asof(
        steps, left_on="api_start_ns", right_on="step_start_ns", by="rank", strategy="backward", check_sortedness=False
    )
    inside = pl.col("api_start_ns") < pl.col("step_end_ns")
    return found.select(
        *line,
        step=pl.when(inside).then("step"),
        step_start_ns=pl.when(inside).then("step_start_ns"),
        start_ns="start_ns",
        end_ns="end_ns",
        cls="cls",
    )


def _keys(keys: Sequence[str]) -> list[str]:
    return [*keys, *STEP]


def split(ops: pl.LazyFrame, keys: Sequence[str]):
    return ops, None


def start(sides: list, keys: Sequence[str]) -> Fold:
    return U.start(sides, _keys(keys))


def window(ops: pl.DataFrame, keys: Sequence[str], state: Fold) -> Fold:
    return U.window(ops, _keys(keys), state)


def close(state: Fold, sides: list, keys: Sequence[str]) -> pl.LazyFrame:
    return U.close(state, sides, _keys(keys))


def partial(ops: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    return U.partial(ops, _keys(keys))


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    line = timeline(_keys(keys))
    out = [c for c in line if c not in STEP]
    if not partials.collect_schema().names():
        return pl.LazyFrame(schema={**dict.fromkeys(out, pl.Null), **dict.fromkeys(COLUMNS, pl.Int64)})
    l0, l1, l3 = pl.col("l0"), pl.col("l1"), pl.col("l3")
    return (
        U.levels(partials, line)
        .with_columns(compute_ns=l0, nccl_ns=l3, exposed_ns=l1 - l0, overlapped_ns=l3 - (l1 - l0))
        .with_columns(overlap_pct=pl.when(pl.col("nccl_ns") > 0).then(pl.col("overlapped_ns") * 100.0 / pl.col("nccl_ns")))
        .select(*out, *COLUMNS)
        .sort([*out, "start_ns"], nulls_last=True)
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.overlap``)."""
    from ..render import view_charts

    return view_charts.overlap(table)
