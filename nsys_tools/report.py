"""The tables behind ``nsys-tools report`` for exports: any view over one or many exports.

A report is one task per export (its view's partial table, read in bounded memory by
``chunked.py`` and cached beside the export) and one exact merge (the view's ``finalize``), so
the same code runs on threads here or on Dask workers (``engine.py``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import polars as pl

from . import cache, chunked, views
from .engine import Local
from .errors import NsysToolsError
from .export import open_export, reading
from .inputs import expand_inputs
from .trace import open as open_trace


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


def _per_file(path: Path, *, view: str, by: tuple[str, ...], per_file: bool, nsys, options: dict) -> pl.DataFrame:
    """One export's partial table of ``view``, through the cache beside it."""
    with reading(path):
        ex = open_export(path, nsys)
        detail = " ".join(f"{k}={options[k]}" for k in sorted(options))
        key = f"view {view} partial by={','.join(by)} {detail}"
        part = cache.memo(ex, key, lambda: chunked.view_partial(ex, view, by, options))
    return part.with_columns(file=pl.lit(str(path))) if per_file else part


def view_table(
    paths: Sequence[str | Path],
    view: str = "kernels",
    *,
    by: Sequence[str] = (),
    per_file: bool = False,
    range_glob: str | None = None,
    kernel_glob: str | None = None,
    nsys: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    engine=None,
    failures: list[NsysToolsError] | None = None,
    **options,
) -> pl.DataFrame:
    """The ``view`` table (``nsys_tools.views``) over ``paths`` (files or folders of exports).

    ``by``: any of device, process, stream, as leading group-by columns; ``per_file`` keeps
    exports apart (a leading ``file`` column). Each export is one task on ``engine``
    (``engine.Local()``, threads here, by default, or ``engine.Dask``; ``progress(done, total)``
    after each) that reads it into a partial table, cached beside it; the partials merge exactly.
    ``range_glob`` and ``kernel_glob`` keep rows whose ``range`` or ``kernel`` matches.
    ``options`` go to the view (``names``, ``include_memops``, ``nesting``, ``min_gap_ns``).
    With a ``failures`` list, an export that cannot be read is appended to it and left out
    instead of stopping the report.
    """
    views.get(view)  # an unknown view fails before any export is read
    files = expand_inputs(paths)
    by_cols = tuple(views.by_columns(by))
    keys = [*(["file"] if per_file else []), *by_cols]
    read = partial(_per_file, view=view, by=by_cols, per_file=per_file, nsys=nsys, options=options)
    results = (engine or Local()).map(read, files, progress, keep_going=failures is not None)
    parts = [r for r in results if not isinstance(r, NsysToolsError)]
    if failures is not None:
        failures.extend(r for r in results if isinstance(r, NsysToolsError))
    if not parts:  # every export failed: an empty table of the view's columns
        return views.empty(view, keys)
    frame = views.finalize(view, pl.concat(parts, how="diagonal_relaxed").lazy(), keys).collect()
    for column, glob in (("range", range_glob), ("kernel", kernel_glob)):
        if glob:
            frame = frame.filter(pl.col(column).str.contains(glob_regex(glob)))
    return frame


def kernel_summary(paths: Sequence[str | Path], **kw) -> pl.DataFrame:
    """Statistics per (range, kernel) over ``paths``: ``view_table(paths, "kernels", ...)``."""
    return view_table(paths, "kernels", **kw)


def named_ops(path: str | Path, *, names: str = "short", include_memops: bool = True, nsys=None) -> pl.DataFrame:
    """One export's GPU operations with their innermost NVTX range: ``range``, ``kernel``,
    ``start_ns``, ``duration_ns`` (through the cache, like the report)."""
    with reading(path), open_trace(path, nsys) as trace:
        options = f"names={names} memops={include_memops} with start"

        def compute() -> pl.DataFrame:
            ops = views.get("kernels").read(trace, ["start_ns"], names=names, include_memops=include_memops)
            return ops.select("range", pl.col("kernel").cast(pl.String), "start_ns", "duration_ns").collect()

        return cache.memo(trace.export, f"named ops {options}", compute)
