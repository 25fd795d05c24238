"""The small training-loop capture (``tests/fixtures/train-loop/``: one H100, a ``setup`` range, 20
steps ``step 0`` ... ``step 19``, a 600 ms sleep in ``data`` every fifth step, pageable copies and a
sync every step): what an expert finds by hand in it, each checked against the export's own tables
read with SQL."""

from __future__ import annotations

import json
import sqlite3
import statistics
from itertools import pairwise

import polars as pl
import pytest

from nsys_tools.cli import app
from nsys_tools.render.tables import escape
from nsys_tools.run.report import view_table

from .cli import CliRunner
from .conftest import FIXTURES
from .test_steps import blocked_ns, check_against_sql, idle_by_cause_sql, step_ranges, union_ns

EXPORT = FIXTURES / "train-loop" / "train-loop-nsys2025.3.sqlite"
PID, GPU = 521, 0
SLEEP_NS = 600_000_000  # the loader's sleep in steps 4, 9, 14 and 19 (workload.py --slow-ms)
GPU_OPS = """
    SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET"""
COPIES = """
    SELECT m.start, m.end, m.bytes, m.copyKind, m.srcKind, m.dstKind, s.value AS api
    FROM CUPTI_ACTIVITY_KIND_MEMCPY m
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId AND r.globalTid >> 24 = m.globalPid >> 24
    JOIN StringIds s ON s.id = r.nameId"""
runner = CliRunner()


def sql(query: str, **params) -> list[tuple]:
    con = sqlite3.connect(EXPORT)
    try:
        return con.execute(query, params).fetchall()
    finally:
        con.close()


def ranges(glob: str) -> list[tuple[str, int, int]]:
    """The NVTX ranges whose text matches ``glob``: (text, start, end), in order of start."""
    return sql(
        "SELECT coalesce(n.text, s.value), n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE coalesce(n.text, s.value) GLOB :glob ORDER BY n.start",
        glob=glob,
    )


def steps_sql() -> list[tuple[str, int, int]]:
    return ranges("step [0-9]*")


def sleeping() -> list[str]:
    """The steps whose ``data`` range lasts longer than the loader's sleep."""
    data = [(a, b) for _, a, b in ranges("data") if b - a >= SLEEP_NS]
    return [name for name, a, b in steps_sql() if any(a <= s and e <= b for s, e in data)]


def steady_median_ns() -> float:
    """The median duration of every step after ``step 0`` (the first step, with its one-time costs)."""
    return statistics.median(b - a for _, a, b in steps_sql()[1:])


@pytest.fixture(scope="module")
def steps() -> pl.DataFrame:
    return view_table([EXPORT], "steps")


