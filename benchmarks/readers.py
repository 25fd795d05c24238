"""SQLite to Polars: the readers that could carry ``read.export``, on the largest read of a report.

    python -m benchmarks.readers EXPORT [-n 3]

The read is the launch calls of the runtime table (four integer columns, filtered by name: what
attribution needs), in two rowid partitions on two threads where the reader allows it. Readers:

- ``sqlite scan``: SQLite alone, stepping through the same rows and columns (the floor);
- ``adbc``: the ADBC SQLite driver, Arrow C stream into Polars (``read.sqlite_arrow``);
- ``connectorx``: what ``pl.read_database_uri`` runs (needs connectorx and pyarrow installed);
- ``polars + sqlite3``: ``pl.read_database`` on a ``sqlite3`` connection (no extra package);
- ``sqlite3 rows``: ``fetchall`` into ``pl.DataFrame``.

Rounds take the readers in turn; each figure is min, median and max of wall and CPU seconds
(the whole process, all threads), with each reader's import time measured in a fresh process.
"""

from __future__ import annotations

import argparse
import importlib.util
import sqlite3
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from nsys_tools.read import sqlite_arrow
from nsys_tools.read.frames import LAUNCH_NAMES

COLUMNS = '"start" AS api_start_ns, "end" AS api_end_ns, globalTid AS global_tid, correlationId AS correlation_id'
IMPORTS = {"adbc": "import adbc_driver_sqlite, adbc_driver_manager", "connectorx": "import connectorx, pyarrow"}


def queries(path: Path, parts: int) -> list[str]:
    like = " OR ".join(f"value LIKE '{p}'" for p in LAUNCH_NAMES)
    sql = f"SELECT {COLUMNS} FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN (SELECT id FROM StringIds WHERE {like})"
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        last = con.execute("SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    step = -(-last // parts)
    return [f"{sql} AND rowid > {k * step} AND rowid <= {(k + 1) * step}" for k in range(parts)]


def _threads(fn, items):
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(fn, items))


def readers(path: Path) -> dict:
    uri = f"{path.resolve().as_uri()}?mode=ro"

    def scan(qs):
        with sqlite3.connect(uri, uri=True) as con:
            return sum(con.execute(f"SELECT count(*), sum(api_start_ns & 1) FROM ({q})").fetchone()[0] for q in qs)

    def rows(q):
        with sqlite3.connect(uri, uri=True) as con:
            cur = con.execute(q)
            return pl.DataFrame(cur.fetchall(), schema=[d[0] for d in cur.description], orient="row")

    def polars_sqlite3(q):
        with sqlite3.connect(uri, uri=True) as con:
            return pl.read_database(q, con)

    out = {
        "sqlite scan": scan,
        "adbc": lambda qs: sqlite_arrow.read(path, qs).height,
        "polars + sqlite3": lambda qs: pl.concat(_threads(polars_sqlite3, qs)).height,
        "sqlite3 rows": lambda qs: pl.concat(_threads(rows, qs)).height,
    }
    if importlib.util.find_spec("connectorx") and importlib.util.find_spec("pyarrow"):
        out["connectorx"] = lambda qs: pl.read_database_uri(qs, "sqlite://" + str(path.resolve()), engine="connectorx").height
    return out


def import_time(statement: str) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.readers", description=__doc__.split("\n\n")[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("-n", "--runs", type=int, default=3)
    args = parser.parse_args(argv)
    qs = queries(args.export, 2)
    found = readers(args.export)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in found}
    counts = {}
    for _ in range(args.runs + 1):  # the first round warms the page cache and is not counted
        for name, read in found.items():
            wall, cpu = time.perf_counter(), time.process_time()
            counts[name] = read(qs)
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"{args.export.name}: {counts['sqlite scan']:,} launch calls; {args.runs} rounds after one; Polars {pl.__version__}")
    print("| reader | wall s | CPU s | import s | rows |\n|---|---:|---:|---:|---:|")
    for name, runs in times.items():
        cells = []
        for k in (0, 1):
            v = [r[k] for r in runs[1:]]
            cells.append(f"{statistics.median(v):.3f} ({min(v):.3f}–{max(v):.3f})")
        imported = f"{import_time(IMPORTS[name]):.3f}" if name in IMPORTS else "–"
        print(f"| {name} | {cells[0]} | {cells[1]} | {imported} | {counts[name]:,} |")


if __name__ == "__main__":
    main()
