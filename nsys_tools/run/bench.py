"""Benchmark ``nsys-tools report`` on large exports against ``nsys stats`` or a plain SQL baseline.

For each size it builds (once) an export of that many kernels by replicating a real capture
(``bigexport.replicate``), then times, each in a fresh process with its peak memory:

* ``nsys-tools report EXPORT --format csv`` on a cold cache (first read) and again (repeat read);
* ``nsys stats --report cuda_gpu_kern_sum:nvtx-name --format csv`` on the same export when nsys
  is available, or else the same statistics computed in SQLite by ``sql_baseline``.

It checks that both give the same instances, totals, medians, minima and maxima per (range,
kernel), and returns one row per (size, tool), with the baseline's time over the tool's
(``speedup``) and the tool's peak memory over the baseline's (``memory_share``). ``cpus`` pins
every measured command to those cores (as ``taskset -c`` does), so both tools get the same ones.

``scaling`` times a fleet instead: one export replicated into many files, reported on a Dask
cluster of 1, 2, 4, ... worker processes (each with the same number of threads, cold caches
each time), and in this process for reference.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ..errors import NsysNotFound, NsysToolsError, OutputError
from ..files import output_error
from ..read import cache
from ..read.export import find_nsys, nsys_timeout, open_export
from .bigexport import replicate

# Run a command (on the cores given first, "" for any) and report its wall time and its peak
# resident memory (the largest child's).
_MEASURE = """
import json, os, resource, subprocess, sys, time
if sys.argv[1]:
    os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(",")})
t = time.perf_counter()
done = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"wall_s": wall, "peak_bytes": peak, "rc": done.returncode, "stderr": done.stderr[-500:]}))
"""


@dataclass
class Run:
    tool: str
    wall_s: float
    peak_bytes: int


def parse_cpus(text: str) -> list[int]:
    """A core list as ``taskset -c`` takes it: ``0-1``, ``0,2,4-7``. ValueError if malformed."""
    cores: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cores.extend(range(int(lo), int(hi or lo) + 1))
    if not cores:
        raise ValueError(text)
    return cores


def measure(cmd: list[str], cpus: list[int] | None = None) -> dict:
    """Run ``cmd`` once (within the nsys timeout, on ``cpus`` if given), with its wall time and
    peak memory."""
    pin = ",".join(map(str, cpus or []))
    try:
        out = subprocess.run([sys.executable, "-c", _MEASURE, pin, *cmd], capture_output=True, text=True, timeout=nsys_timeout())
        result = json.loads(out.stdout)
    except subprocess.TimeoutExpired as exc:
        raise NsysToolsError(None, f"{' '.join(cmd[:3])}... did not finish in time", "set NSYS_TOOLS_NSYS_TIMEOUT") from exc
    except ValueError as exc:
        raise NsysToolsError(None, f"{' '.join(cmd[:3])}... could not be measured ({out.stderr.strip()[-300:]})") from exc
    if result["rc"] != 0:
        raise NsysToolsError(
            None, f"{' '.join(cmd[:3])}... failed ({result['stderr'].strip()[-300:]})", "run it alone to see why"
        )
    return result


def check_space(sizes: list[int], source: Path, kernels0: int, workdir: Path) -> None:
    """Refuse sizes whose exports would not fit: each is estimated as the source export scaled
    by its kernel count (an upper bound: the string tables are not copied), against the space
    free in ``workdir`` less a tenth for everything else."""
    missing = [s for s in sizes if not (workdir / f"kernels-{s}.sqlite").exists()]
    need = sum(source.stat().st_size * max(1, round(s / max(kernels0, 1))) for s in missing)
    where = next(p for p in (workdir, *workdir.absolute().parents) if p.exists())
    free = shutil.disk_usage(where).free
    if need > 0.9 * free:
        raise OutputError(
            workdir,
            f"exports of {', '.join(map(str, missing))} kernels would take about {need / 1e9:,.1f} GB, "
            f"and {free / 1e9:,.1f} GB are free there",
            "pass smaller --kernels, or a --workdir with more space",
        )


SQL_BASELINE = """
CREATE TEMP TABLE ranges AS
  SELECT n.globalTid AS tid, n.start AS start, coalesce(n.end, 9223372036854775807) AS end,
         coalesce(n.text, s.value) AS name
  FROM NVTX_EVENTS AS n LEFT JOIN StringIds AS s ON s.id = n.textId
  WHERE n.eventType IN (59, 70) AND coalesce(n.end, 9223372036854775807) > n.start;
CREATE INDEX temp.ranges_by_thread ON ranges (tid, start);
CREATE TEMP TABLE ops AS
  SELECT k.end - k.start AS d, k.demangledName AS kernel,
         coalesce((SELECT g.name FROM ranges AS g WHERE g.tid = r.globalTid AND g.start <= r.start AND g.end >= r.end
                   ORDER BY g.start DESC LIMIT 1), '') AS range
  FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId;
"""
SQL_SUMMARY = """
WITH o AS (SELECT range, kernel, d, row_number() OVER (PARTITION BY range, kernel ORDER BY d) AS i,
                  count(*) OVER (PARTITION BY range, kernel) AS n FROM ops)
