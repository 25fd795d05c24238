"""An export's normalized frames as Parquet, with a note saying what every column holds.

``write(trace, folder)`` writes one file per frame of the frame layer (``nsys_tools.read.trace``):
``kernels``, ``memops``, ``api``, ``ranges``, ``gpu_ops`` (kernels and memory operations with
their launch call and innermost NVTX range), ``gpu_op_ranges`` (one row per operation and every
range enclosing its launch), ``gpus``, ``devices`` and ``processes``; names resolved, times in
integer nanoseconds. ``SCHEMA.md`` lists every column of every file with its type and meaning,
and ``frames.json`` the source export, its nsys version and the row counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import polars as pl

from ..escape import markdown
from ..files import made_folder, replaced_atomically
from ..read import schema as S

FRAMES: dict[str, str] = {
    "kernels": "one row per kernel execution",
    "memops": "one row per memcpy or memset",
    "api": "one row per CUDA runtime or driver API call",
    "ranges": "one row per NVTX push/pop or start/end range that starts and ends on one thread",
    "gpu_ops": "kernels and memory operations in one frame, each with the API call that launched it and the innermost "
    "NVTX range that call was made in",
    "gpu_op_ranges": "one row per (GPU operation, NVTX range enclosing its launch call): every enclosing range, not only "
    "the innermost",
    "gpus": "one row per GPU",
    "devices": "which GPU each process's CUDA device ordinal is",
    "processes": "the processes the export names",
}

# Our columns; every other column is the export's, under its snake_case name (see RAW).
COLUMNS: dict[str, str] = {
    "start_ns": "start time, ns on the export's clock",
    "end_ns": "end time, ns on the export's clock (NVTX: 2^63-1 for a range still open at the end)",
    "duration_ns": "end_ns - start_ns (null for a range still open at the end)",
    "api_start_ns": "start of the API call (for GPU operations: of the call that launched it)",
    "api_end_ns": "end of the API call (for GPU operations: of the call that launched it)",
    "name": "kernels: the demangled name; memory operations: nsys's label ([CUDA memcpy Host-to-Device]); "
    "api: the function as recorded (cudaLaunchKernel_v7000)",
    "short_name": "the kernel's base name (a memory operation's label)",
    "mangled_name": "the kernel's mangled name, where recorded",
    "api_name": "the API call that launched the operation",
    "kind": "kernel, memcpy or memset",
    "copy_kind": "memcpy direction as nsys names it (Host-to-Device, ...)",
    "bytes": "bytes copied or set",
    "pid": "OS process id",
    "tid": "OS thread id (for GPU operations: of the launching thread)",
    "process_name": "the process's name",
    "gpu_id": "the GPU (the same across processes that renumber devices with CUDA_VISIBLE_DEVICES)",
    "gpu_name": "the GPU's product name",
    "device_id": "the CUDA device ordinal as the process saw it",
    "stream_id": "CUDA stream id (unique within a process on one device)",
    "correlation_id": "joins a GPU operation to the API call that launched it, within a process (global_pid)",
    "global_pid": "nsys's process key (host, pid); with correlation_id, the launch key",
    "global_tid": "nsys's thread key (host, pid, tid)",
    "range": "NVTX range text ('' for GPU operations launched outside every range)",
    "domain": "NVTX domain (null: the default domain)",
    "style": "pushpop or startend",
    "range_instance": "the range's row (an id of one range instance within the export)",
    "range_start_ns": "start of the enclosing range instance",
    "range_end_ns": "end of the enclosing range instance",
    "api_name_id": "StringIds id of api_name",
    "short_name_id": "StringIds id of short_name",
    "demangled_name_id": "StringIds id of name",
    "mangled_name_id": "StringIds id of mangled_name",
}
RAW = {
    "kernels": (S.KERNEL, S.KERNEL_FIELDS),
    "memops": (f"{S.MEMCPY} / {S.MEMSET}", S.MEMCPY_FIELDS),
    "api": (S.RUNTIME, S.API_FIELDS),
    "ranges": (S.NVTX, S.NVTX_FIELDS),
    "gpus": (S.GPU, S.GPU_FIELDS),
    "devices": (S.CUDA_DEVICE, S.CUDA_DEVICE_FIELDS),
    "processes": (S.PROCESSES, S.PROCESS_FIELDS),
}
RAW["gpu_ops"] = RAW["gpu_op_ranges"] = (f"{S.KERNEL} / {S.MEMCPY} / {S.MEMSET}", S.KERNEL_FIELDS + S.MEMCPY_FIELDS)


def frames(trace) -> dict[str, Callable[[], pl.DataFrame]]:
    """Each frame's name and how to read it."""
    return {
        "kernels": lambda: trace.kernels().collect(),
        "memops": lambda: trace.memops().collect(),
        "api": lambda: trace.api().collect(),
        "ranges": lambda: trace.ranges().collect(),
        "gpu_ops": lambda: trace.gpu_ops().collect(),
        "gpu_op_ranges": lambda: trace.gpu_ops(nesting="all").collect(),
        "gpus": lambda: trace.gpus().collect(),
        "devices": lambda: trace.devices().collect(),
        "processes": lambda: trace.processes().collect(),
    }


