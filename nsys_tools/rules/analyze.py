"""What the twins of ``nsys analyze``'s rules share: their common options, the time filter,
the GPU operations with the profiler's overhead, and the csv as nsys writes it.

nsys analyze (2024.2) runs each rule as SQL over the export. A twin runs its own SQL with the
same meaning over the same tables, so that ``diagnose --rule NAME --format csv`` gives the rows
of ``nsys analyze -r NAME:rows=-1 --format csv``, in the same order (ties in the sort key keep
the order SQLite meets the rows in: the order of the tables' rows, which the twins state).

* ``start``/``end`` keep the rows that overlap ``[start, end)`` of the tables read (a row that
  starts before ``start`` and ends at or after ``end`` too), as nsys filters them; the launch
  calls a copy is matched to are not filtered. ``nvtx=NAME[@DOMAIN][/INDEX]`` takes the times of
  that range's instance (the first by start, or the INDEX-th from 0; ``start``/``end`` given win)
  and keeps, of the tables with a thread, the range's thread (a push/pop range) or process (a
  start/end range), of the tables with a process, its process.
* Times are nanoseconds; ``Bytes (MB)`` is bytes / 10^6 with three decimals; a percentage has
  one decimal; NULL is an empty cell. A rule with no rows writes nothing at all, as nsys does.

A twin reads its export through a ``Db`` (``Run.dbs``: one per export of the run): one connection
for every twin, and the runtime calls the copy and sync twins look at, copied out of the runtime
table in one scan that they share (``Db.calls``).
"""

from __future__ import annotations

import csv
import io
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from ..read import badrows
from ..read.export import Export, reading

COMMON = {
    "rows": (int, -1, "at most this many rows (-1: all of them; nsys's own default is 50)"),
    "start": (int, None, "only what overlaps the time from this timestamp on (ns)"),
    "end": (int, None, "only what overlaps the time before this timestamp (ns)"),
    "nvtx": (str, None, "only what overlaps this NVTX range's instance, NAME[@DOMAIN][/INDEX], on its thread or process"),
}
NO_END = 0x7FFFFFFFFFFFFFFF

# The profiler's overhead on a thread that nsys counts as GPU time of every device its process
# uses (the names 2024.2 selects).
CUDA_OVERHEAD = ("CUDA profiling data flush overhead", "CUDA profiling stop overhead", "CUDA profiling overhead")
# The runtime calls the copy and sync twins read: those whose names start so (LIKE, ASCII case
# aside). Each twin's own condition on the name keeps some of them.
CALLS = ("cudaDeviceSynchronize%", "cudaStreamSynchronize%", "cudaMemcpy%", "cudaMemset%")