SELECT o.range, s.value AS kernel, count(*) AS instances, sum(d) AS total_ns, avg(d) AS mean_ns,
       avg(CASE WHEN i IN ((n + 1) / 2, (n + 2) / 2) THEN d END) AS median_ns, min(d) AS min_ns, max(d) AS max_ns
FROM o JOIN StringIds AS s ON s.id = o.kernel GROUP BY o.range, o.kernel ORDER BY total_ns DESC
"""


def sql_baseline(export: Path, out_csv: Path) -> None:
    """The kernel summary per innermost push/pop range, in SQLite alone (a temporary index on the
    ranges; SQLite builds its own index for the kernel-to-runtime join)."""
    import sqlite3

    con = sqlite3.connect(f"file:{export.resolve()}?mode=ro", uri=True)
    con.executescript(SQL_BASELINE)
    cur = con.execute(SQL_SUMMARY)
    cols = [d[0] for d in cur.description]
    pl.DataFrame(cur.fetchall(), schema=cols, orient="row").write_csv(out_csv)
    con.close()


def _ours_cmd(export: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "nsys_tools", "report", str(export), "--format", "csv", "--output", str(out)]


def prepare(sizes: list[int], source: Path, workdir: Path) -> int:
    """Check that exports of ``sizes`` fit in ``workdir`` and make it; the source's kernels."""
    kernels0 = open_export(source).rows("CUPTI_ACTIVITY_KIND_KERNEL")
    check_space(sizes, source, kernels0, workdir)
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(workdir, exc) from exc
    return kernels0


def build(source: Path, export: Path, kernels: int, kernels0: int, progress=print) -> None:
    """``export`` with about ``kernels`` kernels replicated from ``source`` (which has
    ``kernels0``), unless it exists."""
    if not export.exists():
        progress(f"building {export.name} from {source.name}")
        replicate(source, export, max(0, round(kernels / kernels0) - 1))


def nsys_stats_cmd(nsys: str | Path, export: Path, prefix: Path) -> list[str]:
    """``nsys stats``' kernel summary per NVTX range of ``export``, as CSV into ``nsys_stats_output(prefix)``."""
    absolute = os.path.abspath  # a file name never reads as an option
    report = "cuda_gpu_kern_sum:nvtx-name"
    return [
        str(nsys),
        "stats",
        "--report",
        report,
        "--format",
        "csv",
        "--force-export",
        "false",
        "-o",
        absolute(prefix),
        absolute(export),
    ]


def nsys_stats_output(prefix: Path) -> Path:
    """Where ``nsys_stats_cmd`` writes: nsys names it ``<prefix>_cuda_gpu_kern_sum_nvtx-name.csv``."""
    return prefix.with_name(prefix.name + "_cuda_gpu_kern_sum_nvtx-name.csv")


def compare(ours_csv: Path, ref_csv: Path, nsys_format: bool) -> int:
    """Rows of (range, kernel) on which the two reports disagree (0 when they agree)."""
    ours = pl.read_csv(ours_csv, schema_overrides={"range": pl.String}).with_columns(pl.col("range").fill_null(""))
    if nsys_format:
        ref = pl.read_csv(ref_csv).select(
            name="Name",
            instances="Instances",
            total_ns="Total Time (ns)",
            median_ns="Med (ns)",
            min_ns="Min (ns)",
            max_ns="Max (ns)",
        )
        ours = ours.with_columns(
            name=pl.when(pl.col("range") == "").then(pl.col("kernel")).otherwise(pl.col("range") + "/" + pl.col("kernel"))
        )
        key = ["name"]
    else:
        ref = pl.read_csv(ref_csv, schema_overrides={"range": pl.String}).with_columns(pl.col("range").fill_null(""))
        key = ["range", "kernel"]
    cols = ["instances", "total_ns", "median_ns", "min_ns", "max_ns"]
    both = ours.select(*key, *cols).join(ref.select(*key, *cols), on=key, how="full", suffix="_ref")
    same = pl.all_horizontal([(pl.col(c).cast(pl.Float64) == pl.col(f"{c}_ref").cast(pl.Float64)).fill_null(False) for c in cols])
    return both.filter(~same).height


