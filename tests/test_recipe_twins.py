"""hist and pace against their nsys recipe twins, run on the PyTorch training capture (run A):
``cuda_gpu_kern_hist`` (every kernel's duration; the recipe bins them in its notebook),
``cuda_gpu_kern_pace --name multi_tensor_apply_kernel`` and ``nvtx_gpu_proj_pace --name forward``
and ``optimizer`` (tests/fixtures/recipes/torch-train/MANIFEST.md says how they were made)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from nsys_tools.run.report import view_table

from .conftest import FIXTURES
from .torch_train import exports

RECIPES = FIXTURES / "recipes" / "torch-train"


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    return exports(tmp_path_factory.mktemp("torch-train"))["a"]


def column(folder: str, table: str) -> list[int]:
    return pl.read_parquet(RECIPES / folder / f"pace_{table}.parquet").to_series().to_list()


def test_kernel_histograms_bin_the_recipe_s_durations(run_a):
    twin = pl.read_parquet(RECIPES / "cuda_gpu_kern_hist" / "analysis.parquet")
    ours = view_table([run_a], "hist", names="short")
    assert ours["name"].n_unique() == twin["Name"].n_unique()
    assert ours["instances"].sum() == twin.height == 1608
    for (name,), group in twin.group_by("Name"):
        values = np.sort(group["Duration"].to_numpy())
        rows = ours.filter(pl.col("name") == name).sort("bin")
        if values.min() == values.max():
            assert rows["instances"].to_list() == [len(values)]
            continue
        counts, edges = np.histogram(values, bins=10, range=(values.min(), values.max()))
        assert rows["instances"].to_list() == counts.tolist(), name
        np.testing.assert_allclose(rows["bin_min_ns"].to_numpy(), edges[:-1])
        assert rows["bin_max_ns"][-1] == values.max()


@pytest.mark.parametrize(
    ("folder", "view", "name"),
    [
        ("cuda_gpu_kern_pace", {"names": "short"}, "multi_tensor_apply_kernel"),
        ("nvtx_gpu_proj_pace-forward", {"of": "ranges"}, "forward"),
        ("nvtx_gpu_proj_pace-optimizer", {"of": "ranges"}, "optimizer"),
    ],
)
def test_pace_equals_the_recipe(run_a, folder, view, name):
    ours = view_table([run_a], "pace", **view).filter(pl.col("name") == name).sort("instance")
    assert ours.height == len(column(folder, "start")) == (192 if name.startswith("multi") else 24)
    assert ours["start_ns"].to_list() == column(folder, "start")
    assert (ours["start_ns"] + ours["duration_ns"]).to_list() == column(folder, "end")
    assert ours["duration_ns"].to_list() == column(folder, "duration")
    # The recipe's delta is the idle time since the previous instance ended (the first: its start).
    delta = column(folder, "delta")
    assert ours["gap_ns"].to_list()[1:] == delta[1:] and delta[0] == ours["start_ns"][0]
    assert (ours["start_ns"][0] + ours["gap_ns"].fill_null(0).cum_sum()).to_list() == column(folder, "delta_accum")
    stats = pl.read_parquet(RECIPES / folder / "stats.parquet").row(0, named=True)
    assert (stats["Count"], stats["Min"], stats["Max"], stats["Sum"]) == (
        ours.height,
        ours["duration_ns"].min(),
        ours["duration_ns"].max(),
        ours["duration_ns"].sum(),
    )
