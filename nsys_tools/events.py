"""The standard frames of an export: kernels, memory operations, API calls, NVTX ranges, GPUs, session.

Each function takes an opened ``Export`` and returns a LazyFrame (``gpus`` and ``session``
are small and come back eager). Times are integer nanoseconds. String ids stay integers;
``attach_names`` resolves them through ``StringIds`` in one place, after joins and grouping.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import polars as pl

from . import schema as S
from .export import Export

CUDA_HINT = "was it captured with --trace=cuda (nsys profile -t cuda,nvtx)?"
NO_END = (1 << 63) - 1  # an NVTX range still open when the capture stopped


def _in_ids(column: str, ids: Iterable[int | None]) -> str:
    """A SQL filter: ``column`` is one of ``ids`` (passed as one JSON array, however many)."""
    wanted = json.dumps(sorted({int(i) for i in ids if i is not None}))
    return f"{column} IN (SELECT value FROM json_each('{wanted}'))"


def strings(ex: Export, ids: Iterable[int]) -> pl.DataFrame:
    """``StringIds`` rows for ``ids`` only: the one place string ids become text."""
    return ex.fetch(f"SELECT id, value FROM {S.STRINGS} WHERE {_in_ids('id', ids)}", {"id": pl.Int64, "value": pl.String})


def attach_names(ex: Export, df: pl.DataFrame, columns: Mapping[str, str]) -> pl.DataFrame:
    """Add a text column for each id column: ``{"short_name_id": "kernel"}``."""
    ids = pl.concat([df.get_column(c) for c in columns], how="vertical").unique().drop_nulls()
    table = strings(ex, ids.to_list())
    for id_col, name_col in columns.items():
        df = df.join(table.rename({"id": id_col, "value": name_col}), on=id_col, how="left")
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


def launch_keys(ex: Export, table: str = S.KERNEL) -> list[str]:
    """The columns that tie an activity record to its launching call: the process and the
    correlation id, or the correlation id alone where the export records no process."""
    return ["pid", "correlation_id"] if "globalPid" in ex.tables.get(table, ()) else ["correlation_id"]


def kernels(ex: Export, columns: Iterable[str] | None = None) -> pl.LazyFrame:
    """One row per kernel execution, with launch configuration and resource usage (or only
    ``columns`` of them, read alone: exports hold millions of kernels)."""
    if not ex.has(S.KERNEL):
        ex.require(S.KERNEL, cuda_hint(ex))
    wanted = set(columns or [f.name for f in S.KERNEL_FIELDS]) | {"start_ns", "end_ns"}
    fields = [f for f in S.KERNEL_FIELDS if f.name in wanted]
    ex.check_columns(S.KERNEL, [*S.REQUIRED_COLUMNS[S.KERNEL], *(f.sources for f in fields if f.name.endswith("_name_id"))])
    return ex.select(S.KERNEL, fields).with_columns(duration_ns=pl.col("end_ns") - pl.col("start_ns"))


def memops(ex: Export) -> pl.LazyFrame:
    """Memcpy and memset operations, with ``op`` ("memcpy" | "memset"), ``copy_kind`` and ``bytes``."""
    frames = []
    for table in (S.MEMCPY, S.MEMSET):
        if ex.has(table):
            ex.check_columns(table)
    if ex.has(S.MEMCPY):
        kinds = pl.DataFrame(
            {"copy_kind": list(S.MEMCPY_KINDS), "copy_kind_name": list(S.MEMCPY_KINDS.values())},
            schema={"copy_kind": pl.Int64, "copy_kind_name": pl.String},
        ).lazy()
        frames.append(
            ex.select(S.MEMCPY, S.MEMCPY_FIELDS)
            .join(kinds, on="copy_kind", how="left")
            .select(pl.exclude("copy_kind", "copy_kind_name"), op=pl.lit("memcpy"), copy_kind=pl.col("copy_kind_name"))
        )
    if ex.has(S.MEMSET):
        frames.append(ex.select(S.MEMSET, S.MEMSET_FIELDS).with_columns(op=pl.lit("memset"), copy_kind=pl.lit(None, pl.String)))
    if not frames:
        return pl.LazyFrame(
            schema={**{f.name: pl.Int64 for f in S.MEMSET_FIELDS}, "op": pl.String, "copy_kind": pl.String}
        ).with_columns(duration_ns=pl.lit(0, pl.Int64))
    return pl.concat(frames, how="vertical").with_columns(duration_ns=pl.col("end_ns") - pl.col("start_ns"))


# API calls that enqueue GPU work are named like these; ``launch_calls`` falls back to an exact
# lookup for any operation whose call is not among them.
LAUNCH_NAMES = ("%Launch%", "%Memcpy%", "%Memset%", "%Prefetch%")


def api_calls(
    ex: Export, *, launches_only: bool = False, correlation_ids: Iterable[int] | None = None, columns: Iterable[str] | None = None
) -> pl.LazyFrame:
    """CUDA runtime and driver API calls: all of them, only those named like launches (a cheap
    filter on the name id), or those with the given correlation ids (a scan of the table);
    ``columns`` reads only those (``tid`` is always read, for ``pid``)."""
    columns = None if columns is None else {*columns, "tid"}
    tables = [t for t in (S.RUNTIME, S.DRIVER) if ex.has(t)]
    if not tables:
        ex.require(S.RUNTIME, cuda_hint(ex))
    where = ""
    if launches_only:
        names = " OR ".join(f"value LIKE '{p}'" for p in LAUNCH_NAMES)
        where = f"nameId IN (SELECT id FROM {S.STRINGS} WHERE {names})"
    if correlation_ids is not None:
        where = _in_ids("correlationId", correlation_ids)
    fields = S.API_FIELDS if columns is None else [f for f in S.API_FIELDS if f.name in columns]
    for t in tables:
        ex.check_columns(t)
    frames = [ex.select(t, fields, where) for t in tables]
    return pl.concat(frames, how="vertical").with_columns(pid=_pid(pl.col("tid")))


def launch_calls(ex: Export, ops: pl.LazyFrame) -> pl.LazyFrame:
    """The API calls that launched ``ops``: the launch-named calls, plus an exact lookup of the
    correlation ids still missing (none, in every export seen so far). A correlation id names
    one call in a process, so each operation matches at most one of them."""
    cols = ("api_start_ns", "api_end_ns", "tid", "correlation_id")
    calls = api_calls(ex, launches_only=True, columns=cols)
    missing = ops.join(calls, on="correlation_id", how="anti").select(pl.col("correlation_id").drop_nulls().unique()).collect()
    if missing.height:
        calls = pl.concat([calls, api_calls(ex, correlation_ids=missing["correlation_id"], columns=cols)])
    return calls


def _pid(tid: pl.Expr) -> pl.Expr:
    """The serialized process id (``globalPid``) of a serialized thread id (``globalTid``)."""
    return (tid // (1 << S.TID_BITS)) * (1 << S.TID_BITS)


def nvtx_ranges(ex: Export) -> pl.LazyFrame:
    """NVTX push/pop and start/end ranges with their text (inline ``text`` or ``textId``) and domain.

    Columns: ``start_ns, end_ns, tid, style ("pushpop" | "startend"), range, domain``. A range
    still open at the end of the capture gets ``end_ns`` = the largest int64. Exports without an
    NVTX table give an empty frame: "no ranges" is information, not an error.
    """
    out_schema = {
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "tid": pl.Int64,
        "style": pl.String,
        "range": pl.String,
        "domain": pl.String,
    }
    if not ex.has(S.NVTX):
        return pl.LazyFrame(schema=out_schema)
    ex.check_columns(S.NVTX)
    types = S.NVTX_PUSHPOP + S.NVTX_STARTEND + (S.NVTX_DOMAIN_CREATE,)
    raw = ex.select(S.NVTX, S.NVTX_FIELDS, f"eventType IN ({','.join(map(str, types))})").collect()
    raw = attach_names(ex, raw, {"text_id": "text_from_id"}).with_columns(
        range=pl.coalesce("text", "text_from_id"), pid=_pid(pl.col("tid"))
    )
    domains = (
        raw.filter(pl.col("event_type") == S.NVTX_DOMAIN_CREATE)
        .select("pid", "domain_id", domain=pl.col("range"))
        .unique(subset=["pid", "domain_id"], keep="last")
    )
    ranges = raw.filter(pl.col("event_type") != S.NVTX_DOMAIN_CREATE).join(domains, on=["pid", "domain_id"], how="left")
    return ranges.select(
        "start_ns",
        pl.col("end_ns").fill_null(NO_END),
        "tid",
        style=pl.when(pl.col("event_type").is_in(S.NVTX_PUSHPOP)).then(pl.lit("pushpop")).otherwise(pl.lit("startend")),
        range=pl.col("range").fill_null(""),
        domain=pl.col("domain"),
    ).lazy()


def gpus(ex: Export) -> pl.DataFrame:
    """One row per GPU: name, SMs, memory bandwidth, L2 size. Empty when the export has no GPU table."""
    return (
        ex.select(S.GPU, S.GPU_FIELDS).collect()
        if ex.has(S.GPU)
        else pl.DataFrame(schema={f.name: (pl.String if f.dtype == "str" else pl.Int64) for f in S.GPU_FIELDS})
    )


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
