"""The benchmark, as a smoke test: a tiny export, one run per side, the report and its raw lines."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.bench
@pytest.mark.slow
def test_the_tree_and_its_base_run_side_by_side_into_a_report(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "benchmarks.compare", "--base", "HEAD", "--sizes", "2k", "--cases", "first-read@*", "-n", "1"]
    done = subprocess.run([*cmd, "--exports", str(tmp_path), "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (report,) = out.glob("*.md")
    lines = [json.loads(x) for x in report.with_suffix(".jsonl").read_text().splitlines()]
    assert {(x["side"], x["turn"]) for x in lines} == {(s, t) for s in ("base", "tree") for t in (0, 1)}
    assert all(x["rc"] == 0 and x["wall_s"] > 0 and x["cpu_s"] > 0 and x["peak_mib"] > 50 for x in lines)
    assert len({x["md5"] for x in lines}) == 1  # the same table from both trees
    row = next(line for line in report.read_text().splitlines() if line.startswith("| first-read@2k"))
    assert row.endswith("| yes |")
    assert "- cores:" in report.read_text()
    (export,) = tmp_path.glob("*-2k-*.sqlite")  # built from the committed fixture: 5 copies of its 381 kernels
    with sqlite3.connect(export) as con:
        assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == 5 * 381


def test_the_report_records_paths_of_this_machine_by_their_last_part():
    from benchmarks.compare import shown

    argv = ["--base", "main", "--nsys", "/opt/nvidia/nsight-systems/2025.3/bin/nsys", "--out=/home/me/bench", "-n", "3"]
    assert shown(argv) == "python -m benchmarks.compare --base main --nsys nsys --out=bench -n 3"
