"""Which exports are one run: the ranks of one job, captured at the same time.

Every export records the wall-clock time its session started (``utcEpochNs``) and, in the same
nanoseconds from that start as its events, when the capture started and stopped (its analysis
details; where an export lacks them, its first GPU operation's start and last one's end). Exports
whose wall-clock capture spans overlap are one run; exports that do not overlap any of them are
other runs (a before and an after, a sweep of separate captures), never one timeline. An export
that records no wall-clock start cannot be placed: then all the exports given are taken as one
run, as they always were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import schema as S
from .export import open_export, reading

DETAILS = "ANALYSIS_DETAILS"


@dataclass(frozen=True)
class Span:
    """An export's capture on the wall clock: ``[start_ns, end_ns]`` in ns since the epoch."""

    path: Path
    start_ns: int
    end_ns: int


def extent(path: Path, nsys=None) -> tuple[int, int, int] | None:
    """The first start and last end of an export's GPU operations (ns from its session start),
    and how many there are (None where it has none)."""
    with reading(path):
        ex = open_export(path, nsys)
        tables = [t for t in (S.KERNEL, S.MEMCPY, S.MEMSET) if ex.has(t)]
        if not tables:
            return None
        sql = " UNION ALL ".join(f'SELECT MIN("start"), MAX("end"), COUNT(*) FROM {t}' for t in tables)
        with ex.connect() as con:
            rows = [r for r in con.execute(sql).fetchall() if r[2]]
    if not rows:
        return None
    return min(r[0] for r in rows), max(r[1] for r in rows), sum(r[2] for r in rows)


def span(path: Path, nsys=None, reexport: bool = False) -> Span | None:
    """``path``'s capture on the wall clock (None where it records no wall-clock start)."""
    with reading(path):
        ex = open_export(path, nsys, reexport=reexport)
        if not ex.has(S.SESSION_START):
            return None
        with ex.connect() as con:
            row = con.execute(f"SELECT utcEpochNs FROM {S.SESSION_START}").fetchone()
            details = f'SELECT MIN("startTime"), MAX("stopTime") FROM {DETAILS}'
            times = con.execute(details).fetchone() if ex.has(DETAILS) else None
    if not row or not isinstance(row[0], int):
        return None
    if not times or not all(isinstance(t, int) for t in times):
        times = extent(path, nsys) or (0, 0)
    if not all(isinstance(t, int) for t in times[:2]):
        return None
    return Span(path, row[0] + times[0], row[0] + times[1])


def placed(path: Path, nsys=None, reexport: bool = False) -> Span | None:
    """``span``, or None where the export cannot be read (its reader names the problem) or
    holds times that are not integers."""
    from ..errors import NsysToolsError

    try:
        s = span(path, nsys, reexport)
    except NsysToolsError:
        return None
    return s if s is not None and isinstance(s.start_ns, int) and isinstance(s.end_ns, int) else None


def runs(files: Sequence[Path], nsys=None, reexport: bool = False) -> list[list[Path]]:
    """``files`` as runs: groups of exports whose wall-clock capture spans overlap, in order of
    start (each group in the order given); one group where an export cannot be placed."""
    if len(files) < 2:  # one run, unread
        return [list(files)] if files else []
    spans = [placed(f, nsys, reexport) for f in files]
    if any(s is None for s in spans):
        return [list(files)]
    groups: list[list[Span]] = []
    end = None
    for s in sorted(spans, key=lambda s: (s.start_ns, s.end_ns)):
        if end is None or s.start_ns > end:
            groups.append([])
            end = s.end_ns
        groups[-1].append(s)
        end = max(end, s.end_ns)
    order = {f: i for i, f in enumerate(files)}
    return [sorted((s.path for s in g), key=order.__getitem__) for g in groups]


def one_run(files: Sequence[Path], given: Sequence[Path], nsys=None, reexport: bool = False) -> None:
    """Refuse ``files`` (read from the paths ``given``) when they hold more than one run: an
    ``errors.UsageError`` naming them, with the choice of ``compare`` or ``--merge``."""
    from ..errors import UsageError

    groups = runs(files, nsys, reexport)
    if len(groups) < 2:
        return
    where = given[0] if len(given) == 1 else groups[1][0]
    shown = ", ".join(" + ".join(p.name for p in g) for g in groups[:4]) + (", ..." if len(groups) > 4 else "")
    raise UsageError(
        where,
        f"holds {len(groups)} separate runs, captured at different times ({shown}); one report is one run",
        "compare two of them with `nsys-tools compare BASE NEW`, or pass --merge to read them as one",
    )
