"""The frame layer: one opened export, its tables as Polars frames with names resolved.

``nsys_tools.open(path)`` returns a ``Trace``. Its methods return LazyFrames at once, with their
schemas known (found on a zero-row read of the export): the export is read at ``.collect()``,
once, and kept for the life of the object. Every column of the export comes under a snake_case
name, string ids resolved to text (``pl.String``, so ``.str`` works), times in integer
nanoseconds, and the columns every view groups by: ``pid`` and ``process_name`` (the OS
process), ``gpu_id`` and ``gpu_name`` (the GPU a CUDA device is, across processes that renumber
devices), ``tid``. Each event frame has ``start_ns``, ``end_ns`` and ``duration_ns``; no join
suffix is ever left in a frame.

* ``kernels()``, ``memops()``, ``api()``, ``ranges()``: one row per kernel, memory operation,
  CUDA API call, NVTX range;
* ``gpu_ops(attributed=True)``: kernels and memory operations together, each with the API call
  that launched it (``api_start_ns``, ``api_end_ns``, ``api_name``) and the NVTX range it
  belongs to (``nesting="all"``: one row per enclosing range);
* ``gpus()``, ``devices()``, ``processes()``: the small tables; ``session()``: a dict;
* ``view(name, by=...)``: one of the standard tables, a LazyFrame too, on the ``Trace`` that
  ``nsys_tools.open`` returns (``nsys_tools.facade``: the views sit above this layer).

``columns=[...]`` reads only those columns (and what they derive from): exports hold millions of
kernels. ``close()`` (or leaving a ``with`` block) drops what was read. Everything else in
nsys-tools reads exports through this layer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from . import attribute
from . import frames as events
from .export import Export, open_export

# Text columns resolved from string-id columns, per table.
KERNEL_NAMES = {"demangled_name_id": "name", "short_name_id": "short_name", "mangled_name_id": "mangled_name"}
API_NAMES = {"api_name_id": "name"}
# Derived columns and what they are computed from: the process and GPU ones, and per table.
PLACED = {
    "pid": ("global_pid",),
    "tid": ("global_tid",),
    "process_name": ("global_pid",),
    "gpu_id": ("device_id", "global_pid"),
    "gpu_name": ("device_id", "global_pid"),
}
DERIVED_KERNEL = {**PLACED, **{name: (id_col,) for id_col, name in KERNEL_NAMES.items()}}
DERIVED_API = {
    **PLACED,
    "name": ("api_name_id",),
    "pid": ("global_tid",),
    "process_name": ("global_tid",),
    "global_pid": ("global_tid",),
}
DERIVED_RANGES = {**PLACED, "pid": ("global_tid",), "process_name": ("global_tid",), "duration_ns": ("start_ns", "end_ns")}
# The kinds of GPU operation, as an enum (cheap to carry through joins of millions of rows).
KINDS = ("kernel", "memcpy", "memset")
KIND = pl.Enum(KINDS)
# What attribution needs of every operation (and ``start_ns`` where one records no process),
# and what it adds.
LAUNCH_KEYS = ("global_pid", "correlation_id")
ATTRIBUTION = (
    "global_tid",
    "tid",
    "api_start_ns",
    "api_end_ns",
    "api_name",
    *attribute.RANGE_COLUMNS,
    *attribute.INSTANCE_COLUMNS,
)


F = TypeVar("F", bound=Callable[..., pl.LazyFrame])
# api(): the call's own times are ``start_ns`` and ``end_ns`` there, as in every event frame
# (``api_start_ns`` and ``api_end_ns`` name the launching call's in ``gpu_ops``).
API_TIMES = {"api_start_ns": "start_ns", "api_end_ns": "end_ns"}


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(_hashable(v) for v in value) if not isinstance(value, (set, frozenset)) else tuple(sorted(value))
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _deferred(method: F) -> F:
    """A frame method that, on a trace from ``open()``, returns at once: a LazyFrame whose
    schema comes from the same method on the export read with zero rows, and whose rows are
    read at the first ``.collect()`` and kept."""

    @functools.wraps(method)
    def wrapper(self: Trace, *args, **kwargs) -> pl.LazyFrame:
        if not self._lazy:
            return method(self, *args, **kwargs)
        key = (method.__name__, _hashable(args), _hashable(kwargs))
        schema = method(self._probe(), *args, **kwargs).collect_schema()

        def read() -> pl.DataFrame:
            return self._once(key, lambda: method(self, *args, **kwargs).collect(), keep=True)

        return pl.defer(read, schema=schema, validate_schema=False)

    return wrapper  # type: ignore[return-value]


def _reads(columns: Iterable[str] | None, derived: dict[str, tuple[str, ...]] = DERIVED_KERNEL) -> set[str] | None:
    """The export columns to read for ``columns``: themselves and what derived ones need."""
    if columns is None:
        return None
    wanted = set(columns)
    return wanted | {src for c in wanted for src in derived.get(c, ())}


def _only(frame: pl.LazyFrame, columns: Sequence[str] | None) -> pl.LazyFrame:
    """``frame`` narrowed to ``columns``, in that order, leaving out those it does not have."""
    if columns is None:
        return frame
    have = set(frame.collect_schema().names())
    return frame.select([c for c in dict.fromkeys(columns) if c in have])


def launched_by(ops: pl.LazyFrame, calls: pl.LazyFrame) -> pl.LazyFrame:
    """``ops`` with ``_launch``, the start of the call that launched each (null where none is
    recorded), and ``_pid``, its process as ``attribute.launches`` finds it: its own, its call's,
    or its device's (null where none of them tells)."""
    keys = calls.select(*LAUNCH_KEYS, "global_tid", "api_start_ns")
    out = attribute.launches(ops.with_columns(_own=pl.col("global_pid")), keys).rename({"api_start_ns": "_launch"})
    return out.with_columns(_pid=pl.col("global_pid"), global_pid=pl.col("_own")).drop("_own", "global_tid")


