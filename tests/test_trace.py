"""The frame layer: ``nsys_tools.open`` on real exports, every column kept, names resolved, each
GPU operation matched to one launching call."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import polars as pl
import pytest

import nsys_tools
from nsys_tools.read import schema as S
from nsys_tools.run.report import view_table

from .conftest import FIXTURES

LAYERNORM = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
DOUBLED = FIXTURES / "doubled-launch" / "doubled-launch.sqlite"


def test_import_is_cheap_and_open_is_lazy():
    code = (
        "import sys, nsys_tools; assert 'polars' not in sys.modules, 'polars imported'; "
        "assert callable(nsys_tools.open) and 'polars' in sys.modules; print(nsys_tools.__version__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == nsys_tools.__version__
    assert {"open", "Trace"} <= set(dir(nsys_tools))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nsys_tools.nope  # noqa: B018


def test_every_export_column_is_kept_with_names_resolved():
    with nsys_tools.open(LAYERNORM) as trace:
        with sqlite3.connect(LAYERNORM) as con:
            raw = [r[1] for r in con.execute(f"PRAGMA table_info({S.KERNEL})")]
        con.close()
        kernels = trace.kernels().collect()
        named = {f.sources[0]: f.name for f in S.KERNEL_FIELDS}
        assert {named.get(c, S.snake(c)) for c in raw} <= set(kernels.columns)
        assert {"shared_memory_executed", "launch_type", "grid_id"} <= set(kernels.columns)  # not in our schema
        assert kernels.height == 381 and kernels["name"].null_count() == 0
        assert kernels.filter(pl.col("short_name") == "norm_kernel").height == 120
        assert set(kernels["process_name"]) == {"python3"} and set(kernels["gpu_name"]) == {"NVIDIA H200"}
        memops = trace.memops().collect()
        assert sorted(memops["name"].unique()) == ["[CUDA memcpy Device-to-Host]", "[CUDA memset]"]
        assert {"bytes", "copy_kind", "mem_kind", "value", "src_kind"} <= set(memops.columns)
        api = trace.api().collect()
        assert api.filter(pl.col("name") == "cudaLaunchKernel_v7000").height == 141
        assert (api["duration_ns"] >= 0).all() and {"tid", "pid", "return_value"} <= set(api.columns)
        ranges = trace.ranges().collect()
        assert sorted(ranges["range"]) == ["cupy/4096x768", "torch/4096x768", "triton/4096x768"]
        assert {"color", "category", "json_text"} <= set(ranges.columns)
        ops = trace.gpu_ops().collect()
        assert ops.height == 390 and ops.group_by("kind").len().sort("kind").rows() == [
            ("kernel", 381),
            ("memcpy", 3),
            ("memset", 6),
        ]
        assert ops.filter(pl.col("range") == "triton/4096x768")["api_name"].unique().to_list() == ["cuLaunchKernelEx"]
        assert trace.gpus().collect()["gpu_name"].to_list() == ["NVIDIA H200"]
        assert trace.session()["nsys_version"].startswith("2025.3")
    assert not trace._read  # leaving the block drops what was read


def test_columns_reads_only_those():
    trace = nsys_tools.open(LAYERNORM)
    assert trace.kernels(["name", "duration_ns", "gpu_name"]).collect().columns == ["name", "duration_ns", "gpu_name"]
    narrow = trace.gpu_ops(columns=["name", "duration_ns"]).collect()
    assert {"name", "duration_ns", "range", "api_start_ns"} <= set(narrow.columns) and "grid_x" not in narrow.columns


def test_two_gpus_two_processes():
    trace = nsys_tools.open(MULTI)
    ops = trace.gpu_ops().collect()
    per = ops.group_by("pid", "process_name", "gpu_id", "gpu_name").len().sort("gpu_id")
    assert per.select("process_name", "gpu_id", "gpu_name").rows() == [
        ("python3", 0, "NVIDIA H200"),
        ("python3", 1, "NVIDIA H200"),
    ]
    assert per["pid"].n_unique() == 2 and per["len"].to_list() == [67, 67]
    # Each process saw both GPUs under their own ordinals; the per-process map places each op.
    assert trace.devices().filter(pl.col("pid").is_not_null()).collect().height == 4


def test_by_device_gives_one_row_per_device():
    table = view_table([MULTI], "memops", by=["device"])
    whole = view_table([MULTI], "memops")
    assert table.group_by("operation").len()["len"].to_list() == [2] * whole.height
    assert set(table["gpu_id"]) == {0, 1} and set(table["gpu_name"]) == {"NVIDIA H200"}
    summed = table.group_by("operation").agg(pl.col("instances", "total_bytes", "total_ns").sum()).sort("operation")
    assert summed.rows() == whole.select("operation", "instances", "total_bytes", "total_ns").sort("operation").rows()
    by_stream = view_table([MULTI], "kernels", by=["stream"])
    assert {"gpu_id", "pid", "stream_id"} <= set(by_stream.columns) and by_stream["stream_id"].n_unique() == 2


def test_doubled_launches_take_the_outermost_call():
    """Where a runtime records a call and the versioned one it wraps, with one correlation id,
    the operation is launched by the outer call: counted once, timed from the outer call."""
    cols = ["start_ns", "device_id", "stream_id", "api_name"]
    doubled = nsys_tools.open(DOUBLED).gpu_ops(columns=cols).collect()
    real = nsys_tools.open(MULTI).gpu_ops(columns=cols).collect()
    assert doubled.height == real.height == 134
    both = doubled.join(real, on=["start_ns", "device_id", "stream_id"], how="inner", validate="1:1", suffix="_real")
    wrapped = both.filter(pl.col("api_name_real").str.contains(r"_v\d+$"))
    assert wrapped.height == 126
    assert (wrapped["api_name"] == wrapped["api_name_real"].str.replace(r"_v\d+$", "")).all()
    assert (wrapped["api_start_ns"] == wrapped["api_start_ns_real"] - 300).all()
    assert (wrapped["api_end_ns"] == wrapped["api_end_ns_real"] + 200).all()
    assert (both["range"] == both["range_real"]).all()


@pytest.mark.parametrize("command", [["report"], ["summary"], ["report", "--view", "steps"]])
def test_doubled_launches_are_noted_in_one_line(command):
    """The report says, in one line, how many operations several calls launched under one
    correlation id (counted by sqlite3), and that each is attributed once; the views of the
    operations equal those of the real capture. Nothing had said so."""
    from typer.testing import CliRunner

    from nsys_tools.cli import app

    with sqlite3.connect(f"file:{DOUBLED}?mode=ro", uri=True) as con:
        counts = [
            con.execute(
                f"SELECT count(*) FROM {table} o WHERE (SELECT count(*) FROM {S.RUNTIME} r WHERE r.correlationId = "
                "o.correlationId AND r.globalTid >> 24 = o.globalPid >> 24) > 1"
            ).fetchone()[0]
            for table in (S.KERNEL, S.MEMCPY, S.MEMSET)
        ]
    con.close()
    assert counts == [70, 32, 24]
    res = CliRunner().invoke(app, [*command, str(DOUBLED)])
    assert res.exit_code == 0, res.output
    notes = [line for line in res.stderr.splitlines() if line.startswith("Note:") and "correlation id" in line]
    assert notes == [
        f"Note: {DOUBLED}: 70 kernels, 32 memcpys and 24 memsets were launched by API calls that share one correlation "
        "id (the call made and the entry point it wraps, as older CUDA runtimes record them); each is attributed "
        "once, to the outermost call"
    ]
    for view in ("kernels", "memops", "utilization", "overlap"):
        assert view_table([DOUBLED], view).equals(view_table([MULTI], view)), view
    clean = CliRunner().invoke(app, [*command, str(MULTI)])
    assert "correlation id" not in clean.stderr


def test_doubled_api_names_stay_apart():
    """The outer and the versioned call both happened: the API view counts both, and keeps
    their recorded names where nsys's shortening would make them read alike."""
    api = view_table([DOUBLED], "api")
    launches = api.filter(pl.col("api").str.starts_with("cudaLaunchKernel"))
    assert sorted(launches["api"]) == [
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchKernelExC_v11060",
        "cudaLaunchKernel_v7000",
    ]
    assert api["api"].n_unique() == api.height


