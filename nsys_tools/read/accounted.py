"""Every GPU operation accounted for: how many have no launch row, and whether the trace was cut.

A kernel, memcpy or memset is attributed through the API call that launched it. An export cut
in time by another tool, or one that lost runtime records, holds operations whose call is not
there: they are still counted, under the empty range (outside every NVTX range), and
``accounting`` says how many there are. An operation with no start or end time (an edited
export's) is in no figure, and ``accounting`` counts those too. A trace whose first GPU
operation starts before its first API call, or whose diagnostics say records were lost, was
visibly cut.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from ..errors import MissingColumn
from . import attribute, badrows, cache
from . import frames as events
from . import schema as S

KEY = "accounting v6"
SUMMED = badrows.COLUMNS  # counted per part and summed
LOST_WORDS = ("lost", "dropped", "discarded", "overflow")  # diagnostics that say records are missing


def counts(trace) -> pl.LazyFrame:
    """Per kind of GPU operation in ``trace``: ``ops``, ``unlaunched``, ``first_op_ns`` (of those
    with a start and an end time), ``first_launch_ns`` (the first call that launched one of
    them), ``untimed`` (those without a time), ``unsized`` (copies and sets whose bytes are
    NULL, or not in the export), ``relaunched`` (those whose launch several API calls record,
    sharing its correlation id: an older runtime's call and the entry point it wraps; attributed
    to the outermost), and the bad rows ``read.badrows`` names
    (``backwards``, left out of the others; ``zero_length``, ``shared_ids``, ``outside``, kept).
    Counts of any subsets of the operations (with their launch calls) merge into those of all
    (``merge``); operations that share a correlation id are in one subset (split by launch)."""
    columns = ["kind", "global_pid", "correlation_id", "start_ns", "end_ns", "bytes"]
    ops = trace.gpu_ops(attributed=False, columns=columns, kinds=_complete(trace.export))
    calls = events.launch_calls(trace.export, ops, names=False)
    # Each operation with its launch, and its process where the export records none (by its call):
    # only the call's start travels through the join.
    launched = attribute.launches(ops, calls.select("global_pid", "correlation_id", "api_start_ns")).collect().lazy()
    timed = (
        launched.group_by("kind")
        .agg(
            ops=pl.len().cast(pl.Int64),
            unlaunched=pl.col("api_start_ns").is_null().sum().cast(pl.Int64),
            unsized=(pl.col("bytes").is_null() & (pl.col("kind") != "kernel")).sum().cast(pl.Int64),
            first_op_ns=pl.col("start_ns").min(),
            first_launch_ns=pl.col("api_start_ns").min(),
        )
        .with_columns(pl.col("kind").cast(pl.String))
    )
    repeated = calls.filter(pl.col("calls") > 1).select("global_pid", "correlation_id")
    relaunched = (
        launched.join(repeated, on=["global_pid", "correlation_id"], how="semi")
        .group_by("kind")
        .agg(relaunched=pl.len().cast(pl.Int64))
        .with_columns(pl.col("kind").cast(pl.String))
    )
    untimed = events.untimed(trace.export).group_by("kind").agg(untimed=pl.len().cast(pl.Int64))
    backwards = events.backwards(trace.export).group_by("kind").agg(backwards=pl.len().cast(pl.Int64))
    bad = badrows.counts(launched, badrows.capture(trace.export)).with_columns(pl.col("kind").cast(pl.String))
    out = timed.join(untimed, on="kind", how="full", coalesce=True).join(backwards, on="kind", how="full", coalesce=True)
    out = out.join(relaunched, on="kind", how="full", coalesce=True)
    return out.join(bad, on="kind", how="full", coalesce=True).with_columns(
        pl.col("ops", "unlaunched", "unsized", "relaunched", "untimed", *SUMMED).fill_null(0)
    )


def _complete(ex) -> list[str]:
    """The kinds of operation whose table holds every column a view of them needs: a memcpy or
    memset table without one (``Export.check_columns``: a memcpy table without ``bytes``) is
    not counted, so that the note never stops a view that does not read that table; a view
    that does read it says what is missing."""
    kinds = ["kernel"]
    for kind, table in (("memcpy", S.MEMCPY), ("memset", S.MEMSET)):
        try:
            if ex.has(table):
                ex.check_columns(table)
        except MissingColumn:
            continue
        kinds.append(kind)
    return kinds


def merge(parts: pl.DataFrame) -> pl.DataFrame:
    """``counts`` of several parts of one export, as those of the whole."""
    return (
        parts.group_by("kind")
        .agg(
            pl.col("ops", "unlaunched", "unsized", "relaunched", "untimed", *SUMMED).sum(),
            pl.col("first_op_ns", "first_launch_ns").min(),
        )
        .sort("kind")
    )


def accounting(trace, counted: Callable[[], pl.DataFrame] | None = None) -> pl.DataFrame:
    """One row per kind of GPU operation (``kernel``, ``memcpy``, ``memset``) in ``trace``:
    ``ops``, ``unlaunched`` (no launch row), ``first_op_ns``, ``first_launch_ns``, ``untimed``
    (no start or end time, so in none of the others); and, on every row, ``first_call_ns`` and
    ``diagnostics_lost`` (diagnostic messages saying records were lost). ``first_call_ns`` is
    the first CUDA API call where the first operation starts before the first launch call (or
    nothing was launched); otherwise that launch call, which is then no later than the first
    operation either: the first call is found by a scan of the API tables only where it can
    show the trace cut. Cached beside the export. ``counted``: the ``merge``d ``counts`` of the
    whole trace, computed another way (in the pass that makes a view's table:
    ``run.chunked.view_partial``; a piece at a time: ``run.chunked.accounting_counts``); by
    default read whole."""
    ex = trace.export

    def compute() -> pl.DataFrame:
        counted_ = counted() if counted is not None else merge(counts(trace).collect())
        first_op, first_launch = counted_["first_op_ns"].min(), counted_["first_launch_ns"].min()
        launched_first = first_op is not None and first_launch is not None and first_launch <= first_op
        first_call = first_launch if launched_first or counted_.is_empty() else _first_call(ex)
        return counted_.with_columns(first_call_ns=pl.lit(first_call, pl.Int64), diagnostics_lost=pl.lit(_lost(ex), pl.Int64))

    return cache.memo(ex, KEY, compute)


def _first_call(ex) -> int | None:
    """The start of the export's first CUDA API call (None without any), found by SQLite."""
    tables = [t for t in (S.RUNTIME, S.DRIVER) if ex.has(t)]
    if not tables:
        ex.require(S.RUNTIME, events.cuda_hint(ex))
    firsts = [ex.fetch(f'SELECT min("start") AS first FROM {t}', {"first": pl.Int64})["first"][0] for t in tables]
    return min((f for f in firsts if f is not None), default=None)


