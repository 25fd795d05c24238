"""Where the time of a first read goes, step by step, and the floor under it.

    python -m benchmarks.steps EXPORT [--view kernels]

Runs in one process, on the working tree, with the cache off:

1. ``imports``: Polars, the SQLite driver and the report pipeline;
2. ``scan floor``: SQLite alone stepping through the rows and columns the view reads (each
   planned read as ``SELECT count(*), sum(...) FROM (query)``, one thread): no reader can be
   faster than the scan under it;
3. ``read``: the same reads through the reader the pipeline uses, into Polars frames (rowid
   partitions on threads);
4. ``read and bucket``: the pipeline's reads with the rows split into buckets (``run.spill``);
5. ``pieces``: the view's partial table of each piece and the accounting's counts, which the
   same pieces give.

Times are wall seconds and CPU seconds of the whole process (all threads) for each step, so
that steps that use both cores show it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

os.environ["NSYS_TOOLS_CACHE"] = "0"


@contextmanager
def step(name: str, rows: list):
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    rows.append((name, time.perf_counter() - wall, time.process_time() - cpu))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.steps", description=__doc__.split("\n\n")[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--view", default="kernels")
    args = parser.parse_args(argv)
    rows: list = []
    with step("imports", rows):
        import polars as pl

        from nsys_tools import views
        from nsys_tools.read.export import open_export
        from nsys_tools.read.trace import Trace
        from nsys_tools.run import chunked

    ex = open_export(args.export)

    def plan(trace):
        return views.partial(args.view, trace, (), part="pieces")

    dry = chunked.DryRun()
    for planned in (plan, chunked._counts):
        planned(Trace(replace(ex, planned=dry, held={}))).collect()
    with step("scan floor (SQLite alone, 1 thread)", rows):
        with sqlite3.connect(f"{args.export.resolve().as_uri()}?mode=ro", uri=True) as con:
            for table, fields, where in dry.reads:
                sql, _ = ex.query(table, fields, where)
                touched = ", ".join(f'sum("{f.name}" IS NULL)' for f in fields)
                con.execute(f"SELECT count(*), {touched} FROM ({sql})").fetchone()
    with step("read (the pipeline's reader)", rows):
        for read in dry.reads:
            for window in ex.windows([read[0]], chunked.WINDOW_ROWS):
                window.select(*read).collect()
    pieces, parts, counts = [], 0.0, 0.0
    with step("read and bucket", rows):
        traces = chunked._pieces(ex, plan, None, counts=True)
        first = next(traces)
    with step("pieces: the view's partials and the accounting's counts", rows):
        for trace in itertools.chain([first], traces):  # each piece while the spill holds it
            t = time.process_time()
            pieces.append(plan(trace).collect())
            parts += time.process_time() - t
            t = time.process_time()
            chunked._counts(trace).collect()
            counts += time.process_time() - t
    print(f"{args.export.name}: {ex.rows('CUPTI_ACTIVITY_KIND_KERNEL'):,} kernels, view {args.view}, {len(pieces)} pieces")
    reads = [f"{table} ({len(fields)} columns{', filtered' if where else ''})" for table, fields, where in dry.reads]
    print(f"reads: {', '.join(reads)}")
    print("| step | wall s | CPU s |\n|---|---:|---:|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.2f} | {cpu:.2f} |")
    print(f"\nOf the pieces' CPU: view {parts:.2f} s, accounting counts {counts:.2f} s. Polars {pl.__version__}.")


if __name__ == "__main__":
    main()
