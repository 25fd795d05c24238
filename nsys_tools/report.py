"""Kernel time per NVTX range: the facade behind ``nsys-tools report`` for plain exports.

A report is one task per export (``export_counts``: how many operations took each duration, per
range and kernel, read in bounded memory and cached beside the export) and one exact merge
(``merge_counts``), so the same code runs in this process or on Dask workers (``engine.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Literal

import polars as pl

from . import attribute, cache, chunked, events, metrics
from . import schema as S
from .engine import Local
from .errors import BadExport
from .export import REPORT_SUFFIXES, Export, open_export

Names = Literal["short", "demangled"]


def expand_inputs(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; folders searched recursively for exports. A ``.sqlite`` beside a
    ``.nsys-rep`` of the same name is its export, so the report is read once."""
    found: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise BadExport(p, "no such file or folder", "check the path")
        if p.is_file():
            found.append(p)
            continue
        inside = sorted(q for q in p.rglob("*") if q.suffix in (".sqlite", *REPORT_SUFFIXES) and not q.name.startswith("."))
        sqlite = {q.with_suffix("") for q in inside if q.suffix == ".sqlite"}
        inside = [q for q in inside if q.suffix == ".sqlite" or q.with_suffix("") not in sqlite]
        if not inside:
            raise BadExport(p, "holds no .sqlite or .nsys-rep exports", "point at an export or a folder of them")
        found.extend(inside)
    return found


def gpu_ops(ex: Export, *, names: Names = "demangled", include_memops: bool = False) -> pl.LazyFrame:
    """Kernels (and optionally memory operations) as ``name_id``/``label`` rows with times.

    Kernels keep their string id in ``name_id``; memory operations (``include_memops``) carry a
    literal ``label`` such as ``[CUDA memcpy Device-to-Device]``, as nsys names them.
    """
    id_col = "short_name_id" if names == "short" else "demangled_name_id"
    cols = [*events.launch_keys(ex), "start_ns", "end_ns", "duration_ns"]
    kernels = events.kernels(ex, [*cols, id_col]).select(*cols, name_id=id_col)
    if not include_memops:
        return kernels
    label = pl.when(pl.col("op") == "memcpy").then(pl.format("[CUDA memcpy {}]", "copy_kind")).otherwise(pl.lit("[CUDA memset]"))
    memops = events.memops(ex).select(*cols, name_id=pl.lit(None, pl.Int64), label=label)
    return pl.concat([kernels, memops], how="diagonal")


def attributed(
    ex: Export,
    *,
    names: Names = "demangled",
    include_memops: bool = False,
    nesting: attribute.Nesting = "innermost",
    keep: Iterable[str] | None = None,
) -> pl.LazyFrame:
    """``gpu_ops`` with the enclosing NVTX ``range`` of each operation; ``keep`` narrows the
    operation columns carried along (exports hold millions of operations)."""
    ops = gpu_ops(ex, names=names, include_memops=include_memops)
    if keep is not None:
        ops = ops.select(*dict.fromkeys([*events.launch_keys(ex), *keep]))
    return attribute.project(ops, events.launch_calls(ex, ops), events.nvtx_ranges(ex), nesting)


def glob_regex(pattern: str) -> str:
    """A shell glob (``*``, ``?``, ``[seq]``) as an anchored regular expression."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and pattern.find("]", i + 2) > 0:
            j = pattern.find("]", i + 2)
            body = pattern[i + 1 : j]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "^(?s:" + "".join(out) + ")$"


def _name(df: pl.DataFrame, ex: Export) -> pl.DataFrame:
    """Attach kernel names to ``name_id`` and merge them with the memory-operation labels."""
    named = events.attach_names(ex, df, {"name_id": "name"})
    kernel = pl.coalesce("label", "name") if "label" in df.columns else pl.col("name")
    return named.with_columns(kernel=kernel).drop("name", "name_id", "label", strict=False)


def export_counts(
    path: Path, *, nsys=None, names: Names = "demangled", include_memops: bool = False, nesting: attribute.Nesting = "innermost"
) -> pl.DataFrame:
    """One export's mergeable part of the report: ``file, range, kernel, duration_ns, count``,
    how many operations of each (range, kernel) took each duration. Exact and compact (a few
    thousand rows for millions of kernels); read in bounded memory (``chunked.py``) and kept in
    the export's cache."""
    ex = open_export(path, nsys)
    label = ["label"] if include_memops else []
    keys = events.launch_keys(ex)
    by = ["range", "name_id", *label]

    def ops_of(window: Export) -> pl.LazyFrame:  # a label per memory operation, stored as a category
        ops = gpu_ops(window, names=names, include_memops=include_memops)
        return ops.select(*keys, "name_id", *[pl.col(c).cast(pl.Categorical) for c in label], "duration_ns")

    def count(ops: pl.LazyFrame) -> pl.LazyFrame:
        return ops.group_by(*by, "duration_ns").agg(count=pl.len().cast(pl.Int64))

    def compute() -> pl.DataFrame:
        tables = [S.KERNEL, S.MEMCPY, S.MEMSET] if include_memops else [S.KERNEL]
        counts = chunked.attributed_reduce(ex, ops_of, tables, count, nesting)
        counts = counts.group_by(*by, "duration_ns").agg(pl.col("count").sum())
        return _name(counts.with_columns(pl.col(c).cast(pl.String) for c in label), ex)

    options = f"names={names} memops={include_memops} nesting={nesting}"
    frame = cache.memo(ex, f"report counts {options}", compute)
    return frame.select(pl.lit(str(path)).alias("file"), "range", "kernel", "duration_ns", "count")


def merge_counts(parts: Sequence[pl.DataFrame], *, per_file: bool = False) -> pl.DataFrame:
    """The report's statistics from ``export_counts`` parts (any number, any order), per
    (range, kernel), or per (file, range, kernel) with ``per_file``."""
    keyed = ["file"] if per_file else []
    return metrics.summarize_counts(pl.concat(parts, how="vertical").lazy(), [*keyed, "range", "kernel"]).collect()


def kernel_summary(
    paths: Sequence[str | Path],
    *,
    range_glob: str | None = None,
    kernel_glob: str | None = None,
    names: Names = "demangled",
    include_memops: bool = False,
    nesting: attribute.Nesting = "innermost",
    per_file: bool = False,
    nsys: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    engine=None,
) -> pl.DataFrame:
    """Statistics per (range, kernel) over ``paths`` (files or folders of exports).

    Each export is one task on ``engine`` (``engine.Local()``, threads here, by default; or
    ``engine.Dask``), ``progress(done, total)`` after each; their parts are merged exactly, and
    rows are aggregated across files, or kept apart with ``per_file`` (a leading ``file`` column).
    """
    files = expand_inputs(paths)
    keyed = ["file"] if per_file else []
    work = partial(export_counts, nsys=nsys, names=names, include_memops=include_memops, nesting=nesting)
    frame = merge_counts((engine or Local()).map(work, files, progress), per_file=per_file)
    if range_glob:
        frame = frame.filter(pl.col("range").str.contains(glob_regex(range_glob)))
    if kernel_glob:
        frame = frame.filter(pl.col("kernel").str.contains(glob_regex(kernel_glob)))
    return frame.select(*keyed, *S.SUMMARY_COLUMNS).sort(
        ["total_ns", *keyed, "range", "kernel"], descending=[True] + [False] * (len(keyed) + 2)
    )
