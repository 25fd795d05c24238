"""The tables behind ``nsys-tools report`` for exports: any view over one or many exports.

A report is one task per export (its view's partial table, read in bounded memory by
``chunked.py`` and cached in the user's cache folder) and one exact merge (the view's ``finalize``), so
the same code runs on threads here or on Dask workers (``engine.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import polars as pl

from .. import views
from ..errors import BadExport, NsysToolsError
from ..read import accounted, cache
from ..read.export import open_export, reading
from ..read.inputs import expand_inputs
from ..read.names import glob_regex
from ..read.trace import Trace
from ..read.trace import open as open_trace
from ..views import kernels
from ..views import stats as metrics
from . import chunked
from .engine import Local


def _per_file(
    path: Path, *, requests: tuple[chunked.Request, ...], named: tuple[bool, ...], nsys, reexport: bool, account: bool
) -> tuple[list[pl.DataFrame], pl.DataFrame | None]:
    """One export's partial tables of the ``requests`` (view, group-by columns, options),
    through the cache, those not there read together (``chunked.view_partials``); each with a
    ``file`` column where ``named`` says so; and with ``account`` the export's
    ``read.accounted.accounting``, counted in the same pass where a view is read in pieces."""
    with reading(path):
        ex = open_export(path, nsys, reexport=reexport)
        before = _identity(ex.path)
        keys = [
            f"view {view} partial by={','.join(by)} {' '.join(f'{k}={options[k]}' for k in sorted(options))}"
            for view, by, options in requests
        ]
        counted: list[pl.DataFrame] = []
        parts = cache.memo_all(
            ex, keys, lambda missing: chunked.view_partials(ex, [requests[i] for i in missing], counted if account else None)
        )
        counts = None
        if account:
            counts = accounted.accounting(Trace(ex), lambda: counted[0] if counted else chunked.accounting_counts(ex))
        if _identity(ex.path, full=len(before) == 4) != before:  # a table mixed from two files: not an answer
            cache.forget(ex.path)
            raise BadExport(
                path, "changed while it was read (size, time or file replaced)", "read it again once nothing writes it"
            )
    return [p.with_columns(file=pl.lit(str(path))) if n else p for p, n in zip(parts, named, strict=True)], counts


def _identity(path: Path, full: bool | None = None) -> tuple:
    """What changes when a file is written or replaced: device, inode, size, modification time."""
    import os

    try:
        st = os.stat(path)
    except OSError:
        return ()
    if full is False or full is None and os.path.exists(f"{path}-wal"):
        return (st.st_dev, st.st_ino)  # a reader that checkpoints the WAL writes the file itself: replacement only
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


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
    reexport: bool = False,
    accounting: dict[Path, pl.DataFrame] | None = None,
    notes: list[str] | None = None,
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
    instead of stopping the report. ``reexport``: a ``.sqlite`` with a ``.nsys-rep`` beside it is
    read through the report (exported again when the report is newer), not as given. With an
    ``accounting`` dict, each export read gets its ``read.accounted.accounting`` there (path ->
    frame; ``read.accounted.note`` says it in a line), counted in the pass that makes its table.
    Rows by device over several exports where one GPU id is in more than one of them (every node
    of a multi-node job has a GPU 0) are kept apart per export, as ``per_file`` does, and a line
    saying so goes to ``notes``.
    """
    globs = {"range_glob": range_glob, "kernel_glob": kernel_glob}
    read = {"nsys": nsys, "progress": progress, "engine": engine, "failures": failures, "reexport": reexport}
    asked = [(view, {"by": by, **options})]
    return view_tables(paths, asked, per_file=per_file, accounting=accounting, notes=notes, **globs, **read)[0]


def view_tables(
    paths: Sequence[str | Path],
    requests: Sequence[tuple[str, dict]],
    *,
    per_file: bool = False,
    range_glob: str | None = None,
    kernel_glob: str | None = None,
    nsys: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    engine=None,
    failures: list[NsysToolsError] | None = None,
    reexport: bool = False,
    accounting: dict[Path, pl.DataFrame] | None = None,
    notes: list[str] | None = None,
) -> list[pl.DataFrame]:
    """The tables of several views over ``paths``, each ``view_table``'s: ``requests`` are
    ``(view, options)``, ``by`` among the options; the rest as ``view_table`` takes it. Each
    export is one task that reads the partial tables of all of them, the views that read the
    same large tables from one read of them (``chunked.view_partials``)."""
    for view, _ in requests:
        views.get(view)  # an unknown view fails before any export is read
    files = expand_inputs(paths, reexport=reexport)
    asked = [
        (view, tuple(views.by_columns(options.get("by", ()))), {k: v for k, v in options.items() if k != "by"})
        for view, options in requests
    ]
    # Rows by device over several exports: each part names its export, so that one GPU id in
    # two exports (every node of a multi-node job has a GPU 0) stays two devices.
    named = tuple(per_file or ("gpu_id" in by and len(files) > 1) for _, by, _ in asked)
    account = accounting is not None
    read = partial(_per_file, requests=tuple(asked), named=named, nsys=nsys, reexport=reexport, account=account)
    results = (engine or Local()).map(read, files, progress, keep_going=failures is not None)
    done = [r for r in results if not isinstance(r, NsysToolsError)]
    if account:
        accounting.update((f, r[1]) for f, r in zip(files, results, strict=True) if not isinstance(r, NsysToolsError))
    if failures is not None:
        failures.extend(r for r in results if isinstance(r, NsysToolsError))
    globs = {"range_glob": range_glob, "kernel_glob": kernel_glob}
    return [
        _table(view, by, [r[0][i] for r in done], files, named[i], per_file, notes, **globs)
        for i, (view, by, _) in enumerate(asked)
    ]


