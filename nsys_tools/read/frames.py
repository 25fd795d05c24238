"""The tables of an export as frames: kernels, memory operations, API calls, NVTX ranges, GPUs,
processes, session. The readers under ``nsys_tools.read.trace`` (the public frame layer).

Each function takes an opened ``Export``. The large tables come back as LazyFrames with every
column of the export (``columns`` reads only those: exports hold millions of kernels); the small
ones come back eager. Times are integer nanoseconds. String ids stay integers here;
``attach_names`` resolves them through ``StringIds`` in one place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence

import polars as pl

from . import badrows
from . import schema as S
from .export import Export

CUDA_HINT = "was it captured with --trace=cuda (nsys profile -t cuda,nvtx)?"
NO_END = (1 << 63) - 1  # an NVTX range still open when the capture stopped
TIMES = ("start", "end")
# A GPU operation with no start or end time (an edited export's; nsys declares them NOT NULL)
# is in no frame: every figure is timed. ``untimed`` counts them for the report's accounting.
TIMED, UNTIMED = '"start" IS NOT NULL AND "end" IS NOT NULL', '"start" IS NULL OR "end" IS NULL'


def _in_ids(column: str, ids: Iterable[int | None]) -> str:
    """A SQL filter: ``column`` is one of ``ids`` (passed as one JSON array, however many)."""
    wanted = json.dumps(sorted({int(i) for i in ids if i is not None}))
    return f"{column} IN (SELECT value FROM json_each('{wanted}'))"


def strings(ex: Export, ids: Iterable[int]) -> pl.DataFrame:
    """``StringIds`` rows for ``ids`` only: the one place string ids become text. An id held
    twice (nsys makes it the primary key; an edited file may not) is an error naming the table:
    joining through it would count every row that names it twice."""
    out = ex.fetch(f"SELECT id, value FROM {S.STRINGS} WHERE {_in_ids('id', ids)}", {"id": pl.Int64, "value": pl.String})
    twice = out.filter(pl.col("id").is_duplicated())["id"].unique().sort()
    if twice.len():
        from ..errors import BadExport

        raise BadExport(
            ex.source,
            f"{S.STRINGS} holds {twice.len()} id(s) more than once (first: {twice[0]}), so names would count twice",
            "it is not an unmodified Nsight Systems export; export it again",
        )
    return out


RESOLVED = "__resolved"  # a name resolved through StringIds, before it takes its column's place


def attach_names(ex: Export, df: pl.DataFrame, columns: Mapping[str, str], dtype=pl.String) -> pl.DataFrame:
    """Add a text column for each id column present in ``df``: ``{"short_name_id": "short_name"}``
    (``dtype=pl.Categorical`` for names repeated over millions of rows).

    Where ``df`` already has a text column of that name (some exports carry an all-NULL ``name``
    beside ``nameId``), the resolved name wins; the text stays only where it resolves to none
    and is not empty. No join suffix is ever left behind."""
    columns = {i: n for i, n in columns.items() if i in df.columns}
    if not columns:
        return df
    ids = pl.concat([df.get_column(c) for c in columns], how="vertical").unique().drop_nulls()
    table = strings(ex, ids.to_list()).with_columns(pl.col("value").cast(pl.String))
    for id_col, name_col in columns.items():
        df = df.join(table.rename({"id": id_col, "value": RESOLVED}), on=id_col, how="left")
        resolved = pl.col(RESOLVED)
        if name_col in df.columns:
            text = pl.col(name_col).cast(pl.String)
            resolved = pl.coalesce(resolved, pl.when(text != "").then(text))
        df = df.with_columns(resolved.cast(dtype).alias(name_col)).drop(RESOLVED)
    return df


def cuda_hint(ex: Export) -> str:
    """Why an export may lack CUDA tables: not traced, or traced with nothing launched."""
    if ex.has("META_DATA_CAPTURE"):
        with ex.connect() as con:
            row = con.execute(
                "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%COLLECT_CUDA_TRACE' AND value = 'true'"
            ).fetchone()
        if row:
            return "CUDA was traced but no kernel ran: did the program launch GPU work inside the capture range?"
    return CUDA_HINT


def fields(ex: Export, table: str, known: tuple[S.Field, ...], columns: Iterable[str] | None) -> list[S.Field]:
    """The fields of ``table`` to read: all of them (every export column), or those in ``columns``."""
    every = S.all_fields(known, ex.tables.get(table, ()))
    if columns is None:
        return every
    wanted = set(columns)
    return [f for f in every if f.name in wanted]


def _timed(ex: Export, table: str) -> str:
    """The filter that leaves out ``table``'s operations without a time (where the export lets
    one be NULL) and those that end before they start (``read.badrows``)."""
    return f"{TIMED} AND {badrows.KEPT}" if ex.nullable(table, TIMES) else badrows.KEPT


def backwards(ex: Export) -> pl.LazyFrame:
    """One row (its ``kind``) per kernel, memcpy or memset that ends before it starts: those the
    other frames leave out (``read.badrows``)."""
    return _kinds(ex, badrows.BACKWARDS, lambda table: True)


def untimed(ex: Export) -> pl.LazyFrame:
    """One row (its ``kind``) per kernel, memcpy or memset with no start or end time: those the
    other frames leave out. Read only where the export lets a time be NULL."""
    return _kinds(ex, UNTIMED, lambda table: ex.nullable(table, TIMES))


def _kinds(ex: Export, where: str, read: Callable[[str], bool]) -> pl.LazyFrame:
    """One row (its ``kind``) per GPU operation matching ``where``, in the tables where ``read``."""
    frames = [
        ex.select(table, fields(ex, table, known, ["correlation_id"]), where).with_columns(kind=pl.lit(kind)).select("kind")
        for table, known, kind in (
            (S.KERNEL, S.KERNEL_FIELDS, "kernel"),
            (S.MEMCPY, S.MEMCPY_FIELDS, "memcpy"),
            (S.MEMSET, S.MEMSET_FIELDS, "memset"),
        )
        if ex.has(table) and read(table)
    ]
    return pl.concat(frames) if frames else pl.LazyFrame(schema={"kind": pl.String})


def kernels(ex: Export, columns: Iterable[str] | None = None) -> pl.LazyFrame:
    """One row per kernel execution with a start and an end time, every column of the kernel
    table and ``duration_ns`` (or only ``columns``)."""
    if not ex.has(S.KERNEL):
        ex.require(S.KERNEL, cuda_hint(ex))
    selected = fields(ex, S.KERNEL, S.KERNEL_FIELDS, columns)
    names = [f.sources for f in selected if f.name in ("short_name_id", "demangled_name_id")]
    ex.check_columns(S.KERNEL, [*S.REQUIRED_COLUMNS[S.KERNEL], *names])
    return ex.select(S.KERNEL, selected, _timed(ex, S.KERNEL))


def copy_kinds(ex: Export) -> pl.DataFrame:
    """Memcpy kind ids and their labels, from the export's enum table or, where older exports
    carry none, from CUPTI's list."""
    if ex.has(S.MEMCPY_KIND_ENUM) and "label" in ex.tables[S.MEMCPY_KIND_ENUM]:
        with ex.connect() as con:
            rows = con.execute(f"SELECT id, label FROM {S.MEMCPY_KIND_ENUM}").fetchall()
    else:
        rows = list(S.MEMCPY_KINDS.items())
    return pl.DataFrame(rows, schema={"copy_kind": pl.Int64, "copy_kind_name": pl.String}, orient="row")


