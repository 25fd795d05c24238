"""One run per report (``read/sessions.py``): exports whose captures overlap in time are the ranks
of one run; others are separate runs, refused by ``report`` unless ``--merge``, one section each
in ``summary``; one GPU id in two exports of a run stays two devices. Spans and figures are
checked against sqlite3."""

from __future__ import annotations

import sqlite3

import polars as pl
import pytest

from nsys_tools.cli import app
from nsys_tools.read.sessions import runs, span
from nsys_tools.run.report import view_table
from nsys_tools.study.summary import run_summary, summary

from .cli import CliRunner
from .conftest import FIXTURES
from .split_ranks import make

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
OPS = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def sql(path, query: str):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute(query).fetchone()


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    from .torch_train import exports

    folder = tmp_path_factory.mktemp("runs")
    exports(folder)
    return folder


def test_a_capture_span_is_its_session_start_on_the_wall_clock_plus_its_capture_times():
    (utc,) = sql(MULTI, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    lo, hi = sql(MULTI, "SELECT MIN(startTime), MAX(stopTime) FROM ANALYSIS_DETAILS")
    s = span(MULTI)
    assert (s.start_ns, s.end_ns) == (utc + lo, utc + hi)


def test_separate_captures_are_separate_runs_and_ranks_of_one_job_one(three_runs, tmp_path):
    files = sorted(three_runs.glob("*.sqlite"))
    assert [len(g) for g in runs(files)] == [1, 1, 1]
    ranks = make(tmp_path / "ranks")
    assert runs(ranks) == [ranks]


def test_report_refuses_several_runs_unless_merged_or_per_file(three_runs):
    cli = CliRunner()
    res = cli.invoke(app, ["report", str(three_runs), "--view", "utilization"])
    assert res.exit_code == 1
    line = res.stderr.strip()
    assert line.count("\n") == 0 and line.startswith(f"Error: {three_runs}: holds 3 separate runs")
    assert "nsys-tools compare BASE NEW" in line and "--merge" in line and "Traceback" not in res.output
    for flag in ("--merge", "--per-file"):
        ok = cli.invoke(app, ["report", str(three_runs), "--view", "utilization", flag, "--format", "csv"])
        assert ok.exit_code == 0, ok.output


@pytest.mark.slow
def test_a_summary_of_several_runs_has_a_section_per_run(three_runs):
    files = sorted(three_runs.glob("*.sqlite"))
    text = summary([three_runs])
    assert text.startswith("## 3 runs")
    for f in files:
        assert run_summary([f]) in text
    assert summary([three_runs], merge=True) == run_summary(files)


def test_the_ranks_of_one_run_in_separate_exports_are_the_capture_device_for_device(tmp_path):
    ranks = make(tmp_path / "ranks")
    assert view_table(ranks, "utilization", by=["device"]).equals(view_table([MULTI], "utilization", by=["device"]))


def test_one_gpu_id_in_two_exports_of_a_run_stays_two_devices(tmp_path):
    """Two nodes' exports, each with a GPU 0: two rows, each the figures of its own export, its
    span from its first operation to its last (sqlite3)."""
    nodes = make(tmp_path / "nodes", node=True)
    notes: list[str] = []
    table = view_table(nodes, "utilization", by=["device"], notes=notes)
    assert table["gpu_id"].to_list() == [0, 0] and table["file"].to_list() == [str(p) for p in nodes]
    assert notes == [
        "GPU 0 is in 2 exports (rank-1426.sqlite, rank-1427.sqlite): rows by device are kept apart per export (the file column)"
    ]
    for path in nodes:
        row = table.filter(pl.col("file") == str(path)).drop("file")
        assert row.equals(view_table([path], "utilization", by=["device"]))
        rows = [sql(path, f"SELECT MIN(start), MAX(end) FROM {t}") for t in OPS]
        assert row["span_ns"].item() == max(r[1] for r in rows) - min(r[0] for r in rows)
    res = CliRunner().invoke(app, ["summary", str(tmp_path / "nodes")])
    assert "| rank-1426.sqlite 0 NVIDIA H200 |" in res.stdout and "| rank-1427.sqlite 0 NVIDIA H200 |" in res.stdout