def _table(
    view: str,
    by_cols: Sequence[str],
    parts: list[pl.DataFrame],
    files: list[Path],
    named: bool,
    per_file: bool,
    notes: list[str] | None,
    range_glob: str | None,
    kernel_glob: str | None,
) -> pl.DataFrame:
    """View ``view``'s table from the exports' partial tables (``parts``; ``named``: they carry
    their ``file``)."""
    shared = shared_devices(parts) if named and not per_file else {}
    if named and not per_file and not shared:
        parts = [p.drop("file") for p in parts]
    if shared and notes is not None:
        notes.append(
            "; ".join(
                f"GPU {gpu} is in {len(where)} exports ({', '.join(Path(f).name for f in where)})"
                for gpu, where in shared.items()
            )
            + ": rows by device are kept apart per export (the file column)"
        )
    keys = [*(["file"] if per_file or shared else []), *by_cols]
    if not parts:  # every export failed: an empty table of the view's columns
        return views.empty(view, keys)
    try:
        frame = views.finalize(view, pl.concat(parts, how="diagonal_relaxed").lazy(), keys).collect()
    except pl.exceptions.InvalidOperationError as exc:
        if "i128" not in str(exc):
            raise
        where = files[0] if len(files) == 1 else None
        raise NsysToolsError(
            where,
            f"the {view} table holds {metrics.TOO_LARGE} (more than 292 years of nanoseconds in one row)",
            "the export's times are not real durations; check it, or report fewer exports at once",
        ) from None
    for column, glob in (("range", range_glob), ("kernel", kernel_glob)):
        if glob and column not in frame.columns and "name" in frame.columns:
            column = "name"  # hist and pace name a kernel or a range by ``name``
        if glob:
            frame = frame.filter(pl.col(column).str.contains(glob_regex(glob)))
    return frame


def shared_devices(parts: Sequence[pl.DataFrame]) -> dict[int, list[str]]:
    """The GPU ids found in the partial tables of more than one export (``file`` column), with
    those exports in order."""
    seen: dict[int, list[str]] = {}
    for part in parts:
        if "gpu_id" not in part.columns or part.is_empty():
            continue
        for gpu, where in part.select("gpu_id", "file").unique(maintain_order=True).drop_nulls("gpu_id").iter_rows():
            seen.setdefault(gpu, [])
            if where not in seen[gpu]:
                seen[gpu].append(where)
    return {gpu: where for gpu, where in sorted(seen.items()) if len(where) > 1}


def kernel_summary(paths: Sequence[str | Path], **kw) -> pl.DataFrame:
    """Statistics per (range, kernel) over ``paths``: ``view_table(paths, "kernels", ...)``."""
    return view_table(paths, "kernels", **kw)


def named_ops(
    path: str | Path,
    *,
    names: str = "short",
    include_memops: bool = True,
    by: Sequence[str] = (),
    nsys=None,
    reexport: bool = False,
) -> pl.DataFrame:
    """One export's GPU operations with their innermost NVTX range: ``by`` columns (of
    ``views.by_columns``), ``range``, ``kernel``, ``start_ns``, ``duration_ns`` (through the
    cache, like the report)."""
    by = list(by)
    with reading(path), open_trace(path, nsys, reexport=reexport) as trace:
        options = f"names={names} memops={include_memops} by={','.join(by)} with start"

        def compute() -> pl.DataFrame:
            ops = kernels.operations(trace, by, carry=["start_ns"], names=names, include_memops=include_memops)
            # nsys's short name as it is (the key's first part): comparisons pair kernels by it
            kernel = pl.col("kernel").cast(pl.String).str.split(kernels.SEP).list.first()
            strings = [pl.col(c).cast(pl.String) for c in ("range", *by) if c in ("range", "gpu_name")]
            return ops.select(*by, "range", kernel, "start_ns", "duration_ns").with_columns(strings).collect()

        return cache.memo(trace.export, f"named ops {options}", compute)
