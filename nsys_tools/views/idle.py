"""Why each device sat idle: every interval between its operations (from its first to its
last, as ``utilization`` counts idle time), with a cause, found from the operation that ended
the interval and the thread that launched it:

* ``sync``: a blocking call on the launching thread covered at least half of the interval: a
  ``...Synchronize`` call, or a synchronous copy or set (``cudaMemcpy``, not ``...Async``);
* ``host``: nothing was queued: the launch call of the next operation had not returned when the
  device went idle (the host was late);
* ``memory``: the next operation is a copy or a set that was queued and waited;
* ``other``: the next operation was queued and did not start (a dependency on another stream,
  an event wait), or no launch call is recorded for it.

The table gives, per timeline and cause, the intervals, their total and share of the idle time,
and the longest; with ``longest=N``, instead, the N longest intervals of each timeline with their
cause, the operations around them and the API calls in flight (the next operation's launch
call, and any blocking call on its thread).

Rows are folded in slices of time (``chunked.py``): the blocking calls are side rows, read once
and given to the fold at its start (``start``); each slice carries the operation holding each
timeline busy, as ``gaps`` does, and keeps only totals and its N longest intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import polars as pl

from . import View
from .contract import Fold, option
from .gaps import holding, intervals, timeline

VIEW = View(
    "idle",
    "GPU idle time by cause, or the longest idle intervals",
    ordered=True,
    twin="gpu_gaps recipe (the intervals)",
    rows="device and idle cause (or, `longest=N`, idle interval)",
)


@dataclass(frozen=True)
class Options:
    """The options of ``idle``."""

    longest: int = option(0, "--longest", "List the N longest idle intervals of each device instead.", at="partial", min=0)


CAUSES = ("sync", "host", "memory", "other")
COLUMNS = ("cause", "intervals", "total_ns", "idle_pct", "longest_ns", "longest_start_ns")
LISTED = (
    "gap_ns",
    "gap_start_ns",
    "gap_end_ns",
    "cause",
    "before",
    "after",
    "launch",
    "launch_start_ns",
    "launch_end_ns",
    "blocking",
    "blocking_start_ns",
    "blocking_end_ns",
)
OP = ("kind", "name", "global_tid", "api_name", "api_start_ns", "api_end_ns")
CALL = ("global_tid", "call", "call_start_ns", "call_end_ns")


# What ``blocking`` can match, as SQL ``LIKE`` patterns: the export is read through them, then
# ``blocking`` decides (``LIKE`` ignores case, and cannot say "not Async").
BLOCKING_LIKE = ("%Synchronize%", "cuMemcpy%", "cuMemset%", "cudaMemcpy%", "cudaMemset%")


def blocking(name: pl.Expr) -> pl.Expr:
    """A call that blocks its thread: a synchronization, or a copy or set that is not ``Async``."""
    text = name.cast(pl.String)
    copy = text.str.contains(r"^cu(da)?Mem(cpy|set)") & ~text.str.contains("Async")
    return text.str.contains("Synchronize") | copy


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    """The GPU operations (``by`` columns, times, and their launch call) and, as rows with no
    ``start_ns``, the blocking API calls."""
    line = timeline(by)
    ops = trace.gpu_ops(attributed=True, ranges=False, columns=[*line, "start_ns", "end_ns", *OP])
    ops = ops.select(*line, "start_ns", "end_ns", pl.col("kind").cast(pl.String), *OP[1:])
    calls = trace.api(columns=["global_tid", "name", "start_ns", "end_ns"], like=BLOCKING_LIKE).filter(blocking(pl.col("name")))
    calls = calls.select("global_tid", call="name", call_start_ns="start_ns", call_end_ns="end_ns")
    return pl.concat([ops, calls], how="diagonal_relaxed")


def split(rows: pl.LazyFrame, keys: Sequence[str]) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    ops = rows.filter(pl.col("start_ns").is_not_null()).drop(*CALL[1:])
    calls = rows.filter(pl.col("start_ns").is_null()).select(*CALL)
    return ops, calls


class Passed(NamedTuple):
    """The blocking calls that earlier slices passed (``near``): how many, and each thread's last of them."""

    count: int
    last: pl.DataFrame


