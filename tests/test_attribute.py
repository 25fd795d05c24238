"""NVTX projection on real exports and on ranges built from a real export's calls."""

from __future__ import annotations

import polars as pl

from nsys_tools.read import attribute
from nsys_tools.read import frames as events
from nsys_tools.read.export import open_export

from .conftest import FIXTURES

EXPORT = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"


def _parts():
    ex = open_export(EXPORT)
    ops = events.kernels(ex, ["global_pid", "correlation_id", "start_ns", "end_ns"])
    calls = events.launch_calls(ex, ops)
    return ex, ops, calls


def test_every_kernel_is_kept_and_launched():
    ex, ops, calls = _parts()
    out = attribute.project(ops, calls, events.nvtx_ranges(ex)).collect()
    assert out.height == 381
    assert out["global_tid"].null_count() == 0  # each kernel found its launching call
    assert (out["api_start_ns"] <= out["start_ns"]).all()  # a kernel starts after its launch call


def _synthetic_ranges(calls: pl.DataFrame) -> pl.LazyFrame:
    """Nested push/pop ranges around the real calls of the first thread: outer around all,
    'even'/'odd' blocks of 10 calls inside it, and a start/end range around the first 5."""
    calls = calls.sort("api_start_ns")
    tid = calls["global_tid"][0]
    first, last = calls["api_start_ns"].min() - 10, calls["api_end_ns"].max() + 10
    rows = [(first, last, tid, "pushpop", "outer", None)]
    starts = calls["api_start_ns"].to_list()
    ends = calls["api_end_ns"].to_list()
    for k in range(0, len(starts) - 10, 10):
        rows.append((starts[k] - 1, ends[k + 9] + 1, tid, "pushpop", "even" if k % 20 == 0 else "odd", None))
    rows.append((starts[0], ends[4] + 1, tid, "startend", "first5", None))
    return (
        pl.DataFrame(
            rows,
            schema={
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "global_tid": pl.Int64,
                "style": pl.String,
                "range": pl.String,
                "domain": pl.String,
            },
            orient="row",
        )
        .with_row_index("range_instance")
        .lazy()
    )


def test_innermost_and_all_enclosing_ranges():
    ex, ops, calls = _parts()
    c = calls.collect()
    ranges = _synthetic_ranges(c)
    inner = attribute.project(ops, calls, ranges).collect().sort("api_start_ns")
    every = attribute.project(ops, calls, ranges, "all").collect()
    # The first five launches sit in first5 (start/end, opened last, so innermost), the next five in 'even'.
    assert inner["range"].head(5).to_list() == ["first5"] * 5
    assert inner["range"].slice(5, 5).to_list() == ["even"] * 5
    assert inner["range"].slice(10, 10).to_list() == ["odd"] * 10
    per_op = every.group_by("start_ns").agg(pl.col("range").sort()).sort("start_ns")
    assert per_op["range"][0].to_list() == ["even", "first5", "outer"]
    assert per_op["range"][7].to_list() == ["even", "outer"]
    assert every.filter(pl.col("range") == "outer").height == 381


def test_no_ranges_means_empty_range_not_dropped():
    ex, ops, calls = _parts()
    empty = events.nvtx_ranges(ex).clear()
    out = attribute.project(ops, calls, empty).collect()
    assert out.height == 381 and set(out["range"]) == {""}


def test_start_end_ranges_match_as_the_pairwise_comparison_does():
    """Overlapping start/end ranges on two threads, with edges on the calls' own start and end
    times: every (operation, enclosing range) pair, as comparing each call with each range of
    its thread finds them."""
    ex, ops, calls = _parts()
    c = calls.collect().sort("api_start_ns")
    tids = c["global_tid"].unique().sort().to_list()
    starts, ends, threads = c["api_start_ns"].to_list(), c["api_end_ns"].to_list(), c["global_tid"].to_list()
    rows = []
    for k in range(0, len(starts) - 40, 7):  # a range from a call's start to a later call's end, or one short of it
        rows.append((starts[k], ends[k + 30] - (k % 2), threads[k], "startend", f"r{k}", None))
    rows.append((starts[0], ends[-1], tids[-1] + 1, "startend", "other-thread", None))
    rows.append((ends[-1], starts[0], threads[0], "startend", "backwards", None))
    schema = {"start_ns": pl.Int64, "end_ns": pl.Int64, "global_tid": pl.Int64, "style": pl.String, "range": pl.String}
    ranges = pl.DataFrame(rows, schema={**schema, "domain": pl.String}, orient="row").with_row_index("range_instance")
    every = attribute.project(ops, calls, ranges.lazy(), "all").collect()
    launched = attribute.launches(ops, calls).collect()
    expected = (
        launched.join(ranges, on="global_tid")
        .filter((pl.col("start_ns_right") <= pl.col("api_start_ns")) & (pl.col("end_ns_right") >= pl.col("api_end_ns")))
        .select("start_ns", "range")
    )
    assert expected.height > 1000
    assert every.filter(pl.col("range") != "").select("start_ns", "range").sort(pl.all()).equals(expected.sort(pl.all()))
