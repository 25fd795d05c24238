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


def _per_file(path: Path, *, nsys, names: Names, include_memops: bool, nesting: attribute.Nesting, whole: bool) -> pl.DataFrame:
    """One export's contribution: its summary (``whole``) or its named rows, through the cache."""
    ex = open_export(path, nsys)
    label = ["label"] if include_memops else []
    options = f"names={names} memops={include_memops} nesting={nesting}"

    def compute() -> pl.DataFrame:
        keys = ["range", "name_id", *label]
        ops = attributed(ex, names=names, include_memops=include_memops, nesting=nesting, keep=("name_id", *label, "duration_ns"))
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
) -> pl.DataFrame:
    """Statistics per (range, kernel) over ``paths`` (files or folders of exports).

    One export: grouped on string ids, names attached to the few result rows. Several exports:
    read in parallel (``progress(done, total)`` after each); string ids differ between files,
    so names are attached per file before grouping; rows are aggregated across files, or kept
    apart with ``per_file`` (a leading ``file`` column).
    """
    files = expand_inputs(paths)
    keyed = ["file"] if per_file else []
    work = partial(_per_file, nsys=nsys, names=names, include_memops=include_memops, nesting=nesting, whole=len(files) == 1)
    parts = []
    with ThreadPoolExecutor(max_workers=min(os.cpu_count() or 1, len(files))) as pool:
        for part in pool.map(work, files):
            parts.append(part)
            if progress:
                progress(len(parts), len(files))
    frame = pl.concat(parts, how="vertical")
    if len(files) > 1:
        frame = metrics.summarize(frame.lazy(), [*keyed, "range", "kernel"]).collect()
    if range_glob:
        frame = frame.filter(pl.col("range").str.contains(glob_regex(range_glob)))
    if kernel_glob:
        frame = frame.filter(pl.col("kernel").str.contains(glob_regex(kernel_glob)))
    return frame.select(*keyed, *S.SUMMARY_COLUMNS).sort(
        ["total_ns", *keyed, "range", "kernel"], descending=[True] + [False] * (len(keyed) + 2)
    )