def test_no_process_column_matches_by_the_launching_thread(tmp_path):
    """Exports whose activity tables record no process: the two processes of the real capture
    reuse every correlation id, and each operation still finds its own launch and process."""
    path = tmp_path / "no-global-pid.sqlite"
    path.write_bytes(MULTI.read_bytes())
    with sqlite3.connect(path) as con:
        reused = con.execute(
            f"SELECT count(*) FROM (SELECT correlationId FROM {S.KERNEL} GROUP BY 1 HAVING count(DISTINCT globalPid) > 1)"
        ).fetchone()[0]
        for table in (S.KERNEL, S.MEMCPY, S.MEMSET):
            con.execute(f"ALTER TABLE {table} DROP COLUMN globalPid")
    con.close()
    assert reused == 39
    from typer.testing import CliRunner

    from nsys_tools.cli import app

    res = CliRunner().invoke(app, ["report", str(path)])  # ids reused by two processes: not shared within one
    assert res.exit_code == 0 and "correlation id" not in res.stderr, res.stderr
    cols = ["start_ns", "device_id", "stream_id", "pid", "process_name", "gpu_id"]
    old = nsys_tools.open(path).gpu_ops(columns=cols).collect()
    new = nsys_tools.open(MULTI).gpu_ops(columns=cols).collect()
    both = old.join(new, on=["start_ns", "device_id", "stream_id"], how="inner", validate="1:1", suffix="_new")
    assert old.height == both.height == 134
    for column in ("pid", "process_name", "gpu_id", "api_start_ns", "range"):
        assert (both[column] == both[f"{column}_new"]).all(), column
