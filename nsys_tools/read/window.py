"""Windows of a run: the part of the timeline a view looks at.

Every view takes a window (``nsys-tools report --from/--to/--within/--skip-first``): the GPU
operations and API calls that start inside it, in nanoseconds from the session start (nsys
exports record times from the session start). ``resolve_window`` turns what the user wrote into
a ``Window`` for one trace; with several exports (ranks) each resolves its own, so ``--within
'step*#3'`` is the third step of every rank.

* ``start``/``end``: a time with a unit (``1.5s``, ``200ms``, ``30us``, ``100ns``; a bare number
  is nanoseconds);
* ``within``: ``GLOB`` or ``GLOB#n``: the n-th instance (from 1, in order of start) of the NVTX
  ranges whose text matches the glob, or without ``#n`` from the first instance's start to the
  last one's end;
* ``skip_first``: drop the first N instances of the step range (``within``'s glob, else
  ``STEP_GLOB``): the window starts where instance N+1 starts.

All of them given together intersect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError

NO_END = (1 << 63) - 1
STEP_GLOB = "*step*"
UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*$")


@dataclass(frozen=True)
class Window:
    """``[start_ns, end_ns)`` from the session start; the whole run is ``Window(0, NO_END)``."""

    start_ns: int = 0
    end_ns: int = NO_END

    @property
    def whole(self) -> bool:
        return self.start_ns <= 0 and self.end_ns >= NO_END


@dataclass(frozen=True)
class WindowSpec:
    """A window as the user gave it, before it is resolved against one trace."""

    start: str | int | None = None
    end: str | int | None = None
    within: str | None = None
    skip_first: int = 0

    def __bool__(self) -> bool:
        return self.start is not None or self.end is not None or bool(self.within) or self.skip_first > 0

    def __str__(self) -> str:
        return f"from={self.start} to={self.end} within={self.within} skip_first={self.skip_first}"


def parse_time(text: str | int) -> int:
    """Nanoseconds of ``1.5s``, ``200ms``, ``30us``, ``100ns`` (a bare number: nanoseconds)."""
    if isinstance(text, int):
        return text
    m = _TIME.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a time: write a number and a unit, as 1.5s, 200ms, 30us or 100ns")
    return round(float(m.group(1)) * UNITS[m.group(2) or "ns"])


def split_within(within: str) -> tuple[str, int | None]:
    """``"step*#3"`` -> ``("step*", 3)``; ``"step*"`` -> ``("step*", None)``."""
    glob, sep, n = within.rpartition("#")
    if sep and n.isdigit() and glob:
        if int(n) < 1:
            raise ValueError(f"--within {within!r}: instances count from 1")
        return glob, int(n)
    return within, None


def resolve_window(trace, *, start=None, end=None, within=None, skip_first: int = 0) -> Window:
    """The window of ``trace`` that ``start``, ``end`` (times from the session start, with
    units), ``within`` (``GLOB[#n]``, NVTX range instances) and ``skip_first`` (instances of the
    step range dropped) select, intersected."""
    import polars as pl

    from .names import glob_regex

    lo = parse_time(start) if start is not None else 0
    hi = parse_time(end) if end is not None else NO_END
    if within or skip_first:
        glob, n = split_within(within) if within else (STEP_GLOB, None)
        ranges = trace.ranges(columns=["range", "start_ns", "end_ns"]).select("range", "start_ns", "end_ns")
        found = ranges.filter(pl.col("range").cast(pl.String).str.contains(glob_regex(glob))).sort("start_ns", "end_ns").collect()
        if skip_first:
            found = found.slice(skip_first)
        if n is not None:
            found = found.slice(n - 1, 1)
        if found.is_empty():
            what = f"instance {n} of " if n is not None else ""
            skipped = f" after skipping {skip_first}" if skip_first else ""
            raise UsageError(trace.path, f"no {what}NVTX range matching {glob!r}{skipped}", "see `--view ranges` for the names")
        lo = max(lo, found["start_ns"].min())
        hi = min(hi, found["end_ns"].max() if n is not None or within else NO_END)
    if hi <= lo:
        raise UsageError(trace.path, f"the window [{lo} ns, {hi} ns) is empty", "--to must come after --from")
    return Window(lo, hi)


def resolve(trace, spec: WindowSpec | None) -> Window | None:
    """``spec`` resolved against ``trace`` (None when no window was asked for)."""
    if not spec:
        return None
    return resolve_window(trace, start=spec.start, end=spec.end, within=spec.within, skip_first=spec.skip_first)
