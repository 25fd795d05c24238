"""The standard frames on real exports of two nsys versions."""

from __future__ import annotations

import polars as pl
import pytest

from nsys_tools.read import frames as events
from nsys_tools.read.export import open_export

from .conftest import FIXTURES

EXPORTS = [FIXTURES / "layernorm-3impl" / f"layernorm-3impl-nsys{v}.sqlite" for v in ("2025.3", "2024.2")]


@pytest.fixture(params=EXPORTS, ids=["2025.3", "2024.2"])
def ex(request):
    return open_export(request.param)


def test_kernels(ex):
    k = events.kernels(ex).collect()
    assert k.height == 381
    assert k["duration_ns"].min() > 0 and k["duration_ns"].dtype == pl.Int64
    named = events.attach_names(ex, k, {"short_name_id": "name"})
    triton = named.filter(pl.col("name") == "norm_kernel")
    assert triton.height == 120
    assert triton.select("grid_x", "block_x", "registers_per_thread").unique().rows() == [
        (4096, 128, triton["registers_per_thread"][0])
    ]
    assert set(named.filter(pl.col("name") == "ln_block")["static_shared_bytes"]) == {128}


def test_memops(ex):
    m = events.memops(ex).collect()
    assert sorted(m["kind"].value_counts().rows()) == [("memcpy", 3), ("memset", 6)]
    assert set(m.filter(pl.col("kind") == "memcpy")["copy_kind"]) == {"Device-to-Host"}
    assert set(m["name"]) == {"[CUDA memcpy Device-to-Host]", "[CUDA memset]"}


def test_api_calls(ex):
    calls = events.api_calls(ex).collect()
    assert calls.height > 4000
    named = events.attach_names(ex, events.api_calls(ex, launches_only=True).collect(), {"api_name_id": "api"})
    assert set(named["api"]) == {
        "cudaLaunchKernel_v7000",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaMemcpyAsync_v3020",
        "cudaMemsetAsync_v3020",
    }
    ops = events.kernels(ex).select("global_pid", "correlation_id")
    launches = events.launch_calls(ex, ops).join(ops, on="correlation_id", how="semi").collect()
    assert launches.height == 381
    exact = events.api_calls(ex, correlation_ids=ops.collect()["correlation_id"]).collect()
    assert sorted(exact["correlation_id"]) == sorted(launches["correlation_id"])


def test_nvtx_ranges(ex):
    r = events.nvtx_ranges(ex).collect()
    assert sorted(r["range"]) == ["cupy/4096x768", "torch/4096x768", "triton/4096x768"]
    assert set(r["style"]) == {"pushpop"}
    assert (r["end_ns"] > r["start_ns"]).all()


def test_gpus_and_session(ex):
    g = events.gpus(ex)
    assert g.select("gpu_id", "gpu_name", "sm_count", "l2_bytes").rows() == [(0, "NVIDIA H200", 132, 62914560)]
    s = events.session(ex)
    assert s["nsys_version"].split(".")[0] in ("2024", "2025") and s["schema_version"].startswith("3.")
    assert s["driver"] == "580.159.04" and s["start_utc_ns"] > 0


def test_no_nvtx_table_gives_no_ranges():
    ex = open_export(FIXTURES / "bad-input" / "no-nvtx.sqlite")
    assert events.nvtx_ranges(ex).collect().is_empty()


def test_nvtx_text_from_string_ids(fixture_copy):
    """Registered strings (textId) resolve through StringIds like inline text."""
    import sqlite3

    path = fixture_copy("layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO StringIds (id, value) VALUES (99999, 'registered/4096x768')")
        con.execute("UPDATE NVTX_EVENTS SET text = NULL, textId = 99999 WHERE text = 'cupy/4096x768'")
    con.close()
    r = events.nvtx_ranges(open_export(path)).collect()
    assert "registered/4096x768" in r["range"].to_list()
