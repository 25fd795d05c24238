"""Nsight Systems export tables and columns, the differences between versions, and our names.

This is the only module that knows raw nsys table and column names. Every frame the
toolkit builds is described here as a list of ``Field``: our snake_case name, the nsys
columns that may hold it (first present wins, across export versions) and its dtype.
Columns missing from an export come back as nulls, so older exports still read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
DRIVER = "CUPTI_ACTIVITY_KIND_DRIVER"  # some exports keep driver calls apart from runtime calls
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"
# The GPU table: TARGET_INFO_CUDA_GPU keyed by deviceId (nsys before mid-2021), then
# TARGET_INFO_GPU keyed by id; TARGET_INFO_CUDA_DEVICE (2023 and later) maps each process's CUDA
# device ordinal (which CUDA_VISIBLE_DEVICES renumbers) to the GPU's id.
GPU = "TARGET_INFO_GPU"
GPUS = (GPU, "TARGET_INFO_CUDA_GPU")
CUDA_DEVICE = "TARGET_INFO_CUDA_DEVICE"
PROCESSES = "PROCESSES"
MEMCPY_KIND_ENUM = "ENUM_CUDA_MEMCPY_OPER"
SYSTEM_ENV = "TARGET_INFO_SYSTEM_ENV"
SESSION_START = "TARGET_INFO_SESSION_START_TIME"
# The export metadata table was renamed around nsys 2021.
EXPORT_META = ("META_DATA_EXPORT", "EXPORT_META_DATA")

# NVTX_EVENTS.eventType values (ENUM_NSYS_EVENT_TYPE), stable since 2020.
NVTX_PUSHPOP = (59, 70)  # NvtxPushPopRange, NvtxtPushPopRange
NVTX_STARTEND = (60, 71)  # NvtxStartEndRange, NvtxtStartEndRange
NVTX_DOMAIN_CREATE = 75

# CUPTI memcpy kinds (ENUM_CUDA_MEMCPY_OPER); older exports carry no ENUM tables.
MEMCPY_KINDS = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}

# A serialized globalTid holds the host in its top bits, the process in the next 24 and the
# thread in the low 24; a globalPid is a globalTid with the thread bits cleared.
TID_BITS = 24


@dataclass(frozen=True)
class Field:
    name: str  # our column name
    sources: tuple[str, ...]  # nsys columns that may hold it, first present wins
    dtype: str  # "int" | "str" | "float" | "any" (as the export stores it)
    expr: str = ""  # or SQLite computes it from all of ``sources``


def f(name: str, *sources: str, dtype: str = "int") -> Field:
    return Field(name, sources, dtype)


# Durations are computed by SQLite: one column read instead of two.
DURATION = Field("duration_ns", ("start", "end"), "int", '"end" - "start"')


def snake(column: str) -> str:
    """An nsys column name in our style: ``sharedMemoryExecuted`` -> ``shared_memory_executed``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", column).lower()


def all_fields(known: tuple[Field, ...], present: Iterable[str]) -> list[Field]:
    """``known`` fields, then every other column of the table under its ``snake`` name, so that
    frames keep all the export holds, including columns newer nsys versions add."""
    claimed = {src for fld in known if not fld.expr for src in fld.sources}
    names = {fld.name for fld in known}
    extra = [Field(snake(c), (c,), "any") for c in sorted(present) if c not in claimed and snake(c) not in names]
    return [*known, *extra]


# Where, when and for which launch an activity record ran: common to kernels and memory operations.
ACTIVITY_FIELDS = (
    f("start_ns", "start"),
    f("end_ns", "end"),
    DURATION,
    f("device_id", "deviceId"),
    f("context_id", "contextId"),
    f("stream_id", "streamId"),
    f("correlation_id", "correlationId"),
    f("global_pid", "globalPid"),
)

KERNEL_FIELDS = ACTIVITY_FIELDS + (
    f("short_name_id", "shortName"),
    f("demangled_name_id", "demangledName"),
    f("mangled_name_id", "mangledName"),
    f("grid_x", "gridX"),
    f("grid_y", "gridY"),
    f("grid_z", "gridZ"),
    f("block_x", "blockX"),
    f("block_y", "blockY"),
    f("block_z", "blockZ"),
    f("registers_per_thread", "registersPerThread"),
    f("static_shared_bytes", "staticSharedMemory"),
    f("dynamic_shared_bytes", "dynamicSharedMemory"),
    f("local_bytes_per_thread", "localMemoryPerThread"),
)

MEMCPY_FIELDS = ACTIVITY_FIELDS + (f("bytes", "bytes"), f("copy_kind", "copyKind"))
MEMSET_FIELDS = ACTIVITY_FIELDS + (f("bytes", "bytes"),)

API_FIELDS = (
    f("api_start_ns", "start"),
    f("api_end_ns", "end"),
    DURATION,
    f("global_tid", "globalTid"),
    f("correlation_id", "correlationId"),
    f("api_name_id", "nameId"),
    f("return_value", "returnValue"),
)

NVTX_FIELDS = (
    f("start_ns", "start"),
    f("end_ns", "end"),
    f("event_type", "eventType"),
    f("global_tid", "globalTid"),
    f("end_global_tid", "endGlobalTid"),
    f("text", "text", dtype="str"),
    f("text_id", "textId"),
    f("domain_id", "domainId"),
)

GPU_FIELDS = (
    f("gpu_id", "id", "deviceId"),
    f("gpu_name", "name", dtype="str"),
    f("cuda_device", "cuDevice"),
    f("sm_count", "smCount", "numMultiprocessors"),
    f("memory_bandwidth_bps", "memoryBandwidth"),
    f("l2_bytes", "l2CacheSize"),
    f("memory_bytes", "totalMemory", "globalMemorySize"),
    f("clock_hz", "clockRate", "coreClockRate"),
    f("compute_major", "computeMajor", "computeCapabilityMajor"),
    f("compute_minor", "computeMinor", "computeCapabilityMinor"),
)

CUDA_DEVICE_FIELDS = (f("gpu_id", "gpuId"), f("device_id", "cudaId"), f("pid", "pid"))
PROCESS_FIELDS = (f("global_pid", "globalPid"), f("pid", "pid"), f("process_name", "name", dtype="str"))

# Columns the analysis cannot do without, per table (a tuple: any one of them). Other columns
# an export lacks read as nulls (a copy's or set's bytes: its size is unknown, and the
# accounting note says so); these stop the reader with an error naming the column.
_ACTIVITY_REQUIRED = ("start", "end", "correlationId")
REQUIRED_COLUMNS: dict[str, tuple[str | tuple[str, ...], ...]] = {
    KERNEL: _ACTIVITY_REQUIRED,
    MEMCPY: (*_ACTIVITY_REQUIRED, "copyKind"),
    MEMSET: _ACTIVITY_REQUIRED,
    RUNTIME: (*_ACTIVITY_REQUIRED, "globalTid", "nameId"),
    DRIVER: (*_ACTIVITY_REQUIRED, "globalTid", "nameId"),
    NVTX: ("start", "end", "eventType", "globalTid", ("text", "textId")),
}

# Strings the analysis reads, which ``scrub`` must never change: columns holding StringIds ids
# (kernel names, API names, NVTX texts and domains), and columns holding the text inline.
ANALYSIS_STRING_IDS = (
    (KERNEL, "shortName"),
    (KERNEL, "demangledName"),
    (KERNEL, "mangledName"),
    (RUNTIME, "nameId"),
    (DRIVER, "nameId"),
    (NVTX, "textId"),
)
ANALYSIS_TEXT = ((NVTX, "text"), (GPU, "name"))
