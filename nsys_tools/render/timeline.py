"""An export as Chrome/Perfetto trace-event JSON: a timeline that opens in Perfetto's UI and
``chrome://tracing``.

Tracks: one per GPU and stream (a process ``GPU <id>``, a thread per process and stream: a
stream id is unique only within a process on one device), and per OS process and thread three:
its push/pop NVTX ranges (nested), its start/end ranges (they need not nest) and its CUDA API
calls (a call may outlast the range it was made in). Every event is a complete event (``"ph": "X"``, ``ts`` and ``dur``
in µs with nanosecond decimals); kernels are ``cat: kernel`` (``nccl`` for NCCL kernels, by
name), memory operations ``memcpy``/``memset``, API calls ``cuda_api``, ranges ``nvtx``. A flow
(``s`` at the launching call, ``f`` bound to the GPU operation) joins each launch to its
operation through the correlation id.

The file is written a batch of rows at a time (each batch encoded by Polars, never a list of
every event); ``start_ns``/``end_ns`` keep the events that overlap a window.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..files import replaced_atomically
from ..read import frames as events

BATCH = 50_000
# Trace-event pids of the GPU tracks: above any OS pid (Linux caps them at 2^22).
GPU_PID = 1_000_000_000
# Thread t's CUDA API calls are on track t, its push/pop NVTX ranges on t + PUSH_POP and its
# start/end ranges on t + START_END (above any OS tid): a call may outlast the range it started in.
PUSH_POP = 100_000_000
START_END = 200_000_000
WARN_BYTES = 500 * 10**6
GZIP_LEVEL = 3  # 3.8M events: 610 MB of JSON, 57 MB at level 3 in 24 s; level 9 gives 46 MB in 100 s
OP_COLUMNS = [
    "start_ns",
    "end_ns",
    "duration_ns",
    "kind",
    "gpu_id",
    "pid",
    "stream_id",
    "correlation_id",
    "name",
    "short_name",
    "bytes",
]


@dataclass
class Written:
    """What a timeline holds: events per category, flows, and bytes written."""

    path: Path
    events: dict[str, int] = field(default_factory=dict)
    flows: int = 0
    open_ranges: int = 0
    bytes: int = 0
    estimated_bytes: int = 0


def _us(column: str | pl.Expr) -> pl.Expr:
    expr = pl.col(column) if isinstance(column, str) else column
    return expr.cast(pl.Float64) / 1000


def _overlaps(start: str, end: str, start_ns: int | None, end_ns: int | None) -> pl.Expr:
    keep = pl.lit(True)
    if start_ns is not None:
        keep &= pl.col(end) >= start_ns
    if end_ns is not None:
        keep &= pl.col(start) <= end_ns
    return keep


def _ranked(trace) -> bool:
    """Whether ``trace`` is read through per-rank windows (``read.window``): its operations and
    calls are those of each rank's own window already, launch by launch."""
    return trace.window is not None and bool(trace.window.ranks)


def gpu_ops(trace, start_ns: int | None = None, end_ns: int | None = None) -> pl.DataFrame:
    """The GPU operations of the window with their launch (``tid, api_start_ns, api_end_ns``)
    and track: ``track_pid`` (the GPU's) and ``track_tid`` (its process and stream)."""
    if _ranked(trace):
        start_ns = end_ns = None
    ops = trace.gpu_ops(attributed=True, columns=OP_COLUMNS).filter(_overlaps("start_ns", "end_ns", start_ns, end_ns))
    ops = ops.with_columns(
        pl.col("gpu_id").fill_null(-1),
        pl.col("name", "short_name").cast(pl.String),
        cat=pl.when(pl.col("kind") != "kernel")
        .then(pl.col("kind").cast(pl.String))
        .when(pl.col("name").cast(pl.String).str.to_lowercase().str.contains("nccl"))
        .then(pl.lit("nccl"))
        .otherwise(pl.lit("kernel")),
        # A launch arrow needs its call in the window too.
        launch_shown=pl.col("api_start_ns").is_not_null()
        & pl.col("tid").is_not_null()
        & _overlaps("api_start_ns", "api_end_ns", start_ns, end_ns),
    ).collect()
    streams = ops.select("gpu_id", "pid", "stream_id").unique().sort(pl.all(), nulls_last=True)
    streams = streams.with_columns(track_tid=pl.int_range(1, pl.len() + 1).over("gpu_id"))
    ops = ops.join(streams, on=["gpu_id", "pid", "stream_id"], how="left", nulls_equal=True).with_columns(
        track_pid=GPU_PID + pl.col("gpu_id")
    )
    # In time order on each track: the same export gives the same bytes (and flow ids) every run.
    return ops.sort(["track_pid", "track_tid", "start_ns", "end_ns", "correlation_id"], nulls_last=True)