class Trace:
    """An opened Nsight Systems export, read as frames. Use ``nsys_tools.open(path)``.

    ``lazy``: frame methods return at once and read at ``.collect()`` (what ``open`` gives);
    without it, they read when called (the report pipeline, which collects every frame it asks
    for at once)."""

    def __init__(self, export: Export, *, lazy: bool = False, window=None):
        self.export = export
        self._lazy = lazy
        # A ``read.window.Window``: only operations and API calls that start inside it (the
        # NVTX ranges stay whole, so an operation keeps the range it was launched in).
        self.window = None if window is None or window.whole else window
        self._read: dict[tuple, Any] = {}
        self._zero: Trace | None = None

    def within(self, window) -> Trace:
        """This export read through ``window`` (a ``read.window.Window``; None: the whole run)."""
        return type(self)(self.export, lazy=self._lazy, window=window)

    def _windowed(self, frame: pl.LazyFrame, start: str = "start_ns", *, launched: bool = False) -> pl.LazyFrame:
        """``frame``'s rows that start inside the window; with per-rank windows, inside their
        process's, and GPU operations (``launched``) by the start of the call that launched them
        (by their own start where none is recorded), in the window of their process as their
        attribution finds it (``launched_by``); one whose process is unknown is kept where it
        starts inside the ranks' windows' span, never dropped for want of a process."""
        w = self.window
        if w is None:
            return frame
        if not w.ranks:
            return frame.filter(pl.col(start).is_between(w.start_ns, w.end_ns, closed="left"))
        at = pl.col(start)
        if launched:
            frame = launched_by(frame, events.launch_calls(self.export, frame, names=False))
            at, pid = pl.coalesce("_launch", start), pl.col("_pid")
        else:
            pid = (
                pl.col("global_pid")
                if "global_pid" in frame.collect_schema().names()
                else events.global_pid(pl.col("global_tid"))
            )
        pids, los, his = (list(c) for c in zip(*w.ranks, strict=True))
        lo = pid.replace_strict(pids, los, default=None, return_dtype=pl.Int64)
        hi = pid.replace_strict(pids, his, default=None, return_dtype=pl.Int64)
        if launched:  # of no known process: the span of the ranks' windows
            lo, hi = pl.when(pid.is_null()).then(w.start_ns).otherwise(lo), pl.when(pid.is_null()).then(w.end_ns).otherwise(hi)
        kept = frame.filter((at >= lo) & (at < hi))
        return kept.drop("_launch", "_pid") if launched else kept

    def _timed(
        self, columns: Sequence[str] | None, start: str = "start_ns", *, ids: Sequence[str] = (*LAUNCH_KEYS, "device_id")
    ) -> Sequence[str] | None:
        """``columns`` and, in a window, the start time the window filters on (and, with
        per-rank windows, the ``ids`` that name the rank and the launch)."""
        if columns is None or self.window is None:
            return columns
        return [*columns, start, *(ids if self.window.ranks else ())]

    @property
    def path(self) -> Path:
        """The export as it was given (a ``.nsys-rep`` or a ``.sqlite``)."""
        return self.export.source

    def __repr__(self) -> str:
        return f"<Trace {self.path}>"

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the frames read so far."""
        self._read.clear()

    def _once(self, key: tuple, read: Callable[[], Any], *, keep: bool = False) -> Any:
        if self._lazy and not keep:  # a lazy trace keeps what its deferred frames collect instead
            return read()
        if key not in self._read:
            self._read[key] = read()
        return self._read[key]

    def _probe(self) -> Trace:
        """This trace on the export read with zero rows: where frames find their schemas."""
        if self._zero is None:
            self._zero = Trace(self.export.zero_rows())
        return self._zero

    # The small tables.

    @_deferred
    def gpus(self) -> pl.LazyFrame:
        """One row per GPU: ``gpu_id, gpu_name``, SMs, memory bandwidth, L2 size."""
        return self._gpus().lazy()

    @_deferred
    def devices(self) -> pl.LazyFrame:
        """Which GPU (``gpu_id, gpu_name``) each process's (``pid``) CUDA ``device_id`` is."""
        return self._devices().lazy()

    @_deferred
    def processes(self) -> pl.LazyFrame:
        """``global_pid, pid, process_name`` of the processes the export names."""
        return self._processes().lazy()

    def _gpus(self) -> pl.DataFrame:
        return self._once(("gpus",), lambda: events.gpus(self.export), keep=True)

    def _devices(self) -> pl.DataFrame:
        return self._once(("devices",), lambda: events.devices(self.export), keep=True)

    def _processes(self) -> pl.DataFrame:
        return self._once(("processes",), lambda: events.processes(self.export), keep=True)

    def session(self) -> dict[str, object]:
        """nsys version, schema version, capture start, driver."""
        return self._once(("session",), lambda: events.session(self.export), keep=True)

    # The event tables.

    @_deferred
    def kernels(self, columns: Sequence[str] | None = None) -> pl.LazyFrame:
        """One row per kernel execution: every column of the kernel table, ``name`` (demangled),
        ``short_name``, ``mangled_name`` (where recorded), ``duration_ns``, and the process and
        GPU columns."""
        key = ("kernels", None if columns is None else tuple(columns))
        return self._once(
            key,
            lambda: _only(
                self._placed(
                    self._named(
                        self._windowed(events.kernels(self.export, _reads(self._timed(columns))), launched=True),
                        KERNEL_NAMES,
                        columns,
                    ),
                    columns,
                ),
                columns,
            ),
        )

    @_deferred
    def memops(self, columns: Sequence[str] | None = None) -> pl.LazyFrame:
        """One row per memcpy or memset: every column of both tables, ``kind`` ("memcpy" |
        "memset"), ``copy_kind`` ("Host-to-Device", ...), ``name`` as nsys labels it
        (``[CUDA memcpy Host-to-Device]``, ``[CUDA memset]``), ``bytes``, ``duration_ns``, and the
        process and GPU columns."""
        key = ("memops", None if columns is None else tuple(columns))
        return self._once(
            key,
            lambda: _only(
                self._placed(self._windowed(events.memops(self.export, _reads(self._timed(columns))), launched=True), columns),
                columns,
            ),
        )

    @_deferred
    def api(self, columns: Sequence[str] | None = None, *, like: Sequence[str] = ()) -> pl.LazyFrame:
        """One row per CUDA runtime or driver API call: every column, ``name`` as recorded
        (``cudaLaunchKernel_v7000``), ``start_ns``, ``end_ns``, ``duration_ns``, ``pid``, ``tid``
        and ``process_name``. ``like``: only calls whose name matches one of these SQL ``LIKE``
        patterns (filtered as the export is read; ASCII case is ignored)."""
        key = ("api", None if columns is None else tuple(columns), tuple(like))
        recorded = {v: k for k, v in API_TIMES.items()}
        asked = None if columns is None else [recorded.get(c, c) for c in columns]

        def read() -> pl.LazyFrame:
            timed = self._timed(asked, "api_start_ns", ids=("global_tid",))
            calls = events.api_calls(self.export, like=like, columns=_reads(timed, DERIVED_API))
            calls = self._windowed(calls, "api_start_ns")
            frame = _only(self._placed(self._named(calls, API_NAMES, asked), asked), asked)
            return frame.rename(API_TIMES, strict=False)

        return self._once(key, read)

    @_deferred
    def ranges(self, columns: Sequence[str] | None = None, *, like: Sequence[str] = ()) -> pl.LazyFrame:
        """One row per NVTX push/pop or start/end range that starts and ends on one thread:
        ``range_instance, start_ns, end_ns, global_tid, style, range`` (its text), ``domain``,
        ``duration_ns`` (null for a range still open at the end), every other column of the
        NVTX table, ``pid``, ``tid`` and ``process_name``. ``like``: only ranges whose text
        matches one of these SQL ``LIKE`` patterns (ASCII case ignored; ``range_instance`` then
        numbers those only), filtered as the export is read."""
        key = ("ranges", None if columns is None else tuple(columns), tuple(like))

        def read() -> pl.LazyFrame:
            ranges = events.nvtx_ranges(self.export, _reads(columns, DERIVED_RANGES), like=like).with_columns(
                global_pid=events.global_pid(pl.col("global_tid")),
                duration_ns=pl.when(pl.col("end_ns") < events.NO_END).then(pl.col("end_ns") - pl.col("start_ns")),
            )
            return _only(self._placed(ranges, columns), columns)

        return self._once(key, read)

    @_deferred
    def gpu_ops(
        self,
        attributed: bool = True,
        *,
        columns: Sequence[str] | None = None,
        nesting: attribute.Nesting = "innermost",
        kinds: Iterable[str] = KINDS,
        ranges: bool = True,
    ) -> pl.LazyFrame:
        """Kernels and memory operations in one frame (``kind``: "kernel", "memcpy", "memset";
        ``kinds`` keeps some of them; kernel-only columns are null for memory operations and the
        other way round; a memory operation's ``name`` is its label).

        ``attributed`` adds the launching API call (``global_tid, tid, api_start_ns,
        api_end_ns``, and ``api_name`` unless ``columns`` leaves it out; where several calls
        share a launch's correlation id, the outermost) and the NVTX ``range`` and ``domain`` the call was made in: the innermost,
        or with ``nesting="all"`` one row per enclosing range and its instance (``range_instance,
        style, range_start_ns, range_end_ns``). Operations outside every range have
        ``range = ""``. ``ranges=False``: the launching call only, no NVTX range (the ranges are
        not matched at all: for views that need only the call)."""
        kinds = tuple(k for k in KINDS if k in set(kinds))
        key = ("gpu_ops", attributed, nesting, kinds, ranges, None if columns is None else tuple(columns))

        def read() -> pl.LazyFrame:
            wanted = _reads(None if columns is None else [*columns, *LAUNCH_KEYS, "start_ns", "device_id"])
            frames = []
            if "kernel" in kinds:
                frames.append(events.kernels(self.export, wanted).with_columns(kind=pl.lit("kernel", KIND)))
            if set(kinds) - {"kernel"}:
                memops = events.memops(self.export, wanted, kinds)
                frames.append(memops.with_columns(pl.col("kind").cast(KIND)).rename({"name": "label"}))
            ops = self._windowed(
                pl.concat(frames, how="diagonal_relaxed"), launched=True
            ).collect()  # read once: attribution reads it twice
            if columns is not None:  # only what was asked for travels through the joins
                keep = {*_reads([*columns, *LAUNCH_KEYS]), "kind", "label"}
                if ops["global_pid"].has_nulls():  # or matched to their launch by time, else by device
                    keep |= {"start_ns", "device_id"}
                ops = ops.select([c for c in ops.columns if c in keep])
            ops = ops.lazy()
            names = KERNEL_NAMES
            if attributed:
                api_name = columns is None or "api_name" in columns
                calls = events.launch_calls(self.export, ops, names=api_name)
                unwanted = () if columns is None else [k for k in LAUNCH_KEYS if k not in _reads(columns)]
                if ranges:
                    ops = attribute.project(ops, calls, self.ranges(attribute.RANGE_INPUT), nesting, drop=unwanted)
                else:
                    ops = attribute.launches(ops, calls).drop(unwanted)
                names = {**KERNEL_NAMES, "api_name_id": "api_name"}
            # Names last (string ids are cheaper than text through the joins); a memory
            # operation's name is its label.
            named = self._named(ops, names, None if columns is None else [*columns, *ATTRIBUTION])
            schema = named.collect_schema().names()
            if "label" in schema:
                present = [n for n in KERNEL_NAMES.values() if n in schema]
                label = pl.col("label").cast(pl.String)
                # Filled on the memory operations alone, then put back in order: a row-wise pick
                # over the whole column would copy every kernel's name into a new column (a 20 MB
                # name once per kernel).
                named = named.with_row_index("__row")
                memop = pl.col("label").is_not_null()
                filled = named.filter(memop).with_columns(pl.coalesce(n, label).alias(n) for n in present)
                named = pl.concat([named.filter(~memop), filled], how="vertical_relaxed").sort("__row").drop("__row", "label")
            placed = self._placed(named, columns)  # after attribution: old exports learn the process from the call
            return placed if columns is None else _only(placed, [*columns, *(ATTRIBUTION if attributed else ())])

        return self._once(key, read)

    # Names, processes and GPUs, attached in one place.

    def _named(self, frame: pl.LazyFrame, names: dict[str, str], columns: Sequence[str] | None) -> pl.LazyFrame:
        """``frame`` with a text column for each of its string-id columns that ``columns`` asks for."""
        names = {i: n for i, n in names.items() if columns is None or n in columns}
        if not names:
            return frame
        return events.attach_names(self.export, frame.collect(), names).lazy()

    def _placed(self, frame: pl.LazyFrame, columns: Sequence[str] | None) -> pl.LazyFrame:
        """Add ``pid``, ``tid``, ``process_name``, ``gpu_id`` and ``gpu_name`` (those ``columns``
        asks for) where ``frame`` has what they derive from."""
        wanted = set(PLACED) if columns is None else set(columns)
        have = set(frame.collect_schema().names())
        if "global_tid" in have:
            frame = frame.with_columns(tid=events.os_id(pl.col("global_tid"), thread=True))
            if "global_pid" not in have:
                frame = frame.with_columns(global_pid=events.global_pid(pl.col("global_tid")))
                have.add("global_pid")
        if "global_pid" not in have:
            return frame
        frame = frame.with_columns(pid=events.os_id(pl.col("global_pid")))
        if "process_name" in wanted:
            frame = frame.join(self._processes().lazy().select("global_pid", "process_name"), on="global_pid", how="left")
        if "device_id" not in have or not wanted & {"gpu_id", "gpu_name"}:
            return frame
        mapped = self._devices()
        per_process = mapped.filter(pl.col("pid").is_not_null()).lazy()
        by_ordinal = mapped.filter(pl.col("pid").is_null()).drop("pid").unique("device_id", keep="first").lazy()
        return (
            frame.join(per_process, on=["pid", "device_id"], how="left")
            .join(by_ordinal, on="device_id", how="left", suffix="_any")
            .with_columns(
                gpu_id=pl.coalesce("gpu_id", "gpu_id_any", "device_id"), gpu_name=pl.coalesce("gpu_name", "gpu_name_any")
            )
            .drop("gpu_id_any", "gpu_name_any")
        )


def open(path: str | Path, nsys: str | Path | None = None, *, reexport: bool = False) -> Trace:  # noqa: A001 - the facade's name
    """Open an export (``.sqlite`` as given, or ``.nsys-rep`` exported through nsys; over a scrubbed
    export only with ``reexport``) for reading as frames: every frame method returns a LazyFrame at
    once, read at ``.collect()``."""
    return Trace(open_export(path, nsys, reexport=reexport), lazy=True)
