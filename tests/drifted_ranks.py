"""A two-rank export whose ranks drift apart, derived from the real two-GPU capture
(``fixtures/multi-gpu``), for the per-rank windows (``read/window.py``).

    python -m tests.drifted_ranks OUT.sqlite

In the capture the two processes ran one after the other (pid 1427's four ``step=<k>`` ranges
from 8.62 s, pid 1426's from 9.71 s). Here every event of pid 1426 (its API calls, NVTX ranges,
kernels, copies, sets, synchronizations and overheads) moves in time so that its step 1 starts
``LAG_NS`` after pid 1427's step 1, and each later step ``DRIFT_NS`` later again: an event moves by
the shift of the last step to start before it (a GPU operation by its launch call's), so every
duration, and every gap inside a step, stays as captured. Its step 0 (a 251 ms warm-up) then
starts before pid 1427's, and its steps 2 and 3 fall behind pid 1427's by more than a step: the
n-th ``step=*`` range of the export is not each rank's n-th step. Nothing derived is committed;
the tests build it in a temporary folder.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

from .conftest import FIXTURES

SOURCE = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
MOVED = 1426  # the OS pid of the rank that moves
LEAD = 1427
LAG_NS = 200_000
DRIFT_NS = 800_000
TID_BITS = 24
STEPS = """SELECT n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
           WHERE coalesce(n.text, s.value) LIKE 'step=%' AND (n.globalTid >> ?) % (1 << ?) = ? ORDER BY n.start"""
# Tables with a start time and the column naming the process (a thread id holds it too).
BY_THREAD = ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "PROFILER_OVERHEAD")
BY_LAUNCH = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)


def shifts(con: sqlite3.Connection) -> list[tuple[int, int]]:
    """(from this start on, move by) for the moved rank, in order of time."""
    lead = [r[0] for r in con.execute(STEPS, (TID_BITS, TID_BITS, LEAD))]
    moved = [r[0] for r in con.execute(STEPS, (TID_BITS, TID_BITS, MOVED))]
    base = lead[1] + LAG_NS - moved[1]
    return [(-(1 << 62), base)] + [(start, base + DRIFT_NS * k) for k, start in enumerate(moved[2:], 1)]


def _case(column: str, steps: list[tuple[int, int]]) -> str:
    """SQL: the move of an event that starts at ``column``."""
    arms = " ".join(f"WHEN {column} >= {start} THEN {by}" for start, by in reversed(steps))
    return f"(CASE {arms} END)"


def make(out: Path) -> Path:
    shutil.copy(SOURCE, out)
    rank = f"((globalTid >> {TID_BITS}) % (1 << {TID_BITS})) = {MOVED}"
    with sqlite3.connect(out) as con:
        steps = shifts(con)
        # Each operation moves with its launch call, found before the calls move.
        con.execute(
            f"""CREATE TEMP TABLE moves AS SELECT correlationId AS id, {_case("start", steps)} AS by
                FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE {rank}"""
        )
        con.execute("CREATE INDEX temp.moves_id ON moves (id)")
        for table in BY_LAUNCH:
            own = f"((globalPid >> {TID_BITS}) % (1 << {TID_BITS})) = {MOVED}"
            by = f"coalesce((SELECT by FROM moves WHERE moves.id = {table}.correlationId), {_case('start', steps)})"
            con.execute(f"UPDATE {table} SET start = start + {by}, end = end + {by} WHERE {own}")
        for table in BY_THREAD:
            by = _case("start", steps)
            con.execute(f"UPDATE {table} SET start = start + {by}, end = end + {by} WHERE {rank} AND end IS NOT NULL")
            con.execute(f"UPDATE {table} SET start = start + {by} WHERE {rank} AND end IS NULL")
    return out


def export(into: Path) -> Path:
    """The derived export in ``into``, made once."""
    path = into / "drifted-ranks.sqlite"
    return path if path.exists() else make(path)


if __name__ == "__main__":
    make(Path(sys.argv[1]))