@dataclass
class IdleFold(Fold):
    """The fold's state: the partials so far and the operation holding each timeline busy
    (``Fold``), the blocking calls in order of start, and those that earlier slices passed."""

    calls: pl.DataFrame | None = None
    passed: Passed | None = None


def start(sides: list, keys: Sequence[str]) -> IdleFold:
    """The fold's first state: no partials, no operation held, the blocking calls in order of
    start, and none of them passed yet (``near``)."""
    calls = pl.concat(sides, how="vertical_relaxed") if sides else pl.DataFrame(schema=dict.fromkeys(CALL, pl.Int64))
    calls = calls.with_columns(pl.col("call").cast(pl.String)).unique().sort("call_start_ns", "global_tid", "call_end_ns", "call")
    return IdleFold(calls=calls, passed=Passed(0, calls.clear()))


def near(calls: pl.DataFrame, passed: Passed, first: int, last: int) -> tuple[pl.DataFrame, Passed]:
    """The blocking calls that gaps ending between ``first`` and ``last`` can find (the as-of
    join takes each thread's last call to start before a gap's end): those that start from
    ``first`` to ``last``, and each thread's last one before ``first``. ``passed``: how many
    calls earlier slices passed and each thread's last of them (slices come in order of time, so
    each slice looks at its own calls, not at all of them). Returns the calls and the new ``passed``."""
    done, before = passed
    starts = calls.get_column("call_start_ns")
    lo, hi = starts.search_sorted(first, side="left"), starts.search_sorted(last, side="right")
    if lo < done:  # an earlier time than the last slice's: counted again from the first call
        done, before = 0, calls.clear()
    if lo > done:
        before = pl.concat([before, calls.slice(done, lo - done)]).group_by("global_tid", maintain_order=True).last()
        before = before.select(calls.columns).sort("call_start_ns", "global_tid", "call_end_ns", "call")
    return pl.concat([before, calls.slice(lo, hi - lo)]), Passed(lo, before)


def slice_gaps(
    ops: pl.DataFrame, held: pl.DataFrame | None, calls: pl.DataFrame, passed: Passed, line: list[str]
) -> tuple[pl.LazyFrame, pl.DataFrame, Passed]:
    """A slice's gaps, classified: found among its operations and the one holding each timeline
    busy from the slices before (``held``, ``gaps.holding``), which closes the slice's first gap.
    Returns the gaps, those operations (the next ``held`` comes from them) and the calls passed
    (``near``)."""
    both = ops if held is None else pl.concat([held, ops], how="vertical_relaxed")
    # A gap ends where an operation starts: its probe (a nanosecond before) is within these.
    first, last = both.select(first=pl.col("start_ns").min() - 1, last=pl.col("start_ns").max()).row(0)
    seen, passed = (calls.clear(), passed) if first is None else near(calls, passed, first, last)
    return classify(gaps_of(both.lazy(), line), seen), both, passed


def classify(gaps: pl.LazyFrame, calls: pl.DataFrame) -> pl.LazyFrame:
    """Each gap's cause, with the blocking call in flight on the next operation's launching
    thread (the last to start before the gap ended, if it covers half the gap or more);
    ``calls`` in order of start."""
    probe = gaps.with_columns(probe_ns=pl.col("gap_end_ns") - 1).sort("probe_ns")
    found = probe.join_asof(
        calls.lazy(),
        left_on="probe_ns",
        right_on="call_start_ns",
        by="global_tid",
        strategy="backward",
        check_sortedness=False,
    )
    covered = pl.min_horizontal("call_end_ns", "gap_end_ns") - pl.max_horizontal("call_start_ns", "gap_start_ns")
    # (min/max_horizontal skip nulls: a gap with no call before it on its thread has none in flight)
    found = found.with_columns(in_flight=pl.col("call_start_ns").is_not_null() & (covered * 2 >= pl.col("gap_ns")))
    in_flight = pl.col("in_flight")
    cause = (
        pl.when(in_flight)
        .then(pl.lit("sync"))
        .when(pl.col("api_end_ns") > pl.col("gap_start_ns"))
        .then(pl.lit("host"))
        .when(pl.col("after_kind") != "kernel")
        .then(pl.lit("memory"))
        .otherwise(pl.lit("other"))
    )
    return found.with_columns(
        cause=cause,
        blocking=pl.when(in_flight).then("call"),
        blocking_start_ns=pl.when(in_flight).then("call_start_ns"),
        blocking_end_ns=pl.when(in_flight).then("call_end_ns"),
    )


