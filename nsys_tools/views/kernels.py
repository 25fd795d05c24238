"""Kernel time per (NVTX range, kernel): ``nsys stats --report cuda_gpu_kern_sum:nvtx-name``.

Each kernel (and, on request, each memory operation) belongs to the innermost NVTX range that
encloses the API call that launched it, on the launching thread (``nesting="all"``: to every
enclosing range). ``time_pct`` is the share of all kernel time in the table, as nsys's "Time (%)".
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from .. import metrics

MEASURED = {"duration_ns": "{}_ns"}
COLUMNS = ("range", "kernel", "instances", *metrics.timed())


def read(
    trace, by: Sequence[str], *, names: str = "demangled", include_memops: bool = False, nesting: str = "innermost"
) -> pl.LazyFrame:
    """Attributed GPU operations: ``by`` columns, ``range``, ``kernel`` (demangled or short
    name; memory operations by their label) and ``duration_ns``."""
    name = "short_name" if names == "short" else "name"
    kinds = ("kernel", "memcpy", "memset") if include_memops else ("kernel",)
    ops = trace.gpu_ops(attributed=True, nesting=nesting, columns=[*by, name, "duration_ns"], kinds=kinds)
    return ops.select(*by, "range", "duration_ns", kernel=name)


def partial(ops: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    return metrics.partial(ops, [*keys, "range", "kernel"], list(MEASURED))


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    groups = [*keys, "range", "kernel"]
    merged = metrics.merge(partials, groups, list(MEASURED))
    return (
        metrics.finalize(merged, groups, MEASURED)
        .with_columns(time_pct=metrics.share("total_ns"))
        .select(*keys, *COLUMNS)
        .sort(["total_ns", *groups], descending=[True] + [False] * len(groups), nulls_last=True)
    )