def run(
    sizes: list[int],
    source: Path,
    workdir: Path,
    nsys: str | None = None,
    progress=print,
    cpus: list[int] | None = None,
    baseline: str = "auto",
) -> pl.DataFrame:
    """Build, measure and compare; one row per (kernels, tool). ``baseline``: "nsys", "sql",
    "auto" (nsys where it is found, else SQL) or "none" (only nsys-tools is timed)."""
    nsys_exe = None
    if baseline in ("auto", "nsys"):
        try:
            nsys_exe = str(find_nsys(nsys))
        except NsysNotFound:
            if baseline == "nsys":
                raise
    kernels0 = prepare(sizes, source, workdir)
    rows = []
    for size in sizes:
        export = workdir / f"kernels-{size}.sqlite"
        build(source, export, size, kernels0, progress)
        cache.forget(export)
        counts = {t: open_export(export).rows(t) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")}
        base = {
            "kernels": counts["CUPTI_ACTIVITY_KIND_KERNEL"],
            "runtime_rows": counts["CUPTI_ACTIVITY_KIND_RUNTIME"],
            "export_bytes": export.stat().st_size,
            "cpus": len(cpus) if cpus else None,
        }
        ours_csv = workdir / f"kernels-{size}.ours.csv"
        for tool in ("nsys-tools report (first read)", "nsys-tools report (repeat read)"):
            progress(f"{export.name}: {tool}")
            r = measure(_ours_cmd(export, ours_csv), cpus)
            rows.append({**base, "tool": tool, "wall_s": r["wall_s"], "peak_bytes": r["peak_bytes"], "mismatches": None})
        ref_csv = workdir / f"kernels-{size}.ref.csv"
        if baseline == "none":
            continue
        if nsys_exe:
            tool = "nsys stats cuda_gpu_kern_sum:nvtx-name"
            cmd = nsys_stats_cmd(nsys_exe, export, ref_csv.with_suffix(""))
        else:
            tool = "sqlite3 SQL baseline"
            cmd = [
                sys.executable,
                "-c",
                f"from nsys_tools.run.bench import sql_baseline; from pathlib import Path; "
                f"sql_baseline(Path({str(export)!r}), Path({str(ref_csv)!r}))",
            ]
        progress(f"{export.name}: {tool}")
        t = time.perf_counter()
        r = measure(cmd, cpus)
        if nsys_exe:
            nsys_stats_output(ref_csv.with_suffix("")).replace(ref_csv)
        rows.append(
            {
                **base,
                "tool": tool,
                "wall_s": r["wall_s"] or time.perf_counter() - t,
                "peak_bytes": r["peak_bytes"],
                "mismatches": compare(ours_csv, ref_csv, nsys_format=bool(nsys_exe)),
            }
        )
    table = pl.DataFrame(rows, schema_overrides={"cpus": pl.Int64, "mismatches": pl.Int64})
    base = table.filter(pl.col("mismatches").is_not_null()).select("kernels", base_s="wall_s", base_bytes="peak_bytes")
    return (
        table.join(base, on="kernels", how="left", maintain_order="left")
        .with_columns(speedup=pl.col("base_s") / pl.col("wall_s"), memory_share=pl.col("peak_bytes") / pl.col("base_bytes"))
        .drop("base_s", "base_bytes")
    )


def scaling(
    workers: list[int],
    exports: int,
    kernels: int,
    source: Path,
    workdir: Path,
    threads_per_worker: int | None = None,
    progress=print,
) -> pl.DataFrame:
    """Report ``exports`` copies of a ``kernels``-kernel export on Dask clusters of each size in
    ``workers`` (local worker processes, ``threads_per_worker`` threads each, by default this
    machine's cores over the largest count), then on threads in this process; caches are
    dropped before each run. One row per run: the cluster's start-up and the report's wall
    time, the speedup over the first run, and whether its table equals the first run's."""
    from . import engine
    from .report import kernel_summary

    kernels0 = prepare([kernels * (exports + 1)], source, workdir)  # room for the export and its copies
    fleet = workdir / f"fleet-{exports}x{kernels}"
    fleet.mkdir(parents=True, exist_ok=True)
    one = workdir / f"kernels-{kernels}.sqlite"
    build(source, one, kernels, kernels0, progress)
    files = [fleet / f"rank{k:04d}.sqlite" for k in range(exports)]
    for f in files:
        if not f.exists() or f.stat().st_size != one.stat().st_size:
            shutil.copyfile(one, f)
    threads = threads_per_worker or max(1, engine.cores() // max(workers))
    rows, first = [], None
    for spec in [f"local:{n}" for n in workers] + [None]:
        for f in files:
            cache.forget(f)
        progress(f"{len(files)} exports of {kernels} kernels on {spec or 'threads in this process'}")
        t = time.perf_counter()
        with engine.connect(spec, threads_per_worker=threads) as eng:
            if isinstance(eng, engine.Dask):  # start-up includes each worker's imports
                eng.client.run(importlib.import_module, "nsys_tools.run.report")
            started = time.perf_counter()
            table = kernel_summary(files, engine=eng)
            done = time.perf_counter()
        first = table if first is None else first
        rows.append(
            {
                "engine": f"dask {spec}" if spec else "threads",
                "workers": int(spec.split(":")[1]) if spec else 1,
                "threads_per_worker": threads if spec else engine.cores(),
                "exports": len(files),
                "kernels_per_export": open_export(one).rows("CUPTI_ACTIVITY_KIND_KERNEL"),
                "startup_s": started - t,
                "wall_s": done - started,
                "same_table": table.equals(first),
            }
        )
    table = pl.DataFrame(rows)
    base = table["wall_s"][0]
    return table.with_columns(
        speedup=base / pl.col("wall_s"), kernels_per_s=pl.col("exports") * pl.col("kernels_per_export") / pl.col("wall_s")
    )
