"""The benchmarks: pinned side-by-side runs and the Dask fleet, on small real exports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nsys_tools.run import bench

from .conftest import FIXTURES

pytestmark = pytest.mark.slow  # times report against the SQL baseline and on Dask clusters (about 25 s)

SRC = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"


def test_a_fleet_on_dask_clusters_of_each_size(tmp_path):
    pytest.importorskip("distributed", reason="needs nsys-tools[dask]")
    table = bench.scaling([1, 2], exports=3, kernels=762, source=SRC, workdir=tmp_path, threads_per_worker=1, progress=str)
    assert table["engine"].to_list() == ["dask local:1", "dask local:2", "threads"]
    assert table["workers"].to_list() == [1, 2, 1] and table["exports"].to_list() == [3, 3, 3]
    assert table["kernels_per_export"].to_list() == [762] * 3 and table["same_table"].all()
    assert (table["wall_s"] > 0).all() and table["speedup"][0] == 1.0
    assert len(list((tmp_path / "fleet-3x762").glob("rank*.sqlite"))) == 3


def test_pinned_run_without_a_baseline(tmp_path):
    table = bench.run([762], SRC, tmp_path, progress=str, cpus=[0], baseline="none")
    assert table["tool"].to_list() == ["nsys-tools report (first read)", "nsys-tools report (repeat read)"]
    assert table["cpus"].to_list() == [1, 1] and table["speedup"].is_null().all()
    assert table["kernels"].to_list() == [762, 762]


@pytest.mark.parametrize("text, cores", [("0-1", [0, 1]), ("0,2-4", [0, 2, 3, 4]), ("7", [7])])
def test_core_lists(text, cores):
    assert bench.parse_cpus(text) == cores
    with pytest.raises(ValueError):
        bench.parse_cpus("0-x")


@pytest.mark.slow
def test_bench_against_the_sql_baseline(tmp_path, monkeypatch):
    from nsys_tools.run import bench

    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv(
        "PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nsys").exists())
    )
    table = bench.run([1905], SRC, tmp_path, progress=lambda msg: None)
    assert table["tool"].to_list() == [
        "nsys-tools report (first read)",
        "nsys-tools report (repeat read)",
        "sqlite3 SQL baseline",
    ]
    assert table["kernels"].unique().to_list() == [1905] and table["mismatches"][2] == 0
    assert (table["peak_bytes"] > 0).all() and table["speedup"][2] == 1.0
