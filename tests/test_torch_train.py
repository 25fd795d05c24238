"""The views against their ``nsys stats`` twins on real PyTorch training captures: one small
transformer block trained for 24 steps under ``emit_nvtx`` (a range per aten operator call), two
runs of the same program and one with a slowed operator (``tests/fixtures/torch-train/MANIFEST.md``)."""

from __future__ import annotations

import polars as pl
import pytest

from nsys_tools.run.report import view_table

from .nsys_reference import assert_equal, assert_time_stats, paired, reference
from .torch_train import RUNS, exports


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return exports(tmp_path_factory.mktemp("torch-train"))


@pytest.mark.parametrize("run", RUNS)
def test_kernels_per_range_match_cuda_gpu_kern_sum_nvtx_name(runs, run):
    """Every kernel under the aten operator range that launched it, on the launching thread (the
    backward pass launches from autograd's own thread): equal to nsys, row for row."""
    report = "cuda_gpu_kern_sum:nvtx-name"
    ours = view_table([runs[run]], "kernels").with_columns(
        Name=pl.when(pl.col("range") == "").then(pl.col("kernel")).otherwise(pl.col("range") + "/" + pl.col("kernel"))
    )
    ref = reference(f"torch-train/run-{run}", "cuda_gpu_kern_sum_nvtx-name")
    assert ref.height > 1000  # one row per operator call and kernel
    assert_time_stats(paired(ours, ref, "Name", report), report)


@pytest.mark.parametrize("run", RUNS)
def test_kernels_match_cuda_gpu_kern_sum(runs, run):
    report = "cuda_gpu_kern_sum"
    ours = view_table([runs[run]], "kernels").group_by("kernel").agg(pl.col("instances", "total_ns").sum())
    both = paired(ours.rename({"kernel": "Name"}), reference(f"torch-train/run-{run}", report), "Name", report)
    assert both["instances"].sum() == 1608
    assert_equal(both, {"instances": "Instances", "total_ns": "Total Time (ns)"}, report)


@pytest.mark.parametrize("run", RUNS)
def test_api_and_memops_match_their_twins(runs, run):
    name = f"torch-train/run-{run}"
    report = "cuda_api_sum"
    both = paired(view_table([runs[run]], "api").rename({"api": "Name"}), reference(name, report), "Name", report)
    assert_time_stats(both, report, instances="Num Calls")
    ours = view_table([runs[run]], "memops").rename({"operation": "Operation"})
    report = "cuda_gpu_mem_time_sum"
    assert_time_stats(paired(ours, reference(name, report), "Operation", report), report, instances="Count")


def test_slowed_operator_is_the_one_kernel_that_changed(runs):
    """Run S slows one operator (``aten::mul_`` over a 16x buffer): by the kernels view its kernel's
    time grows several-fold, and its instance counts equal run A's for every kernel."""
    tables = {
        run: view_table([runs[run]], "kernels").group_by("kernel").agg(pl.col("instances", "total_ns").sum())
        for run in ("a", "slow")
    }
    both = tables["a"].join(tables["slow"], on="kernel", suffix="_slow", validate="1:1")
    assert both.height == tables["a"].height == tables["slow"].height
    assert (both["instances"] == both["instances_slow"]).all()
    grew = both.filter(pl.col("total_ns_slow") > 3 * pl.col("total_ns"))
    assert grew["kernel"].to_list() == [k for k in both["kernel"] if "AUnaryFunctor" in k and "MulFunctor" in k]