def memops(ex: Export, columns: Iterable[str] | None = None, kinds: Iterable[str] = ("memcpy", "memset")) -> pl.LazyFrame:
    """Memcpy and memset operations with a start and an end time, every column of both tables
    (or only ``columns``; only the tables of ``kinds``), with ``kind`` ("memcpy" | "memset"),
    ``copy_kind`` as text, ``name`` as nsys labels them (``[CUDA memcpy Device-to-Host]``,
    ``[CUDA memset]``) and ``duration_ns``."""
    wanted = None if columns is None else {*columns, "copy_kind"}
    tables = [table for table, kind in ((S.MEMCPY, "memcpy"), (S.MEMSET, "memset")) if kind in set(kinds) and ex.has(table)]
    frames = []
    for table in tables:
        ex.check_columns(table)
    if S.MEMCPY in tables:
        frames.append(
            ex.select(S.MEMCPY, fields(ex, S.MEMCPY, S.MEMCPY_FIELDS, wanted), _timed(ex, S.MEMCPY))
            .join(copy_kinds(ex).lazy(), on="copy_kind", how="left")
            .with_columns(
                kind=pl.lit("memcpy"),
                copy_kind=pl.col("copy_kind_name").fill_null(pl.format("kind {}", "copy_kind")),
            )
            .drop("copy_kind_name")
            .with_columns(name=pl.format("[CUDA memcpy {}]", "copy_kind"))
        )
    if S.MEMSET in tables:
        frames.append(
            ex.select(S.MEMSET, fields(ex, S.MEMSET, S.MEMSET_FIELDS, wanted), _timed(ex, S.MEMSET)).with_columns(
                kind=pl.lit("memset"), copy_kind=pl.lit(None, pl.String), name=pl.lit("[CUDA memset]")
            )
        )
    if not frames and not (ex.has(S.RUNTIME) or ex.has(S.DRIVER)):
        ex.require(S.RUNTIME, cuda_hint(ex))  # no copy, and no CUDA call either: not traced, not "no copies"
    if not frames:
        empty = {f.name: pl.Int64 for f in S.MEMSET_FIELDS if wanted is None or f.name in wanted}
        return pl.LazyFrame(schema={**empty, "kind": pl.String, "copy_kind": pl.String, "name": pl.String})
    return pl.concat(frames, how="diagonal_relaxed")


