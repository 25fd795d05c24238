"""Large exports for benchmarking, made from a real one.

``replicate(src, dst, copies)`` appends ``copies`` shifted copies of the export's CUDA and NVTX
activity: each copy moves every timestamp by the span of the original activity (plus a gap) and
every correlation id by the largest one, so the schema, the string ids, the threads and the
NVTX projection stay those of a real capture, at any size.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from ..files import replaced_atomically
from ..read import schema as S
from ..read.export import check_sqlite
from ..read.sql import ident

# Tables copied, and which of their columns hold times and correlation ids.
REPLICATED = {
    S.KERNEL: ("start", "end", "correlationId"),
    S.MEMCPY: ("start", "end", "correlationId"),
    S.MEMSET: ("start", "end", "correlationId"),
    S.RUNTIME: ("start", "end", "correlationId"),
    S.NVTX: ("start", "end", None),
}


def replicate(src: Path, dst: Path, copies: int) -> dict[str, int]:
    """Write ``dst``: ``src`` plus ``copies`` shifted copies of its activity. Returns row counts."""
    check_sqlite(src)
    with replaced_atomically(dst, through_link=True) as partial:
        shutil.copyfile(src, partial)
        counts = _append_copies(partial, copies)
    return counts


def _append_copies(path: Path, copies: int) -> dict[str, int]:
    con = sqlite3.connect(path)
    con.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    present = {t: cols for t, cols in REPLICATED.items() if t in tables}
    bounds = [con.execute(f"SELECT min(start), max(coalesce(end, start)) FROM {t}").fetchone() for t in present]
    lo = min(b[0] for b in bounds if b[0] is not None)
    hi = max(b[1] for b in bounds if b[1] is not None)
    span = (hi - lo) + 1_000_000  # 1 ms between copies
    corr = 1 + max(
        con.execute(f"SELECT coalesce(max(correlationId), 0) FROM {t}").fetchone()[0] for t, cols in present.items() if cols[2]
    )
    counts = {}
    for table, (start, end, correlation) in present.items():
        cols = [r[0] for r in con.execute("SELECT name FROM pragma_table_info(?)", (table,))]
        shifted = []
        for c in cols:
            if c in (start, end):
                shifted.append(f"{ident(c)} + k.n * {span}")
            elif c == correlation:
                shifted.append(f"{ident(c)} + k.n * {corr}")
            else:
                shifted.append(ident(c))
        keep = f" AND eventType != {S.NVTX_DOMAIN_CREATE}" if table == S.NVTX else ""
        n0 = con.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()[0]
        names = ", ".join(ident(c) for c in cols)
        con.execute(
            f"WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < {copies}) "
            f"INSERT INTO {table} ({names}) SELECT {', '.join(shifted)} "
            f"FROM k CROSS JOIN (SELECT * FROM {table} WHERE rowid <= {n0}{keep})"
        )
        counts[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    con.commit()
    con.close()
    return counts
