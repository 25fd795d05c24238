"""Comparing our tables with the ``nsys stats`` CSVs in ``tests/fixtures/nsys-stats/``.

nsys is not installed where CI runs: those CSVs were written by Nsight Systems 2025.3.1.0 on the
capture machine, or, for the reports of the training-loop capture that 2025.3 did not write, by
2024.2.3 (that folder's MANIFEST.md says which wrote each file, and how). nsys prints averages
and standard deviations with one decimal, percentages with one, and memory sizes in MB with three;
everything else must be equal.
"""

from __future__ import annotations

import gzip

import polars as pl

from .conftest import FIXTURES

NSYS = "nsys stats"  # which nsys wrote each reference CSV: tests/fixtures/nsys-stats/MANIFEST.md
ONE_DECIMAL = 0.05 + 1e-9
MB = 1e6


def reference(name: str, report: str) -> pl.DataFrame:
    """nsys's CSV for ``report`` on the export ``name``; large ones are stored as ``.csv.gz``."""
    path = FIXTURES / "nsys-stats" / name / f"{report}.csv"
    if not path.exists() and path.with_suffix(".csv.gz").exists():
        return pl.read_csv(gzip.decompress(path.with_suffix(".csv.gz").read_bytes()), infer_schema_length=None)
    return pl.read_csv(path, infer_schema_length=None)


def paired(ours: pl.DataFrame, ref: pl.DataFrame, key: str, report: str) -> pl.DataFrame:
    """Our rows joined to nsys's on ``key``: the same rows, one to one."""
    assert sorted(ours[key]) == sorted(ref[key]), f"rows differ from {NSYS} {report}"
    return ours.join(ref, on=key, how="inner", validate="1:1")


def assert_equal(both: pl.DataFrame, pairs: dict[str, str], report: str) -> None:
    for ours, theirs in pairs.items():
        assert (both[ours] == both[theirs]).all(), f"{ours} != {NSYS} {report} {theirs!r}"


def assert_close(both: pl.DataFrame, pairs: dict[str, str], report: str, tol: float = ONE_DECIMAL, scale: float = 1.0) -> None:
    for ours, theirs in pairs.items():
        worst = (both[ours] / scale - both[theirs]).abs().max()
        assert worst <= tol, f"{ours} differs from {NSYS} {report} {theirs!r} by {worst}"


def assert_time_stats(both: pl.DataFrame, report: str, instances: str = "Instances") -> None:
    """Our time statistics against nsys's usual columns: count, total, median, extremes exactly;
    mean, standard deviation and share to nsys's one decimal."""
    exact = {"total_ns": "Total Time (ns)", "median_ns": "Med (ns)", "min_ns": "Min (ns)", "max_ns": "Max (ns)"}
    assert_equal(both, {"instances": instances, **exact}, report)
    assert_close(both, {"mean_ns": "Avg (ns)", "stddev_ns": "StdDev (ns)", "time_pct": "Time (%)"}, report)
