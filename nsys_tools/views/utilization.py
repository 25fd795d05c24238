"""How busy each device was: the share of its time running compute kernels, communication
kernels (NCCL), memory operations, and idle; over the whole run or per time window
(``bin_ns``, ``--window 10ms``). Twins: the ``gpu_time_util`` and ``cuda_gpu_time_util_map``
recipes of Nsight Systems.

A device's time runs from its first operation's start to its last one's end (in a window of
``bin_ns``, that span cut to the window; windows are aligned to the session start). Overlapping
work is counted once, as the union of intervals, and split by precedence: ``compute_ns`` is the
union of compute kernels; ``communication_ns`` what NCCL kernels add to it (communication not
hidden behind compute); ``memory_ns`` what copies and sets add to both. So compute,
communication, memory and idle add up to the span. A kernel is communication when its name
starts with ``nccl``.

The unions are exact on any slicing of the operations in order of start time (``chunked.py``):
each slice carries, per timeline and class, the end of the union so far, and emits only the new
disjoint pieces, which sum across slices, pieces and exports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from ..errors import UsageError
from . import View
from .contract import Fold, option
from .gaps import timeline

VIEW = View(
    "utilization",
    "per device: busy, compute, communication, memory, idle",
    ordered=True,
    twin="gpu_time_util, cuda_gpu_time_util_map recipes",
    rows="device (and time window): busy, compute, communication, memory, idle",
)


@dataclass(frozen=True)
class Options:
    """The options of ``utilization``."""

    bin_ns: int = option(
        0, "--window", "One row per window of this length (10ms); 0: the whole run.", at="partial", parse="time", min=0
    )


# Classes in order of precedence; level L of the union holds the classes up to L (0: compute;
# 1: compute and communication; 2: all), and level 3 communication alone (for ``overlap``).
CLASSES = ("compute", "communication", "memory")
LEVELS = 4


def in_level(level: int) -> pl.Expr:
    return pl.col("cls") == 1 if level == 3 else pl.col("cls") <= level


PARTS = ("compute_ns", "communication_ns", "memory_ns")
COLUMNS = (
    "start_ns",
    "end_ns",
    "span_ns",
    "busy_ns",
    *PARTS,
    "idle_ns",
    "busy_pct",
    "compute_pct",
    "communication_pct",
    "memory_pct",
    "idle_pct",
)


MAX_WINDOWS = 100_000  # windows a --window table may hold: a span that needs more is refused


def _ns_text(ns: int) -> str:
    """``ns`` in the largest unit that holds it whole, as ``--window`` reads it (``50ms``)."""
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"


def bounded(spans: pl.DataFrame, bin_ns: int) -> None:
    """Refuse ``--window bin_ns`` when the ``first_ns``-``last_ns`` spans (one row per timeline)
    need more than ``MAX_WINDOWS`` windows, before any is made: the error says how many, and a
    window that fits (1, 2 or 5 times a power of ten)."""
    first, last = spans["first_ns"], spans["last_ns"]
    needed = int(((last - 1) // bin_ns - first // bin_ns + 1).clip(lower_bound=1).sum())
    if needed <= MAX_WINDOWS:
        return
    lengths = (spans["last_ns"] - spans["first_ns"]).clip(lower_bound=0)
    least = -(-int(lengths.sum()) // max(MAX_WINDOWS - 2 * spans.height, 1))
    fit = next(m * 10**k for k in range(19) for m in (1, 2, 5) if m * 10**k >= least)
    where = f" on the longest of {spans.height} timelines" if spans.height > 1 else ""
    raise UsageError(
        None,
        f"--window {_ns_text(bin_ns)} needs {needed:,} windows to cover the span ({int(lengths.max()) / 1e9:,.3f} s{where}); "
        f"at most {MAX_WINDOWS:,} are made",
        f"use --window {_ns_text(fit)} or longer, or narrow the span with --from/--to",
    )


def op_class(kind: pl.Expr, name: pl.Expr) -> pl.Expr:
    """0 compute, 1 communication (a kernel named ``nccl...``), 2 memory (memcpy, memset)."""
    nccl = name.cast(pl.String).str.slice(0, 4).str.to_lowercase() == "nccl"  # cut first: names can be MBs long
    return pl.when(kind.cast(pl.String) != "kernel").then(2).when(nccl).then(1).otherwise(0).cast(pl.Int8)


def read(trace, by: Sequence[str]) -> pl.LazyFrame:
    line = timeline(by)
    ops = trace.gpu_ops(attributed=False, columns=[*line, "kind", "name", "start_ns", "end_ns"])
    return ops.select(*line, "start_ns", "end_ns", cls=op_class(pl.col("kind"), pl.col("name")))


def union_pieces(ops: pl.LazyFrame, line: list[str], level: int, carried: pl.LazyFrame | None) -> pl.LazyFrame:
    """The union of the operations of classes up to ``level`` on each timeline, as disjoint
    pieces ``lo, hi``: each operation's part past the end of all before it (and past
    ``carried``'s ``carry_ns``, the end of the union of earlier slices)."""
    sub = ops.filter(in_level(level))
    if carried is not None:
        sub = sub.join(carried.filter(pl.col("level") == level).select(*line, "carry_ns"), on=line, how="left", nulls_equal=True)
    else:
        sub = sub.with_columns(carry_ns=pl.lit(None, pl.Int64))
    before = pl.col("end_ns").cum_max().shift(1).over(line)
    ordered = sub.sort([*line, "start_ns", "end_ns"], nulls_last=True)
    lo = pl.max_horizontal("start_ns", before, "carry_ns")
    return ordered.select(*line, level=pl.lit(level, pl.Int8), lo=lo, hi="end_ns").filter(pl.col("hi") > pl.col("lo"))


