"""Sweep folders (study.folder): the manifest and units, calls from the trace, the summary per implementation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from nsys_tools.cli import app
from nsys_tools.errors import BadExport
from nsys_tools.study import folder as sweep

from .cli import CliRunner
from .conftest import MATMUL_BF16, QUIET, QUIET_2

runner = CliRunner()


def test_summary_rows(quiet):
    s = sweep.summary(quiet)
    assert s.height == 16
    assert set(s["impl"]) == {"ours", "triton", "torch", "copy"}
    assert (s["instances"] == 300).all()  # 3 rounds x 100 calls, one GPU operation each
    row = s.filter((pl.col("impl") == "triton") & (pl.col("shape") == "4096x768")).row(0, named=True)
    assert row["kernels"] == "layer_norm_fwd" and row["op"] == "layernorm" and row["l2"] == "cold"
    assert row["kernel_p10_ns"] <= row["kernel_median_ns"] <= row["kernel_p90_ns"]
    assert row["span_median_ns"] > row["kernel_median_ns"]  # the span includes the launch the GPU waited for
    assert row["gb_per_s"] == pytest.approx(row["bytes"] / row["kernel_median_ns"])
    copy = s.filter(pl.col("impl") == "copy")["kernels"].unique().to_list()
    assert copy == ["[CUDA memcpy Device-to-Device]"]


def test_calls_parse_the_range_convention(quiet):
    c = quiet.calls
    assert c.columns == ["op", "impl", "shape", "l2", "round", "start_ns", "duration_ns", "kernel", "ops"]
    assert sorted(c["round"].unique()) == [0, 1, 2]
    assert c.group_by("impl", "shape", "round").len()["len"].unique().to_list() == [100]
    assert c["ops"].unique().to_list() == [1]


def _raw_ops(folder: Path) -> pl.DataFrame:
    import nsys_tools

    frames = []
    for export in sorted(folder.glob("*.sqlite")):
        with nsys_tools.open(export) as trace:
            ops = trace.gpu_ops(attributed=True, columns=["name", "short_name", "start_ns", "duration_ns"])
            ops = ops.filter(pl.col("range").str.contains(sweep.RANGE_REGEX)).collect()
        frames.append(ops.select("range", "start_ns", "duration_ns", kernel=pl.coalesce("short_name", "name").cast(pl.String)))
    return pl.concat(frames).pipe(sweep.parse_ranges)


def test_a_call_of_several_gpu_operations_is_one_call():
    """torch.matmul's cuBLAS call sets a 4-byte workspace flag with a memset before its kernel: one
    call, two operations, and its kernel time is their sum, not a median over a mix of both."""
    s = sweep.load(MATMUL_BF16)
    c = s.calls
    torch = c.filter(pl.col("impl") == "torch")
    assert torch.height == 4 * 300 and torch["ops"].unique().to_list() == [2]
    assert torch["kernel"].str.starts_with("[CUDA memset] + nvjet_").all()
    assert c.filter(pl.col("impl") != "torch")["ops"].unique().to_list() == [1]
    raw = _raw_ops(MATMUL_BF16)
    assert raw.height == c["ops"].sum() == 4 * 300 * 4  # every operation in exactly one call
    totals = raw.group_by("impl", "shape").agg(pl.col("duration_ns").sum()).sort("impl", "shape")
    assert totals.equals(c.group_by("impl", "shape").agg(pl.col("duration_ns").sum()).sort("impl", "shape"))
    # The median call is a whole call: far above any memset, near the kernel alone.
    row = sweep.summary(s).filter((pl.col("impl") == "torch") & (pl.col("shape") == "4096x4096x1024")).row(0, named=True)
    kernel_only = raw.filter(
        (pl.col("impl") == "torch") & (pl.col("shape") == "4096x4096x1024") & ~pl.col("kernel").str.contains("memset")
    )
    assert row["instances"] == 300
    assert kernel_only["duration_ns"].median() < row["kernel_median_ns"] < 1.05 * kernel_only["duration_ns"].median()


def test_calls_fall_back_to_one_per_operation_when_the_count_does_not_divide():
    raw = _raw_ops(MATMUL_BF16).filter((pl.col("impl") == "torch") & (pl.col("shape") == "4096x4096x1024"))
    assert sweep.into_calls(raw.with_columns(calls=pl.lit(100, pl.Int64)))["ops"].unique().to_list() == [2]
    odd = raw.filter(pl.col("round") == 0).slice(1)  # 199 operations for 100 calls
    out = sweep.into_calls(odd.with_columns(calls=pl.lit(100, pl.Int64)))
    assert out.height == 199 and out["ops"].unique().to_list() == [1]
    named = sweep.into_calls(raw.with_columns(calls=pl.lit(None, pl.Int64)))  # a program's range without /n<calls>
    assert named.height == raw.height


@pytest.mark.slow
def test_json_markdown_csv_carry_the_same_rows():
    js = json.loads(runner.invoke(app, ["report", str(QUIET), "-f", "json"]).stdout)
    csv = runner.invoke(app, ["report", str(QUIET), "-f", "csv"]).stdout.splitlines()
    md = runner.invoke(app, ["report", str(QUIET)]).stdout.splitlines()
    assert len(js) == len(csv) - 1 == len(md) - 2 == 16
    need = {"op", "impl", "shape", "l2", "instances", "kernel_median_ns", "kernel_p10_ns", "kernel_p90_ns", "span_median_ns"}
    assert need <= set(js[0])
    assert csv[0].split(",")[: len(js[0])] == list(js[0])


def test_two_sweeps_side_by_side():
    res = runner.invoke(app, ["report", str(QUIET), str(QUIET_2), "-f", "json"])
    rows = json.loads(res.stdout)
    assert {r["sweep"] for r in rows} == {QUIET.name, QUIET_2.name} and len(rows) == 32


def test_not_a_sweep(tmp_path):
    with pytest.raises(BadExport, match="not a sweep folder"):
        sweep.load(tmp_path)


def test_failed_shapes_are_left_out(tmp_path):
    folder = tmp_path / "s"
    shutil.copytree(QUIET, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["shapes"]["4096x4096"] = {"status": "failed", "error": "CaptureError: profiling failed"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert sorted(set(sweep.summary(sweep.load(folder))["shape"])) == ["1024x2048", "4096x768", "8192x768"]


def test_sweeps_from_before_the_shuffle_read_as_the_rotation_they_ran(quiet):
    """A sweep recorded before each round's order was: its orders are the rotation, and that is the
    order its trace shows the implementations starting in, round by round, at every shape."""
    assert quiet.order == "rotated"
    first_calls = quiet.calls.group_by("shape", "round", "impl").agg(pl.col("start_ns").min()).sort("start_ns")
    for shape in quiet.units:
        ran = first_calls.filter(pl.col("shape") == shape).group_by("round", maintain_order=True).agg("impl").sort("round")
        assert ran["impl"].to_list() == quiet.round_orders(shape)
    assert quiet.round_orders("4096x768")[1] == ["triton", "torch", "copy", "ours"]
    from nsys_tools.study import issue

    assert "order rotated each round" in issue.compose(quiet, None, None).markdown