def _like_any(column: str, patterns: Iterable[str]) -> str:
    """SQL: ``column`` matches one of the ``LIKE`` ``patterns`` (their quotes escaped)."""
    return " OR ".join("{} LIKE '{}'".format(column, p.replace("'", "''")) for p in patterns)


def _named_like(id_column: str, patterns: Iterable[str]) -> str:
    """SQL: the string id in ``id_column`` names a text that matches one of the ``patterns``."""
    return f"{id_column} IN (SELECT id FROM {S.STRINGS} WHERE {_like_any('value', patterns)})"


# API calls that enqueue GPU work are named like these; ``launch_calls`` falls back to an exact
# lookup for any operation whose call is not among them.
LAUNCH_NAMES = ("%Launch%", "%Memcpy%", "%Memset%", "%Prefetch%")


def api_calls(
    ex: Export,
    *,
    launches_only: bool = False,
    like: Sequence[str] = (),
    correlation_ids: Iterable[int] | None = None,
    columns: Iterable[str] | None = None,
) -> pl.LazyFrame:
    """CUDA runtime and driver API calls: all of them, only those named like launches or like
    one of the SQL ``LIKE`` patterns in ``like`` (a cheap filter on the name id; ``LIKE`` ignores
    ASCII case, so the caller narrows further where case matters), or those with the given
    correlation ids (a scan of the table); every column, or only ``columns``; ``global_pid``
    comes with ``global_tid``."""
    wanted = None if columns is None else set(columns)
    tables = [t for t in (S.RUNTIME, S.DRIVER) if ex.has(t)]
    if not tables:
        ex.require(S.RUNTIME, cuda_hint(ex))
    where, lookup = "", correlation_ids is not None
    patterns = LAUNCH_NAMES if launches_only else tuple(like)
    if patterns:
        where = _named_like("nameId", patterns)
    if correlation_ids is not None:
        where = _in_ids("correlationId", correlation_ids)
    for t in tables:
        ex.check_columns(t)
    frames = [ex.select(t, fields(ex, t, S.API_FIELDS, wanted), where, lookup=lookup) for t in tables]
    frames = pl.concat(frames, how="diagonal_relaxed")
    if "global_tid" not in frames.collect_schema().names():
        return frames
    return frames.with_columns(global_pid=global_pid(pl.col("global_tid")))


