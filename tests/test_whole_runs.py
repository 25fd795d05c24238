"""The whole-run views against their twins on the real PyTorch training captures
(``tests/fixtures/torch-train``): ``nsys stats`` reports for all three runs, Nsight Systems recipes
for run A (``tests/fixtures/recipes/torch-train/MANIFEST.md`` says how they were made)."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from nsys_tools.cli import app
from nsys_tools.run.report import view_table
from nsys_tools.study import compare, ledger

from .cli import CliRunner
from .conftest import FIXTURES
from .nsys_reference import ONE_DECIMAL, reference
from .torch_train import RUNS, exports

RECIPES = FIXTURES / "recipes" / "torch-train"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return exports(tmp_path_factory.mktemp("torch-train"))


def recipe(name: str) -> pl.DataFrame:
    return pl.read_parquet(RECIPES / name / "analysis.parquet")


@pytest.mark.parametrize("run", RUNS)
def test_launch_matches_cuda_kern_exec_sum(runs, run):
    """Per launching thread, launch function and kernel: counts, queued counts, medians and
    extremes equal to nsys's; means and standard deviations to its one decimal."""
    ref = reference(f"torch-train/run-{run}", "cuda_kern_exec_sum")
    ours = view_table([runs[run]], "launch", by=["process"])
    assert ours.height == ref.height == 39  # 33 kernels, some launched from two threads or by two functions
    both = ours.join(
        ref, left_on=["pid", "tid", "api", "kernel"], right_on=["PID", "TID", "API Name", "Kernel Name"], validate="1:1"
    )
    assert both.height == ref.height
    exact = {"instances": "Count", "queued": "QCount"}
    close = {}
    for ours_prefix, theirs in (("exec", "T"), ("api", "A"), ("queue", "Q"), ("kernel", "K")):
        exact |= {f"{ours_prefix}_{s}_ns": f"{theirs}{n} (ns)" for s, n in (("median", "Med"), ("min", "Min"), ("max", "Max"))}
        close |= {f"{ours_prefix}_{s}_ns": f"{theirs}{n} (ns)" for s, n in (("mean", "Avg"), ("stddev", "StdDev"))}
    for a, b in exact.items():
        assert (both[a] == both[b]).all(), f"{a} != nsys {b}"
    for a, b in close.items():
        assert (both[a] - both[b]).abs().max() <= ONE_DECIMAL, f"{a} != nsys {b}"
    assert (both["queued"] < both["instances"]).any()  # some kernels started before their launch call returned


def test_sync_matches_cuda_api_sync(runs):
    calls = recipe("cuda_api_sync")
    assert calls.height == 27
    expected = calls.group_by(pl.col("API Name").str.replace(r"_v\d{4}$", "")).agg(
        n=pl.len().cast(pl.Int64), total=pl.col("Duration").sum(), low=pl.col("Duration").min(), high=pl.col("Duration").max()
    )
    ours = view_table([runs["a"]], "sync").select("api", "instances", "total_ns", "min_ns", "max_ns")
    assert sorted(ours.rows()) == sorted(expected.rows())


def test_utilization_matches_gpu_time_util(runs):
    """The recipe's one chunk under its threshold is the whole run: its start and length are the
    device's span, and its in-use share is the busy share (kernels and memory operations)."""
    (chunk,) = recipe("gpu_time_util").iter_rows(named=True)
    (row,) = view_table([runs["a"]], "utilization", by=["device"]).iter_rows(named=True)
    assert (row["start_ns"], row["span_ns"], row["gpu_id"]) == (chunk["Start"], chunk["Duration"], chunk["Device ID"])
    assert round(row["busy_pct"], 1) == chunk["In-Use"]


