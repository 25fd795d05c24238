"""Position in the round (study/order.py) on a committed sweep: each round's deviation from the
implementation's median round, beside where it ran."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from nsys_tools.study.folder import load
from nsys_tools.study.order import position_effect, round_positions, same_orders

BF16 = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261202-074312-ln-bf16-reuse"


@pytest.fixture(scope="module")
def sweep():
    return load(BF16)


def test_rounds_carry_their_position_and_deviation(sweep):
    rows = round_positions(sweep)
    assert rows.height == 5 * 6 * 3  # shapes x implementations x rounds
    # the position is the one the manifest records for that round
    for r in rows.filter(pl.col("shape") == "4096x4096").iter_rows(named=True):
        assert sweep.round_orders("4096x4096")[r["round"]][r["position"]] == r["impl"]
    # the deviation is against the implementation's median round at that shape: one of three is it
    per = rows.group_by("shape", "impl").agg((pl.col("deviation") == 0).any().alias("has_median"))
    assert per["has_median"].all()
    one = rows.filter((pl.col("shape") == "4096x4096") & (pl.col("impl") == "ours")).sort("round")
    medians = (
        sweep.calls.filter((pl.col("shape") == "4096x4096") & (pl.col("impl") == "ours"))
        .group_by("round")
        .agg(pl.col("duration_ns").median())
    )
    assert sorted(one["median_ns"].to_list()) == sorted(medians["duration_ns"].to_list())


def test_one_seed_for_every_shape_is_named_and_pooled_rows_cover_every_round(sweep):
    assert same_orders(sweep)  # recorded before each shape drew its own seed
    effect = position_effect(sweep)
    pooled = effect.filter(pl.col("impl") == "all")
    assert pooled["position"].to_list() == ["first", "later"] and pooled["rounds"].to_list() == [15, 75]
    # in this sweep no round moved an implementation's median by more than 3 % from its median round
    assert effect["max_deviation"].max() < 0.03 and effect["min_deviation"].min() > -0.03