def launch_calls(ex: Export, ops: pl.LazyFrame, *, names: bool = True) -> pl.LazyFrame:
    """The API calls that launched ``ops``: the launch-named calls, plus an exact lookup of the
    correlation ids still missing (none, in every export seen so far); ``names``: with their
    ``api_name_id``.

    A correlation id names one launch in a process, but a runtime may record several calls
    for it: older CUDA runtimes write ``cudaLaunchKernel`` and the ``cudaLaunchKernel_v7000`` it
    wraps. Only the outermost call (earliest start, then latest end) is kept, so each operation
    matches one call and is counted once; ``calls`` says how many calls recorded its launch.
    """
    cols = ("api_start_ns", "api_end_ns", "global_tid", "correlation_id", *(("api_name_id",) if names else ()))
    calls = api_calls(ex, launches_only=True, columns=cols)
    missing = ops.join(calls, on="correlation_id", how="anti").select(pl.col("correlation_id").drop_nulls().unique()).collect()
    if missing.height:
        calls = pl.concat([calls, api_calls(ex, correlation_ids=missing["correlation_id"], columns=cols)])
    calls = calls.select(*cols, "global_pid").collect()
    ids = calls.get_column("correlation_id")
    once = pl.lit(1, pl.UInt32).alias("calls")
    if ids.n_unique() == len(ids):  # the common case, decided without hashing pairs
        return calls.lazy().with_columns(once)
    per_process = calls.group_by("global_pid").agg(pl.col("correlation_id").n_unique(), n=pl.len())
    if (per_process["correlation_id"] == per_process["n"]).all():  # processes reuse ids, none twice
        return calls.lazy().with_columns(once)
    first = (pl.col("global_pid") != pl.col("global_pid").shift(1)) | (
        pl.col("correlation_id") != pl.col("correlation_id").shift(1)
    )
    ordered = calls.sort(["global_pid", "correlation_id", "api_start_ns", "api_end_ns"], descending=[False, False, False, True])
    ordered = ordered.with_columns(calls=pl.len().over("global_pid", "correlation_id"))
    return ordered.filter(first.fill_null(True)).lazy()


