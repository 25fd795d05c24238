"""Synchronous sets of pinned or managed memory, which block the host: sets launched by a
``cudaMemset*`` call that is not ``async``, of memory of kind 1 (pinned) or 4 (managed),
longest first. Twin of ``nsys analyze``'s ``cuda_memset_sync`` (matched to the call by
correlation id alone; ties in order of the call, then the set)."""

from __future__ import annotations

from . import Finding, Rule
from . import analyze as A
from .cuda_memcpy_async import COLUMNS as COPIES
from .cuda_memcpy_async import per_device

RULE = Rule("cuda_memset_sync", "synchronous sets of pinned or managed memory", twin="cuda_memset_sync")

OPTIONS = dict(A.COMMON)
SET = ("start", "end", "memKind", "bytes", "globalPid", "deviceId", "contextId", "greenContextId", "streamId", "correlationId")
NEEDS = {
    "StringIds": ("id", "value"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("nameId", "correlationId"),
    "CUPTI_ACTIVITY_KIND_MEMSET": SET,
    "ENUM_CUDA_MEM_KIND": ("id", "label"),
}
COLUMNS = (*COPIES[:2], ("Memory Kind", "text"), *COPIES[4:])  # a copy's, its two memory kinds made one
ADVICE = "Use cudaMemsetAsync on a stream, so the host does not wait for the set."


def select(db, *, rows=-1, start=None, end=None, nvtx=None) -> list[tuple]:
    export = db.export
    if not all(export.has(t) for t in ("CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", "ENUM_CUDA_MEM_KIND")):
        return []
    green = A.column(export, "CUPTI_ACTIVITY_KIND_MEMSET", "m", "greenContextId")
    kind = A.column(export, "CUPTI_ACTIVITY_KIND_MEMSET", "m", "memKind")
    size = A.column(export, "CUPTI_ACTIVITY_KIND_MEMSET", "m", "bytes")
    sql = f"""
        SELECT m.end - m.start AS duration, m.start, k.label, {size}, (m.globalPid >> 24) & 16777215,
               m.deviceId, m.contextId, NULLIF({green}, 0), m.streamId, s.value
        FROM {db.calls()} AS r
        JOIN StringIds AS s ON s.id = r.nameId
        JOIN CUPTI_ACTIVITY_KIND_MEMSET AS m ON m.correlationId = r.correlationId
        LEFT JOIN ENUM_CUDA_MEM_KIND AS k ON k.id = {kind}
        WHERE s.value LIKE 'cudaMemset%' AND s.value NOT LIKE '%async%' AND {kind} IN (1, 4)
          AND {A.scope(db, start, end, nvtx).where("m", "globalPid")}
        ORDER BY duration DESC, r.rowid, m.rowid{A.limit(rows)}"""
    return db.fetch(sql)


def rows(run, **options):
    return A.rows(run, RULE.name, select, COLUMNS, NEEDS, options)


def findings(run, table, **options) -> list[Finding]:
    return per_device(RULE.name, table, "synchronous sets", ADVICE)
