"""Kernel time per (NVTX range, kernel): ``nsys stats --report cuda_gpu_kern_sum:nvtx-name``.

Each kernel (and, on request, each memory operation) belongs to the innermost NVTX range that
encloses the API call that launched it, on the launching thread (``nesting="all"``: to every
enclosing range). ``time_pct`` is the share of all kernel time in the table, as nsys's "Time (%)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from . import View
from . import stats as metrics
from .contract import option

VIEW = View(
    "kernels",
    "kernel time per NVTX range and kernel",
    splittable=True,
    twin="nsys stats --report cuda_gpu_kern_sum:nvtx-name",
    rows="(NVTX range, kernel)",
)


@dataclass(frozen=True)
class Options:
    """The options of ``kernels``."""

    names: Literal["short", "demangled", "op"] = option(
        "demangled",
        "--names",
        "Kernel names: demangled (with templates) or short (base name); op: demangled, with range names "
        "without PyTorch's per-call ids (seq, op_id, sizes).",
    )
    include_memops: bool = option(False, "--include-memops", "Also report memcpy and memset operations.")
    nesting: Literal["innermost", "all"] = option(
        "innermost", "--nesting", "Attribute to the innermost NVTX range, or to every enclosing one."
    )


MEASURED = {"duration_ns": "{}_ns"}
COLUMNS = ("range", "kernel", "instances", *metrics.timed())


def read(
    trace, by: Sequence[str], *, names: str = "demangled", include_memops: bool = False, nesting: str = "innermost"
) -> pl.LazyFrame:
    """Attributed GPU operations: ``by`` columns, ``range``, ``kernel`` and ``duration_ns``
    (``operations``)."""
    return operations(trace, by, names=names, include_memops=include_memops, nesting=nesting)


def operations(
    trace,
    by: Sequence[str],
    *,
    carry: Sequence[str] = (),
    names: str = "demangled",
    include_memops: bool = False,
    nesting: str = "innermost",
) -> pl.LazyFrame:
    """Attributed GPU operations: ``by`` columns, ``range``, ``kernel``, ``duration_ns``, and the
    columns of ``Trace.gpu_ops`` named in ``carry`` (``start_ns``, for calls in order).
    ``kernel`` is the demangled name (memory operations: their label); with ``names="short"``,
    nsys's short name and the demangled one joined by ``SEP``, so that kernels are still told
    apart by their full names until ``finalize`` (``short_names``) shows them short.
    ``names="op"``: demangled kernel names and range names without PyTorch's per-call ids
    (``read.names.op_name``)."""
    kinds = ("kernel", "memcpy", "memset") if include_memops else ("kernel",)
    wanted = ["short_name", "name"] if names == "short" else ["name"]
    ops = trace.gpu_ops(attributed=True, nesting=nesting, columns=[*by, *carry, *wanted, "duration_ns"], kinds=kinds)
    # A name holding the separator itself (a hostile export) shows it as U+FFFD: the key splits once.
    unsep = {c: pl.col(c).str.replace_all(SEP, "\ufffd", literal=True) for c in ("short_name", "name")}
    kernel = pl.concat_str(unsep["short_name"], pl.lit(SEP), unsep["name"]) if names == "short" else pl.col("name")
    if names == "op":
        from ..read.names import op_name

        return ops.select(*by, op_name(pl.col("range")).alias("range"), *carry, "duration_ns", kernel=kernel)
    return ops.select(*by, "range", *carry, "duration_ns", kernel=kernel)


SEP = "\x1f"  # the unit separator, in no kernel name: between the short and the full name


def short_names(frame: pl.DataFrame, column: str = "kernel") -> pl.DataFrame:
    """``column`` of short-and-full keys (``read`` with ``names="short"``) as unique short names
    (``tables.unique_short_names``); a column without keys is returned as it is."""
    from ..render.tables import unique_short_names

    keys = frame.get_column(column).cast(pl.String)
    named = keys.drop_nulls()
    if named.is_empty() or not named.str.contains(SEP, literal=True).all():
        return frame  # no names, or demangled names (one of which may hold the separator): as they are
    pairs = keys.unique().drop_nulls().str.split_exact(SEP, 1).struct.unnest()
    full = dict(zip(pairs["field_1"], pairs["field_0"], strict=True))
    shown = unique_short_names(full, full)
    mapping = {f"{short}{SEP}{name}": shown[name] for name, short in full.items()}
    return frame.with_columns(pl.col(column).cast(pl.String).replace_strict(mapping, default=None))


def partial(ops: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    return metrics.partial(ops, [*keys, "range", "kernel"], list(MEASURED))


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, "range", "kernel"]
    merged = metrics.merge(partials, groups, list(MEASURED))
    table = (
        metrics.finalize(merged, groups, MEASURED)
        .with_columns(time_pct=metrics.share("total_ns", keys))
        .select(*keys, *COLUMNS)
        .sort(["total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )
    return pl.defer(lambda: short_names(table.collect()), schema=table.collect_schema())


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.kernels``)."""
    from ..render import view_charts

    return view_charts.kernels(table)
