"""Times a GPU sat idle longer than a threshold (``gap``, 500 ms unless given): for each process
and device, from its first operation to its last, every interval in which none of its kernels,
copies or sets (nor the profiler's CUDA overhead) ran; the same of each graphics API's work
apart. Twin of ``nsys analyze``'s ``gpu_gaps``: rows numbered longest first (then by start).

The ends of a timeline's operations, in order, are paired with its starts, in order: the k-th
end with the (k+1)-th start. Where that start comes after that end, nothing ran between them
(each earlier operation has ended, each later one has not started): a gap."""

from __future__ import annotations

from . import Finding, Rule, plural
from . import analyze as A

RULE = Rule("gpu_gaps", "GPU idle longer than a threshold", twin="gpu_gaps")

OPTIONS = {**A.COMMON, "gap": (int, 500, "the shortest gap listed, in ms")}
NEEDS = A.GPU_NEEDS
COLUMNS = (
    ("Row#", "text"),
    ("Duration (ns)", "ns"),
    ("Start (ns)", "ns"),
    ("PID", "text"),
    ("Device ID", "text"),
    ("Context ID", "text"),
)
ADVICE = "Find what the host did meanwhile (NVTX ranges around data loading, checkpoints, logging) and overlap it with GPU work."


def select(db, *, rows=-1, start=None, end=None, nvtx=None, gap=500) -> list[tuple]:
    found = []
    for ops in A.gpu_timelines(db.export, A.scope(db, start, end, nvtx)):
        sql = f"""
            WITH ops AS ({ops}),
            s AS (SELECT ROW_NUMBER() OVER (ORDER BY pid, deviceId, start) - 1 AS k, start, pid, deviceId FROM ops),
            e AS (SELECT ROW_NUMBER() OVER (ORDER BY pid, deviceId, end) AS k, end, pid, deviceId, contextId FROM ops)
            SELECT s.start - e.end AS duration, e.end AS at, e.pid, e.deviceId, e.contextId
            FROM e JOIN s ON s.k = e.k AND s.pid = e.pid AND s.deviceId = e.deviceId
            WHERE s.start - e.end > {int(gap) * 1000000} AND e.end < s.start
            ORDER BY duration DESC, at, e.pid, e.deviceId"""
        found.append(db.fetch(sql))
    return A.numbered(found, lambda r: (-r[0], r[1]), rows)


def rows(run, **options):
    return A.rows(run, RULE.name, select, COLUMNS, NEEDS, options)


def findings(run, table, *, gap=500, **options) -> list[Finding]:
    """One finding per process and device: its idle intervals above the threshold, the part of
    them in steady steps that are not slow (setup and warm-up are the ``setup`` rule's, slow steps
    the ``slow_steps`` rule's), or all of them without steps."""
    if table.is_empty():
        return []
    out = []
    for (pid, device), gaps in table.group_by("PID", "Device ID", maintain_order=True):
        total = int(gaps["Duration (ns)"].sum())
        starts = gaps["Start (ns)"].cast(int)
        steady = sum(run.in_steady(int(pid), starts, starts + gaps["Duration (ns)"].cast(int)))
        if steady == 0:
            continue
        longest = gaps.row(0, named=True)
        where = "" if run.steps.is_empty() else f", {steady / 1e6:,.1f} ms of it in steady steps that are not slow"
        out.append(
            Finding(
                RULE.name,
                f"GPU {device} (process {pid}) sat idle {plural(gaps.height, 'time')} for more than {gap} ms, "
                f"{total / 1e6:,.1f} ms in all{where}; the longest {longest['Duration (ns)'] / 1e6:,.1f} ms",
                steady,
                device=int(device),
                rank=int(pid),
                start_ns=int(longest["Start (ns)"]),
                end_ns=int(longest["Start (ns)"] + longest["Duration (ns)"]),
                evidence=gaps.head(5).to_dicts(),
                advice=ADVICE,
            )
        )
    return out
