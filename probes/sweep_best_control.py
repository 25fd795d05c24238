"""Ours against the best control, per shape, from committed sweeps (the targets of the controls study).

    python3 probes/sweep_best_control.py reports/sweeps/20261129-231949-ln-rotate reports/sweeps/20261129-231949-ln-reuse

For each sweep: one row per shape with the kernel median of ours, of each control, ours over the
best control and ours over the same-session copy; then the geometric mean of ours over the best
control. Kernel medians come from the trace, as ``nsys-tools report SWEEP`` gives them.
"""

from __future__ import annotations

import math
import sys

import polars as pl

from nsys_tools.study.folder import load, summary

CONTROLS = ("triton", "inductor", "liger", "torch")


def table(path: str) -> str:
    sweep = load(path)
    s = summary(sweep).pivot(on="impl", index="shape", values="kernel_median_ns")
    present = [c for c in CONTROLS if c in s.columns]
    s = s.with_columns(best=pl.min_horizontal(present)).with_columns(
        best_is=pl.concat_list(present).list.arg_min().replace_strict(dict(enumerate(present))),
        vs_best=pl.col("ours") / pl.col("best"),
        vs_copy=pl.col("ours") / pl.col("copy"),
    )
    head = f"### {sweep.id} (outputs: {sweep.manifest['spec'].get('outputs')})\n\n"
    cols = ["ours", *present, "copy"]
    lines = [
        "| shape | " + " | ".join(f"{c} µs" for c in cols) + " | best control | ours / best | ours / copy |",
        "|---|" + "---:|" * (len(cols) + 3),
    ]
    for r in s.iter_rows(named=True):
        cells = [f"{r[c] / 1000:.2f}" for c in cols]
        lines.append(f"| {r['shape']} | " + " | ".join(cells) + f" | {r['best_is']} | {r['vs_best']:.3f} | {r['vs_copy']:.3f} |")
    geo = math.exp(sum(math.log(v) for v in s["vs_best"]) / s.height)
    return head + "\n".join(lines) + f"\n\nGeometric mean of ours / best control over {s.height} shapes: {geo:.3f}\n"


if __name__ == "__main__":
    print("\n".join(table(p) for p in sys.argv[1:]))
