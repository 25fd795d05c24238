"""Whether a sweep's medians depend on the position an implementation ran at in its round
(``nsys_tools.study.order``), one table per sweep folder.

    python3 probes/order_positions.py reports/sweeps/20261202-*.tar.xz > reports/probes/order-positions.md
"""

from __future__ import annotations

import sys

import polars as pl

from nsys_tools.study.folder import load
from nsys_tools.study.order import position_effect, same_orders


def main(paths: list[str]) -> None:
    for path in paths:
        sweep = load(path)
        if sweep.order != "shuffled":
            continue
        effect = position_effect(sweep)
        held = effect.filter(pl.col("impl") != "all").group_by("impl").agg(pl.col("position").sort().str.join(" "))
        print(f"### {sweep.id}\n")
        print(f"- shapes: {len(sweep.units)}, rounds: {sweep.spec.rounds}; same orders at every shape: {same_orders(sweep)}")
        places = "; ".join(f"{r['impl']} {r['position']}" for r in held.sort("impl").iter_rows(named=True))
        print(f"- positions held (0 = first): {places}")
        print("\n| impl | position | rounds | mean deviation | min | max |\n|---|---|---:|---:|---:|---:|")
        worst = effect.filter(pl.col("impl") != "all").sort(pl.col("mean_deviation").abs(), descending=True).head(3)
        for r in pl.concat([effect.filter(pl.col("impl") == "all"), worst]).iter_rows(named=True):
            print(
                f"| {r['impl']} | {r['position']} | {r['rounds']} | {r['mean_deviation']:+.2%} | "
                f"{r['min_deviation']:+.2%} | {r['max_deviation']:+.2%} |"
            )
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
