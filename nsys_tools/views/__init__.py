"""The standard tables of an export, each checked against its ``nsys stats`` twin.

| view | one row per | nsys stats twin |
|---|---|---|
| ``kernels`` | (NVTX range, kernel) | ``cuda_gpu_kern_sum:nvtx-name`` |
| ``ranges`` | NVTX range name and style: GPU time projected, CPU time | ``nvtx_gpu_proj_sum`` |
| ``api`` | CUDA API function | ``cuda_api_sum`` |
| ``memops`` | memory operation kind: bytes, time, bandwidth | ``cuda_gpu_mem_size_sum``, ``cuda_gpu_mem_time_sum`` |
| ``gaps`` | GPU idle interval above a threshold | (none) |

Each view is a module with three functions, so that one export and many (on one machine or
one task per export on a cluster) share every step:

* ``read(trace, keys, **options)``: the frame it needs, from the frame layer, only the columns
  it uses;
* ``partial(frame, keys, **options)``: pure, per export; partials of several exports concatenate
  and merge exactly (counts, totals, extremes, and the values medians need);
* ``finalize(partials, keys, **options)``: pure, merges the concatenated partials and computes
  the table.

``keys`` are the leading group-by columns: ``by_columns(["device", "process", "stream"])``, and
``file`` when exports are kept apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module
from types import ModuleType

NAMES = ("kernels", "ranges", "api", "memops", "gaps")

# The --by keys and the columns each adds. A stream id is unique only within a process on one
# device, so the stream key carries both.
BY = {
    "device": ("gpu_id", "gpu_name"),
    "process": ("pid", "process_name"),
    "stream": ("gpu_id", "pid", "stream_id"),
}


def by_columns(by: Iterable[str]) -> list[str]:
    """The group-by columns for ``--by`` keys, in a fixed order (device, process, stream)."""
    wanted = set(by)
    unknown = wanted - set(BY)
    if unknown:
        raise ValueError(f"unknown --by key {sorted(unknown)[0]!r}: choose from {', '.join(BY)}")
    return list(dict.fromkeys(c for key in BY if key in wanted for c in BY[key]))


def get(name: str) -> ModuleType:
    """The module of view ``name``."""
    if name not in NAMES:
        raise ValueError(f"unknown view {name!r}: choose from {', '.join(NAMES)}")
    return import_module(f"{__name__}.{name}")