def global_pid(global_tid: pl.Expr) -> pl.Expr:
    """The serialized process id (``globalPid``) of a serialized thread id (``globalTid``)."""
    return (global_tid // (1 << S.TID_BITS)) * (1 << S.TID_BITS)


def os_id(serialized: pl.Expr, *, thread: bool = False) -> pl.Expr:
    """The operating system's process id (or thread id) inside a serialized ``globalTid`` or ``globalPid``."""
    shift = 0 if thread else S.TID_BITS
    return (serialized // (1 << shift)) % (1 << S.TID_BITS)


NVTX_COLUMNS = ("start_ns", "end_ns", "global_tid", "style", "range", "domain")


def nvtx_ranges(ex: Export, columns: Iterable[str] | None = None, *, like: Sequence[str] = ()) -> pl.LazyFrame:
    """NVTX push/pop and start/end ranges with their text (inline ``text`` or ``textId``) and domain;
    ``like``: only those whose text matches one of these SQL ``LIKE`` patterns (filtered as the
    export is read; ASCII case is ignored, so the caller narrows further where case matters, and
    ``range_instance`` then numbers the matching ranges only).

    Columns: ``range_instance, start_ns, end_ns, global_tid, style ("pushpop" | "startend"), range,
    domain``, then every other column of the NVTX table (or ``columns`` only). A range still open
    at the end of the capture gets ``end_ns`` = the largest int64. As nsys projects them, only
    ranges that end on the thread they started on are kept. Exports without an NVTX table give
    an empty frame: "no ranges" is information, not an error.
    """
    out_schema = {
        "range_instance": pl.UInt32,
        **{c: pl.String if c in ("style", "range", "domain") else pl.Int64 for c in NVTX_COLUMNS},
    }
    if not ex.has(S.NVTX):
        return pl.LazyFrame(schema=out_schema)
    ex.check_columns(S.NVTX)
    needed = {"start_ns", "end_ns", "event_type", "global_tid", "end_global_tid", "text", "text_id", "domain_id"}
    wanted = None if columns is None else {*columns, *needed}
    types = S.NVTX_PUSHPOP + S.NVTX_STARTEND + (S.NVTX_DOMAIN_CREATE,)
    where = f"eventType IN ({','.join(map(str, types))})"
    if like:
        texts = [_like_any("text", like)] if "text" in ex.tables[S.NVTX] else []
        if "textId" in ex.tables[S.NVTX]:
            texts.append(_named_like("textId", like))
        where += f" AND (eventType = {S.NVTX_DOMAIN_CREATE} OR {' OR '.join(texts)})"  # domains are named by their own rows
    raw = ex.select(S.NVTX, fields(ex, S.NVTX, S.NVTX_FIELDS, wanted), where).collect()
    inline = pl.when(pl.col("text") != "").then("text")  # a resolved textId wins over empty inline text
    raw = attach_names(ex, raw, {"text_id": "text_from_id"}).with_columns(
        range=pl.coalesce("text_from_id", inline, "text"), global_pid=global_pid(pl.col("global_tid"))
    )
    domains = (
        raw.filter(pl.col("event_type") == S.NVTX_DOMAIN_CREATE)
        .select("global_pid", "domain_id", domain=pl.col("range"))
        .unique(subset=["global_pid", "domain_id"], keep="last")
    )
    ranges = (
        raw.filter(pl.col("event_type") != S.NVTX_DOMAIN_CREATE)
        .filter(pl.col("end_global_tid").is_null() | (pl.col("end_global_tid") == pl.col("global_tid")))
        .join(domains, on=["global_pid", "domain_id"], how="left")
        .with_row_index("range_instance")
    )
    own = ranges.select(
        "range_instance",
        "start_ns",
        pl.col("end_ns").fill_null(NO_END),
        "global_tid",
        style=pl.when(pl.col("event_type").is_in(S.NVTX_PUSHPOP)).then(pl.lit("pushpop")).otherwise(pl.lit("startend")),
        range=pl.col("range").fill_null(""),
        domain=pl.col("domain"),
    )
    rest = ranges.drop(*own.columns, "text", "text_from_id", "global_pid", strict=False)
    if columns is not None:
        rest = rest.select([c for c in rest.columns if c in set(columns)])
    return pl.concat([own, rest], how="horizontal").lazy()


def gpus(ex: Export) -> pl.DataFrame:
    """One row per GPU: id, name, SMs, memory bandwidth, L2 size. Empty when the export has no GPU table."""
    table = ex.first(S.GPUS)
    if table is None:
        return pl.DataFrame(schema={f.name: (pl.String if f.dtype == "str" else pl.Int64) for f in S.GPU_FIELDS})
    return ex.select(table, S.GPU_FIELDS).collect()


def devices(ex: Export) -> pl.DataFrame:
    """Which GPU each process's CUDA device is: ``pid`` (the OS process id, null where the export
    maps devices for all processes at once), ``device_id`` (as activity records hold it),
    ``gpu_id`` and ``gpu_name``. Exports before 2023 have no per-process map; there the device
    id is the GPU's ``cuDevice`` ordinal, or its id in the GPU table."""
    g = gpus(ex)
    by_ordinal = g.select(
        pid=pl.lit(None, pl.Int64), device_id=pl.coalesce("cuda_device", "gpu_id"), gpu_id="gpu_id", gpu_name="gpu_name"
    )
    if not ex.has(S.CUDA_DEVICE):
        return by_ordinal
    per_process = (
        ex.select(S.CUDA_DEVICE, S.CUDA_DEVICE_FIELDS).collect().join(g.select("gpu_id", "gpu_name"), on="gpu_id", how="left")
    )
    return pl.concat([per_process.select(by_ordinal.columns), by_ordinal])


def processes(ex: Export) -> pl.DataFrame:
    """One row per process the export names: ``global_pid, pid, process_name`` (empty where it names none)."""
    if not ex.has(S.PROCESSES):
        return pl.DataFrame(schema={"global_pid": pl.Int64, "pid": pl.Int64, "process_name": pl.String})
    return ex.select(S.PROCESSES, S.PROCESS_FIELDS).collect().unique("global_pid", keep="last")


def session(ex: Export) -> dict[str, object]:
    """Export metadata: nsys version, schema version, capture start (when recorded), driver."""
    meta: dict[str, object] = {"file": str(ex.source)}
    table = ex.first(S.EXPORT_META)
    if table:
        with ex.connect() as con:
            rows = dict(con.execute(f"SELECT name, value FROM {table}").fetchall())
        meta["nsys_version"] = rows.get("EXPORT_PRODUCT_VERSION")
        meta["schema_version"] = rows.get("EXPORT_SCHEMA_VERSION")
    if ex.has(S.SESSION_START):
        with ex.connect() as con:
            row = con.execute(f"SELECT utcEpochNs, utcTime FROM {S.SESSION_START}").fetchone()
        if row:
            meta["start_utc_ns"], meta["start_utc"] = row
    if ex.has(S.SYSTEM_ENV):
        with ex.connect() as con:
            row = con.execute(f"SELECT value FROM {S.SYSTEM_ENV} WHERE name = 'NvDriverVersion'").fetchone()
        if row:
            meta["driver"] = row[0]
    return meta
