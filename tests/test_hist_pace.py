"""The hist and pace views against independent computations (numpy over the frames), and the
ranges view (itself checked against nsys's nvtx_gpu_proj_sum) for histograms of ranges."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import nsys_tools
from nsys_tools.cli import app
from nsys_tools.run.report import view_table
from nsys_tools.views import hist

from .cli import CliRunner
from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"
EXPORTS = [MULTI, FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite", DEMO / "4096x768.sqlite"]
runner = CliRunner()


def durations(paths, by=("name",)) -> dict[tuple, np.ndarray]:
    """Each kernel's durations over ``paths``, read straight from the frame layer."""
    frames = []
    for path in paths:
        with nsys_tools.open(path) as trace:
            frames.append(trace.kernels().select(*by, "duration_ns").with_columns(pl.col("name").cast(pl.String)).collect())
    both = pl.concat(frames)
    return {key: np.sort(g["duration_ns"].to_numpy()) for key, g in both.group_by(list(by))}


def check_hist(table: pl.DataFrame, expected: dict[tuple, np.ndarray], keys: list[str]) -> None:
    assert table.select([*keys, "name"]).unique().height == len(expected)
    for key, values in expected.items():
        rows = table.filter(pl.all_horizontal(pl.col(c) == v for c, v in zip([*keys, "name"], key, strict=True))).sort("bin")
        lo, hi = values.min(), values.max()
        if lo == hi:
            assert rows["instances"].to_list() == [len(values)]
            continue
        counts, edges = np.histogram(values, bins=10, range=(lo, hi))
        assert rows["instances"].to_list() == counts.tolist(), key
        assert rows["bin_min_ns"].to_list() == edges[:-1].tolist(), key
        assert rows["bin_max_ns"].to_list() == edges[1:].tolist(), key
        assert rows["share"].sum() == pytest.approx(1.0)


@pytest.mark.parametrize("engine", ["in-memory", "streaming"])
def test_bin_edges_are_numpy_linspace_to_the_bit(engine):
    """Every edge equals numpy.linspace's, bit for bit, on extremes from one nanosecond apart to
    hours (a value on an edge falls in the bin numpy.histogram gives it), in both Polars engines."""
    draw = random.Random(34)
    spans = [
        (lo, lo + draw.choice([1, 3, 7, 999, draw.randrange(1, 10**13)])) for lo in (draw.randrange(10**13) for _ in range(3000))
    ]
    rows = pl.DataFrame(spans, schema={"lo": pl.Int64, "hi": pl.Int64}, orient="row").with_columns(n=pl.lit(hist.BINS, pl.Int64))
    rows = rows.vstack(pl.DataFrame({"lo": [5, 0], "hi": [5, 10**15], "n": [1, 7]}))  # one bin; another count of bins
    rows = rows.with_columns(k=pl.int_ranges(0, pl.col("n"))).explode("k")
    got = hist.edges(rows.lazy(), edge=pl.col("k")).collect(engine=engine)
    expected = [np.linspace(lo, hi, n + 1)[k].item() for lo, hi, n, k in rows.iter_rows()]
    assert got["edge"].to_list() == expected
    assert got["edge"].dtype == pl.Float64


@pytest.mark.parametrize("path", EXPORTS, ids=[p.stem for p in EXPORTS])
def test_kernel_histograms_equal_numpy_over_the_frames(path):
    check_hist(view_table([path], "hist"), durations([path]), [])


@pytest.mark.slow
def test_kernel_histograms_of_several_exports_merge_exactly_and_split_by_device():
    paths = EXPORTS[:2]
    check_hist(view_table(paths, "hist"), durations(paths), [])
    check_hist(view_table([MULTI], "hist", by=["device"]), durations([MULTI], ("gpu_id", "name")), ["gpu_id"])


def test_range_histograms_count_the_ranges_view_instances_between_its_extremes():
    hist = view_table([MULTI], "hist", of="ranges")
    ranges = view_table([MULTI], "ranges")
    per = hist.group_by("name").agg(pl.col("instances").sum(), lo=pl.col("bin_min_ns").min(), hi=pl.col("bin_max_ns").max())
    joined = ranges.group_by("range").agg(pl.col("instances").sum(), pl.col("proj_min_ns").min(), pl.col("proj_max_ns").max())
    joined = joined.join(per, left_on="range", right_on="name")
    assert joined.height == ranges["range"].n_unique() == 7
    assert (joined["instances"] == joined["instances_right"]).all()
    np.testing.assert_allclose(joined["lo"], joined["proj_min_ns"])
    np.testing.assert_allclose(joined["hi"], joined["proj_max_ns"])


def test_pace_equals_numpy_differences_per_kernel():
    pace = view_table([MULTI], "pace")
    with nsys_tools.open(MULTI) as trace:
        kernels = trace.kernels().with_columns(pl.col("name").cast(pl.String)).collect()
    assert pace.height == kernels.height
    for (name,), g in kernels.group_by("name"):
        g = g.sort("start_ns", "end_ns")
        mine = pace.filter(pl.col("name") == name).sort("instance")
        starts, ends = g["start_ns"].to_numpy(), g["end_ns"].to_numpy()
        assert mine["instance"].to_list() == list(range(1, len(starts) + 1))
        assert mine["interval_ns"].to_list()[1:] == np.diff(starts).tolist()
        assert mine["gap_ns"].to_list()[1:] == (starts[1:] - ends[:-1]).tolist()
        if len(starts) > 1:
            steady = starts[0] + np.arange(len(starts)) * np.median(np.diff(starts))
            np.testing.assert_allclose(mine["drift_ns"].to_numpy(), starts - steady)


def test_range_pace_follows_each_range_instance_projection():
    pace = view_table([MULTI], "pace", of="ranges", by=["process"])
    steps = pace.filter(pl.col("name") == "forward")
    assert steps.height == 8 and steps.group_by("pid").len()["len"].to_list() == [4, 4]
    assert (steps["duration_ns"] > 0).all()


def test_report_hist_and_pace_options(tmp_path):
    res = runner.invoke(app, ["report", str(MULTI), "--view", "hist", "--of", "ranges", "--range", "step*", "-f", "csv"])
    assert res.exit_code == 0, res.output
    table = pl.read_csv(res.stdout.encode())
    assert set(table["name"]) == {"step=0", "step=1", "step=2", "step=3"} and table["instances"].sum() == 8
    res = runner.invoke(app, ["report", str(MULTI), "--view", "pace", "--kernel", "*Kernel2*", "--names", "short", "-f", "csv"])
    assert res.exit_code == 0 and pl.read_csv(res.stdout.encode()).height == 8
    res = runner.invoke(app, ["report", str(MULTI), "--view", "hist", "--top", "2", "-f", "csv"])
    assert pl.read_csv(res.stdout.encode())["name"].n_unique() == 2
    for bad in (
        ["--view", "api", "--of", "ranges"],
        ["--view", "ranges", "--of", "ranges"],
        ["--view", "hist", "--of", "steps"],
        ["--view", "hist", "--of", "ranges", "--kernel", "x*"],
    ):
        assert runner.invoke(app, ["report", str(MULTI), *bad]).exit_code == 2, bad
