"""A view's partial table of an export of any size, in bounded memory.

The frame layer reads each table whole, and attribution joins every GPU operation with the API
call that launched it: an operation and its call share a correlation id but may sit anywhere
in their tables, and the runtime table holds ten times as many rows as the kernel table. Whole,
that costs about half the export's size in memory. Here the same pipeline (``Trace`` and the
view's ``read`` and ``partial``) runs a piece at a time, as a Grace hash join (Kitsuregawa et
al., 1983):

1. a dry run of the view on empty event tables records which reads of the large tables
   (kernels, memory operations, runtime and driver calls) it makes, and with which columns
   (``DryRun``, the export's ``PlannedReads``);
2. each of those reads is made one rowid window at a time (``Export.windows``) and its rows are
   split by correlation id into buckets (``spill.Spill``: in memory up to a budget, on disk
   past it), so that an operation and the calls that launched it land in the same bucket;
3. the view runs once per group of buckets, on an export whose large tables hold only that
   group's rows (``Piece``: a read the dry run did not record is an error; the one read of a
   large table by key, the exact lookup of a launch outside the name filter, goes to the file
   by ``select(lookup=True)``); the NVTX ranges, names and other small tables are read whole,
   once, and held for every piece (``Export.held``);
4. the pieces' partial tables concatenate into the export's: they merge exactly, as partials
   of several exports do (with the partial of a view's ``once`` rows, those of the small tables
   alone, read one time beside them: ``nccl``'s payload ranges).

An export whose large tables one piece would hold whole (``fits``: a small export) is read in
one piece without the steps that cut it: no dry run, no buckets, no thread reading ahead.

Attribution depends only on the launching call's thread and times, so no NVTX range is cut by a
window or a bucket. Views whose partial needs the operations in time order (``views.ORDERED``:
``ranges``, the busy time of each range instance; ``gaps``, each timeline) run their ``read`` and
``split`` per group of buckets instead, and the rows go to a second store, bucketed by start
time into ``SLOTS`` consecutive slots of the operations' span: its groups of buckets are slices
of the timeline in order, and the view's ``window`` folds them one after another, carrying what
the next slice needs (a timeline's busy operation, an instance's last end), then ``close`` merges.
The rows' text columns travel through that store as integer codes (``codes.Codes``): each name
is held once, however many operations carry it and however long it is.
Peak memory is set by ``WINDOW_ROWS``, ``WINDOW_BYTES``, ``BUCKET_BYTES`` and ``SPILL_BYTES``, not by the
export (and, for ``ranges``, by the number of range instances that launch GPU work; where its
ranges nest deeply, by its operations, held once each: ``views/nested.py``).

Using the cores: each window is read in rowid partitions, one per thread (``Export.select``),
and the next window is read while this one is bucketed. Pieces run one after another: each sees
nearly all the NVTX ranges, so smaller pieces run side by side cost more range matching than
they save (at 30M kernels and 236k ranges, quarter-size pieces four at a time took 72 s on two
cores against 48 s one at a time: ``reports/big-exports.md``). How an export is cut does not
depend on the cores, so neither do its partial tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from .. import views
from ..read import accounted
from ..read import schema as S
from ..read.export import Export, read_error, reading
from ..read.schema import Field
from ..read.trace import Trace
from ..views.contract import OrderedView
from .codes import Codes
from .spill import Spill

WINDOW_ROWS = 2_000_000  # rows of a table read at a time
WINDOW_BYTES = 80 * 2**20  # and at most this many bytes of them (8 a field): wide reads take fewer rows
BUCKET_BYTES = 48 * 2**20  # rows of the large tables a piece holds, in bytes
SPILL_BYTES = 128 * 2**20  # held in memory before buckets go to disk
SLOTS = 4  # time slots per slice of the ordered views' rows (each flush to disk writes every slot)
SLICE_BYTES = 16 * 2**20  # rows of an ordered view folded at a time (sorted and joined: a few copies)
LARGE = (S.KERNEL, S.MEMCPY, S.MEMSET, S.RUNTIME, S.DRIVER)
KEY = "correlation_id"

Read = tuple[str, tuple[Field, ...], str]  # (table, fields, where) of one read of a large table
Request = tuple[str, Sequence[str], dict]  # a view, its group-by columns and its options


@dataclass
class DryRun:
    """The reads of the large tables a view makes (``PlannedReads``): each is answered with no
    rows and recorded, read -> the name of its stream in the spill. Reads of one table with one
    filter become one read of all the columns they ask for (``merged``): the table is read once,
    however many frames of a piece ask for it."""

    tables: tuple[str, ...] = LARGE
    reads: dict[Read, str] = field(default_factory=dict)

    def rows(self, ex: Export, table: str, fields: tuple[Field, ...], where: str) -> pl.LazyFrame:
        self.reads = merged(self.reads, (table, fields, where))
        schema = ex.query(table, fields, where)[1]
        return pl.LazyFrame(schema={c: t or pl.Null for c, t in schema.items()})


def merged(reads: dict[Read, str], read: Read) -> dict[Read, str]:
    """``reads`` with ``read`` recorded: into the read of the same table and filter, its fields
    added, unless one of its names stands for another field there; else as a new stream."""
    table, fields, where = read
    for t, have, w in reads:
        if (t, w) != (table, where):
            continue
        names = {f.name: f for f in have}
        if any(names.get(f.name, f) != f for f in fields):
            continue
        wider = (*have, *(f for f in fields if f.name not in names))
        return {(k if k != (t, have, w) else (t, wider, w)): v for k, v in reads.items()}
    return {**reads, read: f"read{len(reads)}"}


@dataclass
class Piece:
    """The recorded reads of the large tables (``PlannedReads``), answered with one group of
    buckets' rows. A read the dry run did not record has no rows here: it is an error, not a
    read of the whole table."""

    spill: Spill
    streams: dict[Read, str]
    group: tuple[int, ...]
    tables: tuple[str, ...] = LARGE
    taken: dict[str, pl.DataFrame] = field(default_factory=dict)

    def rows(self, ex: Export, table: str, fields: tuple[Field, ...], where: str) -> pl.LazyFrame:
        stream = next(
            (s for (t, have, w), s in self.streams.items() if (t, w) == (table, where) and set(fields) <= set(have)), None
        )
        if stream is None:
            raise RuntimeError(
                f"{ex.source}: a piece read {table} ({', '.join(f.name for f in fields)}"
                + (f" where {where}" if where else "")
                + ") that the dry run did not; read it with select(lookup=True) if it is a lookup by key"
            )
        if stream not in self.taken:
            self.taken[stream] = self.spill.take(stream, list(self.group))
        return self.taken[stream].lazy().select(f.name for f in fields)


def bucket_count(ex: Export, reads: Iterable[Read]) -> int:
    """Enough buckets that none can exceed ``BUCKET_BYTES``, from the tables' row counts (an
    upper bound: most API calls are not launches); ``Spill.groups`` then joins buckets up to
    that size by what they actually received."""
    total = sum(ex.rows(table) * 8 * len(fields) for table, fields, _ in reads if ex.has(table))
    return max(1, -(-total // BUCKET_BYTES))


def view_partial(ex: Export, view: str, by: Sequence[str], options: dict, counted: list | None = None) -> pl.DataFrame:
    """View ``view``'s partial table of ``ex`` (``views.partial``), in bounded memory when the
    view allows it; ``options["window"]`` (a ``read.window.WindowSpec``) is resolved once, on the
    whole export. ``counted``: a list that gets the export's ``read.accounted.counts`` (all its
    operations, whatever the window), made from the same pieces as the table where the view is
    read in pieces, or from the same read where the export ``fits`` in one; else left empty."""
    return view_partials(ex, [(view, by, options)], counted)[0]


def fits(ex: Export) -> bool:
    """Whether one piece would hold the whole export, in memory and in one slice of an ordered
    view: its large tables' rows, every column counted (``bucket_count``'s bound, whatever a
    view reads), within ``BUCKET_BYTES``, ``SPILL_BYTES`` and ``SLICE_BYTES``. Such an export is
    read whole, in no more memory than one piece takes."""
    total = sum(ex.rows(t) * 8 * len(ex.tables[t]) for t in LARGE if ex.has(t))
    return total <= min(BUCKET_BYTES, SPILL_BYTES, SLICE_BYTES)


def view_partials(ex: Export, requests: Sequence[Request], counted: list | None = None) -> list[pl.DataFrame]:
    """The partial tables of several views of ``ex`` (each ``view_partial``'s), where views read
    in pieces read the same large tables with the same filters (the same ``DryRun`` reads) from
    one read of them: each such table is read and bucketed once, with the columns they all ask
    for, and each piece goes through every one of those views in turn. ``summary`` reads six
    views of one export; the five that read its operations and their launch calls share one
    read, ``sync`` (every API call) has its own. ``counted``: as ``view_partial``'s, from the
    pieces of the first pass."""
    if fits(ex):  # one piece would hold it all: read whole, with no dry run and no buckets
        ex = replace(ex, held={})
        jobs = [_Job.of(ex, view, by, options, whole=True) for view, by, options in requests]
        for job in jobs:
            job.finish(ex)
        if counted is not None:
            counted.append(accounted.merge(_counts(Trace(ex)).collect()))
        return [job.partial for job in jobs]
    jobs = [_Job.of(ex, view, by, options) for view, by, options in requests]
    passes = _passes([j for j in jobs if j.mode != "whole"], ex)
    counts: list[pl.DataFrame] = []
    slots = time_slots(ex) if any(j.mode == "ordered" for j in jobs) else None
    for i, shared in enumerate(passes):
        count = counted is not None and i == 0
        with ExitStack() as stack:
            for job in shared:
                job.begin(stack, slots)
            for piece in _split(ex, [(job.plan, job.window) for job in shared], counts=count):
                if count:
                    counts.append(_counts(Trace(piece)).collect())
                for job in shared:
                    job.add(Trace(piece, window=job.window))
            for job in shared:
                job.finish(ex)
    _merged(counts, counted)
    for job in jobs:
        if job.mode == "whole":
            job.finish(ex)
    return [job.partial for job in jobs]


def _passes(jobs: list[_Job], ex: Export) -> list[list[_Job]]:
    """``jobs`` in groups, each read in one pass: those whose dry runs read one table with one
    filter (or are linked so through others), in the order of their first job."""
    whole = Export(path=ex.path, source=ex.source, tables=ex.tables, not_null=ex.not_null, held={})
    groups: list[tuple[set, list[int]]] = []
    for i, job in enumerate(jobs):
        dry = DryRun()
        job.plan(Trace(replace(whole, planned=dry), window=job.window)).collect()
        keys = {(table, where) for table, _, where in dry.reads}
        joined = [g for g in groups if g[0] & keys]
        groups = [g for g in groups if not g[0] & keys] + [
            (keys.union(*(k for k, _ in joined)), [*(n for _, g in joined for n in g), i])
        ]
    return [[jobs[n] for n in sorted(g)] for _, g in sorted(groups, key=lambda g: min(g[1]))]


@dataclass
class _Job:
    """One view's share of ``view_partials``: how it is read (``mode``: ``pieces``, a splittable
    view's partial per piece; ``ordered``, its rows per piece folded in time order after;
    ``whole``) and what it has gathered; ``partial`` once finished."""

    view: str
    by: Sequence[str]
    options: dict
    window: Any
    mode: str
    parts: list[pl.DataFrame] = field(default_factory=list)
    sides: list[pl.DataFrame] = field(default_factory=list)
    codes: Codes | None = None
    timed: Spill | None = None
    slot: pl.Expr | None = None
    partial: pl.DataFrame | None = None

    @classmethod
    def of(cls, ex: Export, view: str, by: Sequence[str], options: dict, whole: bool = False) -> _Job:
        options = dict(options)
        window = views.windowed(Trace(ex), options.pop("window", None)).window
        mode = "pieces" if views.splits(view, options) else "ordered" if views.spec(view).ordered else "whole"
        mode = "whole" if whole else mode
        return cls(view, by, options, window, mode)

    def plan(self, trace: Trace) -> pl.LazyFrame:
        """What is computed on each piece: a splittable view's partial; an ordered view's rows
        (its partial needs typed columns; its reads are all in ``read``)."""
        if self.mode == "pieces":
            return views.partial(self.view, trace, self.by, part="pieces", **self.options)
        return views.read(self.view, trace, self.by, **self.options)

    def begin(self, stack: ExitStack, slots: tuple[int, int, int] | None) -> None:
        """An ordered view's store of rows by time slot (``time_slots``), held beside the pieces'."""
        if self.mode != "ordered":
            return
        first, last, n = slots
        slot = ((pl.col("start_ns") - first) * n / (last - first + 1)).floor().cast(pl.Int64)
        self.slot = slot.clip(0, n - 1).fill_null(n - 1)
        self.codes = Codes()
        self.timed = stack.enter_context(Spill(n, "_slot", SPILL_BYTES // 4))

    def add(self, trace: Trace) -> None:
        """One piece's share: a splittable view's partial, or an ordered view's rows, read once
        (a split reads its input up to three times: rows, side rows, ranges' ancestry); the
        trace's frames (the attributed operations, its NVTX ranges) are not kept while the
        split runs, nor the rows once stored."""
        if self.mode == "pieces":
            self.parts.append(self.plan(trace).collect())
            return
        frame = self.plan(trace).collect().lazy()
        trace = None
        rows, side = views.get(self.view).split(frame, self.by)
        frame = None
        self.timed.add("rows", self.codes.encode(rows.with_columns(_slot=self.slot).collect()))  # names as numbers
        if side is not None:  # the same rows from every piece that sees them: kept once
            self.sides = [pl.concat([*self.sides, side.collect()], how="vertical_relaxed").unique()]

    def finish(self, ex: Export) -> None:
        """The partial table: the pieces' partials with the small tables' rows read once beside
        them (``once``); the ordered rows folded slice by slice in time order; or the whole read."""
        if self.mode == "pieces":
            once = views.partial(self.view, Trace(ex, window=self.window), self.by, part="once", **self.options)
            self.partial = pl.concat([*self.parts, *([] if once is None else [once.collect()])], how="diagonal_relaxed")
        elif self.mode == "ordered":
            module: OrderedView = views.get(self.view)
            if self.timed.flushes:  # past the budget: the rest goes to disk too, the folds need the memory
                self.timed.flush()
            # A view that needs the side rows while it folds (``idle``: the blocking calls) starts from them.
            state = module.start(self.sides, self.by)
            for group in self.timed.groups(SLICE_BYTES):
                rows = self.codes.decode(self.timed.take("rows", group).drop("_slot"))
                state = module.window(rows, self.by, state, **views.window_options(self.view, self.options))
            self.partial = module.close(state, self.sides, self.by).collect()
        else:
            self.partial = views.partial(self.view, Trace(ex, window=self.window), self.by, **self.options).collect()


def accounting_counts(ex: Export) -> pl.DataFrame:
    """``read.accounted.counts`` of ``ex`` (its operations and launch calls: the export's two
    largest tables), a piece at a time, merged: for a table read another way than in pieces."""
    return accounted.merge(pl.concat(each_piece(ex, accounted.counts)))


def each_piece(ex: Export, plan: Callable[[Trace], pl.LazyFrame]) -> Iterator[pl.DataFrame]:
    """``plan``'s frame of each piece of ``ex`` (split by launch, ``_split``), one piece at a
    time; of the whole export where it ``fits``. Counts and sums of the pieces' frames merge into
    the whole export's, as do rows kept per operation: an operation, its launch call and every
    operation sharing its correlation id are in one piece."""
    traces = [Trace(replace(ex, held={}))] if fits(ex) else _pieces(ex, plan)
    for trace in traces:
        yield plan(trace).collect()


def _counts(trace: Trace) -> pl.LazyFrame:
    """``read.accounted.counts`` of a piece: all its operations, outside the view's window too."""
    return accounted.counts(trace.within(None))


def _merged(counts: list[pl.DataFrame], counted: list | None) -> None:
    if counted is not None and counts:
        counted.append(accounted.merge(pl.concat(counts)))


def _split(ex: Export, plans: Sequence[tuple[Callable[[Trace], pl.LazyFrame], Any]], counts: bool = False) -> Iterator[Export]:
    """``ex`` as exports whose large tables hold one group of buckets each (split by launch), for
    the reads that each of ``plans`` (what is computed on each piece, and through which window)
    makes, and with ``counts`` those of ``_counts`` too (one read of each table serves them all)."""
    # Small tables are read once for every piece, held in memory (not the Parquet cache).
    whole = Export(path=ex.path, source=ex.source, tables=ex.tables, not_null=ex.not_null, held={})
    dry = DryRun()
    for plan, window in [*plans, *([(_counts, None)] if counts else [])]:
        plan(Trace(replace(whole, planned=dry), window=window)).collect()
    with Spill(bucket_count(ex, dry.reads), KEY, SPILL_BYTES) as spill:
        for stream, rows in _read_ahead(ex, dry.reads):
            spill.add(stream, rows)
        if spill.flushes:  # past the budget: the rest goes to disk too, the pieces need the memory
            spill.flush()
        for group in spill.groups(BUCKET_BYTES):
            yield replace(whole, planned=Piece(spill, dry.reads, tuple(group)))


def _pieces(ex: Export, plan: Callable[[Trace], pl.LazyFrame], window=None, counts: bool = False) -> Iterator[Trace]:
    """``ex`` as traces through ``window`` whose large tables hold one group of buckets each,
    for ``plan`` alone (``_split``)."""
    for piece in _split(ex, [(plan, window)], counts):
        yield Trace(piece, window=window)


def _read_ahead(ex: Export, reads: dict[Read, str]) -> Iterator[tuple[str, pl.DataFrame]]:
    """Each recorded read's rows (its stream's name, the frame), one rowid window at a time, in
    order. The next window is read on another thread (SQLite and its Arrow driver release the GIL)
    while the caller buckets this one: at most two windows are held."""
    jobs = [
        (stream, window, read)
        for read, stream in reads.items()
        for window in ex.windows([read[0]], min(WINDOW_ROWS, WINDOW_BYTES // (8 * len(read[1]))))
    ]
    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = None
        for stream, window, read in jobs:
            future = pool.submit(lambda w=window, r=read: w.select(*r).collect())
            if ahead is not None:
                yield ahead[0], ahead[1].result()
            ahead = (stream, future)
        if ahead is not None:
            yield ahead[0], ahead[1].result()


def time_slots(ex: Export) -> tuple[int, int, int]:
    """The first and last start of the export's GPU operations (0, 0 without any), and how many
    time slots to cut that span into: ``SLOTS`` per ``SLICE_BYTES`` of rows (at most 64 bytes
    an operation, without names), so that slices of about that size form even where work is dense."""
    tables = [t for t in (S.KERNEL, S.MEMCPY, S.MEMSET) if ex.has(t)]
    if not tables:
        return 0, 0, 1
    sql = " UNION ALL ".join(f'SELECT MIN("start"), MAX("start"), coalesce(MAX(rowid), 0) FROM {t}' for t in tables)
    with reading(ex.source), ex.connect() as con:
        spans = con.execute(sql).fetchall()
    starts = [r for r in spans if r[0] is not None]
    if not starts:
        return 0, 0, 1
    if not all(isinstance(v, int) for r in starts for v in r[:2]):  # text or REAL times: SQLite orders them apart
        raise read_error(ex.source, ValueError("invalid column type: GPU operation start times that are not integers"))
    ops = sum(r[2] for r in spans)
    return min(r[0] for r in starts), max(r[1] for r in starts), SLOTS * max(1, -(-ops * 64 // SLICE_BYTES))