def test_utilization_per_window_matches_cuda_gpu_time_util_map(runs):
    """Thirty bins from the session start: the kernels' union in each, as a share of the bin, to
    the recipe's one decimal (bins with no operation are absent from ours, 0 in the recipe's)."""
    bins = recipe("cuda_gpu_time_util_map")
    width = bins["Duration"][1] - bins["Duration"][0]
    table = view_table([runs["a"]], "utilization", by=["device"], bin_ns=width)
    ours = {r["start_ns"] // width: round(r["compute_ns"] * 100 / width, 1) for r in table.iter_rows(named=True)}
    theirs = {r["Duration"] // width: r["Kernel"] for r in bins.iter_rows(named=True)}
    assert len(ours) >= 28 and all(ours.get(k, 0.0) == v for k, v in theirs.items())
    whole = view_table([runs["a"]], "utilization", by=["device"])
    assert table["compute_ns"].sum() == whole["compute_ns"].item()


def test_idle_finds_the_hosts_sleeps(runs):
    """Steps 1, 4, 7, ... sleep 2 ms on the host before their forward pass: eight intervals over
    2 ms, each with the next launch still in its call or queued behind it: the host was late."""
    longest = view_table([runs["a"]], "idle", longest=8)
    assert (longest["gap_ns"] > 2_000_000).all() and set(longest["cause"]) == {"host"}
    totals = view_table([runs["a"]], "idle")
    util = view_table([runs["a"]], "utilization")
    assert totals["total_ns"].sum() == util["idle_ns"].sum()


def gpu_gaps(threshold_ms: int) -> pl.DataFrame:
    """The ``gpu_gaps`` rule's intervals on run A (the recipe's mapper; MANIFEST.md says how)."""
    table = pl.read_csv(RECIPES / "gpu_gaps" / f"run-a-gap{threshold_ms}.csv")
    return table.select(gap_ns=pl.col("Duration (ns)"), gap_start_ns=pl.col("Start (ns)"), gpu_id=pl.col("Device ID"))


def test_gaps_and_idle_intervals_equal_gpu_gaps(runs):
    """Every idle interval of the run (1,799 with a threshold of 0 ms), and those over 1 ms, equal
    the rule's to the nanosecond; idle's totals are their count and sum."""
    every = gpu_gaps(0)
    assert every.height == 1799
    ours = view_table([runs["a"]], "gaps", min_gap_ns=0).select(every.columns)
    assert ours.sort("gap_start_ns").rows() == every.sort("gap_start_ns").rows()
    (totals,) = (
        view_table([runs["a"]], "idle", by=["device"])
        .group_by("gpu_id")
        .agg(pl.col("intervals").sum(), pl.col("total_ns").sum())
        .iter_rows(named=True)
    )
    assert (totals["intervals"], totals["total_ns"]) == (every.height, every["gap_ns"].sum())
    over = gpu_gaps(1)
    assert over.height == 9 and (over["gap_ns"] > 1_000_000).all()
    longest = view_table([runs["a"]], "idle", longest=9).select(over.columns)
    assert longest.sort("gap_start_ns").rows() == over.sort("gap_start_ns").rows()
    assert view_table([runs["a"]], "gaps", min_gap_ns=1_000_000).height == over.height


@pytest.mark.slow
def test_compare_runs_by_op_and_kernel(runs):
    """Run A against run B (same build): every row matched, all of the kernel time, nothing
    distinguishable. Run A against the run with a slowed ``aten::mul_``: slower on that op and on
    no other, with the variance between sessions measured on the two same-build runs
    (``noise_from``): the root mean square of their rows' log ratios over sqrt(2), at its upper
    95% bound."""
    a, b, slow = (compare.open_capture(runs[r], names="op") for r in RUNS)
    same = compare.compare(a, b)
    assert compare.matched_share(a, b) == (1.0, 1.0) and set(same["verdict"]) == {"not distinguishable"}
    sd, dof = compare.noise_from(a, b)
    ratios = same["ratio"].log()
    pooled = math.sqrt(float((ratios**2).sum()) / (2 * ratios.len()))
    assert dof == same.height == 41 and pooled < sd < 1.5 * pooled < 0.01
    assert compare.noise_from(b, a) == pytest.approx((sd, dof))
    table = compare.compare(a, slow, session_sd=math.sqrt(2) * sd)
    slower = table.filter(pl.col("verdict") == "slower")
    assert slower["op"].to_list() == ["aten::mul_"] and slower["ratio"].item() > 10
    assert compare.matched_share(a, slow) == (1.0, 1.0)
    # The ledger's default, from microbenchmark sweeps on the H200, is smaller than what two runs
    # of a program show, and calls another op slower.
    ledger_sd, _ = ledger.session_noise(FIXTURES.parents[1] / ledger.DEFAULT_PATH, "NVIDIA H200")
    assert 0 < ledger_sd < sd
    too_tight = compare.compare(a, slow, session_sd=math.sqrt(2) * ledger_sd).filter(pl.col("verdict") == "slower")
    assert len(too_tight["op"]) > 1 and "aten::mul_" in too_tight["op"].to_list()
    by_range = compare.compare(compare.open_capture(runs["a"]), compare.open_capture(runs["b"]))
    # By raw emit_nvtx names every operator call is its own row, compared a call or two at a time.
    assert by_range.height > 1000 > 50 > table.height


def test_compare_noise_from_on_the_command_line(runs):
    """``compare --noise-from A B`` says where its variance came from, finds the slowed op alone
    slower, and refuses to be given two noises."""
    args = ["compare", str(runs["a"]), str(runs["slow"]), "--names", "op", "-f", "json"]
    res = CliRunner().invoke(app, [*args, "--noise-from", str(runs["a"]), str(runs["b"])])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert [r["op"] for r in rows if r["verdict"] == "slower"] == ["aten::mul_"]
    md = CliRunner().invoke(app, [*args[:-2], "--noise-from", str(runs["a"]), str(runs["b"])])
    assert "(from run-a.sqlite against run-b.sqlite, 41 rows, upper 95% bound)" in md.stdout
    both = CliRunner().invoke(app, [*args, "--noise-from", str(runs["a"]), str(runs["b"]), "--session-noise", "1"])
    assert both.exit_code == 2 and "not both" in both.output
