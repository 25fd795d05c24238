"""Kernel time per NVTX range: the facade behind ``nsys-tools report`` for plain exports."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Literal

import polars as pl

from . import attribute, cache, events, metrics
from . import schema as S
from .errors import NsysToolsError
from .export import Export, open_export, reading
from .inputs import expand_inputs

Names = Literal["short", "demangled"]


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


def _per_file(path: Path, *, nsys, names: Names, include_memops: bool, nesting: attribute.Nesting, whole: bool) -> pl.DataFrame:
    """One export's contribution: its summary (``whole``) or its named rows, through the cache."""
    with reading(path):
        ex = open_export(path, nsys)
        label = ["label"] if include_memops else []
        options = f"names={names} memops={include_memops} nesting={nesting}"

        def compute() -> pl.DataFrame:
            keys = ["range", "name_id", *label]
            ops = attributed(
                ex, names=names, include_memops=include_memops, nesting=nesting, keep=("name_id", *label, "duration_ns")
            )
            return _name((metrics.summarize(ops, keys) if whole else ops.select(*keys, "duration_ns")).collect(), ex)

        frame = cache.memo(ex, f"report {'summary' if whole else 'rows'} {options}", compute)
        return frame.with_columns(file=pl.lit(str(path)))


def named_ops(path: str | Path, *, names: Names = "short", include_memops: bool = True, nsys=None) -> pl.DataFrame:
    """One export's GPU operations with their innermost NVTX range: ``range``, ``kernel``,
    ``duration_ns`` (through the cache, like the report)."""
    return _per_file(Path(path), nsys=nsys, names=names, include_memops=include_memops, nesting="innermost", whole=False)


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
    failures: list[NsysToolsError] | None = None,
) -> pl.DataFrame:
    """Statistics per (range, kernel) over ``paths`` (files or folders of exports).

    One export: grouped on string ids, names attached to the few result rows. Several exports:
    read in parallel (``progress(done, total)`` after each); string ids differ between files,
    so names are attached per file before grouping; rows are aggregated across files, or kept
    apart with ``per_file`` (a leading ``file`` column). With a ``failures`` list, an export
    that cannot be read is appended to it and left out instead of stopping the report.
    """
    files = expand_inputs(paths)
    keyed = ["file"] if per_file else []
    whole = len(files) == 1  # one export: summarized on string ids, names attached last
    read = partial(_per_file, nsys=nsys, names=names, include_memops=include_memops, nesting=nesting, whole=whole)

    def work(path: Path) -> pl.DataFrame | None:
        try:
            return read(path)
        except NsysToolsError as err:
            if failures is None:
                raise
            failures.append(err)
            return None

    parts, done = [], 0
    with ThreadPoolExecutor(max_workers=min(os.cpu_count() or 1, len(files))) as pool:
        for part in pool.map(work, files):
            done += 1
            parts += [part] if part is not None else []
            if progress:
                progress(done, len(files))
    if not parts:  # every export failed: no rows, summarized into an empty table of the usual columns
        whole = False
        parts = [pl.DataFrame(schema={"file": pl.String, "range": pl.String, "kernel": pl.String, "duration_ns": pl.Int64})]
    frame = pl.concat(parts, how="vertical")
    if not whole:
        frame = metrics.summarize(frame.lazy(), [*keyed, "range", "kernel"]).collect()
    if range_glob:
        frame = frame.filter(pl.col("range").str.contains(glob_regex(range_glob)))
    if kernel_glob:
        frame = frame.filter(pl.col("kernel").str.contains(glob_regex(kernel_glob)))
    return frame.select(*keyed, *S.SUMMARY_COLUMNS).sort(
        ["total_ns", *keyed, "range", "kernel"], descending=[True] + [False] * (len(keyed) + 2)
    )