@pytest.fixture(scope="module")
def findings() -> list[dict]:
    res = runner.invoke(app, ["diagnose", str(EXPORT), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["findings"]


def one(findings: list[dict], rule: str) -> dict:
    (found,) = [f for f in findings if f["rule"] == rule]
    return found


def test_twenty_steps_are_the_step_ranges_and_the_setup_row_is_the_time_before_them(steps):
    assert steps["pid"].unique().to_list() == [PID] and steps["gpu_id"].unique().to_list() == [GPU]
    assert steps["step"].to_list() == list(range(21))
    assert steps["name"].to_list() == ["(setup)", *(f"step {i}" for i in range(20))]
    assert set(steps["source"]) == {"NVTX ranges named like steps ('*step*', 'ProfilerStep#N')"}
    rows = steps.filter(pl.col("step") > 0)
    assert [(PID, a, a + d) for a, d in rows.select("start_ns", "duration_ns").rows()] == step_ranges(EXPORT, "step %")
    # setup: from the `setup` range, which opens before the process's first GPU operation and its
    # launch call, to the start of `step 0`
    ((_, setup_start, setup_end),) = ranges("setup")
    first_op = sql(f"SELECT min(start) FROM ({GPU_OPS})")[0][0]
    first_launch = sql(
        "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IN (SELECT correlationId FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY "
        "UNION SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET)"
    )[0][0]
    assert setup_start < first_launch < first_op
    setup = steps.row(0, named=True)
    assert setup["phase"] == "setup" and setup["start_ns"] == setup_start
    assert setup["start_ns"] + setup["duration_ns"] == steps_sql()[0][1] > setup_end
    # every figure of every row equals plain SQL over the row's window, idle by cause included
    assert check_against_sql(EXPORT, steps) == 21
    gaps = idle_by_cause_sql(EXPORT, PID, GPU)
    for row in steps.iter_rows(named=True):
        a, b = row["start_ns"], row["start_ns"] + row["duration_ns"]
        for cause in ("host", "sync", "memory"):
            assert row[f"idle_{cause}_ns"] == sum(max(0, min(e, b) - max(s, a)) for s, e, c in gaps if c == cause)
        host = [min(e, b) - max(s, a) for s, e, c in gaps if c == "host" and min(e, b) > max(s, a)]
        assert row["idle_host_longest_ns"] == max(host, default=0)


def test_the_first_step_is_warm_up_and_the_slow_steps_are_exactly_the_four_sleeping_ones(steps):
    assert sleeping() == ["step 4", "step 9", "step 14", "step 19"]
    durations = [b - a for _, a, b in steps_sql()]
    # step 0 (500 ms: cuBLAS handles, the allocator's first blocks) is well above the median step
    assert durations[0] > 1.5 * statistics.median(durations) and durations[1] < 1.5 * statistics.median(durations)
    rows = steps.filter(pl.col("step") > 0)
    assert rows["phase"].to_list() == ["warmup"] + ["steady"] * 19
    assert rows.filter(pl.col("slow"))["name"].to_list() == sleeping()
    # the sleeping steps' extra time is the GPU waiting for the host: idle with nothing queued for
    # longer than the sleep, against a couple of milliseconds in every other steady step
    for row in rows.filter(pl.col("phase") == "steady").iter_rows(named=True):
        if row["slow"]:
            assert SLEEP_NS < row["idle_host_ns"] < row["duration_ns"]
        else:
            assert row["idle_host_ns"] < SLEEP_NS / 200


def test_the_steps_partition_the_whole_runs_idle_time(steps):
    """Before the step model (at aeb7dc7, ``summary`` on this capture), the first line to look at
    was "GPUs idle 96.3% of their span (9,551.90 ms); the top cause is **host**: 9,550.42 ms":
    one figure lumping setup's 7.1 s with the four data stalls, with neither the slow steps nor the
    pageable copies named. The step rows split that idle time with nothing lost: summed over the
    rows, less the idle before the device's first operation and after its last, plus the idle in
    the few microseconds between one step range and the next, it is the span of the device's
    operations less their union, in SQL."""
    (first, last), busy = sql(f"SELECT min(start), max(end) FROM ({GPU_OPS})")[0], 0
    covered = first
    for start, end in sql(f"SELECT start, end FROM ({GPU_OPS}) ORDER BY start, end"):
        busy += max(0, end - max(start, covered))
        covered = max(covered, end)
    whole = last - first - busy
    assert f"{whole / 1e6:,.2f} ms" == "9,551.90 ms"  # the figure of that line
    bounds = steps.select("start_ns", end_ns=pl.col("start_ns") + pl.col("duration_ns")).rows()
    outside = (first - bounds[0][0]) + (bounds[-1][1] - last)
    con = sqlite3.connect(EXPORT)
    try:
        between = [(a, b) for (_, a), (b, _) in pairwise(bounds)]
        assert 0 < sum(b - a for a, b in between) < 1_000_000
        between_idle = sum(b - a - union_ns(con, PID, GPU, a, b, (0, 1, 2)) for a, b in between)
    finally:
        con.close()
    assert steps["idle_ns"].sum() - outside + between_idle == whole
    setup = steps.row(0, named=True)["idle_ns"] - (first - steps["start_ns"].min())
    slow = steps.filter(pl.col("slow"))["idle_ns"].sum()
    assert setup + slow > 0.9 * whole  # setup and the four stalls are most of it


def test_diagnose_ranks_by_time_and_finds_setup_and_the_slow_data_steps(findings):
    assert [f["time_ns"] for f in findings] == sorted((f["time_ns"] for f in findings), reverse=True)
    steps = steps_sql()
    ((_, setup_start, _),) = ranges("setup")
    median = steady_median_ns()
    # setup and first-step cost: the time before `step 0`, and `step 0` beyond a steady step
    setup = one(findings, "setup")
    before, first = steps[0][1] - setup_start, steps[0][2] - steps[0][1]
    assert findings[0] is setup and setup["time_ns"] == before + round(first - median)
    assert setup["where"] == {
        "device": None,
        "rank": PID,
        "steps": [0, 1],  # the setup row and `step 0`
        "range": None,
        "kernel": None,
        "api": None,
        "start_ns": setup_start,
        "end_ns": steps[0][2],
    }
    assert setup["title"].startswith(f"Rank {PID} spent {before / 1e6:,.1f} ms before its first step")
    # the slow steps: exactly the sleeping ones, each a host (data) stall, never a kernel
    slow = one(findings, "slow_steps")
    sleepers = [(n, a, b) for n, a, b in steps if n in sleeping()]
    assert [e["name"] for e in slow["evidence"]] == [n for n, _, _ in sleepers]
    assert {e["cause"] for e in slow["evidence"]} == {"host"} and slow["where"]["kernel"] is None
    assert slow["where"]["steps"] == [steps.index(s) + 1 for s in sleepers]
    assert slow["time_ns"] == sum(round(b - a - median) for _, a, b in sleepers)
    assert (slow["where"]["start_ns"], slow["where"]["end_ns"]) == (sleepers[0][1], sleepers[-1][2])
    assert "(step 4, step 9, step 14, step 19)" in slow["title"] and "data or host stall" in slow["title"]
    # The stalls are explained once, by their cause, second after setup. Before, the twins and
    # step_variance counted the slow steps' 2.4 s again ahead of it (slow_steps came 6th), and
    # launch_bound called the four stalls launch-bound, with CUDA-graph advice, third: a wait of
    # 600 ms is one stall (idle_host_longest_ns), not launch overhead.
    assert [f["rule"] for f in findings[:2]] == ["setup", "slow_steps"]
    assert not [f for f in findings if f["rule"] == "launch_bound"]
    assert all(f["time_ns"] < slow["time_ns"] / 5 for f in findings[2:])


def test_diagnose_finds_the_sync_every_step_and_the_copies(findings):
    steps = steps_sql()
    con = sqlite3.connect(EXPORT)
    try:
        blocked = [blocked_ns(con, PID, a, b) for _, a, b in steps[1:]]  # the steady steps
    finally:
        con.close()
    # every step holds loss.item()'s cudaStreamSynchronize and the metric's synchronous cudaMemcpy
    calls = sql(
        "SELECT s.value, r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value GLOB 'cudaStreamSynchronize*' OR s.value GLOB 'cudaMemcpy_*'"
    )
    for _, a, b in steps:
        assert sorted(n.split("_")[0] for n, t in calls if a <= t < b) == ["cudaMemcpy", "cudaStreamSynchronize"]
    sync = one(findings, "sync_every_step")
    assert sync["time_ns"] == sum(blocked) and all(blocked)
    assert sync["evidence"][0]["blocking_steps"] == sync["evidence"][0]["steps"] == 19
    assert (sync["where"]["start_ns"], sync["where"]["end_ns"]) == (steps[1][1], steps[-1][2])
    # nsys's own rules: the pageable copies launched as async (6 in setup, 2 a step) and the
    # synchronous device-to-host copy of each step
    copies = sql(COPIES)
    pageable = [c for c in copies if c[6].startswith("cudaMemcpyAsync") and 0 in (c[4], c[5])]
    assert len(pageable) == 46 and {c[3] for c in pageable} == {1}  # host to device
    for _, a, b in steps:
        assert sum(a <= c[0] < b for c in pageable) == 2
    found = one(findings, "cuda_memcpy_async")
    assert found["time_ns"] == sum(e - s for s, e, *_ in pageable) and found["title"].startswith("46 asynchronous copies")
    assert (found["where"]["device"], found["where"]["api"]) == (GPU, "cudaMemcpyAsync_v3020")
    synchronous = [c for c in copies if c[6].startswith("cudaMemcpy_") and c[3] == 2]  # device to host
    assert len(synchronous) == 20 and one(findings, "cuda_memcpy_sync")["time_ns"] == sum(e - s for s, e, *_ in synchronous)
    # and what the copies cost the GPU: every host-to-device copy is from pageable memory
    h2d = [c for c in copies if c[3] == 1]
    evidence = one(findings, "copies")["evidence"][0]
    assert (evidence["copies"], evidence["pageable"]) == (len(h2d), sum(c[4] == 0 for c in h2d)) == (47, 47)
    assert evidence["bytes"] == sum(c[2] for c in h2d) and evidence["time_ns"] == sum(e - s for s, e, *_ in h2d)
    assert evidence["gb_per_s"] == pytest.approx(evidence["bytes"] / evidence["time_ns"], rel=1e-12)  # 7.1 GB/s
    first, last = sql(f"SELECT min(start), max(end) FROM ({GPU_OPS})")[0]
    con = sqlite3.connect(EXPORT)
    try:
        assert evidence["busy_ns"] == union_ns(con, PID, GPU, first, last, (0, 1, 2))  # the share of busy time
    finally:
        con.close()


def test_summary_leads_with_the_top_three_findings(findings):
    res = runner.invoke(app, ["summary", str(EXPORT)])
    assert res.exit_code == 0, res.output
    first = res.stdout.split("**Look at first:**")[1].split("**Steps**")[0].strip().splitlines()
    assert first == [f"{i}. {escape(f['title'])} (`{f['rule']}`)" for i, f in enumerate(findings[:3], 1)]
    assert findings[0]["rule"] == "setup"  # setup's 7.1 s, no longer inside one whole-run idle figure
