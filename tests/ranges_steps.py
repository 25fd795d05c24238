"""Resident memory of ``ranges`` in pieces, step by step: the whole ordered path (``run.chunked``)
on one export, logging RSS and its peak (VmHWM, reset after each line through
/proc/self/clear_refs) at each piece, inside its attribution, and at every 8th folded slice.
From the repository root (Linux):
    python tests/ranges_steps.py EXPORT
"""

import sys
import time

import nsys_tools  # noqa: F401  first: it sets the allocator's options before Polars loads
from nsys_tools import views
from nsys_tools.read import trace as tr
from nsys_tools.read.export import open_export
from nsys_tools.run import chunked

T0 = time.time()


def log(step: str) -> None:
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * 4
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    print(f"#   {time.time() - T0:6.1f}s {step:36s} rss {rss:9d} kB hwm {hwm:9d} kB", flush=True)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def logged(owner, name: str, before=None, after=None) -> None:
    """``owner.name`` wrapped: ``before(*args)`` logs on the way in, ``after(result)`` on the way out."""
    wrapped = getattr(owner, name)

    def call(*args, **kwargs):
        if before:
            before(*args)
        out = wrapped(*args, **kwargs)
        if after:
            after(out)
        return out

    setattr(owner, name, call)


def sized(what: str):
    def after(frame) -> None:
        frame = frame.collect()
        log(f"  {what} {frame.height} rows {frame.estimated_size() >> 20} MB")

    return after


module = views.get("ranges")
folded = [0]
logged(tr.events, "launch_calls", before=lambda ex, ops: log("  operations read"), after=sized("launch calls"))
logged(tr.attribute, "project", before=lambda ops, calls, ranges, nesting: sized("NVTX ranges")(ranges))
logged(tr.Trace, "_named", before=lambda trace, frame, names, columns: sized("attributed")(frame), after=lambda _: log("  named"))
logged(module, "split", before=lambda pairs, by: sized("pairs collected")(pairs))


def slice_folded(_) -> None:
    folded[0] += 1
    if folded[0] % 8 == 0:
        log(f"slice {folded[0]} folded")


logged(module, "window", after=slice_folded)
logged(module, "close", before=lambda *_: log(f"{folded[0]} slices folded"))
pieces = chunked._pieces


def logged_pieces(*args, **kwargs):
    for n, trace in enumerate(pieces(*args, **kwargs), 1):
        log(f"piece {n} yielded")
        held, trace = [trace], None
        yield held.pop()  # not kept here while the piece runs
        log(f"piece {n} split, rows spilled")


chunked._pieces = logged_pieces
ex = open_export(sys.argv[1])
log("start")
log(f"closed: {chunked.view_partial(ex, 'ranges', [], {}).height} rows")