class Db:
    """One export as the twins read it: one connection, held open, and ``calls()``."""

    def __init__(self, export: Export):
        self.export = export
        self._con: sqlite3.Connection | None = None
        self._calls = ""

    def fetch(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with reading(self.export.source):
            if self._con is None:
                self._con = self.export.connect()
                self._con.text_factory = lambda raw: raw.decode("utf-8", "replace")
            return self._con.execute(sql, params).fetchall()

    def calls(self) -> str:
        """The table to read for the runtime table's calls named as ``CALLS`` say: a copy of
        them, made in one scan of the runtime table at the first call (a twin alone scanned it
        once each), with its columns as they are there (no type converts them) and each
        call's rowid as its rowid there, so that ``ORDER BY r.rowid`` keeps its meaning (a column
        the export lacks is not there either: a twin's query that reads it fails as it did)."""
        if not self._calls:
            named = " OR ".join(f"value LIKE '{p}'" for p in CALLS)
            have = self.export.tables.get("CUPTI_ACTIVITY_KIND_RUNTIME", ())
            kept = ", ".join(c for c in ("start", "end", "globalTid", "correlationId", "nameId") if c in have)
            self.fetch(f"CREATE TEMP TABLE twin_calls (id INTEGER PRIMARY KEY, {kept})")
            self.fetch(
                f"INSERT INTO temp.twin_calls SELECT rowid, {kept} FROM main.CUPTI_ACTIVITY_KIND_RUNTIME "
                f"WHERE nameId IN (SELECT id FROM StringIds WHERE {named})"
            )
            self._calls = "temp.twin_calls"
        return self._calls


def overlaps(alias: str, start: int | None, end: int | None) -> str:
    """The SQL condition that keeps rows of ``alias`` overlapping ``[start, end)`` ("1" with no filter)."""
    if start is None and end is None:
        return "1"
    lo, hi = start or 0, NO_END if end is None else end
    if lo > hi:
        raise ValueError("the start time cannot be greater than the end time")
    s, e = f"{alias}.start", f"{alias}.end"
    return f"(({s} >= {lo} AND {s} < {hi}) OR ({e} >= {lo} AND {e} < {hi}) OR ({s} < {lo} AND {e} >= {hi}))"


@dataclass(frozen=True)
class Scope:
    """What the rows read must overlap (``start``, ``end``) and belong to: a thread (``tid``, a
    serialized global thread id), a process (``pid``, a serialized global id), or anything."""

    start: int | None = None
    end: int | None = None
    tid: int | None = None
    pid: int | None = None

    def where(self, alias: str, ids: str) -> str:
        """The SQL condition on table ``alias``, whose ids are ``globalTid`` or ``globalPid`` (``ids``)."""
        cond = [overlaps(alias, self.start, self.end)]
        if self.tid is not None and ids == "globalTid":
            cond.append(f"{alias}.globalTid = {self.tid}")
        elif self.pid is not None:
            cond.append(f"{alias}.{ids} >> 24 = {self.pid >> 24}")
        return " AND ".join(cond)


def scope(db: Db, start: int | None = None, end: int | None = None, nvtx: str | None = None) -> Scope:
    """The rows a rule reads, as ``start``, ``end`` and ``nvtx`` choose them (``Scope``)."""
    export = db.export
    if nvtx is None:
        return Scope(start, end)
    name, index = nvtx, 0
    head, slash, tail = nvtx.rpartition("/")
    if slash and tail.isdigit():
        name, index = head, int(tail)
    if not export.has("NVTX_EVENTS"):
        raise ValueError(f"{export.source} holds no NVTX range, so none named {nvtx!r}")
    sql = """
        SELECT n.start, n.end, n.globalTid FROM NVTX_EVENTS AS n
        LEFT JOIN (SELECT domainId, globalTid, text FROM NVTX_EVENTS WHERE eventType = 75) AS d
            ON d.domainId = n.domainId AND d.globalTid >> 24 = n.globalTid >> 24
        LEFT JOIN StringIds AS s ON s.id = n.textId
        WHERE n.eventType IN (59, 60, 70, 71) AND coalesce(n.text, s.value) || coalesce('@' || d.text, '') = ?
        ORDER BY n.start LIMIT 1 OFFSET ?"""
    found = db.fetch(sql, (name, index))
    if not found:
        raise ValueError(f"no NVTX range {nvtx!r} in {export.source}")
    lo, hi, tid = found[0]
    pushpop = (tid >> 24) & 0xFFFFFF != tid & 0xFFFFFF
    return Scope(
        lo if start is None else start, (NO_END if hi is None else hi) if end is None else end, tid if pushpop else None, tid
    )


# What a table holds, to say why a rule cannot look where it is missing.
HOLDS = {
    "StringIds": "the names",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "the CUDA API calls",
    "CUPTI_ACTIVITY_KIND_KERNEL": "the kernels",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "the memory copies",
    "CUPTI_ACTIVITY_KIND_MEMSET": "the memory sets",
    "ENUM_CUDA_MEM_KIND": "the names of memory kinds",
}
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
# The graphics APIs' GPU work nsys analyze reads besides CUDA's: table, its context column, the
# name of its profiler overhead.
GRAPHICS = (
    ("VULKAN_WORKLOAD", "contextId", "Vulkan profiling overhead"),
    ("OPENGL_WORKLOAD", "contextId", "OpenGL profiling overhead"),
    ("DX12_WORKLOAD", "shortContextId", "DX12 profiling overhead"),
)
# What the GPU rules read of each table (nsys checks ``gpu`` of the Vulkan and DX12 ones).
ACTIVITY = ("start", "end", "globalPid", "deviceId", "contextId")
GPU_NEEDS = {
    (*GPU_TABLES, *(t for t, _, _ in GRAPHICS)): {
        **dict.fromkeys(GPU_TABLES, ACTIVITY),
        **{t: ("start", "end", "globalTid", "gpu", context) for t, context, _ in GRAPHICS},
    }
}


# Columns a twin's query reads as NULL where the export lacks them (``column``): its findings are
# made without them, though nsys skips the rule (its csv is empty then).
NULLABLE = frozenset({"greenContextId", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId", "bytes", "memKind"})


def lacking(export: Export, needs: dict, nullable: frozenset[str] = frozenset()) -> str | None:
    """Why nsys analyze (2024.2) would not run a rule that reads ``needs`` on ``export``, or None.

    ``needs`` maps a table, or a tuple of tables of which one is enough, to the columns the rule's
    query reads there (for a tuple, the same for each, or a dict of them by table); nsys checks
    the tables first (skipping the rule with a message), then the columns (skipping it for
    ``greenContextId`` or a graphics table's ``gpu``, failing on any other), so a twin's csv is
    empty then."""
    for tables, _ in needs.items():
        group = (tables,) if isinstance(tables, str) else tables
        if not any(export.has(t) for t in group):
            what = HOLDS.get(group[0], group[0]) if len(group) == 1 else "the GPU's work"
            return f"it holds no {' or '.join(group)} table ({what}: none were traced or exported)"
    for tables, columns in needs.items():
        for table in (tables,) if isinstance(tables, str) else tables:
            wanted = columns.get(table, ()) if isinstance(columns, dict) else columns
            gone = [c for c in wanted if export.has(table) and c not in export.tables[table] and c not in nullable]
            if gone:
                named = f"{', '.join(gone)} column{'s' * (len(gone) > 1)}"
                return f"its {table} table has no {named} (an export of an older nsys; exported again by a recent one, it has)"
    return None


def column(export: Export, table: str, alias: str, name: str) -> str:
    """``alias.name`` where ``table`` has that column, else ``NULL`` (exports of other nsys versions lack some)."""
    return f"{alias}.{name}" if name in export.tables.get(table, ()) else "NULL"


def limit(rows: int) -> str:
    return "" if rows is None or rows < 0 else f" LIMIT {int(rows)}"


# A (process, device)'s span. With these two aggregates, in this order, SQLite takes a bare
# column (``contextId``) from the first row on which ``max(end)`` is reached.
SPAN = "min(start) AS lo, max(end) AS hi"


def gpu_timelines(export: Export, within: Scope) -> list[str]:
    """Per API whose GPU work nsys analyze reads (CUDA: kernels, copies, sets; the Vulkan, OpenGL
    and DX12 workloads), in its order, the SQL of every timed operation (``start > 0``; none that
    ends before it starts, as everywhere: ``read.badrows``) as ``start, end, pid, globalId,
    deviceId, contextId``, with that API's profiler overhead inside each (process, device)'s span
    added as operations of that device. nsys looks at each API's timelines apart.

    The overhead takes the ``globalId`` and ``contextId`` of the span's operation that ends last
    (the first of them, in the tables' order): SQLite's bare columns beside ``min(start)`` and
    then ``max(end)``, as nsys takes them (``SPAN``); a device can hold several contexts."""
    cuda = [
        f"SELECT o.start, o.end, (o.globalPid >> 24) & 16777215 AS pid, o.globalPid AS globalId, o.deviceId, o.contextId "
        f"FROM {table} AS o WHERE o.start > 0 AND {badrows.KEPT} AND {within.where('o', 'globalPid')}"
        for table in GPU_TABLES
        if export.has(table)
    ]
    out = [_with_overhead(export, within, " UNION ALL ".join(cuda), CUDA_OVERHEAD)] if cuda else []
    for table, context, overhead in GRAPHICS:
        if export.has(table):
            ops = (
                f"SELECT o.start, o.end, (o.globalTid >> 24) & 16777215 AS pid, o.globalTid AS globalId, o.gpu AS deviceId, "
                f"o.{context} AS contextId FROM {table} AS o "
                f"WHERE o.start > 0 AND {badrows.KEPT} AND {within.where('o', 'globalTid')}"
            )
            out.append(_with_overhead(export, within, ops, (overhead,)))
    return out


def _with_overhead(export: Export, within: Scope, ops: str, overhead: Sequence[str]) -> str:
    """``ops`` and the profiler's ``overhead`` (by name) inside each (process, device)'s span."""
    if not export.has("PROFILER_OVERHEAD"):
        return ops
    names = ", ".join(f"'{n}'" for n in overhead)
    return f"""
        WITH g AS ({ops}),
        span AS (SELECT pid, deviceId, {SPAN}, globalId, contextId FROM g GROUP BY deviceId, pid)
        SELECT p.start, p.end, span.pid, span.globalId, span.deviceId, span.contextId
        FROM PROFILER_OVERHEAD AS p JOIN StringIds AS n ON n.id = p.nameId
        JOIN span ON span.pid = (p.globalTid >> 24) & 16777215 AND p.start > span.lo AND p.end < span.hi
        WHERE n.value IN ({names}) AND {within.where("p", "globalTid")}
        UNION ALL SELECT * FROM g"""


def numbered(found: list[list[tuple]], key, rows: int) -> list[tuple]:
    """The rows of each API's timelines (``found``, in ``gpu_timelines``' order, each in its own
    order) as one table, as nsys unions them: sorted by ``key`` (ties in the APIs' order, then
    each one's), numbered from 1, at most ``rows`` of them (-1: all)."""
    merged = sorted(((key(r), api, k, r) for api, part in enumerate(found) for k, r in enumerate(part)), key=lambda t: t[:3])
    return [(i, *r) for i, (*_, r) in enumerate(merged[: None if rows < 0 else rows], 1)]


def rows(run, rule: str, select, columns: Sequence[tuple[str, str]], needs: dict, options: dict):
    """A twin's rows (``select``'s, under ``columns``) over the run's exports, for its findings:
    an export that lacks a table its query reads (nothing of the kind was traced) gives none; one
    that lacks a column the query cannot read as NULL (``NULLABLE``) gives none either, and
    ``run.skipped`` says why."""
    found = []
    for db in run.dbs:
        why = lacking(db.export, needs, NULLABLE)
        if why is None:
            found += select(db, **options)
        elif lacking(db.export, dict.fromkeys(needs, ())) is None:  # its tables are there: a column is not
            run.skipped.append((db.export.source, rule, why))
    return frame(columns, found)


def cell(value, kind: str) -> str:
    if value is None:
        return ""
    if kind == "MB":
        return f"{value / 1e6:.3f}"
    if kind == "%":
        return f"{value:.1f}"
    if kind == "ns":
        return str(int(value))
    return str(value)


def csv_text(columns: Sequence[tuple[str, str]], rows: Sequence[tuple]) -> str:
    """``rows`` as nsys writes its csv: the header ``columns`` names (each ``(header, kind)``:
    ``ns``, ``MB``, ``%`` or ``text``), one line per row; nothing at all for no rows."""
    if not rows:
        return ""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(h for h, _ in columns)
    for row in rows:
        writer.writerow(cell(v, k) for v, (_, k) in zip(row, columns, strict=True))
    return out.getvalue()


def frame(columns: Sequence[tuple[str, str]], rows: Sequence[tuple]):
    """``rows`` as a DataFrame with the csv's headers (bytes in MB, not rounded)."""
    import polars as pl

    scale = [1e-6 if k == "MB" else None for _, k in columns]
    values = [[v if f is None or v is None else v * f for v, f in zip(r, scale, strict=True)] for r in rows]
    return pl.DataFrame(values, schema=[h for h, _ in columns], orient="row", infer_schema_length=None)
