"""Every view against its ``nsys stats`` twin, on every bundled export (see ``nsys_reference``
for which nsys wrote the reference CSVs and how closely they must agree)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from nsys_tools.run.report import view_table

from .conftest import FIXTURES
from .nsys_reference import MB, assert_close, assert_equal, assert_time_stats, paired, reference

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "reports" / "sweeps" / "20261129-183449-quiet"
EXPORTS = {
    "layernorm-3impl-nsys2025.3": FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite",
    "layernorm-3impl-nsys2024.2": FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite",
    "multi-gpu-nsys2025.3": FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite",
    "train-loop-nsys2025.3": FIXTURES / "train-loop" / "train-loop-nsys2025.3.sqlite",
    **{f"demo-{s}": DEMO / f"{s}.sqlite" for s in ("4096x768", "8192x768", "1024x2048", "4096x4096")},
    # The two-GPU capture with every launch recorded twice (its MANIFEST says how): its GPU work
    # must still equal nsys's tables of the real file.
    "doubled-launch": FIXTURES / "doubled-launch" / "doubled-launch.sqlite",
}
REFERENCE = {"doubled-launch": "multi-gpu-nsys2025.3"}


@pytest.fixture(params=list(EXPORTS), ids=list(EXPORTS))
def export(request):
    """(the name of the reference CSVs' folder, the export)."""
    return REFERENCE.get(request.param, request.param), EXPORTS[request.param]


def test_kernels_match_cuda_gpu_kern_sum_nvtx_name(export):
    name, path = export
    report = "cuda_gpu_kern_sum:nvtx-name"
    ours = view_table([path], "kernels").with_columns(
        Name=pl.when(pl.col("range") == "").then(pl.col("kernel")).otherwise(pl.col("range") + "/" + pl.col("kernel"))
    )
    both = paired(ours, reference(name, "cuda_gpu_kern_sum_nvtx-name"), "Name", report)
    assert_time_stats(both, report)


def test_each_kernel_counted_once(export):
    """Summed over ranges, the kernel view is ``cuda_gpu_kern_sum``: every kernel once."""
    name, path = export
    ours = view_table([path], "kernels").group_by("kernel").agg(pl.col("instances", "total_ns").sum())
    both = paired(ours.rename({"kernel": "Name"}), reference(name, "cuda_gpu_kern_sum"), "Name", "cuda_gpu_kern_sum")
    assert_equal(both, {"instances": "Instances", "total_ns": "Total Time (ns)"}, "cuda_gpu_kern_sum")


def test_ranges_match_nvtx_gpu_proj_sum(export):
    name, path = export
    report = "nvtx_gpu_proj_sum"
    ours = view_table([path], "ranges").with_columns(
        Range=pl.col("domain").fill_null("") + ":" + pl.col("range"),
        Style=pl.col("style").replace_strict({"pushpop": "PushPop", "startend": "StartEnd"}),
        key=pl.col("domain").fill_null("") + ":" + pl.col("range") + "|" + pl.col("style"),
    )
    # nsys 2025.3 writes a range of the default domain as ':NAME', 2024.2 as 'NAME'
    ref = reference(name, report).with_columns(
        key=pl.when(pl.col("Range").str.contains(":")).then(pl.col("Range")).otherwise(":" + pl.col("Range"))
        + "|"
        + pl.col("Style").replace({"PushPop": "pushpop", "StartEnd": "startend"})
    )
    both = paired(ours.drop("Range", "Style"), ref, "key", report)
    assert_equal(
        both,
        {
            "proj_total_ns": "Total Proj Time (ns)",
            "range_total_ns": "Total Range Time (ns)",
            "instances": "Range Instances",
            "proj_median_ns": "Proj Med (ns)",
            "proj_min_ns": "Proj Min (ns)",
            "proj_max_ns": "Proj Max (ns)",
            "ops": "Total GPU Ops",
        },
        report,
    )
    assert_close(
        both,
        {
            "proj_mean_ns": "Proj Avg (ns)",
            "proj_stddev_ns": "Proj StdDev (ns)",
            "ops_mean": "Avg GPU Ops",
            "level_mean": "Avg Range Lvl",
            "children_mean": "Avg Num Child",
        },
        report,
    )
    # The projection spans idle time; the union of the operations never exceeds it.
    assert (both["busy_ns"] <= both["proj_total_ns"]).all() and (both["busy_ns"] > 0).all()


@pytest.mark.parametrize("name", [n for n in EXPORTS if n not in REFERENCE])
def test_api_matches_cuda_api_sum(name):
    path = EXPORTS[name]
    report = "cuda_api_sum"
    both = paired(view_table([path], "api").rename({"api": "Name"}), reference(name, report), "Name", report)
    assert_time_stats(both, report, instances="Num Calls")


def test_memops_match_cuda_gpu_mem_size_and_time_sum(export):
    name, path = export
    ours = view_table([path], "memops").rename({"operation": "Operation"})
    report = "cuda_gpu_mem_time_sum"
    both = paired(ours, reference(name, report), "Operation", report)
    assert_time_stats(both, report, instances="Count")
    report = "cuda_gpu_mem_size_sum"
    both = paired(ours, reference(name, report), "Operation", report)
    assert_equal(both, {"instances": "Count"}, report)
    sizes = {f"{s}_bytes": f"{s.replace('mean', 'Avg').replace('stddev', 'StdDev').title()} (MB)" for s in ("min", "max")}
    sizes |= {"total_bytes": "Total (MB)", "mean_bytes": "Avg (MB)", "median_bytes": "Med (MB)", "stddev_bytes": "StdDev (MB)"}
    assert_close(both, sizes, report, tol=0.0005 + 1e-9, scale=MB)
    # Bandwidth from nsys's own totals: Total (MB) of one report over Total Time (ns) of the other
    # (MB printed to 3 decimals: 0.0005 MB of the total, relative).
    times = dict(reference(name, "cuda_gpu_mem_time_sum").select("Operation", "Total Time (ns)").iter_rows())
    for op, gb_per_s, total_mb in both.select("Operation", "gb_per_s", "Total (MB)").iter_rows():
        nsys_gb_per_s = total_mb * MB / times[op]
        assert abs(gb_per_s - nsys_gb_per_s) <= 0.0005 * MB / times[op] + 1e-9, (op, gb_per_s, nsys_gb_per_s)


def test_gaps_on_each_device_with_what_ran_around_them():
    """Checked against a plain walk over the operations of the two-GPU capture, which sleeps
    2 ms between steps: every idle interval of at least 1 ms, and the operations around it."""
    import nsys_tools

    path = EXPORTS["multi-gpu-nsys2025.3"]
    ops = nsys_tools.open(path).gpu_ops(columns=["gpu_id", "start_ns", "end_ns", "name"]).collect()
    expected = []
    for (gpu,), group in ops.sort("start_ns", "end_ns").group_by("gpu_id", maintain_order=True):
        busy_until, holder = None, None
        for start, end, name in group.select("start_ns", "end_ns", "name").iter_rows():
            if busy_until is not None and start - busy_until >= 1_000_000:
                expected.append((gpu, busy_until, start, holder, name))
            if busy_until is None or end >= busy_until:
                busy_until, holder = end, name
    gaps = view_table([path], "gaps", min_gap_ns=1_000_000)
    assert sorted(gaps.select("gpu_id", "gap_start_ns", "gap_end_ns", "before_name", "after_name").rows()) == sorted(expected)
    assert gaps["gap_ns"].is_sorted(descending=True) and len(expected) == 24
    between_steps = gaps.filter(pl.col("after_range") == "data")
    assert between_steps.group_by("gpu_id").len().sort("gpu_id").rows() == [(0, 3), (1, 3)]
    assert (between_steps["gap_ns"] > 2_000_000).all()
    assert view_table([path], "gaps", min_gap_ns=200_000_000).height == 0


def test_busy_time_is_the_union_of_intervals():
    from nsys_tools.views.ranges import union_ns

    frame = pl.DataFrame({"k": [1, 1, 1, 1, 2], "start_ns": [30, 0, 5, 32, 7], "end_ns": [40, 10, 20, 35, 9]})
    assert frame.group_by("k").agg(busy=union_ns()).sort("k").rows() == [(1, 30), (2, 2)]


def test_nesting_of_chained_and_crossing_ranges():
    """Around one call: a chain (outer, then two over the same interval: the first opened is the
    outer) and, around another, start/end ranges that cross: A [0, 10] and B [5, 15] each span
    C [6, 8] but not each other, so C sits at level 2 under B, the later start."""
    from nsys_tools.views.ranges import ancestry

    rows = [  # range_instance, start, end, correlation id of the call it encloses
        (1, 0, 100, 7), (2, 10, 20, 7), (3, 10, 20, 7),
        (10, 0, 10, 9), (11, 5, 15, 9), (12, 6, 8, 9),
    ]  # fmt: skip
    pairs = pl.LazyFrame(rows, schema=["range_instance", "range_start_ns", "range_end_ns", "correlation_id"], orient="row")
    found = ancestry(pairs.with_columns(global_pid=pl.lit(1))).collect().sort("range_instance")
    assert found.rows() == [(1, 0, None), (2, 1, 1), (3, 2, 2), (10, 0, None), (11, 0, None), (12, 2, 11)]


# Whole runs: utilization, launch and sync, each against an independent SQL computation over
# the export (no twin was captured for these fixtures: the recipes need a GPU machine's nsys).

UNION_SQL = """
WITH ops AS (
    SELECT deviceId AS d, k.start AS s, k."end" AS e, CASE WHEN lower(v.value) LIKE 'nccl%' THEN 1 ELSE 0 END AS c
    FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds v ON v.id = k.demangledName
    UNION ALL SELECT deviceId, start, "end", 2 FROM CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL SELECT deviceId, start, "end", 2 FROM CUPTI_ACTIVITY_KIND_MEMSET
), levels AS (SELECT 0 AS l UNION ALL SELECT 1 UNION ALL SELECT 2),
ordered AS (
    SELECT l, d, s, e, MAX(e) OVER (PARTITION BY l, d ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS p
    FROM ops JOIN levels ON c <= l
)
SELECT d, l, SUM(MAX(0, MIN(e, :hi) - MAX(s, COALESCE(p, s), :lo))) FROM ordered GROUP BY d, l
"""


def sql(path, query, *args, **named):
    import sqlite3

    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute(query, named or args).fetchall()


def union_by_level(path, lo=0, hi=1 << 62) -> dict[tuple[int, int], int]:
    """{(device, level): length of the union of its operations of classes up to level, cut to [lo, hi)}."""
    return {(d, lvl): busy for d, lvl, busy in sql(path, UNION_SQL, lo=lo, hi=hi)}


@pytest.mark.parametrize("name", ["multi-gpu-nsys2025.3", "layernorm-3impl-nsys2025.3"])
def test_utilization_is_the_union_of_each_devices_operations(name):
    path = EXPORTS[name]
    table = view_table([path], "utilization")
    spans = dict(
        sql(
            path,
            "SELECT deviceId, MAX(e) - MIN(s) FROM (SELECT deviceId, start s, end e FROM CUPTI_ACTIVITY_KIND_KERNEL "
            "UNION ALL SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY "
            "UNION ALL SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET) GROUP BY deviceId",
        )
    )
    union = union_by_level(path)
    expected = sorted((spans[d], union[d, 2], union[d, 0], union[d, 1] - union[d, 0], union[d, 2] - union[d, 1]) for d in spans)
    ours = sorted(table.select("span_ns", "busy_ns", "compute_ns", "communication_ns", "memory_ns").rows())
    assert ours == expected and len(ours) >= 1
    assert (table["idle_ns"] == table["span_ns"] - table["busy_ns"]).all()
    assert ((table["busy_pct"] + table["idle_pct"] - 100).abs() < 1e-9).all()


def test_utilization_per_window_cuts_the_union_at_each_window():
    path = EXPORTS["multi-gpu-nsys2025.3"]
    bin_ns = 10_000_000
    table = view_table([path], "utilization", bin_ns=bin_ns)
    whole = view_table([path], "utilization")
    assert table.height > 20
    totals = table.group_by("gpu_id").agg(pl.col("span_ns", "busy_ns", "memory_ns").sum()).sort("gpu_id")
    assert totals.rows() == whole.select("gpu_id", "span_ns", "busy_ns", "memory_ns").sort("gpu_id").rows()
    busiest = table.sort("busy_ns", descending=True).row(0, named=True)
    lo = busiest["start_ns"] // bin_ns * bin_ns
    expected = {d: busy for (d, lvl), busy in union_by_level(path, lo, lo + bin_ns).items() if lvl == 2}
    assert busiest["busy_ns"] in expected.values() and busiest["busy_ns"] > 0


@pytest.mark.parametrize("name", ["multi-gpu-nsys2025.3", "layernorm-3impl-nsys2025.3"])
def test_launch_times_are_each_kernels_call_and_queue(name):
    """Per launching thread, launch function and kernel: its launch calls' durations and the time
    from each call's end to the kernel's start where it started after (queued), joined by
    correlation id in one process."""
    from nsys_tools.read.schema import TID_BITS

    path = EXPORTS[name]
    rows = sql(
        path,
        f"""SELECT r.globalTid % (1 << {TID_BITS}),
                   CASE WHEN substr(a.value, -6, 2) = '_v' THEN substr(a.value, 1, length(a.value) - 6) ELSE a.value END,
                   v.value, COUNT(*), SUM(r.end - r.start), MIN(r.end - r.start), MAX(r.end - r.start),
                   SUM(k.start > r.end), SUM(CASE WHEN k.start > r.end THEN k.start - r.end END), SUM(k.end - k.start),
                   MAX(MAX(k.end, r.end) - r.start)
            FROM CUPTI_ACTIVITY_KIND_KERNEL k
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
              ON r.correlationId = k.correlationId AND (r.globalTid >> {TID_BITS}) = (k.globalPid >> {TID_BITS})
            JOIN StringIds v ON v.id = k.demangledName JOIN StringIds a ON a.id = r.nameId GROUP BY 1, 2, 3""",
    )
    columns = ["instances", "api_total_ns", "api_min_ns", "api_max_ns", "queued", "queue_total_ns", "kernel_total_ns"]
    ours = view_table([path], "launch").select("tid", "api", "kernel", *columns, "exec_max_ns")
    assert sorted(ours.rows()) == sorted(rows) and len(rows) > 3
    assert (ours["queued"] > 0).any()


@pytest.mark.parametrize("name", ["multi-gpu-nsys2025.3", "layernorm-3impl-nsys2025.3", "demo-4096x768"])
def test_sync_is_every_synchronize_call(name):
    path = EXPORTS[name]
    rows = sql(
        path,
        """SELECT CASE WHEN substr(v.value, -6, 2) = '_v' THEN substr(v.value, 1, length(v.value) - 6) ELSE v.value END,
                  COUNT(*), SUM(r.end - r.start), MIN(r.end - r.start), MAX(r.end - r.start), COUNT(DISTINCT r.globalTid)
           FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds v ON v.id = r.nameId
           WHERE v.value LIKE '%Synchronize%' GROUP BY v.value""",
    )
    ours = view_table([path], "sync").select("api", "instances", "total_ns", "min_ns", "max_ns", "threads")
    assert sorted(ours.rows()) == sorted(rows) and len(rows) >= 1
    span = sql(path, "SELECT MAX(end) - MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
    one_thread = sql(path, "SELECT COUNT(DISTINCT globalTid) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0] == 1
    if one_thread:
        table = view_table([path], "sync")
        assert ((table["thread_pct"] - table["total_ns"] * 100 / span).abs() < 1e-9).all()


def test_idle_causes_of_a_synthetic_timeline():
    """One device, one launching thread, four idle intervals of known cause: the next kernel's
    launch had not returned (host); a cudaStreamSynchronize covered most of it (sync); a queued
    copy waited (memory); a queued kernel waited (other)."""
    from nsys_tools.views import idle

    ops = pl.DataFrame(
        {
            "gpu_id": [0] * 5,
            "gpu_name": ["H200"] * 5,
            "start_ns": [0, 100, 200, 320, 460],
            "end_ns": [10, 110, 210, 330, 470],
            "kind": ["kernel", "kernel", "kernel", "memcpy", "kernel"],
            "name": ["a", "b", "c", "[CUDA memcpy Host-to-Device]", "e"],
            "global_tid": [1] * 5,
            "api_name": ["cudaLaunchKernel"] * 3 + ["cudaMemcpyAsync", "cudaLaunchKernel"],
            "api_start_ns": [-5, 20, 50, 150, 170],
            "api_end_ns": [-1, 95, 60, 160, 180],
        }
    )
    calls = pl.DataFrame({"global_tid": [1], "call": ["cudaStreamSynchronize"], "call_start_ns": [105], "call_end_ns": [190]})
    rows = pl.concat([ops, calls], how="diagonal_relaxed").lazy()
    keys = ["gpu_id", "gpu_name"]
    totals = idle.finalize(idle.partial(rows, keys), keys).collect()
    assert sorted(totals.select("cause", "intervals", "total_ns").rows()) == [
        ("host", 1, 90),
        ("memory", 1, 110),
        ("other", 1, 130),
        ("sync", 1, 90),
    ]
    listed = idle.finalize(idle.partial(rows, keys, longest=2), keys).collect()
    assert listed.select("gap_start_ns", "cause", "before", "after").rows() == [
        (330, "other", "[CUDA memcpy Host-to-Device]", "e"),
        (210, "memory", "c", "[CUDA memcpy Host-to-Device]"),
    ]
    sync = idle.finalize(idle.partial(rows, keys, longest=4), keys).collect().filter(pl.col("cause") == "sync")
    assert sync.select("blocking", "blocking_start_ns", "launch").row(0) == ("cudaStreamSynchronize", 105, "cudaLaunchKernel")


@pytest.mark.parametrize("name", ["multi-gpu-nsys2025.3", "layernorm-3impl-nsys2025.3"])
def test_idle_intervals_add_up_to_the_idle_time(name):
    """Every idle interval once: as many as sqlite3 finds operations starting after all before
    them ended, and in total the idle time of ``utilization`` (the span less the union)."""
    path = EXPORTS[name]
    gaps = sql(
        path,
        """WITH ops AS (SELECT deviceId d, start s, end e FROM CUPTI_ACTIVITY_KIND_KERNEL
                        UNION ALL SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY
                        UNION ALL SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET),
           o AS (SELECT d, s, MAX(e) OVER (PARTITION BY d ORDER BY s, e ROWS UNBOUNDED PRECEDING EXCLUDE CURRENT ROW) p
                 FROM ops)
           SELECT COUNT(*), SUM(s - p) FROM o WHERE s > p""",
    )[0]
    table = view_table([path], "idle")
    assert (table["intervals"].sum(), table["total_ns"].sum()) == gaps
    util = view_table([path], "utilization").select("gpu_id", "idle_ns").sort("gpu_id")
    assert table.group_by("gpu_id").agg(pl.col("total_ns").sum()).sort("gpu_id").rows() == util.rows()
    assert set(table["cause"]) <= set(("sync", "host", "memory", "other")) and "host" in set(table["cause"])


# NCCL, overlap and stragglers, on the two-GPU capture with NCCL kernel names and NCCL's NVTX
# ranges derived from it (tests/fixtures/nccl-derived/MANIFEST.md: a real NCCL capture is pending).


@pytest.fixture(scope="module")
def nccl_export(tmp_path_factory):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_nccl", FIXTURES / "nccl-derived" / "make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    return make.make(tmp_path_factory.mktemp("nccl") / "nccl-derived.sqlite")


def test_nccl_collectives_per_rank_with_bytes_from_nvtx_payloads(nccl_export):
    rows = sql(
        nccl_export,
        """SELECT k.globalPid >> 24, CASE WHEN s.value LIKE 'ncclDevKernel_AllReduce%' THEN 'AllReduce' ELSE 'AllGather' END,
                  COUNT(*), SUM(k.end - k.start), MIN(k.end - k.start), MAX(k.end - k.start)
           FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'nccl%' GROUP BY 1, 2""",
    )
    sizes = dict(
        (((pid, text[4:]), total))
        for pid, text, total in sql(
            nccl_export, "SELECT globalTid >> 24, text, SUM(uint64Value) FROM NVTX_EVENTS WHERE text LIKE 'nccl%' GROUP BY 1, 2"
        )
    )
    table = view_table([nccl_export], "nccl", by=["process"])
    ours = table.select("pid", "collective", "instances", "total_ns", "min_ns", "max_ns").rows()
    assert len(rows) == 4 and sorted(ours) == sorted((pid % (1 << 24), *rest) for pid, *rest in rows)
    assert sorted(table.select("pid", "collective", "bytes").rows()) == sorted(
        (pid % (1 << 24), c, b) for (pid, c), b in sizes.items()
    )
    assert set(table.filter(pl.col("collective") == "AllReduce")["bytes"]) == {4 * (4 << 20)}
    by_device = view_table([nccl_export], "nccl", by=["device"])
    assert by_device["bytes"].is_null().all() and by_device["instances"].sum() == 16


def test_overlap_is_communication_under_compute_per_step(nccl_export):
    """The derived capture's NCCL kernels run on their own stream between the compute kernels:
    nothing overlaps, so each step's exposed time is its NCCL kernels' time (sqlite3)."""
    table = view_table([nccl_export], "overlap")
    nccl = sql(
        nccl_export,
        """SELECT k.deviceId, SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
           WHERE s.value LIKE 'nccl%' GROUP BY 1""",
    )
    per_device = table.group_by("gpu_id").agg(pl.col("nccl_ns", "exposed_ns", "overlapped_ns").sum()).sort("gpu_id")
    assert per_device.rows() == [(d, t, t, 0) for d, t in sorted(nccl)]
    assert table.filter(pl.col("step").is_not_null()).height == 8 and (table["exposed_ns"] > 0).sum() == 8
    util = view_table([nccl_export], "utilization").select("gpu_id", "communication_ns").sort("gpu_id")
    assert util.rows() == per_device.select("gpu_id", "exposed_ns").rows()


@pytest.mark.slow
def test_overlap_puts_work_launched_by_any_thread_of_a_rank_in_its_step(tmp_path):
    """PyTorch launches the backward pass from its autograd thread, not the thread holding the
    'step <i>' ranges: each step's compute is still all of that step's (the steps view's, by time),
    and 'Optimizer.step#AdamW.step' inside a step is not a step of its own."""
    from .torch_train import exports as torch_exports

    export = torch_exports(tmp_path)["a"]
    threads = sql(
        export,
        "SELECT count(DISTINCT globalTid) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN "
        "(SELECT id FROM StringIds WHERE value LIKE 'cudaLaunchKernel%')",
    )[0][0]
    assert threads == 2  # the main thread and autograd's
    table = view_table([export], "overlap")
    steps = view_table([export], "steps").filter(pl.col("step") > 0)
    per_step = table.filter(pl.col("step").is_not_null()).select("step", "compute_ns").sort("step")
    assert per_step.rows() == steps.select(step="name", compute_ns="compute_ns").sort("step").rows()
    assert table.filter(pl.col("step").is_null())["compute_ns"].sum() == 0
    # stragglers finds the same steps: 24 'step <i>', not the 'Optimizer.step' ranges nested in them
    stragglers = view_table([export], "stragglers")
    assert stragglers["step"].to_list() == [f"step {i}" for i in range(24)]


def test_overlap_of_a_synthetic_device():
    """Compute [0, 10) and [30, 40); NCCL [5, 20) and [25, 35): 10 of 25 ns hidden, 15 exposed."""
    from nsys_tools.views import overlap

    ops = pl.DataFrame(
        {
            "gpu_id": [0] * 4,
            "gpu_name": ["H200"] * 4,
            "step": ["step"] * 4,
            "step_start_ns": [0] * 4,
            "start_ns": [0, 5, 25, 30],
            "end_ns": [10, 20, 35, 40],
            "cls": pl.Series([0, 1, 1, 0], dtype=pl.Int8),
        }
    ).lazy()
    keys = ["gpu_id", "gpu_name"]
    row = overlap.finalize(overlap.partial(ops, keys), keys).collect().row(0, named=True)
    assert (row["nccl_ns"], row["overlapped_ns"], row["exposed_ns"], row["overlap_pct"]) == (25, 10, 15, 40.0)


def test_stragglers_name_the_slowest_rank_of_each_step():
    path = EXPORTS["multi-gpu-nsys2025.3"]
    steps = sql(
        path,
        "SELECT globalTid >> 24, start, end - start FROM NVTX_EVENTS WHERE text LIKE 'step=%' ORDER BY globalTid, start",
    )
    by_rank: dict[int, list[int]] = {}
    for pid, _, duration in steps:
        by_rank.setdefault(pid % (1 << 24), []).append(duration)
    expected = []
    for k in range(4):
        durations = {pid: d[k] for pid, d in by_rank.items()}
        slowest = max(durations, key=durations.get)
        expected.append((k + 1, slowest, durations[slowest], min(durations.values())))
    table = view_table([path], "stragglers")
    assert table.select("step_index", "slowest_pid", "slowest_ns", "fastest_ns").rows() == expected
    late = {pid: sum(1 for e in expected if e[1] == pid) for pid in by_rank}
    assert table["consistent"].to_list() == [late[e[1]] * 2 > 4 and late[e[1]] >= 2 for e in expected]


def test_utilization_of_overlapping_work_across_slices():
    """Compute [0, 10) and [40, 50), NCCL [5, 20), a copy [15, 30): compute 20 ns, communication
    adds 10, memory 10, idle 10 of the 50 ns span; the same when the copy and the last kernel
    come in a later slice than the rest (the union's end carried over)."""
    from nsys_tools.views import utilization

    ops = pl.DataFrame(
        {
            "gpu_id": [0] * 4,
            "gpu_name": ["H200"] * 4,
            "start_ns": [0, 5, 15, 40],
            "end_ns": [10, 20, 30, 50],
            "cls": pl.Series([0, 1, 2, 0], dtype=pl.Int8),
        }
    )
    keys = ["gpu_id", "gpu_name"]
    whole = utilization.finalize(utilization.partial(ops.lazy(), keys), keys).collect()
    assert whole.select("span_ns", "compute_ns", "communication_ns", "memory_ns", "idle_ns").row(0) == (50, 20, 10, 10, 10)
    state = utilization.window(ops.head(2), keys, utilization.start([], keys))
    state = utilization.window(ops.tail(2), keys, state)
    sliced = utilization.finalize(utilization.close(state, [], keys), keys).collect()
    assert sliced.equals(whole)
