"""Synchronization calls that block the host: ``cudaDeviceSynchronize`` and
``cudaStreamSynchronize`` (every runtime call whose name starts so), longest first. Twin of
``nsys analyze``'s ``cuda_api_sync``; ties keep the order of the runtime table."""

from __future__ import annotations

from . import Finding, Rule, plural
from . import analyze as A

RULE = Rule("cuda_api_sync", "CUDA synchronization calls that block the host", twin="cuda_api_sync")

OPTIONS = {
    **A.COMMON,
    "process": (int, -1, "only this process id (-1: all)"),
    "thread": (int, -1, "only this thread id (-1: all)"),
}
NEEDS = {"StringIds": ("id", "value"), "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "globalTid", "nameId")}
COLUMNS = (("Duration (ns)", "ns"), ("Start (ns)", "ns"), ("PID", "text"), ("TID", "text"), ("API Name", "text"))
ADVICE = "Synchronize less: wait on events (cudaStreamWaitEvent) instead of blocking the host; read results back once a step."


def select(db, *, rows=-1, start=None, end=None, nvtx=None, process=-1, thread=-1) -> list[tuple]:
    if nvtx is not None and (process >= 0 or thread >= 0):
        raise ValueError("rule cuda_api_sync: nvtx cannot go with process or thread")
    if not db.export.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return []
    where = [A.scope(db, start, end, nvtx).where("r", "globalTid")]
    if process >= 0:
        where.append(f"(r.globalTid >> 24) & 16777215 = {int(process)}")
    if thread >= 0:
        where.append(f"r.globalTid & 16777215 = {int(thread)}")
    sql = f"""
        SELECT r.end - r.start AS duration, r.start, (r.globalTid >> 24) & 16777215, r.globalTid & 16777215, s.value
        FROM {db.calls()} AS r JOIN StringIds AS s ON s.id = r.nameId
        WHERE (s.value LIKE 'cudaDeviceSynchronize%' OR s.value LIKE 'cudaStreamSynchronize%') AND {" AND ".join(where)}
        ORDER BY duration DESC, r.rowid{A.limit(rows)}"""
    return db.fetch(sql)


def rows(run, **options):
    return A.rows(run, RULE.name, select, COLUMNS, NEEDS, options)


def findings(run, table, **options) -> list[Finding]:
    """One finding per process and function: the time its calls blocked."""
    if table.is_empty():
        return []
    out = []
    for (pid, api), calls in table.group_by("PID", "API Name", maintain_order=True):
        total = int(calls["Duration (ns)"].sum())
        first = int(calls["Start (ns)"].min())
        last = int((calls["Start (ns)"] + calls["Duration (ns)"]).max())
        out.append(
            Finding(
                RULE.name,
                f"{plural(calls.height, api + ' call')} blocked process {pid} for {total / 1e6:,.3f} ms in all",
                total,
                rank=int(pid),
                api=api,
                start_ns=first,
                end_ns=last,
                evidence=calls.head(5).to_dicts(),
                advice=ADVICE,
            )
        )
    return out