def start(sides: list, keys: Sequence[str]) -> Fold:
    """The fold's first state: no pieces, no union yet."""
    return Fold()


def window(ops: pl.DataFrame, keys: Sequence[str], state: Fold, *, bin_ns: int = 0) -> Fold:
    """One slice of the operations (all starting after the previous slices'): its new union
    pieces, binned, and its span, added to ``state``: the partials so far (``found``) and the
    union's end per timeline and level (``held``)."""
    found, carried = state.found, state.held
    line = timeline(keys)
    lazy = ops.lazy()
    pieces = pl.concat([union_pieces(lazy, line, level, None if carried is None else carried.lazy()) for level in range(LEVELS)])
    span = lazy.group_by(line).agg(first_ns=pl.col("start_ns").min(), last_ns=pl.col("end_ns").max())
    if bin_ns:  # pieces lie in the span, disjoint: they take at most its windows, and one more each
        bounded(span.collect(), bin_ns)
        b = pl.col("b") * bin_ns
        pieces = (
            pieces.with_columns(b=pl.int_ranges(pl.col("lo") // bin_ns, (pl.col("hi") - 1) // bin_ns + 1))
            .explode("b")
            .with_columns(start_ns=b, busy_ns=pl.min_horizontal("hi", b + bin_ns) - pl.max_horizontal("lo", b))
        )
    else:
        pieces = pieces.with_columns(start_ns=pl.lit(None, pl.Int64), busy_ns=pl.col("hi") - pl.col("lo"))
    busy = pieces.group_by(*line, "start_ns", "level").agg(pl.col("busy_ns").sum())
    part = pl.concat([busy, span.with_columns(bin_ns=pl.lit(bin_ns, pl.Int64))], how="diagonal_relaxed")
    found.append(part.collect())
    return Fold(found, union_ends(lazy, line, carried, LEVELS))


def union_ends(ops: pl.LazyFrame, line: list[str], carried: pl.DataFrame | None, levels: int) -> pl.DataFrame:
    """Where each timeline's union at each of the first ``levels`` levels ends after a slice's
    ``ops`` and the slices before it (``carried``): the ``carried`` of ``union_pieces``."""
    ends = pl.concat([ops.filter(in_level(level)).with_columns(level=pl.lit(level, pl.Int8)) for level in range(levels)])
    ends = ends.group_by(*line, "level").agg(carry_ns=pl.col("end_ns").max())
    if carried is not None:
        ends = pl.concat([carried.lazy(), ends]).group_by(*line, "level").agg(pl.col("carry_ns").max())
    return ends.collect()


def split(ops: pl.LazyFrame, keys: Sequence[str]) -> tuple[pl.LazyFrame, None]:
    return ops, None


def close(state: Fold, sides: list, keys: Sequence[str]) -> pl.LazyFrame:
    if not state.found:
        return pl.LazyFrame()
    return pl.concat(state.found, how="diagonal_relaxed").lazy()


def partial(ops: pl.LazyFrame, keys: Sequence[str], *, bin_ns: int = 0) -> pl.LazyFrame:
    """The union pieces of all the operations at once: one slice."""
    return close(window(ops.collect(), keys, Fold(), bin_ns=bin_ns), [], keys)


def finalize(partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    line = timeline(keys)
    if not partials.collect_schema().names():
        return pl.LazyFrame(schema={**dict.fromkeys(line, pl.Null), **dict.fromkeys(COLUMNS, pl.Int64)})
    table = levels(partials, line)
    span = pl.col("end_ns") - pl.col("start_ns")
    l0, l1, l2 = pl.col("l0"), pl.col("l1"), pl.col("l2")
    parts = {"compute_ns": l0, "communication_ns": l1 - l0, "memory_ns": l2 - l1}
    pct = {f"{k[:-3]}_pct": pl.col(k) * 100.0 / pl.col("span_ns") for k in ("busy_ns", *PARTS, "idle_ns")}
    return (
        table.with_columns(span_ns=span, busy_ns=pl.col("l2"), **parts)
        .with_columns(idle_ns=pl.col("span_ns") - pl.col("busy_ns"))
        .with_columns(**pct)
        .select(*line, *COLUMNS)
        .sort([*line, "start_ns"], nulls_last=True)
    )


def levels(partials: pl.LazyFrame, line: list[str]) -> pl.LazyFrame:
    """Per timeline and window: ``start_ns``, ``end_ns`` and the union's length at each level
    (``l0`` ... ``l3``)."""
    spans = (
        partials.filter(pl.col("first_ns").is_not_null())
        .group_by(line)
        .agg(pl.col("first_ns").min(), pl.col("last_ns").max(), pl.col("bin_ns").max())
        .collect()
    )
    width = int(spans["bin_ns"].max() or 0)
    if width:
        bounded(spans, width)
    spans = spans.lazy()
    binned, width = pl.col("bin_ns") > 0, pl.col("bin_ns")
    b = pl.col("b") * width
    bins = pl.int_ranges(pl.col("first_ns") // width, (pl.col("last_ns") - 1) // width + 1)
    rows = (
        spans.with_columns(b=pl.when(binned).then(bins))
        .explode("b")
        .with_columns(
            key_ns=pl.when(binned).then(b),
            start_ns=pl.when(binned).then(pl.max_horizontal("first_ns", b)).otherwise("first_ns"),
            end_ns=pl.when(binned).then(pl.min_horizontal("last_ns", b + pl.col("bin_ns"))).otherwise("last_ns"),
        )
    )
    level = [pl.col("busy_ns").filter(pl.col("level") == k).sum().alias(f"l{k}") for k in range(LEVELS)]
    busy = partials.filter(pl.col("level").is_not_null()).group_by(*line, "start_ns").agg(level).rename({"start_ns": "key_ns"})
    table = rows.join(busy, on=[*line, "key_ns"], how="left", nulls_equal=True)
    table = table.with_columns(pl.col("l0", "l1", "l2", "l3").fill_null(0))
    return table


def chart(table: pl.DataFrame):
    """The ``--chart`` of the table (``render.view_charts.utilization``)."""
    from ..render import view_charts

    return view_charts.utilization(table)
