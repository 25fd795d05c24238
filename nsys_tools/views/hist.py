"""Duration histograms: per kernel, the number of instances in each of ``bins`` equal-width
bins from its shortest to its longest duration (the last bin includes its upper edge, as
``numpy.histogram`` counts); or, with ``of="ranges"``, the same per NVTX range of the GPU time
each instance projects (its first operation's start to its last one's end, as the ranges view
projects it).

The partial keeps each group's durations as value counts (``metrics.partial``), so partials of
several exports merge exactly and the bins are drawn over the merged extremes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from ..read import frames as events
from . import View
from . import stats as metrics
from .contract import option

VIEW = View(
    "hist",
    "duration histogram per kernel (or per range)",
    splittable=True,
    twin="cuda_gpu_kern_hist recipe",
    top="name",
    whole=(("of", "ranges"),),  # read whole: a range instance's operations may fall in several pieces
    rows="kernel (or range) and duration bin",
)


@dataclass(frozen=True)
class Options:
    """The options of ``hist``."""

    of: Literal["kernels", "ranges"] = option(
        "kernels", "--of", "Of each kernel, or of each NVTX range's instances by the GPU time they project."
    )
    names: Literal["short", "demangled", "op"] = option(
        "demangled",
        "--names",
        "Kernel names: demangled (with templates) or short (base name); op: demangled, with range names "
        "without PyTorch's per-call ids (seq, op_id, sizes).",
    )


BINS = 10
COLUMNS = ("name", "bin", "bin_min_ns", "bin_max_ns", "instances", "share")
RANGE_NAME = ("domain", "range", "style")


def read(trace, by: Sequence[str], *, of: str = "kernels", names: str = "demangled") -> pl.LazyFrame:
    """``by`` columns, ``name`` (the kernel, or the range's text) and ``duration_ns``."""
    if of == "ranges":
        return projected(trace, by).select(*by, "duration_ns", name="range")
    name = "short_name" if names == "short" else "name"
    return trace.kernels(columns=[*by, name, "duration_ns"]).select(*by, "duration_ns", name=name)


def projected(trace, by: Sequence[str]) -> pl.LazyFrame:
    """One row per closed NVTX range instance that launched GPU work: ``by`` columns, its name,
    ``start_ns``/``end_ns`` of its first and last operation, ``duration_ns`` between them."""
    ops = trace.gpu_ops(attributed=True, nesting="all", columns=[*by, "start_ns", "end_ns"])
    ops = ops.filter(pl.col("range_instance").is_not_null() & (pl.col("range_end_ns") < events.NO_END))
    return (
        ops.group_by([*by, "range_instance", *RANGE_NAME])
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        .with_columns(duration_ns=pl.col("end_ns") - pl.col("start_ns"))
    )


def partial(rows: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    return metrics.partial(rows, [*keys, "name"], ["duration_ns"])


def bins_of(merged: pl.LazyFrame, groups: Sequence[str], bins: int = BINS) -> pl.LazyFrame:
    """Each group's histogram from its merged value counts: ``bins`` equal-width bins between
    its min and max (one bin where they are equal)."""
    lo, hi = pl.col("duration_ns:min"), pl.col("duration_ns:max")
    n = pl.when(hi > lo).then(bins).otherwise(1)
    width = (hi - lo).cast(pl.Float64) / n
    counted = (
        merged.select(*groups, lo.alias("lo"), hi.alias("hi"), n.alias("n"), width.alias("width"), pl.col("duration_ns:values"))
        .explode("duration_ns:values")
        .unnest("duration_ns:values")
        .with_columns(
            bin=pl.when(pl.col("width") > 0)
            .then(((pl.col("value") - pl.col("lo")) * pl.col("n") / (pl.col("hi") - pl.col("lo"))).floor().cast(pl.Int64))
            .otherwise(0)
            .clip(0, pl.col("n") - 1)
        )
    )
    # As numpy.histogram places a value near an edge: by the edges themselves.
    counted = (
        edges(counted, lower=pl.col("bin"), upper=pl.col("bin") + 1)
        .with_columns(
            bin=pl.when(pl.col("value") < pl.col("lower"))
            .then(pl.col("bin") - 1)
            .when((pl.col("value") >= pl.col("upper")) & (pl.col("bin") < pl.col("n") - 1))
            .then(pl.col("bin") + 1)
            .otherwise(pl.col("bin"))
        )
        .group_by([*groups, "bin"])
        .agg(instances=pl.col("len").sum().cast(pl.Int64))
    )
    every = (
        merged.select(
            *groups, lo.alias("lo"), hi.alias("hi"), n.alias("n"), width.alias("width"), pl.col("instances").alias("all")
        )
        .with_columns(bin=pl.int_ranges(0, pl.col("n")))
        .explode("bin")
    )
    joined = every.join(counted, on=[*groups, "bin"], how="left", nulls_equal=True)
    return (
        edges(joined, bin_min_ns=pl.col("bin"), bin_max_ns=pl.col("bin") + 1)
        .with_columns(
            pl.col("instances").fill_null(0),
            # The last edge is the longest duration itself, as numpy.linspace makes it.
            bin_max_ns=pl.when(pl.col("bin") == pl.col("n") - 1).then(pl.col("hi").cast(pl.Float64)).otherwise("bin_max_ns"),
        )
        .with_columns(share=pl.col("instances") / pl.col("all"))
    )


def edges(frame: pl.LazyFrame, **at: pl.Expr) -> pl.LazyFrame:
    """``frame`` with a column per ``at``: the bin edge for its ``k``, ``lo + k * (hi - lo) / n``
    computed as numpy.linspace computes it (the step, times k, plus lo, each rounded to a double).
    Computed on each batch's columns one operation at a time: in an expression, Polars' engines may
    fuse or reorder the float operations, which moves an edge by a unit in the last place, and a
    value on the edge into the next bin."""

    def edge(row: pl.Series) -> pl.Series:
        lo, hi, n, k = (row.struct.field(c).cast(pl.Float64) for c in ("lo", "hi", "n", "k"))
        return k * ((hi - lo) / n) + lo

    return frame.with_columns(
        pl.struct("lo", "hi", "n", k=k).map_batches(edge, return_dtype=pl.Float64, is_elementwise=True).alias(name)
        for name, k in at.items()
    )


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    coded, names = metrics.coded(partials)  # names as codes through the merge, the bins and the sort
    groups = [*keys, metrics.CODE]
    merged = metrics.merge(coded, groups, ["duration_ns"])
    order = merged.select(*groups, total=pl.col("duration_ns:total"))
    schema = merged.collect_schema()
    table = (
        bins_of(merged, groups)
        .join(order, on=groups, how="left", nulls_equal=True)
        # A categorical sorts by its codes, which depend on the order names were read: sort its text.
        .sort(
            ["total", *(_as_text(g, schema[g]) for g in groups), "bin"],
            descending=[True] + [False] * (len(groups) + 1),
            nulls_last=True,
        )
        .collect()
    )
    return metrics.decoded(table, names).select(*keys, *COLUMNS).lazy()


def _as_text(column: str, dtype: pl.DataType) -> pl.Expr:
    return pl.col(column).cast(pl.String) if isinstance(dtype, (pl.Categorical, pl.Enum)) else pl.col(column)


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.hist``)."""
    from ..render import view_charts

    return view_charts.hist(table)
