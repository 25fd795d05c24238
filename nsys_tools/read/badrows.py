"""GPU operations that no unmodified capture holds, named and counted, never averaged in.

* One that ends before it starts is left out of every frame (``KEPT``), so no share turns
  negative and no idle time outgrows the span; ``read.frames.backwards`` reads them for the note.
* Those of no length, those that share a correlation id with another operation of their process,
  and those that lie outside the capture (ANALYSIS_DETAILS' start and stop) are kept, as
  ``nsys stats`` keeps them, so the views still equal its tables; ``counts`` counts them.
* Times held as text or floating point are not compared here (SQLite orders text after every
  number): they reach the reader, which refuses the file as holding values of unexpected types.

``note`` writes what ``counts`` found as the parts of one line of the report's accounting.
"""

from __future__ import annotations

import polars as pl

_INTEGERS = "typeof(\"start\") = 'integer' AND typeof(\"end\") = 'integer'"
BACKWARDS = f'"end" < "start" AND {_INTEGERS}'
KEPT = f'NOT ("end" < "start" AND {_INTEGERS})'
COLUMNS = ("backwards", "zero_length", "shared_ids", "outside")


def capture(ex) -> tuple[int, int] | None:
    """The capture's start and stop (ANALYSIS_DETAILS), in the events' time base; None where unrecorded."""
    if not ex.has("ANALYSIS_DETAILS") or not {"startTime", "stopTime"} <= set(ex.tables["ANALYSIS_DETAILS"]):
        return None
    with ex.connect() as con:
        row = con.execute('SELECT min("startTime"), max("stopTime") FROM ANALYSIS_DETAILS').fetchone()
    return (row[0], row[1]) if row and all(isinstance(v, int) for v in row) else None


def counts(ops: pl.LazyFrame, span: tuple[int, int] | None) -> pl.LazyFrame:
    """Per ``kind`` of the operations ``ops`` (``kind, global_pid, correlation_id, start_ns,
    end_ns``): ``zero_length``, ``shared_ids`` (a correlation id another operation of the process
    holds too; its process as its launch tells, where the export records none) and ``outside``
    (starting before ``span`` or ending after it)."""
    known = pl.col("correlation_id").is_not_null() & pl.col("global_pid").is_not_null()  # of no known process: not told
    distinct = ops.filter(known).select(pl.col("correlation_id").n_unique() == pl.len()).collect().item()
    # Where no two known operations share even a correlation id (the common case), no pair is counted.
    shared = pl.lit(False) if distinct else known & (pl.len().over("global_pid", "correlation_id") > 1)
    outside = (pl.col("start_ns") < span[0]) | (pl.col("end_ns") > span[1]) if span else pl.lit(False)
    return ops.group_by("kind").agg(
        zero_length=(pl.col("end_ns") == pl.col("start_ns")).sum().cast(pl.Int64),
        shared_ids=shared.sum().cast(pl.Int64),
        outside=outside.sum().cast(pl.Int64),
    )


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _listed(rows: dict[str, dict], column: str) -> tuple[str, int]:
    found = [(r[column], kind) for kind in ("kernel", "memcpy", "memset") if (r := rows.get(kind)) and r.get(column)]
    names = [_count(n, kind) for n, kind in found]
    listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else (names[0] if names else "")
    return listed, sum(n for n, _ in found)


def note(rows: dict[str, dict]) -> list[str]:
    """The parts of the accounting line that name bad rows, from ``rows`` (kind -> counts)."""
    said = []
    for column, one, many in (
        (
            "backwards",
            "ends before it starts and is left out of every figure",
            "end before they start and are left out of every figure",
        ),
        (
            "zero_length",
            "takes no time (its end is its start); it is counted",
            "take no time (their end is their start); they are counted",
        ),
        (
            "shared_ids",
            "shares its correlation id with another operation of its process; it is counted",
            "share their correlation id with another operation of their process; they are counted",
        ),
        (
            "outside",
            "lies outside the capture's start and stop; it is counted",
            "lie outside the capture's start and stop; they are counted",
        ),
    ):
        listed, n = _listed(rows, column)
        if n:
            kept = "" if column == "backwards" else f", as nsys stats counts {'it' if n == 1 else 'them'}"
            said.append(f"{listed} {one if n == 1 else many}{kept}")
    return said
