"""The tables behind ``nsys-tools report`` for exports: any view over one or many exports.

A report is one task per export (its view's partial table, read in bounded memory by
``chunked.py`` and cached beside the export) and one exact merge (the view's ``finalize``), so
the same code runs on threads here or on Dask workers (``engine.py``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path

import polars as pl

from . import cache, chunked, views
from .engine import Local
from .errors import BadExport
from .export import REPORT_SUFFIXES, open_export


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
    ex = open_export(path, nsys)
    detail = " ".join(f"{k}={options[k]}" for k in sorted(options))
    part = cache.memo(ex, f"view {view} partial by={','.join(by)} {detail}", lambda: chunked.view_partial(ex, view, by, options))
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
    **options,
) -> pl.DataFrame:
    """The ``view`` table (``nsys_tools.views``) over ``paths`` (files or folders of exports).

    ``by``: any of device, process, stream, as leading group-by columns; ``per_file`` keeps
    exports apart (a leading ``file`` column). Exports are read in parallel (``progress(done,
    total)`` after each), each into a partial table that is cached beside it; the partials
    merge exactly. ``range_glob`` and ``kernel_glob`` keep rows whose ``range`` or ``kernel``
    matches. ``options`` go to the view (``names``, ``include_memops``, ``nesting``,
    ``min_gap_ns``).
    """
    views.get(view)  # an unknown view fails before any export is read
    files = expand_inputs(paths)
    by_cols = tuple(views.by_columns(by))
    work = partial(_per_file, view=view, by=by_cols, per_file=per_file, nsys=nsys, options=options)
    parts = (engine or Local()).map(work, files, progress)
    keys = [*(["file"] if per_file else []), *by_cols]
    frame = views.finalize(view, pl.concat(parts, how="diagonal_relaxed").lazy(), keys).collect()
    for column, glob in (("range", range_glob), ("kernel", kernel_glob)):
        if glob:
            frame = frame.filter(pl.col(column).str.contains(glob_regex(glob)))
    return frame


def kernel_summary(paths: Sequence[str | Path], **kw) -> pl.DataFrame:
    """Statistics per (range, kernel) over ``paths``: ``view_table(paths, "kernels", ...)``."""
    return view_table(paths, "kernels", **kw)
