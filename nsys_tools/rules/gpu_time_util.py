"""Stretches of low GPU utilization: each process and device's time, from its first operation
to its last, cut into ``chunks`` equal chunks (30 unless given; each ``ceil(span / chunks)`` ns,
computed in integers, as SQLite's math functions are not in every Python's build; the last cut
at the span's end); the chunks whose operations (kernels, copies, sets and the profiler's CUDA
overhead, summed, so overlapping work counts twice) fill less than ``threshold`` percent (50
unless given) of them, runs of such chunks joined into one row with their length-weighted mean,
rounded to one decimal. Twin of ``nsys analyze``'s ``gpu_time_util``: rows numbered by that mean,
then by length. It is not the whole run's utilization: ``report --view utilization`` is.

Each operation meets the chunks it overlaps by their numbers (its start's and its last
nanosecond's, by integer division by the chunk size), an equality SQLite indexes, not a range
join that scanned every operation of the device for each chunk."""

from __future__ import annotations

from . import Finding, Rule, plural
from . import analyze as A

RULE = Rule("gpu_time_util", "stretches of low GPU utilization", twin="gpu_time_util")

OPTIONS = {
    **A.COMMON,
    "threshold": (int, 50, "list chunks used less than this percentage"),
    "chunks": (int, 30, "equal chunks per process and device (1 to 1000; 0, as nsys takes it: none)"),
}
NEEDS = A.GPU_NEEDS
COLUMNS = (
    ("Row#", "text"),
    ("In-Use (%)", "%"),
    ("Duration (ns)", "ns"),
    ("Start (ns)", "ns"),
    ("PID", "text"),
    ("Device ID", "text"),
    ("Context ID", "text"),
)
ADVICE = "Look at what the host does in these stretches (NVTX ranges, CPU sampling): the GPU waits for it."


def select(db, *, rows=-1, start=None, end=None, nvtx=None, threshold=50, chunks=30) -> list[tuple]:
    if not 0 <= chunks <= 1000:
        raise ValueError("rule gpu_time_util: chunks must be between 1 and 1000")
    if chunks == 0:  # nsys lets 0 through, cutting the span into no chunks: no rows
        return []
    within = A.scope(db, start, end, nvtx)
    found = [db.fetch(_query(ops, threshold, chunks)) for ops in A.gpu_timelines(db.export, within)]
    return A.numbered(found, lambda r: r[:2], rows)


def _query(ops: str, threshold: int, chunks: int) -> str:
    """The low stretches of one API's timelines (``ops``), in order of mean use, then length."""
    return f"""
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {int(chunks)}),
        ops AS ({ops}),
        span AS (
            SELECT pid, deviceId, {A.SPAN}, contextId,
                   (max(end) - min(start) + {int(chunks) - 1}) / {int(chunks)} AS step,
                   CAST((max(end) - min(start) + {int(chunks) - 1}) / {int(chunks)} AS FLOAT) AS size
            FROM ops GROUP BY deviceId, pid),
        chunk AS (
            SELECT n.i, span.pid, span.deviceId, span.contextId, n.i * span.size + span.lo AS a,
                   min(n.i * span.size + span.lo + span.size, span.hi) AS b
            FROM n JOIN span ON n.i * span.size + span.lo < min(n.i * span.size + span.lo + span.size, span.hi)),
        cut AS (
            SELECT o.pid, o.deviceId, o.start, o.end,
                   (o.start - span.lo) / span.step AS first, (o.end - span.lo - 1) / span.step AS last
            FROM ops AS o JOIN span ON span.pid = o.pid AND span.deviceId = o.deviceId),
        piece AS (
            SELECT pid, deviceId, first AS i, start, end FROM cut WHERE first = last
            UNION ALL
            SELECT cut.pid, cut.deviceId, n.i, cut.start, cut.end FROM cut JOIN n ON n.i BETWEEN cut.first AND cut.last
            WHERE cut.first < cut.last),
        used AS (
            SELECT c.i, c.pid, c.deviceId, c.contextId, c.a, c.b, c.b - c.a AS size,
                   sum(CAST(coalesce(min(o.end, c.b) - max(o.start, c.a), 0) AS FLOAT)) / (c.b - c.a) * 100 AS pct
            FROM chunk AS c LEFT JOIN piece AS o ON o.pid = c.pid AND o.deviceId = c.deviceId AND o.i = c.i
            GROUP BY c.i, c.deviceId, c.pid
            HAVING pct < {int(threshold)}),
        runs AS (SELECT *, i - ROW_NUMBER() OVER (PARTITION BY pid, deviceId ORDER BY i) AS run FROM used),
        joined AS (
            SELECT run, pid, deviceId, min(contextId) AS contextId, min(a) AS a, max(b) - min(a) AS duration,
                   round(sum(size * pct) / sum(size), 1) AS mean
            FROM runs GROUP BY run, deviceId, pid)
        SELECT mean, duration, a, pid, deviceId, contextId FROM joined ORDER BY mean, duration, run, deviceId, pid"""


def rows(run, **options):
    return A.rows(run, RULE.name, select, COLUMNS, NEEDS, options)


def findings(run, table, *, threshold=50, **options) -> list[Finding]:
    """One finding per process and device: the idle part of its low-utilization stretches that
    falls in steady steps that are not slow (setup and warm-up are the ``setup`` rule's, slow steps
    the ``slow_steps`` rule's), or all of it without steps."""
    if table.is_empty():
        return []
    out = []
    for (pid, device), low in table.group_by("PID", "Device ID", maintain_order=True):
        starts = low["Start (ns)"].cast(int)
        parts = run.in_steady(int(pid), starts, starts + low["Duration (ns)"].cast(int))
        steady = sum(parts)
        idle = sum((p * (100 - used) / 100 for p, used in zip(parts, low["In-Use (%)"], strict=True)), 0.0)
        if steady == 0:
            continue
        length = int(low["Duration (ns)"].sum())
        worst = low.row(0, named=True)
        emptiest = f"{worst['In-Use (%)']:.1f}% used for {worst['Duration (ns)'] / 1e6:,.1f} ms"
        where = "" if run.steps.is_empty() else f", {steady / 1e6:,.1f} ms of it in steady steps that are not slow"
        out.append(
            Finding(
                RULE.name,
                f"GPU {device} (process {pid}) was used less than {threshold}% for {length / 1e6:,.1f} ms{where} "
                f"({plural(low.height, 'stretch', 'stretches')}; the emptiest {emptiest})",
                int(idle),
                device=int(device),
                rank=int(pid),
                start_ns=int(worst["Start (ns)"]),
                end_ns=int(worst["Start (ns)"] + worst["Duration (ns)"]),
                evidence=low.head(5).to_dicts(),
                advice=ADVICE,
            )
        )
    return out