def api_calls(trace, start_ns: int | None = None, end_ns: int | None = None) -> pl.DataFrame:
    if _ranked(trace):
        start_ns = end_ns = None
    calls = trace.api(columns=["start_ns", "end_ns", "duration_ns", "pid", "tid", "correlation_id", "name"])
    calls = calls.rename({"start_ns": "api_start_ns", "end_ns": "api_end_ns"})  # as the launches in gpu_ops name them
    return (
        calls.filter(_overlaps("api_start_ns", "api_end_ns", start_ns, end_ns))
        .with_columns(pl.col("name").cast(pl.String))
        .sort(["pid", "tid", "api_start_ns", "api_end_ns", "correlation_id", "name"], nulls_last=True)  # one order every run
        .collect()
    )


def nvtx_ranges(trace, start_ns: int | None = None, end_ns: int | None = None) -> tuple[pl.DataFrame, int]:
    """Closed ranges of the window, each on its thread's track (start/end ranges on the thread's
    second track), and how many were still open at the end of the capture (left out)."""
    ranges = trace.ranges(columns=["start_ns", "end_ns", "duration_ns", "pid", "tid", "style", "range", "domain", "global_tid"])
    if _ranked(trace):  # each rank's ranges that overlap its own window
        pids, los, his = (list(c) for c in zip(*trace.window.ranks, strict=True))
        rank = events.global_pid(pl.col("global_tid"))
        lo = rank.replace_strict(pids, los, default=None, return_dtype=pl.Int64)
        hi = rank.replace_strict(pids, his, default=None, return_dtype=pl.Int64)
        ranges = ranges.filter((pl.col("end_ns") >= lo) & (pl.col("start_ns") <= hi))
    ranges = ranges.filter(_overlaps("start_ns", "end_ns", start_ns, end_ns)).drop("global_tid").collect()
    still_open = ranges.filter(pl.col("end_ns") >= events.NO_END).height
    closed = ranges.filter(pl.col("end_ns") < events.NO_END).with_columns(
        track_tid=pl.col("tid") + pl.when(pl.col("style") == "startend").then(START_END).otherwise(PUSH_POP)
    )
    order = ["pid", "track_tid", "start_ns", "end_ns", "range", "domain", "style", "tid", "duration_ns"]
    return closed.sort(order, nulls_last=True), still_open  # one order every run


def _complete(frame: pl.DataFrame, *, name: str, cat: pl.Expr, pid: str, tid: str, start: str, args: dict) -> pl.Series:
    return frame.select(
        pl.struct(
            name=pl.col(name).fill_null(""),
            cat=cat,
            ph=pl.lit("X"),
            ts=_us(start),
            dur=_us("duration_ns"),
            pid=pl.col(pid),
            tid=pl.col(tid),
            args=pl.struct(**args),
        ).struct.json_encode()
    ).to_series()


def _op_events(ops: pl.DataFrame) -> pl.Series:
    args = {
        "correlation_id": pl.col("correlation_id"),
        "short_name": pl.col("short_name"),
        "bytes": pl.col("bytes"),
        "range": pl.col("range"),
        "stream": pl.col("stream_id"),
    }
    return _complete(ops, name="name", cat=pl.col("cat"), pid="track_pid", tid="track_tid", start="start_ns", args=args)


def _flow_events(ops: pl.DataFrame, first_id: int) -> pl.Series:
    """Flow start (at the launch call, on its thread) and end (bound to the operation) per
    launched operation; ids count from ``first_id``."""
    launched = ops.filter("launch_shown")
    ident = pl.int_range(first_id, first_id + pl.len())
    common = {"name": pl.lit("launch"), "cat": pl.lit("launch"), "id": ident}
    s = launched.select(pl.struct(**common, ph=pl.lit("s"), ts=_us("api_start_ns"), pid="pid", tid="tid").struct.json_encode())
    f = launched.select(
        pl.struct(
            **common, ph=pl.lit("f"), bp=pl.lit("e"), ts=_us("start_ns"), pid="track_pid", tid="track_tid"
        ).struct.json_encode()
    )
    return pl.concat([s.to_series(), f.to_series()])


