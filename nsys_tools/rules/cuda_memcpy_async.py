"""Asynchronous copies from or to pageable memory, which the driver runs synchronously: every
copy with a pageable side launched by a ``cudaMemcpy*Async*`` call, longest first. Twin of
``nsys analyze``'s ``cuda_memcpy_async``. As nsys does, a copy is matched to its launch call by
correlation id alone, so where processes share an id a copy is listed once per matching call;
ties keep the order of the runtime table, then of the copies."""

from __future__ import annotations

from . import Finding, Rule
from . import analyze as A

RULE = Rule("cuda_memcpy_async", "asynchronous copies of pageable memory, which run synchronously", twin="cuda_memcpy_async")

OPTIONS = dict(A.COMMON)
# nsys analyze's tables and columns (``analyze.lacking``); ``copies`` reads those it can.
COPY = ("start", "end", "srcKind", "dstKind", "bytes", "globalPid", "deviceId", "contextId", "greenContextId", "streamId")
NEEDS = {
    "StringIds": ("id", "value"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("nameId", "correlationId"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (*COPY, "correlationId", "copyKind"),
    "ENUM_CUDA_MEM_KIND": ("id", "label"),
}
COLUMNS = (
    ("Duration (ns)", "ns"),
    ("Start (ns)", "ns"),
    ("Src Kind", "text"),
    ("Dst Kind", "text"),
    ("Bytes (MB)", "MB"),
    ("PID", "text"),
    ("Device ID", "text"),
    ("Context ID", "text"),
    ("Green Context ID", "text"),
    ("Stream ID", "text"),
    ("API Name", "text"),
)
ADVICE = "Copy from pinned memory (pin_memory=True, cudaHostAlloc): a pageable source makes the async copy block the host."


def copies(db, condition, api: str, *, rows=-1, start=None, end=None, nvtx=None) -> list[tuple]:
    """The copies meeting ``condition`` (a function of the copy table's optional columns, each
    ``m.<name>`` or ``NULL``: ``column``) whose launch call's name meets ``api`` (on
    ``s.value``), in ``COLUMNS``'s order, longest first; ties in order of the call, then the copy."""
    export = db.export
    if not all(export.has(t) for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "ENUM_CUDA_MEM_KIND")):
        return []
    optional = ("greenContextId", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId", "bytes")
    m = {c: A.column(export, "CUPTI_ACTIVITY_KIND_MEMCPY", "m", c) for c in optional}
    sql = f"""
        SELECT m.end - m.start AS duration, m.start, sk.label, dk.label, {m["bytes"]}, (m.globalPid >> 24) & 16777215,
               m.deviceId, m.contextId, NULLIF({m["greenContextId"]}, 0), m.streamId, s.value
        FROM {db.calls()} AS r
        JOIN StringIds AS s ON s.id = r.nameId
        JOIN CUPTI_ACTIVITY_KIND_MEMCPY AS m ON m.correlationId = r.correlationId
        LEFT JOIN ENUM_CUDA_MEM_KIND AS sk ON sk.id = {m["srcKind"]}
        LEFT JOIN ENUM_CUDA_MEM_KIND AS dk ON dk.id = {m["dstKind"]}
        WHERE ({api}) AND ({condition(m)}) AND {A.scope(db, start, end, nvtx).where("m", "globalPid")}
        ORDER BY duration DESC, r.rowid, m.rowid{A.limit(rows)}"""
    return db.fetch(sql)


def select(db, **options) -> list[tuple]:
    return copies(db, pageable, "s.value LIKE 'cudaMemcpy%Async%'", **options)


def pageable(m: dict[str, str]) -> str:
    """A copy from or to pageable memory (kind 0)."""
    return f"{m['srcKind']} = 0 OR {m['dstKind']} = 0"


def rows(run, **options):
    return A.rows(run, RULE.name, select, COLUMNS, NEEDS, options)


def megabytes(ops) -> str:
    """The MB ``ops`` moved, saying how many of them have no byte count (NULL in the export)."""
    known = ops["Bytes (MB)"].drop_nulls()
    unknown = ops.height - known.len()
    if not known.len():
        return "an unknown size (the export records no byte count for them)"
    return f"{known.sum():,.1f} MB" + (f" ({unknown} of them with no byte count)" if unknown else "")


def per_device(rule: str, table, what: str, advice: str) -> list[Finding]:
    """One finding per process and device: the time its copies (or sets) in ``table`` took (each
    once: nsys lists one again for every other process's call that shares its correlation id)."""
    if table.is_empty():
        return []
    out = []
    for (pid, device), ops in table.unique(maintain_order=True).group_by("PID", "Device ID", maintain_order=True):
        total = int(ops["Duration (ns)"].sum())
        out.append(
            Finding(
                rule,
                f"{ops.height} {what} on GPU {device} (process {pid}) took {total / 1e6:,.3f} ms for {megabytes(ops)}",
                total,
                device=int(device),
                rank=int(pid),
                api=ops["API Name"][0],
                start_ns=int(ops["Start (ns)"].min()),
                end_ns=int((ops["Start (ns)"] + ops["Duration (ns)"]).max()),
                evidence=ops.head(5).to_dicts(),
                advice=advice,
            )
        )
    return out


def findings(run, table, **options) -> list[Finding]:
    return per_device(RULE.name, table, "asynchronous copies of pageable memory", ADVICE)