def describe(frame: str, column: str) -> str:
    """What ``column`` of ``frame`` holds."""
    if column in COLUMNS:
        return COLUMNS[column]
    table, fields = RAW.get(frame, ("the export", ()))
    for fld in fields:
        if fld.name == column and not fld.expr:
            return f"`{table}.{fld.sources[0]}`"
    camel = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), column)
    return markdown(f"{table}.{camel}")


def schema_note(written: dict[str, pl.Schema], rows: dict[str, int], source: str) -> str:
    lines = [
        f"# Frames of {markdown(source)}",
        "",
        "Written by `nsys-tools export`: the frames nsys-tools reads an export into, one Parquet file each. Times are",
        "integer nanoseconds on the export's clock; names are resolved to text. A column named as an export column",
        "(`TABLE.column`) holds that column as nsys wrote it. Rows are in order of start time, then of every column.",
        "",
    ]
    for frame, columns in written.items():
        lines += [
            f"## {frame}.parquet",
            "",
            f"{FRAMES[frame].capitalize()}; {rows[frame]} rows.",
            "",
            "| column | type | meaning |",
        ]
        lines.append("|---|---|---|")
        lines += [f"| {markdown(c)} | {markdown(str(dtype))} | {describe(frame, c)} |" for c, dtype in columns.items()]
        lines.append("")
    return "\n".join(lines)


def in_order(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame``'s rows in one order, whatever order they were read or joined in: by start time,
    then by every column; so one export gives the same bytes every run, at any thread count."""
    first = [c for c in ("start_ns", "end_ns") if c in frame.columns]
    return frame.sort([*first, *(c for c in frame.columns if c not in first)], nulls_last=True)


def write(trace, folder: Path, only: list[str] | None = None) -> dict[str, int]:
    """Write the frames (``only`` some of them) as ``folder/<frame>.parquet``, with SCHEMA.md and
    frames.json; returns the rows of each. All or nothing: each file is renamed into place once
    every one is written, so a failed write leaves the folder as it was."""
    schemas, rows = {}, {}
    with made_folder(folder), ExitStack() as files:
        for name, read in frames(trace).items():
            if only is not None and name not in only:
                continue
            frame = in_order(read())
            frame.write_parquet(files.enter_context(replaced_atomically(folder / f"{name}.parquet")))
            schemas[name], rows[name] = frame.schema, frame.height
        session = {k: v for k, v in trace.session().items() if k != "file"}
        meta = {"source": trace.path.name, **session, "rows": rows}
        notes = {
            "frames.json": json.dumps(meta, indent=2, default=str) + "\n",
            "SCHEMA.md": schema_note(schemas, rows, trace.path.name),
        }
        for note, text in notes.items():
            files.enter_context(replaced_atomically(folder / note)).write_text(text)
    return rows
