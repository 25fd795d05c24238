"""The LayerNorm dispatcher as it is in this tree, per shape, from the committed sweeps that ran its
exact kernel: ours over the best control and over the copy, each ratio within one session.

    python3 probes/dispatcher_now.py --outputs reuse reports/sweeps/20261130-012712-ln-reuse \
        reports/sweeps/20261130-011732-ln-fixed-reuse reports/sweeps/20261129-231949-ln-reuse

For every shape of the first sweep, the kernel ``nsys_tools.kernels.cuda.launch_config("ours", M, N)`` names
today (``ln_held<32,6,4,1,8,0,768>``) is looked up in each sweep's trace (the demangled name of
every kernel an ``ours``-family implementation ran); the first sweep, in the order given, with an
implementation that ran exactly that kernel supplies the row: its kernel median, the best of the
controls in that same capture, and the same capture's copy. The geometric mean over the shapes
closes the table. Needs the analysis stack and the kernels package (no GPU).
"""

from __future__ import annotations

import argparse
import math
import re

import polars as pl

import nsys_tools
from nsys_tools.kernels.cuda import launch_config
from nsys_tools.study.folder import RANGE_REGEX, load, parse_ranges, summary

CONTROLS = ("triton", "inductor", "liger", "torch")


def template(name: str) -> str:
    """``void ln_held<(int)32, (int)6, ...>(const float *, ...)`` -> ``ln_held<32,6,...>``; an
    ``ln_held`` of the six arguments it had before NFIX existed reads as NFIX 0 (the same kernel)."""
    head = re.sub(r"\(int\)|\s", "", name.removeprefix("void ").split("(const", 1)[0])
    return head[:-1] + ",0>" if head.startswith("ln_held<") and head.count(",") == 5 else head


def kernels_by_impl(sweep, shape: str) -> dict[str, set[str]]:
    with nsys_tools.open(sweep.export(shape)) as trace:
        ops = trace.gpu_ops(attributed=True, columns=["name"]).filter(pl.col("range").str.contains(RANGE_REGEX)).collect()
    rows = ops.select("range", pl.col("name").cast(pl.String)).pipe(parse_ranges).select("impl", "name").unique()
    out: dict[str, set[str]] = {}
    for impl, name in rows.iter_rows():
        out.setdefault(impl, set()).add(template(name or ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outputs", required=True, help="the output policy every sweep given must have run under")
    ap.add_argument("sweeps", nargs="+")
    args = ap.parse_args()
    sweeps = [load(p) for p in args.sweeps]
    for s in sweeps:
        if s.outputs != args.outputs:
            raise SystemExit(f"Error: {s.path}: ran under --outputs {s.outputs}, not {args.outputs}")
    summaries = {s.id: summary(s) for s in sweeps}
    print("| shape | kernel | sweep | as | ours µs | best control µs | ours / best | ours / copy |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    ratios = []
    for shape in sweeps[0].units:
        m, n = map(int, shape.split("x"))
        want = launch_config("ours", m, n).kernel
        for s in sweeps:
            if shape not in s.units:
                continue
            ran = [impl for impl, names in kernels_by_impl(s, shape).items() if want in names]
            if not ran:
                continue
            times = dict(summaries[s.id].filter(pl.col("shape") == shape).select("impl", "kernel_median_ns").iter_rows())
            best = min((c for c in CONTROLS if c in times), key=times.get)
            ours = times[ran[0]]
            ratios.append(ours / times[best])
            print(
                f"| {shape} | `{want}` | `{s.id}` | {ran[0]} | {ours / 1000:.2f} | {best} {times[best] / 1000:.2f} | "
                f"{ours / times[best]:.3f} | {ours / times['copy']:.3f} |"
            )
            break
        else:
            print(f"| {shape} | `{want}` | not in any sweep given | | | | | |")
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"\nGeometric mean of ours / best control over {len(ratios)} shapes: {geo:.4f}")


if __name__ == "__main__":
    main()
