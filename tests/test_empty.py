"""An empty table says why (``run/empty.py``): what it looked for, and where the data are, with
the data's span read by sqlite3."""

from __future__ import annotations

import sqlite3

from nsys_tools.cli import app
from nsys_tools.run.empty import seconds

from .cli import CliRunner
from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
LAYERNORM = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite"
OPS = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def span(path) -> tuple[int, int, int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = [con.execute(f"SELECT MIN(start), MAX(end), COUNT(*) FROM {t}").fetchone() for t in OPS]
    return min(r[0] for r in rows), max(r[1] for r in rows), sum(r[2] for r in rows)


def run(*args: str):
    res = CliRunner().invoke(app, [*map(str, args)])
    assert res.exit_code == 0, res.output
    return res


def test_seconds_keep_as_many_decimals_as_tell_two_times_apart():
    assert seconds(60_110_000_000, 60_410_000_000) == "60.11–60.41 s"
    assert seconds(8_821_540_871, 8_822_500_155) == "8.822–8.823 s"
    assert seconds(5, 7) == "0.000000005–0.000000007 s"


def test_a_window_that_misses_the_data_says_where_they_are():
    lo, hi, n = span(MULTI)
    res = run("report", MULTI, "--from", "100ms", "--to", "200ms")
    line = next(x for x in res.stderr.splitlines() if x.startswith("No rows"))
    assert "(--from 100ms --to 200ms)" in line and "the window at 0.10–0.20 s" in line
    assert f"they sit at {seconds(lo, hi)} ({n:,} operations)" in line
    assert "None" not in res.output


def test_a_view_of_steps_says_no_step_range_exists_and_names_the_ranges():
    res = run("report", LAYERNORM, "--view", "stragglers")
    line = next(x for x in res.stderr.splitlines() if x.startswith("No rows"))
    assert "no NVTX range matches '*step*'" in line and "`torch/4096x768`" in line and "--step GLOB" in line


def test_views_of_nccl_and_of_a_kernel_glob_name_what_they_looked_for():
    assert "holds no NCCL kernel" in run("report", MULTI, "--view", "nccl").stderr
    assert "no row matches --kernel 'nosuch*'" in run("report", MULTI, "--kernel", "nosuch*").stderr


def test_a_summary_of_an_empty_window_says_why_and_never_prints_none():
    lo, hi, _ = span(MULTI)
    res = run("summary", MULTI, "--from", "100ms", "--to", "200ms")
    assert "### Run summary: `multi-gpu-nsys2025.3.sqlite` (--from 100ms --to 200ms)" in res.stdout
    assert "(no GPU work found: the window (--from 100ms --to 200ms) holds no GPU operation: " in res.stdout
    assert seconds(lo, hi) in res.stdout and "None" not in res.stdout


def test_an_empty_timeline_says_where_the_data_are(tmp_path):
    lo, hi, n = span(MULTI)
    res = run("timeline", MULTI, "--from", "100ms", "--to", "200ms", "-o", tmp_path / "t.json")
    line = next(x for x in res.stderr.splitlines() if x.startswith("Note: no GPU operation in the timeline"))
    assert f"they sit at {seconds(lo, hi)} ({n:,} operations), the window at 0.10–0.20 s" in line
    assert "Note: no GPU operation" not in run("timeline", MULTI, "-o", tmp_path / "all.json").stderr
