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


def test_one_seed_gives_one_interval_whatever_the_order_and_the_chunks(quiet, monkeypatch):
    """The bootstrap on real calls (10 rounds a side, as the sweeps run them; then the rounds made
    uneven, and one cluster): the rows' order, and the chunks that bound its memory, leave the
    interval as it is; another seed gives the same verdict."""
    from nsys_tools.views import stats

    calls = quiet.calls.filter(pl.col("shape") == "4096x768")
    ours, triton = (calls.filter(pl.col("impl") == impl) for impl in ("ours", "triton"))
    uneven = ours.filter((pl.col("round") != 3) | (pl.int_range(pl.len()).over("round") < 7))
    cases = [(ours, triton, True), (uneven, triton, True), (ours, triton, False)]
    for num, den, by_round in cases:

        def interval(num=num, den=den, by_round=by_round, **kw):
            clusters = (num["round"], den["round"]) if by_round else ()
            return stats.ratio_ci(num["duration_ns"], den["duration_ns"], *clusters, **kw)

        first = interval()
        assert first[1] < first[0] < first[2]
        assert interval(num=num.sample(fraction=1.0, shuffle=True, seed=1), den=den.reverse()) == first
        other = interval(seed=1)
        assert other[0] == first[0] and stats.verdict(*other[1:]) == stats.verdict(*first[1:])
        with monkeypatch.context() as m:
            m.setattr(stats, "CHUNK_VALUES", 1_000)  # a few replicates at a time
            assert interval() == first