def _metadata(ops: pl.DataFrame, calls: pl.DataFrame, ranges: pl.DataFrame, trace) -> list[str]:
    """Process and thread names (and an order: GPUs first) as metadata events."""
    import json

    out = []
    processes = trace.processes().select("pid", "process_name").sort(pl.all(), nulls_last=True)
    names = dict(processes.unique("pid", keep="first", maintain_order=True).collect().iter_rows())
    gpu_names = dict(trace.gpus().select("gpu_id", "gpu_name").collect().iter_rows())
    for gpu_id in sorted(ops["gpu_id"].unique().to_list()):
        pid = GPU_PID + gpu_id
        label = f"GPU {gpu_id}" + (f" ({gpu_names[gpu_id]})" if gpu_id in gpu_names else "") if gpu_id >= 0 else "GPU ?"
        out.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": gpu_id}})
    # In a fixed order: the same export gives the same bytes every run.
    tracks = ops.select("gpu_id", "pid", "stream_id", "track_tid").unique().sort(pl.all(), nulls_last=True)
    for gpu_id, pid, stream, tid in tracks.iter_rows():
        track = GPU_PID + gpu_id
        out.append({"ph": "M", "name": "thread_name", "pid": track, "tid": tid, "args": {"name": f"stream {stream} (pid {pid})"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": track, "tid": tid, "args": {"sort_index": tid}})
    threads = (
        pl.concat([calls.select("pid", "tid", track_tid="tid"), ranges.select("pid", "tid", "track_tid")], how="vertical_relaxed")
        .unique()
        .sort(pl.all(), nulls_last=True)
    )
    for pid in sorted(threads["pid"].unique().to_list()):
        label = f"{names.get(pid) or 'process'} (pid {pid})"
        out.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": 1000 + pid}})
    for pid, tid, track in threads.iter_rows():
        label = f"thread {tid}" + {0: " CUDA API", PUSH_POP: " NVTX", START_END: " NVTX start/end"}[track - tid]
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": track, "args": {"name": label}})
        order = 3 * tid + {0: 2, PUSH_POP: 0, START_END: 1}[track - tid]  # ranges above the calls they hold
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": track, "args": {"sort_index": order}})
    return [json.dumps(e, separators=(",", ":")) for e in out]


def _batches(frame: pl.DataFrame) -> Iterator[pl.DataFrame]:
    yield from frame.iter_slices(BATCH)


def estimate(ops: pl.DataFrame, calls: pl.DataFrame, ranges: pl.DataFrame) -> int:
    """About how many bytes the timeline of these frames takes, uncompressed: each kind's first
    rows encoded and their mean length scaled to its row count."""
    total = 0
    for frame, encode in ((ops, _op_events), (calls, _call_events), (ranges, _range_events), (ops, lambda b: _flow_events(b, 0))):
        if frame.height:
            sample = encode(frame.head(1000))
            total += round((sample.str.len_bytes().mean() or 0) * sample.len() / min(frame.height, 1000) * frame.height)
    return total


def _call_events(calls: pl.DataFrame) -> pl.Series:
    return _complete(
        calls,
        name="name",
        cat=pl.lit("cuda_api"),
        pid="pid",
        tid="tid",
        start="api_start_ns",
        args={"correlation_id": pl.col("correlation_id")},
    )


def _range_events(ranges: pl.DataFrame) -> pl.Series:
    return _complete(
        ranges,
        name="range",
        cat=pl.lit("nvtx"),
        pid="pid",
        tid="track_tid",
        start="start_ns",
        args={"domain": pl.col("domain"), "style": pl.col("style")},
    )


def write(
    trace, path: Path, *, start_ns: int | None = None, end_ns: int | None = None, warn: Callable[[int], None] | None = None
) -> Written:
    """Write the timeline of ``trace`` (the events overlapping ``start_ns``-``end_ns``) to
    ``path``: JSON, gzip-compressed when the name ends in ``.gz``. Written whole or not at all.
    ``warn(estimated_bytes)`` is called before writing when the JSON would pass ``WARN_BYTES``."""
    ops = gpu_ops(trace, start_ns, end_ns)
    calls = api_calls(trace, start_ns, end_ns)
    ranges, still_open = nvtx_ranges(trace, start_ns, end_ns)
    result = Written(path, open_ranges=still_open, estimated_bytes=estimate(ops, calls, ranges))
    if warn is not None and result.estimated_bytes > WARN_BYTES:
        warn(result.estimated_bytes)
    for cat, n in ops.group_by("cat").len().iter_rows():
        result.events[cat] = n
    result.events["cuda_api"] = calls.height
    result.events["nvtx"] = ranges.height
    session = trace.session()
    header = {
        "displayTimeUnit": "ns",
        "otherData": {
            "source": trace.path.name,
            "nsys_version": str(session.get("nsys_version", "")),
            "window_ns": [start_ns, end_ns],
        },
    }
    import json

    with replaced_atomically(path, through_link=True) as partial:
        raw = open(partial, "wb")
        try:
            sink = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=GZIP_LEVEL) if path.name.endswith(".gz") else raw
            out = io.TextIOWrapper(sink, encoding="utf-8", newline="\n")
            out.write(json.dumps(header, separators=(",", ":"))[:-1] + ',"traceEvents":[\n')
            first = True

            def put(lines) -> None:
                nonlocal first
                if not len(lines):
                    return
                text = ",\n".join(lines)
                out.write(text if first else ",\n" + text)
                first = False

            put(_metadata(ops, calls, ranges, trace))
            for batch in _batches(ranges):
                put(_range_events(batch).to_list())
            for batch in _batches(calls):
                put(_call_events(batch).to_list())
            flow_id = 1
            for batch in _batches(ops):
                put(_op_events(batch).to_list())
                flows = _flow_events(batch, flow_id)
                put(flows.to_list())
                result.flows += flows.len() // 2
                flow_id += flows.len() // 2
            out.write("\n]}\n")
            out.flush()
            out.detach()
            if sink is not raw:
                sink.close()
        finally:
            raw.close()
        result.bytes = partial.stat().st_size
    return result
