"""Why a table came out empty: what it looked for, and where the data are.

An empty table is an answer only when it says why. ``reason`` names, for the exports read, the
first of these that holds: no GPU operation at all; a window (``--from/--to/--within``) that
holds none of them, with the span the operations do cover (``--from 100ms --to 200ms`` on a
capture whose work sits at 60.11–60.41 s says so); a step glob (``overlap``, ``stragglers``)
that matches no NVTX range, with the ranges there are; no NCCL kernel, or no blocking call,
for the views about them; a ``--range``/``--kernel`` glob that matches no row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..files import shown
from ..read import schema as S
from ..read.export import reading
from ..read.sessions import extent

# The views that read steps, and the glob they read them by.
STEP_VIEWS = ("overlap", "stragglers")
STEP_GLOB = "*step*"
SHOWN_RANGES = 5


def seconds(lo: int, hi: int) -> str:
    """``lo``–``hi`` (ns) in seconds, with as many decimals as tell them apart (up to ns)."""
    for digits in (2, 3, 4, 6, 9):
        a, b = f"{lo / 1e9:.{digits}f}", f"{hi / 1e9:.{digits}f}"
        if a != b:
            break
    return f"{a}–{b} s"


def _ranges(path: Path, nsys=None, reexport: bool = False) -> list[tuple[str, int]]:
    """The NVTX range texts of an export with their counts, most frequent first."""
    import polars as pl

    from ..read.trace import open as open_trace

    with reading(path), open_trace(path, nsys, reexport=reexport) as trace:
        names = trace.ranges(columns=["range"]).select(pl.col("range").cast(pl.String)).collect()
    counts = names["range"].value_counts(sort=True)
    return [(r, n) for r, n in counts.iter_rows()]


def _window(path: Path, window, nsys=None, reexport: bool = False):
    """The window resolved on ``path``, and its span in words (or each rank's)."""
    from ..read.trace import open as open_trace
    from ..read.window import NO_END, resolve

    with reading(path), open_trace(path, nsys, reexport=reexport) as trace:
        w = resolve(trace, window)

    def span(lo: int, hi: int) -> str:
        return f"from {lo / 1e9:.2f} s on" if hi >= NO_END else seconds(lo, hi)

    if w.ranks:
        return w, "each rank's: " + ", ".join(
            f"pid {(g >> S.TID_BITS) % (1 << S.TID_BITS)} {span(lo, hi)}" for g, lo, hi in w.ranks
        )
    return w, span(w.start_ns, w.end_ns)


def reason(
    files: Sequence[Path],
    view: str,
    *,
    window=None,
    step: str | None = None,
    range_glob: str | None = None,
    kernel_glob: str | None = None,
    nsys=None,
    reexport: bool = False,
) -> str:
    """One sentence: why view ``view`` over ``files`` has no rows."""
    names = ", ".join(f"`{shown(f)}`" for f in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    found = {f: extent(f, nsys) for f in files}
    if not any(found.values()):
        return f"{names} hold{'s' if len(files) == 1 else ''} no kernel, copy or set (was the capture made with `-t cuda`?)"
    if window:
        resolved = {f: _window(f, window, nsys, reexport) for f, e in found.items() if e}
        outside = all(e[1] <= resolved[f][0].start_ns or e[0] >= resolved[f][0].end_ns for f, e in found.items() if e)
        if outside:
            where = "; ".join(
                f"in `{shown(f)}` they sit at {seconds(e[0], e[1])} ({e[2]:,} operations), the window at {resolved[f][1]}"
                for f, e in found.items()
                if e
            )
            return f"the window ({window}) holds no GPU operation: {where}"
    if view in STEP_VIEWS:
        from ..read.names import glob_regex

        glob = step or STEP_GLOB
        pattern = re.compile(glob_regex(glob))
        ranges = [(r, n) for f in files for r, n in _ranges(f, nsys, reexport)]
        if not any(pattern.search(r or "") for r, _ in ranges):
            seen = ", ".join(f"`{r}` ({n})" for r, n in ranges[:SHOWN_RANGES]) or "none"
            return f"no NVTX range matches {glob!r} in {names} (its ranges: {seen}); name the step range with --step GLOB"
    if view == "steps":
        ranges = [(r, n) for f in files for r, n in _ranges(f, nsys, reexport)]
        seen = ", ".join(f"`{r}` ({n})" for r, n in ranges[:SHOWN_RANGES]) or "none"
        looked = (
            f"no NVTX range matches {step!r}"
            if step
            else "no NVTX range named like a step ('*step*', 'ProfilerStep#N'), no top-level range repeated 3 times "
            "or more, and no repeating kernel sequence"
        )
        return f"{looked} in {names} (its ranges: {seen}); name the step range with --step GLOB"
    if view == "nccl":
        return f"{names} hold{'s' if len(files) == 1 else ''} no NCCL kernel (a kernel named `nccl...`)"
    if view == "sync":
        return f"no blocking synchronization call (`...Synchronize`, a synchronous copy or set) in {names}"
    for flag, glob in (("--range", range_glob), ("--kernel", kernel_glob)):
        if glob:
            return f"no row matches {flag} {glob!r} in {names}"
    inside = f" inside the window ({window})" if window else ""
    return f"the {view} view found nothing to count in {names}{inside}"
