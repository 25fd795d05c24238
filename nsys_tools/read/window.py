"""Windows of a run: the part of the timeline a view looks at.

Every view takes a window (``nsys-tools report --from/--to/--within/--skip-first``): the GPU
operations and API calls that start inside it, in nanoseconds from the session start (nsys
exports record times from the session start). ``resolve_window`` turns what the user wrote into
a ``Window`` for one trace; with several exports (ranks) each resolves its own, so ``--within
'step*#3'`` is the third step of every rank.

A rank is a process. With ``within`` or ``skip_first``, each process of an export finds its own
instances, on its own threads: ``--within 'step*#3'`` is each rank's own third step, however far
the ranks drift apart, and a GPU operation belongs to the window when the call that launched it
started inside its rank's window (its launch attribution, as ``overlap`` and the steps take it; an
operation with no launch call recorded, by its own start). A process without that instance has
no window, and none of its work is in the window. ``start``/``end`` alone are times on the
timeline: what starts between them.

* ``start``/``end``: a time with a unit (``1.5s``, ``200ms``, ``30us``, ``100ns``; a bare number
  is nanoseconds);
* ``within``: ``GLOB`` or ``GLOB#n``: the n-th instance (from 1, in order of start) of the NVTX
  ranges whose text matches the glob, or without ``#n`` from the first instance's start to the
  last one's end;
* ``skip_first``: drop the first N instances of the step range (``within``'s glob, else the
  steps as ``--view steps`` finds them in NVTX ranges): the window starts where instance N+1
  starts.

Instances are counted as steps are (``read.step_ranges``): of ranges nested in one another, only
the outermost, so ``Optimizer.step`` inside ``step 3`` is not an instance of ``*step*``.

All of them given together intersect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError

NO_END = (1 << 63) - 1
UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*$")


@dataclass(frozen=True)
class Window:
    """``[start_ns, end_ns)`` from the session start; the whole run is ``Window(0, NO_END)``.
    ``ranks``: per process, ``(global_pid, start_ns, end_ns)``, each rank's own window (from
    ``within`` or ``skip_first``), which its API calls and the GPU work it launched must start
    in; ``start_ns``/``end_ns`` then span them all."""

    start_ns: int = 0
    end_ns: int = NO_END
    ranks: tuple[tuple[int, int, int], ...] = ()

    @property
    def whole(self) -> bool:
        return self.start_ns <= 0 and self.end_ns >= NO_END and not self.ranks


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
        """The window as the options that give it: ``--from 100ms --to 200ms --within 'step*#3'``."""
        given = [("--from", self.start), ("--to", self.end), ("--within", self.within)]
        given.append(("--skip-first", self.skip_first or None))
        return " ".join(f"{flag} {_quoted(value)}" for flag, value in given if value is not None)


def _quoted(value) -> str:
    import shlex

    return shlex.quote(str(value))


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
    units), ``within`` (``GLOB[#n]``, NVTX range instances, each process its own) and
    ``skip_first`` (instances of the step range dropped, per process) select, intersected."""
    lo = parse_time(start) if start is not None else 0
    hi = parse_time(end) if end is not None else NO_END
    if not (within or skip_first):
        if hi <= lo:
            raise UsageError(trace.path, f"the window [{lo} ns, {hi} ns) is empty", "--to must come after --from")
        return Window(lo, hi)
    glob, n = split_within(within) if within else (None, None)
    ranks = []
    for pid, found in _instances(trace, glob):
        found = found[skip_first:]
        if n is not None:
            found = found[n - 1 : n]
        if not found:
            continue
        r_lo = max(lo, min(s for s, _ in found))
        r_hi = min(hi, max(e for _, e in found) if within else NO_END)
        if r_hi > r_lo:
            ranks.append((pid, r_lo, r_hi))
    if not ranks:
        what = f"instance {n} of " if n is not None else ""
        skipped = f" after skipping {skip_first}" if skip_first else ""
        cut = " inside --from/--to" if start is not None or end is not None else ""
        raise UsageError(
            trace.path,
            f"no process has {what}an NVTX range matching {glob!r}{skipped}{cut}"
            if glob
            else f"no process has more than {skip_first} steps in its NVTX ranges{cut}",
            "see `--view ranges` for the names, and name the step range with `--within GLOB --skip-first N`",
        )
    return Window(min(r[1] for r in ranks), max(r[2] for r in ranks), tuple(ranks))


def _instances(trace, glob: str | None) -> list[tuple[int, list[tuple[int, int]]]]:
    """Per process (``global_pid``, in order), the ``(start_ns, end_ns)`` of its step instances in
    order of start: the NVTX ranges ``glob`` matches, or without a glob the steps as the
    ``steps`` view finds them in NVTX ranges; of ranges nested in one another, the outermost
    (``Optimizer.step`` inside ``step 3`` is not an instance of its own)."""
    import polars as pl

    from .frames import global_pid
    from .step_ranges import from_ranges, step_ranges

    ranges = (
        trace.ranges(columns=["range", "start_ns", "end_ns", "global_tid"])
        .select("range", "start_ns", "end_ns", pid=global_pid(pl.col("global_tid")))
        .collect()
    )
    found = step_ranges(ranges, glob) if glob else from_ranges(ranges, None)
    if found is None or found.is_empty():
        return []
    found = found.sort("pid", "start_ns", "end_ns")
    return [
        (pid, list(zip(g["start_ns"], g["end_ns"], strict=True)))
        for (pid,), g in found.partition_by("pid", as_dict=True, maintain_order=True).items()
    ]


def resolve(trace, spec: WindowSpec | None) -> Window | None:
    """``spec`` resolved against ``trace`` (None when no window was asked for)."""
    if not spec:
        return None
    return resolve_window(trace, start=spec.start, end=spec.end, within=spec.within, skip_first=spec.skip_first)