def _lost(ex) -> int:
    """Diagnostic messages of the export that say records were lost or dropped."""
    if not ex.has("DIAGNOSTIC_EVENT") or "text" not in ex.tables["DIAGNOSTIC_EVENT"]:
        return 0
    like = " OR ".join(f"lower(text) LIKE '%{w}%'" for w in LOST_WORDS)
    with ex.connect() as con:
        return con.execute(f"SELECT count(*) FROM DIAGNOSTIC_EVENT WHERE {like}").fetchone()[0]


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def note(name: str, counted: pl.DataFrame) -> str | None:
    """One line for the report when ``counted`` (``accounting``) shows operations without a
    launch row or without a time, or a trace cut in time; None when every operation has its
    times and its call."""
    if counted.is_empty():
        return None
    rows = {r["kind"]: r for r in counted.iter_rows(named=True)}
    parts, untimed, untimed_ops, unsized, relaunched = [], [], 0, [], []
    for kind in ("kernel", "memcpy", "memset"):
        r = rows.get(kind)
        if r and r["unlaunched"]:
            parts.append(f"{r['unlaunched']:,} of {_count(r['ops'], kind)}")
        if r and r.get("relaunched"):
            relaunched.append(_count(r["relaunched"], kind))
        if r and r.get("unsized"):
            unsized.append(f"{r['unsized']:,} of {_count(r['ops'], kind)}")
        if r and r["untimed"]:
            untimed.append(_count(r["untimed"], kind))
            untimed_ops += r["untimed"]
    first_op = counted["first_op_ns"].min()
    first_call = counted["first_call_ns"][0]
    cut = []
    if first_call is None or (first_op is not None and first_op < first_call):
        ahead = "" if first_call is None else f" {(first_call - first_op) / 1e6:.3f} ms"
        cut.append(f"its GPU operations begin{ahead} before its first API call")
    if counted["diagnostics_lost"][0]:
        cut.append(f"{_count(counted['diagnostics_lost'][0], 'diagnostic')} say records were lost")
    said = []
    if parts:
        said.append(
            f"{', '.join(parts)} have no launch row (API call); they are counted under the empty range, outside every range"
        )
    if untimed:
        one = untimed_ops == 1
        listed = ", ".join(untimed[:-1]) + " and " + untimed[-1] if len(untimed) > 1 else untimed[0]
        said.append(f"{listed} {'has' if one else 'have'} no start or end time and {'is' if one else 'are'} not counted")
    if unsized:
        said.append(f"{' and '.join(unsized)} record no byte count: their sizes and bandwidths are unknown, their times counted")
    if relaunched:
        listed = ", ".join(relaunched[:-1]) + " and " + relaunched[-1] if len(relaunched) > 1 else relaunched[0]
        said.append(
            f"{listed} were launched by API calls that share one correlation id (the call made and the entry "
            "point it wraps, as older CUDA runtimes record them); each is attributed once, to the outermost call"
        )
    said += badrows.note(rows)
    if cut:
        said.append("the trace looks cut in time: " + " and ".join(cut))
    return f"{name}: {'; '.join(said)}" if said else None
