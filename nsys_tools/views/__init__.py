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
``file`` when exports are kept apart. ``partial`` and ``finalize`` below run a view by name,
routing each option to the step that takes it; ``table`` is both for one trace.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from ..trace import Trace

NAMES = ("kernels", "ranges", "api", "memops", "gaps")
# Views whose partial of any subset of the operations (with their launch calls) merges with the
# others' into the partial of all: ``chunked.py`` reads them a piece at a time.
SPLITTABLE = ("kernels", "api", "memops")
# Views whose partial needs the operations in order of start time: ``chunked.py`` reads them as
# pieces split by launch (each view's ``split``), then as slices in time order (``window``,
# carrying what a slice needs of the earlier ones), then merges (``close``).
ORDERED = ("ranges", "gaps")

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


def _options(step) -> list[str]:
    """The options a step takes: its parameters after the frame (or trace) and the keys."""
    return list(inspect.signature(step).parameters)[2:]


def partial(name: str, trace: Trace, by: Sequence[str], **options) -> pl.LazyFrame:
    """View ``name``'s partial table of one trace, grouped by the ``by`` columns (``by_columns``)."""
    view = get(name)
    unknown = set(options) - {*_options(view.read), *_options(view.partial)}
    if unknown:
        raise TypeError(f"view {name} takes no option {sorted(unknown)[0]!r}")
    return view.partial(read(name, trace, by, **options), by, **window_options(name, options))


def read(name: str, trace: Trace, by: Sequence[str], **options) -> pl.LazyFrame:
    """View ``name``'s frame of one trace (its ``read``), with the options that step takes."""
    view = get(name)
    return view.read(trace, by, **{k: v for k, v in options.items() if k in _options(view.read)})


def window_options(name: str, options: dict) -> dict:
    """The options of view ``name`` that its ``partial`` (and ``window``) takes."""
    return {k: v for k, v in options.items() if k in _options(get(name).partial)}


def finalize(name: str, partials: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """View ``name``'s table from partials (of one trace or many, concatenated); its names as
    plain strings."""
    import polars as pl

    return get(name).finalize(partials, keys).with_columns(pl.col(pl.Categorical).cast(pl.String))


def table(trace: Trace, name: str, by: Iterable[str] = (), **options) -> pl.DataFrame:
    """View ``name`` of one trace, split by the ``--by`` keys in ``by``."""
    keys = by_columns(by)
    return finalize(name, partial(name, trace, keys, **options), keys).collect()


def empty(name: str, keys: Sequence[str]) -> pl.DataFrame:
    """View ``name``'s table with no rows (every export failed to read)."""
    import polars as pl

    return pl.DataFrame(schema=dict.fromkeys([*keys, *get(name).COLUMNS], pl.Null))
