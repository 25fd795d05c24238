"""Statistics (views.stats): ratios of medians with bootstrap intervals over a sweep's calls."""

from __future__ import annotations

import polars as pl
import pytest


@pytest.mark.slow
def test_ratio_intervals(quiet):
    from nsys_tools.views.stats import ratios

    r = ratios(quiet.calls, "triton")
    ours = r.filter((pl.col("impl") == "ours") & (pl.col("shape") == "4096x768")).row(0, named=True)
    assert ours["ci_lo"] <= ours["ratio"] <= ours["ci_hi"] < 1 and ours["distinguishable"]
    same = ratios(
        quiet.calls.filter(pl.col("impl") == "triton")
        .with_columns(impl=pl.lit("twin"))
        .vstack(quiet.calls.filter(pl.col("impl") == "triton")),
        "triton",
    )
    assert not same["distinguishable"].any()  # identical samples: the interval contains 1