def gaps_of(ops: pl.LazyFrame, line: list[str]) -> pl.LazyFrame:
    """Every idle interval of each timeline (``gaps.intervals``), with the operations before and after it."""
    return intervals(ops, line, {"before": "name"}).select(
        *line,
        "gap_start_ns",
        "before",
        "global_tid",
        "api_end_ns",
        gap_ns=pl.col("start_ns") - pl.col("gap_start_ns"),
        gap_end_ns="start_ns",
        after="name",
        after_kind="kind",
        launch="api_name",
        launch_start_ns="api_start_ns",
        launch_end_ns="api_end_ns",
    )


def window(ops: pl.DataFrame, keys: Sequence[str], state: IdleFold, *, longest: int = 0) -> IdleFold:
    """One slice of the operations, after the previous slices': its gaps, classified, as totals
    per cause (or its ``longest`` gaps per timeline), added to ``state`` (``start``)."""
    found, calls = state.found, state.calls
    line = timeline(keys)
    ops = ops.with_columns(pl.col(pl.Categorical).cast(pl.String))
    gaps, both, passed = slice_gaps(ops, state.held, calls, state.passed, line)
    if longest:
        part = gaps.sort("gap_ns", "gap_start_ns", descending=[True, False]).group_by(line, maintain_order=True).head(longest)
        part = part.select(*line, *LISTED, listed=pl.lit(longest, pl.Int64))
    else:
        part = gaps.group_by(*line, "cause").agg(
            intervals=pl.len().cast(pl.Int64),
            total_ns=pl.col("gap_ns").sum(),
            longest_ns=pl.col("gap_ns").max(),
            longest_start_ns=pl.col("gap_start_ns").sort_by("gap_ns", "gap_start_ns", descending=[True, False]).first(),
        )
    # Texts as categories: the few rows kept would otherwise point into the slice's string
    # buffers and keep them, slice after slice (11.75 GB at 30M kernels with ``longest=10``).
    found.append(part.with_columns(pl.col(pl.String).cast(pl.Categorical)).collect())
    return IdleFold(found, holding(both, line), calls, passed)


def close(state: IdleFold, sides: list, keys: Sequence[str]) -> pl.LazyFrame:
    found = state.found
    if not found:
        return pl.LazyFrame(schema={**dict.fromkeys(timeline(keys), pl.Null), "cause": pl.String, "total_ns": pl.Int64})
    return pl.concat(found, how="diagonal_relaxed").lazy()


def partial(rows: pl.LazyFrame, keys: Sequence[str], *, longest: int = 0) -> pl.LazyFrame:
    ops, calls = split(rows, keys)
    state = start([calls.collect()], keys)
    return close(window(ops.collect(), keys, state, longest=longest), [], keys)


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    line = timeline(keys)
    names = partials.collect_schema().names()
    if "listed" in names:
        n = partials.select(pl.col("listed").max()).collect().item() or 0  # no rows: none listed
        ranked = partials.sort("gap_ns", "gap_start_ns", descending=[True, False], nulls_last=True)
        return ranked.group_by(line, maintain_order=True).head(n).select(*line, *LISTED)
    if "intervals" not in names:
        return pl.LazyFrame(schema={**dict.fromkeys(line, pl.Null), **dict.fromkeys(COLUMNS, pl.Int64)})
    merged = partials.group_by(*line, "cause").agg(
        pl.col("intervals").sum(),
        pl.col("total_ns").sum(),
        pl.col("longest_start_ns").sort_by("longest_ns", "longest_start_ns", descending=[True, False]).first(),
        pl.col("longest_ns").max(),
    )
    return (
        merged.with_columns(idle_pct=pl.col("total_ns") * 100.0 / pl.col("total_ns").sum().over(line) if line else None)
        .select(*line, *COLUMNS)
        .sort([*line, "total_ns"], descending=[False] * len(line) + [True], nulls_last=True)
    )


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.idle``)."""
    from ..render import view_charts

    return view_charts.idle(table)
