"""Every view against its ``nsys stats`` twin, on every bundled export (see ``nsys_reference``
for which nsys wrote the reference CSVs and how closely they must agree)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from nsys_tools.report import view_table

from .conftest import FIXTURES
from .nsys_reference import MB, assert_close, assert_equal, assert_time_stats, paired, reference

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "reports" / "sweeps" / "20261129-183449-quiet"
EXPORTS = {
    "layernorm-3impl-nsys2025.3": FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite",
    "layernorm-3impl-nsys2024.2": FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite",
    "multi-gpu-nsys2025.3": FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite",
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
    ref = reference(name, report).with_columns(
        key=pl.col("Range") + "|" + pl.col("Style").replace({"PushPop": "pushpop", "StartEnd": "startend"})
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
    assert ((both["gbps"] - both["total_bytes"] / both["total_ns"]).abs() < 1e-12).all()


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
    assert sorted(gaps.select("gpu_id", "gap_start_ns", "gap_end_ns", "before", "after").rows()) == sorted(expected)
    assert gaps["gap_ns"].is_sorted(descending=True) and len(expected) == 24
    between_steps = gaps.filter(pl.col("after_range") == "data")
    assert between_steps.group_by("gpu_id").len().sort("gpu_id").rows() == [(0, 3), (1, 3)]
    assert (between_steps["gap_ns"] > 2_000_000).all()
    assert view_table([path], "gaps", min_gap_ns=200_000_000).height == 0


def test_busy_time_is_the_union_of_intervals():
    from nsys_tools.views.ranges import union_ns

    frame = pl.DataFrame({"k": [1, 1, 1, 1, 2], "start_ns": [30, 0, 5, 32, 7], "end_ns": [40, 10, 20, 35, 9]})
    assert frame.group_by("k").agg(busy=union_ns()).sort("k").rows() == [(1, 30), (2, 2)]
