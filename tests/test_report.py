"""Kernel statistics per NVTX range against ``nsys stats --report cuda_gpu_kern_sum:nvtx-name``."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nsys_tools.read.names import glob_regex
from nsys_tools.run.report import kernel_summary

from .conftest import FIXTURES

SRC = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "reports" / "sweeps" / "20261129-183449-quiet"
CASES = [
    (
        FIXTURES / "layernorm-3impl" / f"layernorm-3impl-nsys{v}.sqlite",
        FIXTURES / "layernorm-3impl" / f"layernorm-3impl-nsys{v}.nsys-stats-kern-nvtx.csv",
    )
    for v in ("2025.3", "2024.2")
] + [(DEMO / f"{s}.sqlite", DEMO / f"{s}.nsys-stats.csv") for s in ("4096x768", "8192x768", "1024x2048", "4096x4096")]


@pytest.mark.parametrize("export, reference", CASES, ids=[c[0].parent.name + "/" + c[0].name for c in CASES])
def test_matches_nsys_stats(export, reference):
    ours = kernel_summary([export]).with_columns(
        Name=pl.when(pl.col("range") == "").then(pl.col("kernel")).otherwise(pl.col("range") + "/" + pl.col("kernel"))
    )
    ref = pl.read_csv(reference)
    assert sorted(ours["Name"]) == sorted(ref["Name"])
    both = ours.join(ref, on="Name", how="inner", validate="1:1")
    assert both.height == ref.height
    assert (both["instances"] == both["Instances"]).all()
    assert (both["total_ns"] == both["Total Time (ns)"]).all()
    assert (both["median_ns"] == both["Med (ns)"]).all()  # interpolated for even counts, as nsys does
    assert (both["min_ns"] == both["Min (ns)"]).all()
    assert (both["max_ns"] == both["Max (ns)"]).all()
    assert ((both["mean_ns"] - both["Avg (ns)"]).abs() <= 0.051).all()  # nsys prints one decimal
    assert ((both["stddev_ns"] - both["StdDev (ns)"]).abs() <= 0.051).all()
    assert ((both["time_pct"] - both["Time (%)"]).abs() <= 0.051).all()  # share of all kernel time


def test_columns_and_order():
    df = kernel_summary([CASES[0][0]])
    assert df.columns == [
        "range",
        "kernel",
        "instances",
        "total_ns",
        "time_pct",
        "mean_ns",
        "median_ns",
        "min_ns",
        "max_ns",
        "stddev_ns",
        "p10_ns",
        "p90_ns",
    ]
    assert df["total_ns"].is_sorted(descending=True)
    assert df.filter(pl.col("range") == "")["instances"].sum() == 381 - 300  # warm-up and setup kernels kept


def test_short_names_keep_template_instances_apart():
    short = kernel_summary([CASES[0][0]], names="short")
    demangled = kernel_summary([CASES[0][0]], names="demangled")
    assert short["instances"].sum() == demangled["instances"].sum() == 381
    assert "vectorized_elementwise_kernel" in short["kernel"].to_list()
    assert short.height == demangled.height and short["kernel"].n_unique() == demangled["kernel"].n_unique()


def test_filters_by_glob():
    df = kernel_summary([CASES[0][0]], range_glob="tri*", kernel_glob="norm_*")
    assert df.select("range", "kernel", "instances").rows() == [("triton/4096x768", "norm_kernel", 100)]


def test_memops_are_reported_on_request():
    with_mem = kernel_summary([DEMO / "4096x768.sqlite"], include_memops=True, range_glob="layernorm/copy/*")
    without = kernel_summary([DEMO / "4096x768.sqlite"], range_glob="layernorm/copy/*")
    assert without.is_empty()
    assert set(with_mem["kernel"]) == {"[CUDA memcpy Device-to-Device]"}
    assert with_mem["instances"].to_list() == [100, 100, 100]


def test_all_enclosing_ranges_on_request():
    """On ranges that nest (tests/fixtures/multi-gpu/MANIFEST.md: `step=<k>` > `forward`, `backward`;
    78 kernels), every enclosing range counts a kernel; innermost, only the deepest does."""
    multi = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
    inner = kernel_summary([multi], nesting="innermost")
    every = kernel_summary([multi], nesting="all")
    per_range = lambda t: dict(t.group_by("range").agg(pl.col("instances").sum()).iter_rows())  # noqa: E731
    inner_n, every_n = per_range(inner), per_range(every)
    assert sum(inner_n.values()) == 78 and not any(r.startswith("step=") for r in inner_n)
    steps = {r: n for r, n in every_n.items() if r.startswith("step=")}
    assert sorted(steps) == ["step=0", "step=1", "step=2", "step=3"]
    assert sum(steps.values()) == inner_n["forward"] + inner_n["backward"]  # every step's kernels are in forward or backward
    assert {r: n for r, n in every_n.items() if r not in steps} == inner_n
    # Where ranges do not nest (the LayerNorm fixture), both give the same table.
    flat = kernel_summary([CASES[0][0]], nesting="all")
    assert_frame_equal(flat.sort("range", "kernel"), kernel_summary([CASES[0][0]]).sort("range", "kernel"), rel_tol=1e-12)


def test_several_files_aggregate_or_stay_apart():
    a, b = CASES[0][0], CASES[1][0]
    agg = kernel_summary([a, b])
    per = kernel_summary([a, b], per_file=True)
    row = agg.filter(pl.col("range") == "triton/4096x768")
    assert row["instances"].to_list() == [200]
    assert per.filter(pl.col("range") == "triton/4096x768")["instances"].to_list() == [100, 100]
    assert per.columns[0] == "file"


def test_folder_input_reads_each_export_once(tmp_path):
    folder = FIXTURES / "layernorm-3impl"
    agg = kernel_summary([folder], per_file=True)
    assert agg["file"].n_unique() == 2


@pytest.mark.parametrize(
    "pattern, hits, misses",
    [
        ("tri*", ["triton/4096x768"], ["xtriton"]),
        ("*/4096x7?8", ["torch/4096x768"], ["torch/4096x7688"]),
        ("[ct]*", ["cupy/1", "torch/2"], ["triton"[1:]]),
        ("[!c]*", ["torch"], ["cupy"]),
        ("a.b|c", ["a.b|c"], ["aXb|c"]),
    ],
)
def test_glob_regex(pattern, hits, misses):
    s = pl.Series(hits + misses)
    assert s.str.contains(glob_regex(pattern)).to_list() == [True] * len(hits) + [False] * len(misses)


def test_folder_of_exports_in_parallel(tmp_path):
    for k in range(4):
        shutil.copyfile(SRC, tmp_path / f"rank{k}.sqlite")
    seen = []
    agg = kernel_summary([tmp_path], progress=lambda done, total: seen.append((done, total)))
    per = kernel_summary([tmp_path], per_file=True)
    assert seen[-1] == (4, 4) and len(seen) == 4
    assert agg.filter(pl.col("range") == "triton/4096x768")["instances"].to_list() == [400]
    assert per["file"].n_unique() == 4
