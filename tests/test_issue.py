"""The issue comment of a sweep folder (study.issue): header, verdict, tables, charts, rejected variants."""

from __future__ import annotations

import json
import os
import shutil

import polars as pl
import pytest

from nsys_tools.cli import app
from nsys_tools.study import folder as sweep

from .cli import CliRunner
from .conftest import LOADED, QUIET, SWEEPS

runner = CliRunner()


@pytest.mark.slow
def test_reject_and_issue_comment(book, tmp_path):
    res = runner.invoke(
        app,
        [
            "ledger",
            "reject",
            "ours_regcap",
            "--metric",
            "38.36 µs kernel at 4096x4096 vs 34.47",
            "--why",
            "a 32-register cap spills",
            "--ledger",
            str(book),
        ],
    )
    assert res.exit_code == 0
    out = tmp_path / "comment.md"
    res = runner.invoke(
        app, ["report", str(QUIET), "--issue", "--ledger", str(book), "--charts", str(tmp_path / "charts"), "-o", str(out)]
    )
    assert res.exit_code == 0, res.stderr
    md = out.read_text()
    assert "#### Kernel time, µs: median (p10–p90), from the Nsight Systems trace" in md
    assert "#### Event span, µs: median (p10–p90), from CUDA events with tracing off" in md
    assert md.index("Kernel time, µs") < md.index("Event span, µs")
    assert "triton's kernel came back at 9.12 µs at 4096x768, inside its band" in md
    assert "these numbers are usable" in md
    assert "inputs rotated over 2–9 buffer sets per shape" in md  # 2 at 4096x4096, 9 at 1024x2048
    assert "| ours\\_regcap | 38.36 µs kernel at 4096x4096 vs 34.47 | a 32-register cap spills |" in md
    assert "- 4096x768: 7.90/9.15, 7.94/9.17, 7.84/9.09, 7.90/9.12*" in md
    assert "(charts/kernel-time.png)" in md
    res = runner.invoke(app, ["report", str(QUIET), "--issue", "--ledger", str(book), "--charts", str(tmp_path / "charts")])
    assert f"({os.path.relpath(tmp_path / 'charts' / 'ratio.png')})" in res.stdout  # on stdout: relative to here
    for name in ("kernel-time", "ratio", "history-4096x768"):
        assert (tmp_path / "charts" / f"{name}.png").stat().st_size > 10_000
        assert (tmp_path / "charts" / f"{name}.html").exists()


@pytest.mark.slow
def test_loaded_capture_is_flagged(book, tmp_path):
    res = runner.invoke(app, ["report", str(LOADED), "--issue", "--ledger", str(book), "--charts", str(tmp_path)])
    assert res.exit_code == 0
    md = res.stdout
    assert "But this capture ran under load: another process was on the GPU" in md
    assert "Quote the range across quiet sessions instead (4096x768 9.09–9.17 µs, 8192x768 " in md
    assert "<details><summary>Contention evidence</summary>" in md


@pytest.mark.slow
def test_shapes_not_captured_are_named(tmp_path):
    folder = tmp_path / "cut"
    shutil.copytree(QUIET, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["shapes"]["4096x4096"]["status"] = "running"  # the capture stopped inside this shape
    manifest["spec"]["shapes"].append("2048x768")  # and never reached this one
    (folder / "manifest.json").write_text(json.dumps(manifest))
    args = ["report", str(folder), "--issue", "--ledger", str(tmp_path / "none.sqlite"), "--charts", str(tmp_path)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.stderr
    assert "not captured, see manifest.json: 4096x4096 (running), 2048x768 (not started)" in res.stdout
    assert "| 4096x4096 |" not in res.stdout


def test_throughput_as_a_share_of_the_gpus_peak(monkeypatch):
    """A capture with no copy gets a throughput table; with the op's peak for this GPU, each cell
    carries its share of it and the comment says where the figure comes from."""
    run = sweep.load(SWEEPS / "20261129-225825-cuda-softmax")
    run.plugins = [str(SWEEPS.parents[1] / "examples" / "softmax_op.py")]  # the manifest's is never imported
    from nsys_tools.study.issue import _throughput

    summ = sweep.summary(run)
    impls = list(dict.fromkeys(summ["impl"]))
    plain = "".join(_throughput(run, summ, impls, set()))
    assert "| 8192x4096 |" in plain and "% of peak" not in plain
    monkeypatch.setattr(type(run.op("softmax")), "peaks", {run.gpu: (10.0, "a figure for the test")}, raising=False)
    tflops = summ.filter((pl.col("impl") == "block") & (pl.col("shape") == "8192x4096"))["tflops"][0]
    shared = "".join(_throughput(run, summ, impls, set()))
    assert f"Peak: 10.0 TFLOP/s dense at fp32 on the {run.gpu} (a figure for the test)." in shared
    assert f"{tflops:,.1f} ({100 * tflops / 10:.0f}% of peak)" in shared
