"""Whether an implementation's time in a sweep depends on where it ran in its round.

Each round of a sweep runs every implementation once, in an order drawn anew each round
(``convention.round_orders``, recorded in the manifest). For every shape, implementation and
round: the round's median call time over the median of that implementation's round medians at
that shape, less one (the round's deviation), beside the position the implementation held in
that round (0: first). Where the position does not matter, each position's deviations centre on
zero within the spread the rounds show anyway. Where every shape ran the same orders, the
position of an implementation in a round is the same at every shape, and the check says so.
"""

from __future__ import annotations

import polars as pl

from .folder import KEYS, Sweep


def round_positions(sweep: Sweep) -> pl.DataFrame:
    """One row per (op, impl, shape, l2, round): ``position`` in the round, the round's
    ``median_ns`` and its ``deviation`` from the implementation's median round at that shape."""
    places = [
        {"shape": unit, "round": rnd, "impl": name, "position": k, "of": len(order)}
        for unit in sweep.units
        for rnd, order in enumerate(sweep.round_orders(unit))
        for k, name in enumerate(order)
    ]
    schema = {"shape": pl.String, "round": pl.Int64, "impl": pl.String, "position": pl.Int64, "of": pl.Int64}
    rounds = sweep.calls.group_by([*KEYS, "round"]).agg(pl.col("duration_ns").median().alias("median_ns"))
    return (
        rounds.join(pl.DataFrame(places, schema=schema), on=["shape", "round", "impl"], how="inner")
        .with_columns(deviation=pl.col("median_ns") / pl.col("median_ns").median().over(KEYS) - 1)
        .sort([*KEYS, "round"])
    )


def position_effect(sweep: Sweep) -> pl.DataFrame:
    """Per implementation and position: the rounds it ran there (over all shapes) and the mean,
    smallest and largest deviation of those rounds (the mean, not the median: with three rounds,
    one round of each shape is its median and deviates by nothing). Rows ``all``/``first`` and
    ``all``/``later`` pool every implementation: the first position follows the warm-up or the
    previous shape's idle gap."""
    rows = round_positions(sweep).with_columns(
        slot=pl.when(pl.col("position") == 0).then(pl.lit("first")).otherwise(pl.lit("later"))
    )
    stats = [
        pl.len().alias("rounds"),
        pl.col("deviation").mean().alias("mean_deviation"),
        pl.col("deviation").min().alias("min_deviation"),
        pl.col("deviation").max().alias("max_deviation"),
    ]
    each = rows.group_by("impl", "position").agg(*stats).with_columns(pl.col("position").cast(pl.String))
    pooled = rows.group_by("slot").agg(*stats).rename({"slot": "position"}).with_columns(impl=pl.lit("all"))
    return pl.concat([each, pooled.select(each.columns)]).sort("impl", "position")


def same_orders(sweep: Sweep) -> bool:
    """True where every shape of the sweep ran the same round orders (one seed for all shapes)."""
    return len(sweep.units) > 1 and len({str(sweep.round_orders(u)) for u in sweep.units}) == 1
